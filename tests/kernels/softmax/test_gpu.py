"""Fused edge softmax kernels on the GPU: forward and backward against the float64
reference, with every output element poisoned until a kernel writes it."""

from __future__ import annotations

import pytest
import torch

import gsparse
from gsparse.backends import cpu
from gsparse.kernels import memory
from gsparse.kernels.softmax import (
    SoftmaxTask,
    WarpPerRow,
    build_plan,
    run_edge_softmax,
    run_edge_softmax_backward,
    run_gat_attention,
    run_gat_attention_backward,
    schedule_space,
)
from gsparse.target import Target
from gsparse.testing.reference import edge_softmax_ref, gat_attention_ref

from graphs import attention_operands, named_graph, random_features
from kernels.support import DTYPES, gpu

pytestmark = gpu

_TOLERANCE = {
    torch.float16: {"rtol": 2e-3, "atol": 1e-3},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 8e-3},
    torch.float32: {"rtol": 1e-5, "atol": 1e-6},
    torch.float64: {"rtol": 1e-12, "atol": 1e-13},
}


def _check_forward(g, logits, norm_by) -> None:
    out = run_edge_softmax(g.to("cuda"), logits.cuda(), norm_by)
    expected = edge_softmax_ref(g, logits, norm_by)
    torch.testing.assert_close(out.cpu().double(), expected.to(logits.dtype).double(),
                               **_TOLERANCE[logits.dtype], msg=lambda m: f"{norm_by}: {m}")


def _check_backward(g, logits, norm_by) -> None:
    x = logits.double().requires_grad_()
    y64 = cpu.BACKEND.edge_softmax(g, x, norm_by)
    dy = random_features(tuple(logits.shape), torch.float64, 7)
    (expected,) = torch.autograd.grad(y64, x, dy)
    dtype = logits.dtype
    out = run_edge_softmax_backward(g.to("cuda"), y64.detach().to("cuda", dtype),
                                    dy.to("cuda", dtype), norm_by)
    torch.testing.assert_close(out.cpu().double(), expected.to(dtype).double(),
                               **_TOLERANCE[dtype], msg=lambda m: f"backward {norm_by}: {m}")


SHAPES = [(), (8, 1), (3,), (40,)]  # one head, GAT's 8 heads, 3 heads, more heads than lanes


@pytest.mark.parametrize("norm_by", ["dst", "src"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["random", "sorted", "int64"])
def test_forward_and_backward_match_reference(poisoned, kind, dtype, norm_by) -> None:
    g = named_graph(kind)
    for i, shape in enumerate(SHAPES):
        logits = random_features((g.num_edges, *shape), dtype, seed=i)
        _check_forward(g, logits, norm_by)
        _check_backward(g, logits, norm_by)
    assert len(poisoned) == 2 * len(SHAPES)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_logits_stay_finite(poisoned, dtype) -> None:
    # exp(z) overflows for every one of these; exp(z - max) does not.
    g = named_graph("random")
    logits = random_features((g.num_edges, 8, 1), dtype, seed=3) * 1e3 + 5e4
    out = run_edge_softmax(g.to("cuda"), logits.cuda())
    assert torch.isfinite(out).all()
    _check_forward(g, logits, "dst")
    _check_forward(g, -logits, "src")


@pytest.mark.parametrize("shape", [(), (8, 1)])
def test_hundred_thousand_edge_row(poisoned, shape) -> None:
    g = named_graph("long_row")
    logits = random_features((g.num_edges, *shape), torch.float32, seed=4)
    for norm_by in ("dst", "src"):
        _check_forward(g, logits, norm_by)
        _check_backward(g, logits, norm_by)


def test_graph_without_edges(poisoned) -> None:
    g = named_graph("empty").to("cuda")
    assert run_edge_softmax(g, torch.randn(0, 8, 1, device="cuda")).shape == (0, 8, 1)
    y = torch.randn(0, 8, 1, device="cuda")
    assert run_edge_softmax_backward(g, y, y, "src").shape == (0, 8, 1)


def test_front_end_runs_the_fused_kernel(poisoned) -> None:
    g = named_graph("random")
    logits = random_features((g.num_edges, 8, 1), torch.float32, seed=5)
    cuda = g.to("cuda")
    out = gsparse.edge_softmax(cuda, logits.cuda())
    assert len(poisoned) == 1, "the CUDA backend did not run gsparse.kernels.softmax"
    assert len(cuda.plans) == 1
    torch.testing.assert_close(out.cpu().double(), edge_softmax_ref(g, logits),
                               **_TOLERANCE[torch.float32])


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_every_schedule_of_the_space_matches_reference(poisoned, direction) -> None:
    g = named_graph("random")
    cuda = g.to("cuda")
    logits = random_features((g.num_edges, 8), torch.float32, seed=6)
    x = logits.double().requires_grad_()
    y64 = cpu.BACKEND.edge_softmax(g, x, "dst")
    dy = random_features(tuple(logits.shape), torch.float64, 7)
    (grad,) = torch.autograd.grad(y64, x, dy)
    task = SoftmaxTask(direction, torch.float32, cuda.index_dtype, cuda.eid is not None, 8)
    for schedule in schedule_space(task, g.stats, Target.of("cuda")):
        plan = build_plan(cuda, task, schedule)
        out = memory.allocate((g.num_edges, 8), torch.float32, cuda.device)
        if direction == "forward":
            plan(x=logits.cuda(), y=out)
            expected = y64.detach()
        else:
            plan(y=y64.detach().float().cuda(), dy=dy.float().cuda(), dz=out)
            expected = grad
        torch.testing.assert_close(out.cpu().double(), expected, **_TOLERANCE[torch.float32],
                                   msg=lambda m: f"{direction} {schedule}: {m}")


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_edges_in_flight_do_not_change_a_bit(direction) -> None:
    # Each lane folds its edges in edge order whatever it has in flight; rows of every
    # length up to a hundred thousand, where the last batch of loads is partly past the row.
    for kind in ("random", "long_row"):
        g = named_graph(kind).to("cuda")
        logits = random_features((g.num_edges, 8), torch.float32, seed=8).cuda()
        y = run_edge_softmax(g, logits)
        dy = random_features((g.num_edges, 8), torch.float32, seed=9).cuda()
        task = SoftmaxTask(direction, torch.float32, g.index_dtype, g.eid is not None, 8)
        for lanes in (4, 32):
            outputs = []
            for flight in (1, 2, 4, 8):
                out = torch.empty_like(logits)
                plan = build_plan(g, task, WarpPerRow(edges_in_flight=flight, lanes_per_row=lanes))
                plan(x=logits, y=out) if direction == "forward" else plan(y=y, dy=dy, dz=out)
                outputs.append(out)
            for flight, out in zip((2, 4, 8), outputs[1:]):
                assert torch.equal(out, outputs[0]), f"{kind} {direction}: {lanes} lanes, {flight} in flight"


# ---------------------------------------------------------------------- GAT's attention

_GAT_CASES = [((8,), False, False), ((3, 1), True, False), ((), False, True), ((4,), True, True),
              ((40,), True, True)]


@pytest.mark.parametrize(("shape", "edge", "masked"), _GAT_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["random", "sorted", "int64", "long_row"])
def test_gat_attention_matches_reference(poisoned, kind, dtype, shape, edge, masked) -> None:
    g = named_graph(kind)
    args = attention_operands(g, shape, dtype, 6, edge, masked)
    cuda, on_gpu = g.to("cuda"), [None if t is None else t.cuda() for t in args]
    out = run_gat_attention(cuda, on_gpu[0], on_gpu[1], on_gpu[2], on_gpu[3], 0.2)
    expected = gat_attention_ref(g, args[0], args[1], 0.2, args[2], args[3])
    torch.testing.assert_close(out.cpu().double(), expected.to(dtype).double(), **_TOLERANCE[dtype])
    # The backward against the CPU backend's, from the same values in the same dtype: the
    # LeakyReLU's slope at a logit near 0 depends on how its sums were rounded.
    y, dy = expected.to(dtype), random_features(tuple(expected.shape), dtype, 8)
    expected_dz, expected_d_dst = cpu.BACKEND.gat_attention_grad(g, y, dy, *args[:3], args[3], 0.2)
    dz, d_dst = run_gat_attention_backward(cuda, y.cuda(), dy.cuda(), *on_gpu[:3], on_gpu[3], 0.2)
    torch.testing.assert_close(dz.cpu().double(), expected_dz.double(), **_TOLERANCE[dtype])
    row_sums = {k: v * 4 for k, v in _TOLERANCE[dtype].items()}  # summed in another order
    torch.testing.assert_close(d_dst.cpu().double(), expected_d_dst.double(), **row_sums)
    if masked:
        assert (out.cpu()[args[3]] == 0).all() and (dz.cpu()[args[3]] == 0).all()


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_every_gat_schedule_matches_reference(poisoned, direction) -> None:
    g = named_graph("random")
    cuda = g.to("cuda")
    src, dst, edge, masked = (None if t is None else t.cuda()
                              for t in attention_operands(g, (8,), torch.float32, 11, True, True))
    expected = run_gat_attention(cuda, src, dst, edge, masked, 0.2)
    dy = random_features((g.num_edges, 8), torch.float32, 12).cuda()
    expected_dz, expected_d_dst = run_gat_attention_backward(cuda, expected, dy, src, dst, edge, masked, 0.2)
    task = SoftmaxTask(direction, torch.float32, cuda.index_dtype, True, 8, "gat", True, True)
    for schedule in schedule_space(task, g.stats, Target.of("cuda")):
        plan = build_plan(cuda, task, schedule)
        out = memory.allocate((g.num_edges, 8), torch.float32, cuda.device)
        scores = {"score_src": src, "score_dst": dst, "edge_scores": edge, "masked": masked,
                  "negative_slope": 0.2}
        if direction == "forward":
            plan(**scores, y=out)
            torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-7, msg=lambda m: f"{schedule}: {m}")
        else:
            d_dst = memory.allocate((g.num_dst, 8), torch.float32, cuda.device)
            plan(**scores, y=expected, dy=dy, dz=out, d_dst=d_dst)
            for got, want in ((out, expected_dz), (d_dst, expected_d_dst)):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=lambda m: f"{schedule}: {m}")
