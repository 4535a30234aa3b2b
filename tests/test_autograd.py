"""Gradients of every operator: gradcheck in float64, winners of max/min, the backward's operators."""

from __future__ import annotations

import pytest
import torch
from graphs import random_features

import gsparse
from gsparse import backends
from gsparse.algebra import REDUCERS, SDDMM_OPS, SPMM_OPS, TARGETS
from gsparse.backends import cpu


def _graph(name: str) -> gsparse.Graph:
    """Small graphs with the shapes gradients get wrong.

    ``bipartite``: 4 sources, 5 destinations; destination 3 has no edges; (2, 1) appears
    twice; edges are not in destination order (so the CSR has an edge-id permutation).
    ``square``: 5 nodes with a self loop, a node with no in-edges and one with no out-edges.
    """
    edges = {
        "bipartite": ([2, 0, 3, 2, 1, 0, 3, 2], [1, 4, 0, 1, 2, 0, 4, 2], 4, 5),
        "square": ([0, 1, 2, 3, 3, 1, 0], [1, 2, 0, 3, 1, 0, 2], 5, 5),
    }
    src, dst, num_src, num_dst = edges[name]
    return gsparse.Graph.from_edge_index(torch.tensor([src, dst]), num_src=num_src, num_dst=num_dst)


GRAPHS = ["bipartite", "square"]
ROWS = {"u": lambda g: g.num_src, "v": lambda g: g.num_dst, "e": lambda g: g.num_edges}


def _leaf(shape, seed: int, away_from_zero: bool = False) -> torch.Tensor:
    return random_features(shape, torch.float64, seed, away_from_zero=away_from_zero).requires_grad_()


# Feature shapes (lhs, rhs): equal, a per-edge scalar, per-head weights, both broadcast.
SPMM_SHAPES = [((3,), (3,)), ((3,), ()), ((2, 3), (2, 1)), ((2, 1), (1, 3))]


# Every broadcast on the bipartite graph, one on the square graph (with its self loop).
SPMM_CASES = [(shapes, "bipartite") for shapes in SPMM_SHAPES] + [(SPMM_SHAPES[2], "square")]


@pytest.mark.parametrize("shapes,graph", SPMM_CASES, ids=str)
@pytest.mark.parametrize("reduce", sorted(REDUCERS))
@pytest.mark.parametrize("op", SPMM_OPS)
def test_gspmm_gradcheck(op, reduce, shapes, graph):
    g = _graph(graph)
    lshape, rshape = shapes
    x = _leaf((g.num_src, *lshape), 1)
    y = _leaf((g.num_edges, *rshape), 2, away_from_zero=op == "div")
    assert torch.autograd.gradcheck(lambda a, b: gsparse.gspmm(g, op, reduce, a, b), (x, y))


@pytest.mark.parametrize("differentiable", ["lhs", "rhs"])
@pytest.mark.parametrize("reduce", ["sum", "max"])
@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_gspmm_gradcheck_with_one_operand_differentiable(op, reduce, differentiable):
    # The backward then keeps only what that gradient reads (the other operand, or neither).
    g = _graph("bipartite")
    x = _leaf((g.num_src, 2, 3), 1).requires_grad_(differentiable == "lhs")
    y = _leaf((g.num_edges, 2, 1), 2, away_from_zero=op == "div").requires_grad_(differentiable == "rhs")
    assert torch.autograd.gradcheck(lambda a, b: gsparse.gspmm(g, op, reduce, a, b), (x, y))


@pytest.mark.parametrize("differentiable", ["lhs", "rhs"])
@pytest.mark.parametrize("op", ["add", "dot", "div"])
def test_gsddmm_gradcheck_with_one_operand_differentiable(op, differentiable):
    g = _graph("bipartite")
    x = _leaf((g.num_src, 2, 3), 3).requires_grad_(differentiable == "lhs")
    y = _leaf((g.num_dst, 1 if op == "dot" else 2, 3 if op == "dot" else 1), 4,
              away_from_zero=op == "div").requires_grad_(differentiable == "rhs")
    assert torch.autograd.gradcheck(lambda a, b: gsparse.gsddmm(g, op, a, b, "u", "v"), (x, y))


def _custom_op_spmm(g, op, reduce, lhs, rhs):
    """The registered custom op itself, as torch.compile runs it (not the eager resolved path)."""
    from gsparse import _ops

    out_shape = list(lhs.shape[1:] if rhs is None else torch.broadcast_shapes(lhs.shape[1:], rhs.shape[1:]))
    if reduce in ("max", "min"):
        return _ops.spmm_arg(*g.parts, op, reduce, lhs, rhs, out_shape, False)[0]
    return _ops.spmm(*g.parts, op, reduce, lhs, rhs, out_shape, False)


@pytest.mark.parametrize("path", ["eager", "custom op"])
@pytest.mark.parametrize("op,reduce,keeps", [
    ("copy_lhs", "sum", ""), ("copy_lhs", "max", ""), ("add", "sum", ""),
    ("mul", "sum", "rhs"), ("mul", "max", "rhs"),
])
def test_the_backward_keeps_alive_only_the_operands_it_reads(path, op, reduce, keeps):
    # A layer's [N, F] input must not be held until the backward when its gradient is a
    # plain sum of the output's (GCN's normalised features, a mean aggregation's input).
    import weakref

    g = _graph("bipartite")
    x = _leaf((g.num_src, 3), 5)
    w = random_features((g.num_edges, 1), torch.float64, 6)
    h = x * 2  # not a leaf: only the autograd graph could keep it alive
    rhs = None if op == "copy_lhs" else w.clone()
    alive = weakref.ref(h), (weakref.ref(rhs) if rhs is not None else None)
    out = (gsparse.gspmm if path == "eager" else _custom_op_spmm)(g, op, reduce, h, rhs)
    del h, rhs
    assert (alive[0]() is not None) == ("lhs" in keeps)
    if alive[1] is not None:
        assert (alive[1]() is not None) == ("rhs" in keeps)
    out.sum().backward()
    expected = torch.autograd.grad(gsparse.gspmm(g, op, reduce, x * 2, None if op == "copy_lhs" else w).sum(), x)[0]
    torch.testing.assert_close(x.grad, expected)


SDDMM_SHAPES = {"dot": ((2, 3), (1, 3)), "default": ((2, 3), (2, 1))}


@pytest.mark.parametrize("rhs_target", TARGETS)
@pytest.mark.parametrize("lhs_target", TARGETS)
@pytest.mark.parametrize("op", SDDMM_OPS)
def test_gsddmm_gradcheck(op, lhs_target, rhs_target):
    g = _graph("bipartite")
    lshape, rshape = SDDMM_SHAPES.get(op, SDDMM_SHAPES["default"])
    x = _leaf((ROWS[lhs_target](g), *lshape), 3)
    y = _leaf((ROWS[rhs_target](g), *rshape), 4, away_from_zero=op == "div")
    assert torch.autograd.gradcheck(
        lambda a, b: gsparse.gsddmm(g, op, a, b, lhs_target, rhs_target), (x, y))


@pytest.mark.parametrize("shapes", [((), ()), ((4,), ()), ((1, 3), (2, 1)), ((3,), (2, 3))], ids=str)
@pytest.mark.parametrize("targets", [("u", "v"), ("v", "e"), ("e", "u")], ids="".join)
def test_gsddmm_gradcheck_broadcasts(shapes, targets):
    g = _graph("square")
    (lhs_target, rhs_target), (lshape, rshape) = targets, shapes
    x = _leaf((ROWS[lhs_target](g), *lshape), 5)
    y = _leaf((ROWS[rhs_target](g), *rshape), 6)
    assert torch.autograd.gradcheck(
        lambda a, b: gsparse.gsddmm(g, "mul", a, b, lhs_target, rhs_target), (x, y))


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("shape", [(), (2, 1), (3,)], ids=str)
@pytest.mark.parametrize("norm_by", ["dst", "src"])
def test_edge_softmax_gradcheck(norm_by, shape, graph):
    g = _graph(graph)
    z = _leaf((g.num_edges, *shape), 7)
    assert torch.autograd.gradcheck(lambda t: gsparse.edge_softmax(g, t, norm_by=norm_by), (z,))


def test_edge_softmax_gradient_formula():
    g = _graph("square")
    z = _leaf((g.num_edges, 2), 8)
    a = gsparse.edge_softmax(g, z)
    da = random_features(a.shape, torch.float64, 9)
    (dz,) = torch.autograd.grad(a, z, da)
    _, dst = g.edges()
    row = torch.zeros(g.num_dst, 2, dtype=torch.float64).index_add_(0, dst, (a * da).detach())
    torch.testing.assert_close(dz, a.detach() * (da - row[dst]))


@pytest.mark.parametrize("case", [("mul", "sum"), ("div", "mean"), ("add", "max")], ids=str)
def test_gspmm_second_derivatives(case):
    op, reduce = case
    g = _graph("bipartite")
    x = _leaf((g.num_src, 3), 10)
    y = _leaf((g.num_edges, 1), 11, away_from_zero=True)
    assert torch.autograd.gradgradcheck(lambda a, b: gsparse.gspmm(g, op, reduce, a, b), (x, y))


@pytest.mark.parametrize("norm_by", ["dst", "src"])
def test_sddmm_and_softmax_second_derivatives(norm_by):
    g = _graph("square")
    x = _leaf((g.num_src, 2, 3), 12)
    y = _leaf((g.num_dst, 2, 3), 13)

    def attention(a, b):
        return gsparse.edge_softmax(g, gsparse.gsddmm(g, "dot", a, b, "u", "v"), norm_by=norm_by)

    assert torch.autograd.gradgradcheck(attention, (x, y))


# ---------------------------------------------------------------------- max/min winners


def test_spmm_winners_ties_go_to_the_first_edge_in_csr_order():
    # Destination 0 receives edges 2, 0, 3 (CSR order follows edge ids within a row) with
    # equal messages from sources 1, 2, 0; destination 1 has none; destination 2 one edge.
    g = gsparse.Graph.from_edge_index(torch.tensor([[2, 0, 1, 0], [0, 2, 0, 0]]), num_nodes=3)
    x = torch.tensor([[5.0, 1.0], [5.0, 2.0], [5.0, 3.0]])
    out, arg_u, arg_e = cpu.BACKEND.spmm(g, "copy_lhs", "max", x, None, (2,), with_arg=True)
    torch.testing.assert_close(out, torch.tensor([[5.0, 3.0], [0.0, 0.0], [5.0, 1.0]]))
    # Row 0 in CSR order holds edges 0 (src 2), 2 (src 1), 3 (src 0): column 0 ties -> edge 0.
    assert arg_u.tolist() == [[2, 2], [-1, -1], [0, 0]]
    assert arg_e.tolist() == [[0, 0], [-1, -1], [1, 1]]
    assert arg_u.dtype == arg_e.dtype == torch.int64


def test_spmm_winners_name_user_edge_ids():
    g = _graph("bipartite")
    y = random_features((g.num_edges, 2), torch.float64, 14)
    out, arg_u, arg_e = cpu.BACKEND.spmm(g, "copy_rhs", "min", None, y, (2,), with_arg=True)
    src, dst = g.edges()
    for v in range(g.num_dst):
        for f in range(2):
            incoming = (dst == v).nonzero().flatten()
            if incoming.numel() == 0:
                assert arg_e[v, f] == arg_u[v, f] == -1
                continue
            best = incoming[y[incoming, f].argmin()]
            assert arg_e[v, f] == best and arg_u[v, f] == src[best] and out[v, f] == y[best, f]


def test_with_arg_needs_max_or_min():
    g = _graph("square")
    with pytest.raises(ValueError, match="with_arg needs reduce max or min, got 'sum'"):
        cpu.BACKEND.spmm(g, "copy_lhs", "sum", torch.ones(5, 1), None, (1,), with_arg=True)


def test_max_gradient_goes_to_the_winning_edge_only():
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 1, 2], [0, 0, 0]]), num_src=3, num_dst=2)
    x = torch.tensor([[1.0], [4.0], [2.0]], requires_grad=True)
    gsparse.gspmm(g, "copy_lhs", "max", x).sum().backward()
    assert x.grad.flatten().tolist() == [0.0, 1.0, 0.0]


def test_max_without_grad_keeps_no_winners(monkeypatch):
    calls = []
    original = cpu.BACKEND.spmm

    def spy(*args, **kwargs):
        calls.append(kwargs.get("with_arg", False))
        return original(*args, **kwargs)

    monkeypatch.setattr(cpu.BACKEND, "spmm", spy)
    g = _graph("square")
    x = torch.randn(5, 3, requires_grad=True)
    with torch.no_grad():
        gsparse.gspmm(g, "copy_lhs", "max", x)
    gsparse.gspmm(g, "copy_lhs", "max", x)
    assert calls == [False, True]


# ---------------------------------------------------------------------- plumbing


class _Recorder:
    """A backend that records each call and hands it to another (the PyTorch-ops backend
    by default)."""

    def __init__(self, inner=cpu.BACKEND):
        self.calls = []
        self.inner = inner

    def spmm(self, g, op, reduce, lhs, rhs, out_shape, schedule=None, with_arg=False):
        self.calls.append(("spmm", g, op, reduce))
        return self.inner.spmm(g, op, reduce, lhs, rhs, out_shape, schedule, with_arg)

    def sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule=None):
        self.calls.append(("sddmm", g, op, lhs_target, rhs_target))
        return self.inner.sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule)

    def edge_softmax(self, g, logits, norm_by):
        self.calls.append(("edge_softmax", g, norm_by))
        return self.inner.edge_softmax(g, logits, norm_by)

    def edge_softmax_grad(self, g, y, grad, norm_by):
        self.calls.append(("edge_softmax_grad", g, norm_by))
        return self.inner.edge_softmax_grad(g, y, grad, norm_by)


@pytest.fixture
def recorder(monkeypatch):
    rec = _Recorder()
    monkeypatch.setitem(backends._BY_DEVICE_TYPE, "cpu", rec)
    return rec


def test_backward_runs_on_the_backend_of_the_device(recorder):
    g = _graph("bipartite")
    x = torch.randn(g.num_src, 3, requires_grad=True)
    w = torch.randn(g.num_edges, 1, requires_grad=True)
    out = gsparse.gspmm(g, "mul", "sum", x, w)
    recorder.calls.clear()
    out.backward(torch.ones_like(out))
    # The node gradient is a g-SpMM on the cached reverse graph; the gradient of the
    # broadcast edge weight a g-SDDMM dot, which never materialises the [E, 3] products.
    assert ("spmm", g.reverse(), "mul", "sum") in recorder.calls
    assert ("sddmm", g, "dot", "u", "v") in recorder.calls
    assert x.grad is not None and w.grad is not None


@pytest.mark.parametrize("norm_by", ["dst", "src"])
def test_a_blocks_softmax_backward_is_one_pass_of_the_backend(recorder, norm_by):
    """On a sampled block the gradient of the logits is the backend's fused pass, not a
    g-SpMM of the row sums and a g-SDDMM spreading them back, whatever its values' width (a
    block is host-bound); the same graph validated gives the same gradient."""
    g = _graph("square")
    src, dst = g.edges()
    block = gsparse.Graph.from_block(torch.stack([src, dst]), num_src=g.num_src, num_dst=g.num_dst)
    z = torch.randn(g.num_edges, 2, dtype=torch.float64, requires_grad=True)
    grads = []
    for graph in (block, g):
        y = gsparse.edge_softmax(graph, z, norm_by=norm_by)
        recorder.calls.clear()
        grads.append(torch.autograd.grad((y * y).sum(), z)[0])
        kinds = [call[0] for call in recorder.calls]
        assert kinds == ["edge_softmax_grad"]
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-12)
    # a second derivative through the fused op
    y = gsparse.edge_softmax(block, z, norm_by=norm_by)
    (dz,) = torch.autograd.grad((y * y).sum(), z, create_graph=True)
    recorder.calls.clear()
    dz.sum().backward()
    assert ("edge_softmax_grad", block, norm_by) in recorder.calls


_FUSED_ON_A_GPU = [
    (True, (2,), "dst", True),     # rows in edge order: the fused pass streams
    (True, (2,), "src", False),    # the reverse graph's rows gather 16 bytes an edge
    (False, (2,), "dst", False),   # edge ids: 16 bytes an edge, half a sector
    (False, (4,), "dst", True),    # 32 bytes an edge: a whole sector
    (False, (2, 2), "src", True),
]


def _softmax_backward_kinds(recorder, device, edge_ordered, shape, norm_by) -> list[str]:
    """The backend calls of an edge softmax's backward on ``device``, its gradient checked
    against the formula."""
    g = _graph("square")
    if edge_ordered:  # the same graph, its edges listed by destination: no edge ids
        g = gsparse.Graph.from_csr(g.rowptr, g.col, num_src=g.num_src)
        assert g.eid is None
    g = g.to(device)
    z = _leaf((g.num_edges, *shape), 14).to(device)
    y = gsparse.edge_softmax(g, z, norm_by=norm_by)
    dy = random_features(y.shape, torch.float64, 15).to(device)
    recorder.calls.clear()
    (dz,) = torch.autograd.grad(y, z, dy)
    src, dst = g.edges()
    rows, count = (dst, g.num_dst) if norm_by == "dst" else (src, g.num_src)
    row = torch.zeros(count, *shape, dtype=torch.float64, device=device).index_add_(0, rows, (y * dy).detach())
    torch.testing.assert_close(dz, y.detach() * (dy - row[rows]))
    return [call[0] for call in recorder.calls]


@pytest.mark.parametrize(("edge_ordered", "shape", "norm_by", "fused"), _FUSED_ON_A_GPU)
def test_a_graphs_softmax_backward_is_fused_on_the_cpu(recorder, edge_ordered, shape, norm_by, fused):
    del fused  # the CPU's one accumulation was the faster on every graph
    assert _softmax_backward_kinds(recorder, "cpu", edge_ordered, shape, norm_by) == ["edge_softmax_grad"]


@pytest.mark.gpu
@pytest.mark.parametrize(("edge_ordered", "shape", "norm_by", "fused"), _FUSED_ON_A_GPU)
def test_a_graphs_softmax_backward_is_fused_on_a_gpu_where_it_moves_fewer_bytes(
        monkeypatch, edge_ordered, shape, norm_by, fused):
    recorder = _Recorder(backends.for_device(torch.device("cuda")))
    monkeypatch.setitem(backends._BY_DEVICE_TYPE, "cuda", recorder)
    kinds = _softmax_backward_kinds(recorder, "cuda", edge_ordered, shape, norm_by)
    assert kinds == (["edge_softmax_grad"] if fused else ["spmm", "sddmm"])


def test_a_blocks_softmax_second_derivatives():
    g = _graph("square")
    src, dst = g.edges()
    block = gsparse.Graph.from_block(torch.stack([src, dst]), num_src=g.num_src, num_dst=g.num_dst)
    x = _leaf((g.num_src, 2, 3), 12)
    y = _leaf((g.num_dst, 2, 3), 13)

    def attention(a, b):
        return gsparse.edge_softmax(block, gsparse.gsddmm(block, "dot", a, b, "u", "v"))

    assert torch.autograd.gradgradcheck(attention, (x, y))


def test_operators_find_the_graph_and_its_caches(recorder):
    g = _graph("square")
    gsparse.gspmm(g, "copy_lhs", "sum", torch.ones(5, 2))
    assert recorder.calls[0][1] is g


def test_outputs_never_alias_inputs():
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    w = torch.randn(2, 3)
    out = gsparse.gsddmm(g, "copy_lhs", w, None, "e", "v")
    assert out.data_ptr() != w.data_ptr()
    torch.testing.assert_close(out, w)


def test_forced_schedule_refuses_autograd():
    g = _graph("square")
    x = torch.randn(5, 2, requires_grad=True)
    with pytest.raises(ValueError, match="schedule forces a kernel outside autograd"):
        gsparse.gspmm(g, "copy_lhs", "sum", x, schedule=gsparse.SpmmOnePass())
    with pytest.raises(ValueError, match="schedule forces a kernel outside autograd"):
        gsparse.gsddmm(g, "dot", x, x, "u", "v", schedule=gsparse.SddmmEdge())


def test_custom_ops_pass_opcheck():
    g = _graph("bipartite")
    x = torch.randn(g.num_src, 2, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(g.num_edges, 2, 1, dtype=torch.float64, requires_grad=True)
    n = torch.randn(g.num_dst, 2, 3, dtype=torch.float64, requires_grad=True)
    ops = torch.ops.gsparse
    cases = [
        (ops.spmm, (*g.parts, "mul", "sum", x, w, [2, 3], False)),
        (ops.spmm, (*g.parts, "copy_lhs", "mean", n, None, [2, 3], True)),
        (ops.spmm_arg, (*g.parts, "div", "max", x, w, [2, 3], False)),
        (ops.sddmm, (*g.parts, "dot", x, n, "u", "v", [2, 1])),
        (ops.edge_softmax, (*g.parts, w, "src")),
        (ops.edge_softmax_grad, (*g.parts, torch.rand_like(w).requires_grad_(), w, "dst")),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


@pytest.mark.gpu
@pytest.mark.parametrize("reduce", sorted(REDUCERS))
@pytest.mark.parametrize("op", SPMM_OPS)
def test_gpu_gradients_match_cpu(op, reduce):
    g = _graph("bipartite")
    inputs = (random_features((g.num_src, 2, 8), torch.float32, 15),
              random_features((g.num_edges, 2, 1), torch.float32, 16, away_from_zero=op == "div"),
              random_features((g.num_dst, 2, 8), torch.float32, 17))
    grads = {}
    for device in ("cpu", "cuda"):
        x, y, q = (t.to(device).requires_grad_() for t in inputs)
        gd = g.to(device)
        attention = gsparse.edge_softmax(gd, gsparse.gsddmm(gd, "dot", x, q, "u", "v"))
        loss = (gsparse.gspmm(gd, op, reduce, x, y) ** 2).sum() + \
            (gsparse.gspmm(gd, "mul", "sum", x, attention) ** 2).sum()
        grads[device] = torch.autograd.grad(loss, (x, y, q), allow_unused=True)
    for cpu_grad, gpu_grad in zip(grads["cpu"], grads["cuda"]):
        assert (cpu_grad is None) == (gpu_grad is None)
        if cpu_grad is not None:
            torch.testing.assert_close(gpu_grad.cpu(), cpu_grad, rtol=1e-4, atol=1e-5)


def test_a_graph_sharing_a_rowptr_does_not_hide_the_live_one(recorder):
    rowptr = torch.tensor([0, 1, 2], dtype=torch.int32)
    g = gsparse.Graph.from_csr(rowptr, torch.tensor([1, 0], dtype=torch.int32))
    other = gsparse.Graph.from_csr(rowptr, torch.tensor([0, 1], dtype=torch.int32))  # other columns
    assert g.rowptr is other.rowptr
    x = torch.randn(2, 3)
    torch.testing.assert_close(gsparse.gspmm(g, "copy_lhs", "sum", x), x.flip(0))
    gsparse.gspmm(other, "copy_lhs", "sum", x)
    assert recorder.calls[0][1] is g and recorder.calls[1][1] is other


@pytest.mark.parametrize("graph", GRAPHS)
def test_weighted_sums_follow_weights_changed_between_calls(graph):
    """The CPU backend writes each call's weights into a CSR it keeps with the graph (small
    graphs, narrow rows): forward and backward see the weights as they are at the call,
    whether an optimizer step, a write behind autograd's back (.data, NumPy) or new memory
    changed them."""
    g = _graph(graph)
    src, dst = (i.long() for i in g.edges())
    x, w = _leaf((g.num_src, 3), 1), _leaf((g.num_edges,), 2)
    optimizer = torch.optim.SGD([x, w], lr=0.5)
    changes = [optimizer.step, lambda: w.data.mul_(-2.0), lambda: w.detach().numpy().__setitem__(0, 7.0),
               lambda: setattr(w, "data", torch.rand(g.num_edges, dtype=torch.float64)), lambda: None]
    for change in changes:
        grad = torch.randn(g.num_dst, 3, dtype=torch.float64)
        optimizer.zero_grad()
        out = gsparse.u_mul_e_sum(g, x, w)
        out.backward(grad)
        got = (out.detach(), x.grad.clone(), w.grad.clone())
        reference = torch.zeros(g.num_dst, 3, dtype=torch.float64).index_add_(0, dst, x[src] * w[:, None])
        want = (reference.detach(), *torch.autograd.grad(reference, (x, w), grad))
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
        with torch.no_grad():  # no autograd: the direct call
            torch.testing.assert_close(gsparse.u_mul_e_sum(g, x, w), reference.detach(), rtol=0, atol=1e-12)
        change()
