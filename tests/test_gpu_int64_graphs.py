"""Graphs of more than 2**31 edges: int64 indices through every kernel (GPU).

A graph takes int64 indices only when its counts need them, so no other test reaches the
kernels' int64 paths with positions past 2**31: CSR positions, work items and chunks of
split rows, tiles of edge words, edge operands and per-edge results. One graph of
2**31 + 140,272 edges (134M rows of 16 edges, and a first and a last row of 70,000, so
that split rows have chunks on both sides of the 2**31st position) serves every case. Each
checks sampled rows or edges, the last ones included, against a float64 reference of the
same inputs. Each case builds the graph anew (18 GB) and frees it: the layouts, reverses
and operands of one case would not leave room for the next's. Up to about 110 GB of GPU
memory.
"""

from __future__ import annotations

import gc

import pytest
import torch

import gsparse
from gsparse import Graph
from gsparse.kernels import sddmm as sddmm_kernels, spmm as spmm_kernels
from gsparse.target import Target
from large_checks import assert_close, per_skeleton, row_sums

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

LIMIT = 2**31
NUM_DST = 2**27 + 16
NUM_SRC = 2**20
LONG_ROW = 70_000


@pytest.fixture
def graph() -> Graph:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if torch.cuda.get_device_properties(0).total_memory < 120 * 2**30:
        pytest.skip("needs a GPU of 120 GiB or more")
    gc.collect()  # the last case's graph: a graph and its cached reverse refer to each other
    torch.cuda.empty_cache()
    degrees = torch.full((NUM_DST,), 16, dtype=torch.int64, device="cuda")
    degrees[0] = degrees[-1] = LONG_ROW
    rowptr = torch.zeros(NUM_DST + 1, dtype=torch.int64, device="cuda")
    torch.cumsum(degrees, 0, out=rowptr[1:])
    del degrees
    gen = torch.Generator(device="cuda").manual_seed(0)
    col = torch.randint(0, NUM_SRC, (int(rowptr[-1]),), device="cuda", generator=gen)
    col[-1] = NUM_SRC - 1
    g = Graph.from_csr(rowptr, col, num_src=NUM_SRC)
    assert g.index_dtype == torch.int64 and g.num_edges > LIMIT
    yield g
    _forget(g)


def _forget(g: Graph) -> None:
    """Drop what ``g``'s calls built (plans and their layouts), as large as the graph."""
    for cache in (g.calls, g.plans, g.layouts):
        cache.clear()
    torch.cuda.empty_cache()


def _rows(g: Graph, seed: int) -> torch.Tensor:
    """Sampled rows: the two long ones, those around position 2**31, random and the last ones."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    crossing = int(torch.searchsorted(g.rowptr, torch.tensor(LIMIT, device="cuda"), right=True)) - 1
    return torch.cat([torch.tensor([0, crossing - 1, crossing, crossing + 1], device="cuda"),
                      torch.randint(0, g.num_dst, (256,), device="cuda", generator=gen),
                      torch.arange(g.num_dst - 32, g.num_dst, device="cuda")])


def _edges(g: Graph, seed: int) -> torch.Tensor:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.cat([torch.arange(LIMIT - 32, LIMIT + 32, device="cuda"),
                      torch.randint(0, g.num_edges, (256,), device="cuda", generator=gen),
                      torch.arange(g.num_edges - 32, g.num_edges, device="cuda")])


@pytest.mark.parametrize("features", [1, 4])
def test_every_g_spmm_skeleton_walks_past_2_31_edges(graph, features):
    g = graph
    x = torch.randn(NUM_SRC, features, device="cuda")
    rows = _rows(g, features)
    want, scale = row_sums(g, rows, lambda p, u: x[u]), row_sums(g, rows, lambda p, u: x[u].abs())
    task = spmm_kernels.task_for(g, "copy_lhs", "sum", x, None, (features,))
    schedules = per_skeleton(spmm_kernels.schedule_space(task, g.stats, Target.of("cuda")), 2)
    kinds = {type(s) for s in schedules}
    assert spmm_kernels.SplitRows in kinds and len(kinds) >= 2, kinds
    failed = []
    for schedule in [None, *schedules]:
        try:
            assert_close(gsparse.gspmm(g, "copy_lhs", "sum", x, schedule=schedule)[rows], want, scale)
        except (AssertionError, RuntimeError) as error:  # every skeleton's failure at once
            failed.append(f"{schedule}: {type(error).__name__}: {str(error)[:300]}")
        _forget(g)
    assert not failed, "\n".join(failed)


def test_max_and_an_edge_operand_past_2_31_edges(graph):
    g = graph
    x = torch.randn(NUM_SRC, 2, device="cuda")
    rows = _rows(g, 10)
    got = gsparse.gspmm(g, "copy_lhs", "max", x)[rows]
    want = torch.stack([x[g.col[int(g.rowptr[r]):int(g.rowptr[r + 1])]].max(0).values for r in rows.tolist()])
    assert torch.equal(got, want)
    weights = torch.rand(g.num_edges, 1, device="cuda") + 0.5
    want = row_sums(g, rows, lambda p, u: x[u] * weights[p])
    scale = row_sums(g, rows, lambda p, u: (x[u] * weights[p]).abs())
    assert_close(gsparse.u_mul_e_sum(g, x, weights)[rows], want, scale)


def test_per_edge_results_past_2_31_edges(graph):
    g = graph
    x, y = torch.randn(NUM_SRC, 4, device="cuda"), torch.randn(g.num_dst, 4, device="cuda")
    edges = _edges(g, 11)
    dst = torch.searchsorted(g.rowptr, edges, right=True) - 1
    terms = x[g.col[edges]].double() * y[dst].double()
    want, scale = terms.sum(-1, keepdim=True), terms.abs().sum(-1, keepdim=True)
    task = sddmm_kernels.task_for(g, "dot", x, y, "u", "v", (1,))
    failed = []
    for schedule in [None, *per_skeleton(sddmm_kernels.schedule_space(task, g.stats, Target.of("cuda")), 2)]:
        try:
            assert_close(gsparse.gsddmm(g, "dot", x, y, schedule=schedule)[edges], want, scale)
        except (AssertionError, RuntimeError) as error:
            failed.append(f"{schedule}: {type(error).__name__}: {str(error)[:300]}")
    assert not failed, "\n".join(failed)
    del x, y
    logits = torch.randn(g.num_edges, 1, device="cuda")
    soft = gsparse.edge_softmax(g, logits)
    for row in _rows(g, 12)[:8].tolist():
        start, end = int(g.rowptr[row]), int(g.rowptr[row + 1])
        want = torch.softmax(logits[start:end].double(), 0)
        assert_close(soft[start:end], want, torch.ones_like(want))


def test_a_gradient_through_the_reverse_of_2_31_edges(graph):
    """The backward walks the reversed graph, built by a stable sort of 2**31 sources (in
    pieces: one torch.sort takes at most 2**31 - 1 elements)."""
    g = graph
    x = torch.randn(NUM_SRC, 1, device="cuda", requires_grad=True)
    grad = torch.randn(g.num_dst, 1, device="cuda")
    gsparse.gspmm(g, "copy_lhs", "sum", x).backward(grad)
    for u in (0, NUM_SRC // 2, NUM_SRC - 1):
        readers = torch.nonzero(g.col == u).flatten()
        rows = torch.searchsorted(g.rowptr, readers, right=True) - 1
        assert_close(x.grad[u], grad[rows].double().sum(0), grad[rows].abs().double().sum(0))


def test_an_edge_list_of_2_31_edges(graph):
    """``from_edge_index`` sorts the destinations stably, in pieces past 2**31 - 1."""
    edge_index = torch.empty(2, graph.num_edges, dtype=torch.int64, device="cuda")
    edge_index[0] = graph.col
    edge_index[1] = torch.repeat_interleave(torch.arange(NUM_DST, device="cuda"),
                                            graph.rowptr[1:] - graph.rowptr[:-1], output_size=graph.num_edges)
    g = Graph.from_edge_index(edge_index, num_src=NUM_SRC, num_dst=NUM_DST)
    del edge_index
    assert g.eid is None and torch.equal(g.rowptr, graph.rowptr) and torch.equal(g.col, graph.col)
