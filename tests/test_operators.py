"""Every operator against the float64 reference, on hypothesis-generated graphs and shapes."""

from __future__ import annotations

import pytest
import torch
from graphs import graphs, random_features
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gsparse
from gsparse.algebra import REDUCERS, SDDMM_OPS, SPMM_OPS
from gsparse.testing import edge_softmax_ref, gsddmm_ref, gspmm_ref

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
PROPERTY = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    out = out.double()
    assert not torch.isnan(out).any(), "NaN in output"
    scale = ref.norm()
    diff = (out - ref).norm()
    return float(diff / scale) if scale > 0 else float(diff)


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    err = relative_error(out, ref)
    assert err <= TOLERANCE[dtype], f"relative error {err:.3e} > {TOLERANCE[dtype]:.1e}"


# Pairs of feature shapes that broadcast the way DGL users use them.
BROADCASTS = [
    ((), ()),
    ((4,), (4,)),
    ((5,), ()),  # per-edge scalar weight
    ((), (3,)),
    ((2, 3), (2, 1)),  # multi-head attention weights
    ((2, 1), (1, 3)),
    ((3, 4), (4,)),
    ((1,), (7,)),
]


@PROPERTY
@given(g=graphs(), op=st.sampled_from(SPMM_OPS), reduce=st.sampled_from(sorted(REDUCERS)),
       shapes=st.sampled_from(BROADCASTS), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_gspmm_matches_reference(g, op, reduce, shapes, dtype, seed):
    lshape, rshape = shapes
    lhs = random_features((g.num_src, *lshape), dtype, seed)
    rhs = random_features((g.num_edges, *rshape), dtype, seed + 1, away_from_zero=op == "div")
    out = gsparse.gspmm(g, op, reduce, lhs, rhs)
    assert out.dtype == dtype
    assert_close(out, gspmm_ref(g, op, reduce, lhs, rhs), dtype)


@PROPERTY
@given(g=graphs(), op=st.sampled_from(SDDMM_OPS), targets=st.sampled_from(
    [(a, b) for a in "uve" for b in "uve"]), shapes=st.sampled_from(BROADCASTS),
    dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_gsddmm_matches_reference(g, op, targets, shapes, dtype, seed):
    lhs_target, rhs_target = targets
    lshape, rshape = shapes
    if op == "dot" and (lshape[-1:] or (1,)) != (rshape[-1:] or (1,)):
        rshape = (*rshape[:-1], *(lshape[-1:] or (1,))) if rshape else lshape[-1:]
    rows = {"u": g.num_src, "v": g.num_dst, "e": g.num_edges}
    lhs = random_features((rows[lhs_target], *lshape), dtype, seed)
    rhs = random_features((rows[rhs_target], *rshape), dtype, seed + 1, away_from_zero=op == "div")
    out = gsparse.gsddmm(g, op, lhs, rhs, lhs_target, rhs_target)
    assert out.dtype == dtype
    assert_close(out, gsddmm_ref(g, op, lhs, rhs, lhs_target, rhs_target), dtype)


@settings(max_examples=250, deadline=None)
@given(g=graphs(), shape=st.sampled_from([(), (1,), (4,), (3, 1), (2, 3)]), norm_by=st.sampled_from(["dst", "src"]),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_edge_softmax_matches_reference(g, shape, norm_by, dtype, seed):
    logits = random_features((g.num_edges, *shape), dtype, seed) * 4
    out = gsparse.edge_softmax(g, logits, norm_by=norm_by)
    assert out.dtype == dtype
    assert_close(out, edge_softmax_ref(g, logits, norm_by), dtype)


def test_edge_softmax_is_stable_for_large_logits():
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 1, 2], [0, 0, 0]]))
    out = gsparse.edge_softmax(g, torch.tensor([1000.0, 1000.0, -1000.0]))
    torch.testing.assert_close(out, torch.tensor([0.5, 0.5, 0.0]))


@pytest.mark.parametrize("reduce", sorted(REDUCERS))
def test_rows_without_edges_give_zero(reduce):
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 1], [2, 2]]), num_src=2, num_dst=4)
    x = torch.tensor([[-3.0], [-5.0]])
    out = gsparse.gspmm(g, "copy_lhs", reduce, x)
    expected = {"sum": -8.0, "mean": -4.0, "max": -3.0, "min": -5.0}[reduce]
    torch.testing.assert_close(out, torch.tensor([[0.0], [0.0], [expected], [0.0]]))


def test_mean_divides_by_in_degree_with_multi_edges():
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 0, 1], [1, 1, 1]]))
    out = gsparse.copy_u_mean(g, torch.tensor([2.0, 5.0]))
    torch.testing.assert_close(out, torch.tensor([0.0, 3.0]))


@given(g=graphs(square=True), seed=st.integers(0, 2**16))
@settings(max_examples=50, deadline=None)
def test_edge_features_follow_user_edge_order(g, seed):
    """Shuffling the edge list together with the edge features changes nothing per edge."""
    src, dst = g.edges()
    perm = torch.randperm(g.num_edges, generator=torch.Generator().manual_seed(seed))
    shuffled = gsparse.Graph.from_edge_index(torch.stack([src[perm], dst[perm]]), num_src=g.num_src, num_dst=g.num_dst)
    x = random_features((g.num_src, 3), torch.float64, seed)
    w = random_features((g.num_edges, 3), torch.float64, seed + 1)
    torch.testing.assert_close(gsparse.u_mul_e_sum(shuffled, x, w[perm]), gsparse.u_mul_e_sum(g, x, w))
    torch.testing.assert_close(gsparse.u_add_e(shuffled, x, w[perm]), gsparse.u_add_e(g, x, w)[perm])
    torch.testing.assert_close(gsparse.edge_softmax(shuffled, w[perm]), gsparse.edge_softmax(g, w)[perm])


def test_edge_order_example():
    # Edge 0 goes 1 -> 0 and edge 1 goes 0 -> 0: edge feature i belongs to edge i.
    g = gsparse.Graph.from_edge_index(torch.tensor([[1, 0], [0, 0]]), num_src=2, num_dst=2)
    out = gsparse.u_mul_e_sum(g, torch.tensor([10.0, 100.0]), torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(out, torch.tensor([120.0, 0.0]))
    torch.testing.assert_close(gsparse.copy_u(g, torch.tensor([10.0, 100.0])), torch.tensor([100.0, 10.0]))


def test_shorthands_are_generated_from_the_tables():
    for reduce in REDUCERS:
        for op in ("add", "sub", "mul", "div"):
            assert callable(getattr(gsparse, f"u_{op}_e_{reduce}"))
        assert callable(getattr(gsparse, f"copy_u_{reduce}"))
        assert callable(getattr(gsparse, f"copy_e_{reduce}"))
    for lhs in "uve":
        for rhs in "uve":
            for op in ("add", "sub", "mul", "div", "dot"):
                assert (lhs != rhs) == hasattr(gsparse, f"{lhs}_{op}_{rhs}")
    assert set(gsparse.__all__) >= {"Graph", "gspmm", "gsddmm", "edge_softmax", "u_dot_v", "copy_e_max"}


def test_shorthands_agree_with_the_general_operators():
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]))
    x = random_features((3, 4), torch.float64, 0)
    w = random_features((4, 4), torch.float64, 1)
    torch.testing.assert_close(gsparse.u_sub_e_max(g, x, w), gsparse.gspmm(g, "sub", "max", x, w))
    torch.testing.assert_close(gsparse.copy_e_min(g, w), gsparse.gspmm(g, "copy_rhs", "min", None, w))
    torch.testing.assert_close(gsparse.e_div_v(g, w, x), gsparse.gsddmm(g, "div", w, x, "e", "v"))
    torch.testing.assert_close(gsparse.copy_v(g, x), gsparse.gsddmm(g, "copy_lhs", x, None, "v"))


def test_dot_shapes_follow_dgl():
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    assert gsparse.u_dot_v(g, torch.randn(2, 8), torch.randn(2, 8)).shape == (2, 1)
    assert gsparse.u_dot_v(g, torch.randn(2, 4, 8), torch.randn(2, 4, 8)).shape == (2, 4, 1)
    assert gsparse.u_dot_v(g, torch.randn(2), torch.randn(2)).shape == (2,)


@pytest.mark.parametrize("norm_by", ["dst", "src"])
def test_edge_softmax_over_listed_edges_is_the_softmax_on_their_subgraph(norm_by):
    gen = torch.Generator().manual_seed(5)
    g = gsparse.Graph.from_edge_index(torch.randint(0, 12, (2, 60), generator=gen), num_nodes=12)
    eids = torch.randperm(60, generator=gen)[:25]
    logits = torch.randn(25, 2, generator=gen, requires_grad=True)
    out = gsparse.edge_softmax(g, logits, eids, norm_by=norm_by)
    sub = gsparse.Graph.from_edge_index(g.edge_index[:, eids], num_nodes=12)  # DGL's edge_subgraph
    logits2 = logits.detach().clone().requires_grad_()
    want = gsparse.edge_softmax(sub, logits2, norm_by=norm_by)
    torch.testing.assert_close(out, want)
    grad = torch.randn(25, 2, generator=gen)
    out.backward(grad)
    want.backward(grad)
    torch.testing.assert_close(logits.grad, logits2.grad)
    torch.testing.assert_close(gsparse.edge_softmax(g, logits.detach(), torch.arange(60)[:25]).shape,
                               torch.Size([25, 2]))
    with pytest.raises(TypeError, match="pass norm_by='src' by keyword"):
        gsparse.edge_softmax(g, logits, "src")
    with pytest.raises(ValueError, match=r"logits has 25 rows but the graph has 3 edges listed in eids"):
        gsparse.edge_softmax(g, logits, eids[:3])
    with pytest.raises(ValueError, match=r"eids holds edge ids outside \[0, 60\)"):
        gsparse.edge_softmax(g, logits[:1], torch.tensor([60]))
