"""gsparse.gat_attention: the fused GAT attention against the operations it fuses (g-SDDMM,
LeakyReLU, mask, edge softmax), its gradients, and what it says of bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import gsparse

from graphs import attention_operands as operands
from graphs import named_graph, random_features
from kernels.support import gpu

SLOPE = 0.2


def unfused(g, score_src, score_dst, negative_slope=SLOPE, edge_scores=None, masked=None):
    """What gat_attention fuses, operation by operation."""
    logits = gsparse.gsddmm(g, "add", score_src, score_dst, "u", "v")
    if edge_scores is not None:
        logits = logits + edge_scores
    logits = F.leaky_relu(logits, negative_slope)
    if masked is not None:
        logits = logits.masked_fill(masked.view(-1, *([1] * (logits.dim() - 1))), float("-inf"))
    return gsparse.edge_softmax(g, logits)


CASES = [((8,), False, False), ((3, 1), True, False), ((), False, True), ((4,), True, True)]


@pytest.mark.parametrize(("shape", "edge", "masked"), CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_matches_the_operations_it_fuses(shape, edge, masked, dtype) -> None:
    g = named_graph("square")
    args = operands(g, shape, dtype, 1, edge, masked)
    out = gsparse.gat_attention(g, *args[:2], SLOPE, *args[2:])
    assert out.shape == (g.num_edges, *shape) and out.dtype == dtype
    assert torch.equal(out, unfused(g, *args[:2], SLOPE, *args[2:]))
    if masked:
        assert (out[args[3]] == 0).all()


@pytest.mark.parametrize(("shape", "edge", "masked"), CASES, ids=str)
def test_gradients_match_the_operations_it_fuses(shape, edge, masked) -> None:
    g = named_graph("random")  # empty rows, edge ids unlike CSR positions
    args = operands(g, shape, torch.float32, 2, edge, masked)
    leaves = [None if t is None or t.dtype == torch.bool else t.clone().requires_grad_() for t in args]
    mine = [None if t is None else t.detach().clone().requires_grad_() for t in leaves[:3]]
    dy = random_features((g.num_edges, *shape), torch.float32, 9)
    fused = gsparse.gat_attention(g, mine[0], mine[1], SLOPE, mine[2], args[3])
    reference = unfused(g, leaves[0], leaves[1], SLOPE, leaves[2], args[3])
    fused.backward(dy)
    reference.backward(dy)
    for name, a, b in zip(("score_src", "score_dst", "edge_scores"), mine, leaves):
        if a is not None:
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")


def test_gradcheck_and_second_derivatives() -> None:
    # 4 sources, 5 destinations (one without edges), a repeated edge, edges not in CSR order
    g = gsparse.Graph.from_edge_index(torch.tensor([[2, 0, 3, 2, 1, 0, 3, 2], [1, 4, 0, 1, 2, 0, 4, 2]]),
                                      num_src=4, num_dst=5)
    src, dst, edge, _ = operands(g, (2,), torch.float64, 3, True, False)
    masked = torch.tensor([False, False, False, True, False, False, True, False])  # each a row's second
    leaves = [t.requires_grad_() for t in (src, dst, edge)]

    def attention(a, b, e):
        return gsparse.gat_attention(g, a, b, SLOPE, e, masked)

    assert torch.autograd.gradcheck(attention, leaves)
    assert torch.autograd.gradgradcheck(attention, leaves)


class _PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_the_traced_path_gives_the_eager_result() -> None:
    # Under a dispatch mode the call goes through the custom op (what torch.compile traces).
    g = named_graph("random")
    src, dst, edge, masked = operands(g, (4,), torch.float32, 4, True, True)
    leaves = [t.clone().requires_grad_() for t in (src, dst, edge)]
    eager = gsparse.gat_attention(g, *leaves[:2], SLOPE, leaves[2], masked)
    eager_grads = torch.autograd.grad(eager.sum(), leaves)
    with _PassThrough():
        traced = gsparse.gat_attention(g, *leaves[:2], SLOPE, leaves[2], masked)
        traced_grads = torch.autograd.grad(traced.sum(), leaves)
    assert torch.equal(traced, eager)
    for a, b in zip(traced_grads, eager_grads):
        torch.testing.assert_close(a, b)


def test_compiles_without_graph_breaks() -> None:
    g = named_graph("square")
    src, dst, _, masked = operands(g, (4,), torch.float32, 5, False, True)
    compiled = torch.compile(lambda a, b: gsparse.gat_attention(g, a, b, SLOPE, masked=masked),
                             fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(src, dst), gsparse.gat_attention(g, src, dst, SLOPE, masked=masked))


def test_graph_without_edges() -> None:
    g = named_graph("empty")
    src, dst = torch.randn(g.num_src, 3, requires_grad=True), torch.randn(g.num_dst, 3, requires_grad=True)
    out = gsparse.gat_attention(g, src, dst)
    assert out.shape == (0, 3)
    out.sum().backward()
    assert torch.equal(src.grad, torch.zeros_like(src)) and torch.equal(dst.grad, torch.zeros_like(dst))


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"score_src": torch.randn(7, 4)}, ValueError, "score_src has 7 rows but the graph has 200 source nodes"),
    ({"score_dst": torch.randn(200, 4, dtype=torch.float64)}, ValueError, "score_dst must have score_src's dtype"),
    ({"score_dst": torch.randn(200, 2)}, ValueError, r"feature shape, torch.float32 \[4\]; got torch.float32 \[2\]"),
    ({"score_src": torch.ones(200, 4, dtype=torch.int64)}, TypeError, "score_src must have a floating dtype"),
    ({"negative_slope": "0.2"}, TypeError, "negative_slope must be a real number, got str"),
    ({"negative_slope": True}, TypeError, "negative_slope must be a real number, got bool"),
    ({"edge_scores": torch.randn(5, 4)}, ValueError, "edge_scores has 5 rows but the graph has 3000 edges"),
    ({"edge_scores": torch.randn(3000, 1)}, ValueError, "edge_scores must have score_src's dtype and feature shape"),
    ({"masked": torch.zeros(3000, dtype=torch.uint8)}, TypeError, "masked must be a bool tensor, got torch.uint8"),
    ({"masked": torch.zeros(30, dtype=torch.bool)}, ValueError, r"masked must have shape \[3000\]"),
    ({"masked": torch.zeros(6000, dtype=torch.bool)[::2]}, ValueError, r"masked must be contiguous, got strides \(2,\)"),
])
def test_bad_input_says_what_is_wrong(change, error, match) -> None:
    g = named_graph("square")
    kwargs = {"score_src": torch.randn(200, 4), "score_dst": torch.randn(200, 4), "negative_slope": SLOPE,
              "edge_scores": None, "masked": None, **change}
    with pytest.raises(error, match=match):
        gsparse.gat_attention(g, **kwargs)
    with pytest.raises(TypeError, match="g must be a gsparse.Graph"):
        gsparse.gat_attention("graph", torch.randn(3, 1), torch.randn(3, 1))


def test_autocast_scores_in_float32() -> None:
    g = named_graph("square")
    src, dst = torch.randn(200, 2, dtype=torch.bfloat16), torch.randn(200, 2, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = gsparse.gat_attention(g, src, dst)
    assert out.dtype == torch.float32
    assert torch.equal(out, gsparse.gat_attention(g, src.float(), dst.float()))


@gpu
@pytest.mark.parametrize(("shape", "edge", "masked"), [((8,), False, False), ((8,), True, False),
                                                       ((8, 1), False, True), ((8,), True, True)], ids=str)
def test_float32_attention_is_the_operations_bit_for_bit(shape, edge, masked) -> None:
    # The same softmax schedule over logits rounded the same way: the same bits, forward and
    # (but for the destinations' sums, added in another order) backward, where the edge
    # softmax's gradient is one fused pass too (8 heads of 4 bytes: see _ops._fused_grad_pays).
    g = named_graph("random").to("cuda")
    args = [None if t is None else t.cuda() for t in operands(g, shape, torch.float32, 7, edge, masked)]
    leaves = [None if t is None or t.dtype == torch.bool else t.clone().requires_grad_() for t in args]
    mine = [None if t is None else t.detach().clone().requires_grad_() for t in leaves[:3]]
    fused = gsparse.gat_attention(g, mine[0], mine[1], SLOPE, mine[2], args[3])
    reference = unfused(g, leaves[0], leaves[1], SLOPE, leaves[2], args[3])
    assert torch.equal(fused, reference)
    dy = random_features(tuple(fused.shape), torch.float32, 10).cuda()
    fused.backward(dy)
    reference.backward(dy)
    assert torch.equal(mine[0].grad, leaves[0].grad)
    if edge:
        assert torch.equal(mine[2].grad, leaves[2].grad)
    torch.testing.assert_close(mine[1].grad, leaves[1].grad, rtol=1e-5, atol=1e-6)
