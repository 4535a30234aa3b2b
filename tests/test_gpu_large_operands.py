"""Operands of more than 2**31 elements on graphs of int32 indices (GPU).

A graph's indices are int32 while its counts fit, but a feature tensor's offsets do not:
``col[e] * F + f`` for 16.8M sources of 130 features is past 2**31, and so are the row
offsets of an output, an edge operand or a g-SDDMM result of as many rows. Every kernel
must form those offsets in 64 bits. Each case builds such operands (about 9 GB each, fp32)
and checks sampled rows, the last ones included, against a float64 reference of the same
inputs.
"""

from __future__ import annotations

import pytest
import torch

import gsparse
from gsparse import Graph
from gsparse.kernels import sddmm as sddmm_kernels, spmm as spmm_kernels
from gsparse.target import Target
from large_checks import assert_close, per_skeleton, row_sums

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

ROWS = 2**24 + 5  # ROWS * F > 2**31
F = 130  # not a multiple of 32 either
LIMIT = 2**31


@pytest.fixture(scope="module", autouse=True)
def _enough_memory():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if torch.cuda.get_device_properties(0).total_memory < 60 * 2**30:
        pytest.skip("needs a GPU of 60 GiB or more")
    yield
    torch.cuda.empty_cache()


def _graph(num_dst: int, num_src: int, degree: int, seed: int) -> Graph:
    """``degree`` sources a row, uniform, with the last source in the last row."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    col = torch.randint(0, num_src, (num_dst * degree,), device="cuda", generator=gen, dtype=torch.int32)
    col[-1] = num_src - 1
    rowptr = torch.arange(0, num_dst * degree + 1, degree, device="cuda", dtype=torch.int32)
    g = Graph.from_block_csr(rowptr, col, num_src=num_src)
    assert g.index_dtype == torch.int32
    return g


def _sample(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rows = torch.randint(0, n, (512,), device="cuda", generator=gen)
    return torch.cat([rows, torch.arange(n - 64, n, device="cuda")])


def _wide_sources(num_src: int, features: int, seed: int):
    """65,536 rows of 8 edges over ``num_src`` sources of ``features`` (past 2**31 elements),
    sampled rows, and their sums and sums of magnitudes in float64."""
    g = _graph(num_dst=65_536, num_src=num_src, degree=8, seed=seed)
    x = torch.randn(num_src, features, device="cuda")
    assert x.numel() > LIMIT
    rows = _sample(g.num_dst, seed + 1)
    return g, x, rows, row_sums(g, rows, lambda p, u: x[u]), row_sums(g, rows, lambda p, u: x[u].abs())


def test_a_source_operand_past_2_31_elements():
    g, x, rows, want, scale = _wide_sources(ROWS, F, seed=0)
    assert_close(gsparse.gspmm(g, "copy_lhs", "sum", x)[rows], want, scale)
    got_max = gsparse.gspmm(g, "copy_lhs", "max", x)[rows]
    starts = g.rowptr[rows].long()
    want_max = torch.stack([x[g.col[s:s + 8].long()].max(0).values for s in starts.tolist()])
    assert torch.equal(got_max, want_max)
    left, right = torch.randn(ROWS, 4, device="cuda"), torch.randn(g.num_dst, 4, device="cuda")
    edges = torch.cat([torch.randint(0, g.num_edges, (512,), device="cuda"),
                       torch.arange(g.num_edges - 64, g.num_edges, device="cuda")])
    dst = torch.repeat_interleave(torch.arange(g.num_dst, device="cuda"), 8)
    want_dot = (left[g.col[edges].long()].double() * right[dst[edges]].double()).sum(-1, keepdim=True)
    x = None  # frees 8.7 GB before the next operands
    got_dot = gsparse.u_dot_v(g, left, right)[edges]
    assert_close(got_dot, want_dot, (left[g.col[edges].long()].abs().double()
                               * right[dst[edges]].abs().double()).sum(-1, keepdim=True))


def test_an_output_and_its_gradient_past_2_31_elements():
    g = _graph(num_dst=ROWS, num_src=1_000, degree=1, seed=2)
    x = torch.randn(1_000, F, device="cuda", requires_grad=True)
    out = gsparse.gspmm(g, "copy_lhs", "sum", x)
    assert out.numel() > LIMIT
    rows = _sample(ROWS, 3)
    want = row_sums(g, rows, lambda p, u: x.detach()[u])
    assert_close(out.detach()[rows], want, want.abs())
    grad = torch.randn_like(out)
    out.backward(grad)
    del out
    # The gradient of source u sums the rows that read it: check the last source's.
    readers = (g.col == 999).nonzero().flatten()
    want_grad = grad[readers].double().sum(0)
    assert_close(x.grad[999], want_grad, grad[readers].abs().double().sum(0))


def test_edge_operands_and_results_past_2_31_elements():
    g = _graph(num_dst=ROWS // 8 + 1, num_src=1_000, degree=8, seed=4)
    num_edges = g.num_edges
    edges = _sample(num_edges, 5)
    dst = torch.div(edges, 8, rounding_mode="floor")
    src = g.col[edges].long()
    x, y = torch.randn(1_000, F, device="cuda"), torch.randn(g.num_dst, F, device="cuda")
    added = gsparse.u_add_v(g, x, y)
    assert added.numel() > LIMIT
    want = x[src].double() + y[dst].double()
    assert_close(added[edges], want, want.abs() + 1)
    del added
    weights = torch.randn(num_edges, F, device="cuda")
    rows = _sample(g.num_dst, 6)
    want = row_sums(g, rows, lambda p, u: x[u] * weights[p])
    scale = row_sums(g, rows, lambda p, u: (x[u] * weights[p]).abs())
    assert_close(gsparse.u_mul_e_sum(g, x, weights)[rows], want, scale)
    weights = None
    logits = torch.randn(num_edges, 128, device="cuda")
    assert logits.numel() > LIMIT
    soft = gsparse.edge_softmax(g, logits)
    starts = g.rowptr[rows].long()
    want = torch.stack([torch.softmax(logits[s:s + 8].double(), 0) for s in starts.tolist()])
    got = torch.stack([soft[s:s + 8] for s in starts.tolist()])
    assert_close(got, want, torch.ones_like(want))


@pytest.mark.parametrize("features, num_src", [(F, ROWS), (4, 2**29 + 5)])
def test_every_g_spmm_skeleton_reads_a_source_operand_past_2_31_elements(features, num_src):
    """4 features: the column- and output-tiled skeletons, which only narrow rows take."""
    g, x, rows, want, scale = _wide_sources(num_src, features, seed=7)
    task = spmm_kernels.task_for(g, "copy_lhs", "sum", x, None, (features,))
    schedules = per_skeleton(spmm_kernels.schedule_space(task, g.stats, Target.of("cuda")), 4)
    assert len({type(s) for s in schedules}) >= 2
    for schedule in schedules:
        assert_close(gsparse.gspmm(g, "copy_lhs", "sum", x, schedule=schedule)[rows], want, scale)


def test_every_g_sddmm_skeleton_reads_and_writes_past_2_31_elements():
    """``u_dot_v`` reading 16.8M sources of 130 features, ``u_add_v`` writing 16.8M edges of
    130 features."""
    g = _graph(num_dst=65_536, num_src=ROWS, degree=8, seed=9)
    x, y = torch.randn(ROWS, F, device="cuda"), torch.randn(g.num_dst, F, device="cuda")
    edges = _sample(g.num_edges, 10)
    src, dst = g.col[edges].long(), torch.div(edges, 8, rounding_mode="floor")
    terms = x[src].double() * y[dst].double()
    want, scale = terms.sum(-1, keepdim=True), terms.abs().sum(-1, keepdim=True)
    task = sddmm_kernels.task_for(g, "dot", x, y, "u", "v", (1,))
    for schedule in per_skeleton(sddmm_kernels.schedule_space(task, g.stats, Target.of("cuda")), 3):
        assert_close(gsparse.gsddmm(g, "dot", x, y, schedule=schedule)[edges], want, scale)
    x = y = None
    g = _graph(num_dst=ROWS // 8 + 1, num_src=1_000, degree=8, seed=11)
    x, y = torch.randn(1_000, F, device="cuda"), torch.randn(g.num_dst, F, device="cuda")
    edges = _sample(g.num_edges, 12)
    want = x[g.col[edges].long()].double() + y[torch.div(edges, 8, rounding_mode="floor")].double()
    task = sddmm_kernels.task_for(g, "add", x, y, "u", "v", (F,))
    for schedule in per_skeleton(sddmm_kernels.schedule_space(task, g.stats, Target.of("cuda")), 3):
        assert_close(gsparse.gsddmm(g, "add", x, y, schedule=schedule)[edges], want, want.abs() + 1)
