"""Eager calls without gradients skip the custom ops; autograd and tracing go through them."""

import pytest
import torch
from graphs import named_graph

import gsparse
from gsparse import _ops


@pytest.fixture
def counted(monkeypatch):
    """Counts the calls that reach each custom op, and still runs it."""
    calls = {"spmm": 0, "sddmm": 0, "edge_softmax": 0}
    for name in calls:
        op = getattr(_ops, name)

        def counting(*args, _op=op, _name=name):
            calls[_name] += 1
            return _op(*args)

        monkeypatch.setattr(_ops, name, counting)
    return calls


def _graph():
    gen = torch.Generator().manual_seed(0)
    return gsparse.Graph.from_edge_index(torch.randint(0, 20, (2, 80), generator=gen), num_nodes=20)


def _call_all(g, x, e):
    gsparse.gspmm(g, "mul", "sum", x, e)
    gsparse.gsddmm(g, "dot", x, x, "u", "v")
    gsparse.edge_softmax(g, e)


def test_eager_no_grad_calls_skip_the_custom_ops(counted):
    g = _graph()
    x, e = torch.randn(20, 4), torch.randn(80, 4)
    _call_all(g, x, e)
    with torch.no_grad():
        _call_all(g, x.requires_grad_(), e)
    assert counted == {"spmm": 0, "sddmm": 0, "edge_softmax": 0}


def test_eager_calls_that_need_gradients_skip_the_custom_ops_and_match_their_gradients(counted):
    g = _graph()
    x, e = torch.randn(20, 4, requires_grad=True), torch.randn(80, 4, requires_grad=True)
    outs = [gsparse.gspmm(g, "mul", "sum", x, e), gsparse.gspmm(g, "mul", "max", x, e),
            gsparse.gsddmm(g, "dot", x, x, "u", "v"), gsparse.edge_softmax(g, e)]
    assert counted == {"spmm": 0, "sddmm": 0, "edge_softmax": 0}
    grads = torch.autograd.grad(sum((o * o).sum() for o in outs), [x, e])
    assert counted == {"spmm": 0, "sddmm": 0, "edge_softmax": 0}  # nor does their backward
    parts = g.parts
    through_ops = [_ops.spmm(*parts, "mul", "sum", x, e, [4], False),
                   _ops.spmm_arg(*parts, "mul", "max", x, e, [4], False)[0],
                   _ops.sddmm(*parts, "dot", x, x, "u", "v", [1]),
                   _ops.edge_softmax(*parts, e, "dst")]
    for got, want in zip(outs, through_ops):
        torch.testing.assert_close(got, want)
    want_grads = torch.autograd.grad(sum((o * o).sum() for o in through_ops), [x, e])
    for got, want in zip(grads, want_grads):
        torch.testing.assert_close(got, want)


def test_calls_under_a_dispatch_mode_go_through_the_custom_ops(counted):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    g = _graph()
    x, e = torch.randn(20, 4, requires_grad=True), torch.randn(80, 4, requires_grad=True)
    _call_all(g, x, e)  # resolved eagerly first: the mode must still see the custom ops
    with Passing():
        _call_all(g, x, e)
    assert counted == {"spmm": 1, "sddmm": 1, "edge_softmax": 1}


def test_fake_tensors_go_through_the_custom_ops(counted):
    from torch._subclasses.fake_tensor import FakeTensorMode

    g = _graph()
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        x = mode.from_tensor(torch.randn(20, 4))
        out = gsparse.gspmm(g, "copy_lhs", "sum", x)
    assert counted["spmm"] == 1 and tuple(out.shape) == (20, 4)


def test_direct_and_custom_op_paths_agree():
    g = _graph()
    x, e = torch.randn(20, 3, 2), torch.randn(80, 3, 1)
    direct = gsparse.gspmm(g, "mul", "max", x, e)
    through_op = gsparse.gspmm(g, "mul", "max", x.requires_grad_(), e)
    torch.testing.assert_close(direct, through_op.detach(), rtol=0, atol=0)


@pytest.mark.parametrize("width", [2, 16], ids=["narrow: CSR product", "wide: embedding_bag"])
def test_cpu_weighted_sums_run_as_one_sparse_product(monkeypatch, width):
    from gsparse.backends import cpu

    calls = []
    real_mm, real_bag = cpu._csr_product, torch.embedding_bag
    monkeypatch.setattr(cpu, "_csr_product", lambda a, b: calls.append(("mm", b.shape)) or real_mm(a, b))
    monkeypatch.setattr(torch, "embedding_bag", lambda x, *args: calls.append(("bag", x.shape)) or real_bag(x, *args))
    g = _graph()
    x, w = torch.randn(20, 3, width), torch.rand(80, 1, 1) + 0.5
    gsparse.gspmm(g, "copy_lhs", "mean", x)
    gsparse.gspmm(g, "mul", "sum", x, w)
    gsparse.gspmm(g, "mul", "sum", x[:, 0], w[:, 0, 0])  # [N, F] and [E]: no reshapes
    # a small graph's weighted sums too: its CSR is kept, the weights written into it per call
    assert calls == [(_kernel(3 * width), (20, 3 * width)), (_kernel(3 * width), (20, 3 * width)),
                     (_kernel(width), (20, width))]
    gsparse.gspmm(g, "mul", "mean", x, torch.rand(80, 3, 1))  # one product per head
    assert calls[3:] == [(_kernel(width), (20, width))] * 3
    gsparse.gspmm(g, "mul", "sum", x, torch.rand(80, 1, width))  # weights per feature: messages
    gsparse.gspmm(g, "copy_lhs", "max", x)
    assert len(calls) == 6


def _kernel(features: int) -> str:
    """The faster of the two kernels for a row width (short rows; see backends/cpu.py)."""
    return "bag" if features >= 16 else "mm"


def test_cpu_endpoint_dot_products_run_as_sampled_products(monkeypatch):
    calls = []
    real = torch.sparse.sampled_addmm
    monkeypatch.setattr(torch.sparse, "sampled_addmm",
                        lambda a, m1, m2, **kw: calls.append(m1.shape) or real(a, m1, m2, **kw))
    pairs = torch.randperm(400, generator=torch.Generator().manual_seed(0))[:80]
    g = gsparse.Graph.from_edge_index(torch.stack([pairs % 20, pairs // 20]), num_nodes=20)  # no repeats
    x = torch.randn(20, 3, 4)
    gsparse.gsddmm(g, "dot", x, x, "v", "u")
    assert calls == [(20, 4)] * 3  # one per head
    gsparse.gsddmm(g, "dot", x, torch.randn(80, 3, 4), "u", "e")  # an edge operand: gathers
    gsparse.gsddmm(g, "dot", x, torch.randn(20, 1, 4), "u", "v")  # broadcast heads: gathers
    assert len(calls) == 3


def test_dot_products_of_patterns_denser_than_the_matrix_take_the_gather_path(sampled):
    # two edges between the only pair: sampled_addmm fails on more entries than elements
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 0], [0, 0]]), num_nodes=1)
    x, y = torch.randn(1, 3), torch.randn(1, 3)
    out = gsparse.gsddmm(g, "dot", x, y, "u", "v")
    torch.testing.assert_close(out, (x * y).sum(1, keepdim=True).expand(2, 1))
    assert sampled["calls"] == 0


@pytest.fixture
def sampled(monkeypatch):
    """Counts the CPU backend's calls of torch.sparse.sampled_addmm."""
    seen = {"calls": 0}
    real = torch.sparse.sampled_addmm

    def counting(*args, **kwargs):
        seen["calls"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.sparse, "sampled_addmm", counting)
    return seen


@pytest.mark.parametrize("seed", range(20))
def test_sampled_dot_products_hold_with_repeated_edges(sampled, seed):
    # Random small patterns, many repeated pairs, up to as many entries as elements: the
    # sampled product must match the gather on every edge (in user edge order).
    gen = torch.Generator().manual_seed(seed)
    num_dst, num_src = 2 + seed % 4, 1 + seed % 3
    num_edges = int(torch.randint(1, num_dst * num_src + 1, (), generator=gen))
    edges = torch.stack([torch.randint(0, num_src, (num_edges,), generator=gen),
                         torch.randint(0, num_dst, (num_edges,), generator=gen)])
    g = gsparse.Graph.from_edge_index(edges, num_src=num_src, num_dst=num_dst)
    x = torch.randn(num_src, 2, 5, generator=gen, dtype=torch.float64)
    y = torch.randn(num_dst, 2, 5, generator=gen, dtype=torch.float64)
    out = gsparse.gsddmm(g, "dot", x, y, "u", "v")
    want = (x[edges[0]] * y[edges[1]]).sum(-1, keepdim=True)
    torch.testing.assert_close(out, want)
    assert sampled["calls"] == 2  # one per head


@pytest.mark.parametrize("op, reduce, rhs_shape", [("copy_lhs", "sum", None), ("mul", "sum", (1,)),
                                                   ("mul", "sum", ()), ("copy_lhs", "mean", None),
                                                   ("mul", "max", (1,)), ("add", "sum", "width")])
@pytest.mark.parametrize("width", [6, 32])
def test_a_bound_cpu_call_matches_the_backend_call(op, reduce, rhs_shape, width):
    from gsparse.backends import cpu

    g = _graph()  # edges out of CSR order: weights are permuted per call
    assert g.eid is not None
    x = torch.randn(20, width)
    rhs_shape = (width,) if rhs_shape == "width" else rhs_shape
    rhs = None if rhs_shape is None else torch.randn(80, *rhs_shape)
    padded = None if rhs is None else (rhs if rhs.dim() == 2 else rhs.unsqueeze(-1))  # as the front end pads
    run = cpu.BACKEND.bind_spmm(g, op, reduce, x, padded, (width,))
    for _ in range(2):  # the second call reuses what the first kept with the graph
        x, padded = torch.randn_like(x), None if padded is None else torch.randn_like(padded)
        torch.testing.assert_close(run(x, padded), cpu.BACKEND.spmm(g, op, reduce, x, padded, (width,)))


def test_cpu_narrow_weighted_sums_never_meet_stale_weights(monkeypatch):
    """A small graph's narrow weighted sums run as a CSR product on a CSR kept with the
    graph, whose values each call sets from its weights (through the edge permutation, on
    a graph out of CSR order). Weights changed in place, also behind autograd's back
    (.data, NumPy), replaced (.data =) or other weights always give the sums of the
    weights as they are at the call."""
    from gsparse.backends import cpu

    calls = []
    real_mm = cpu._csr_product
    monkeypatch.setattr(cpu, "_csr_product", lambda a, b: calls.append("mm") or real_mm(a, b))
    edges = torch.randint(0, 50, (2, 400), generator=torch.Generator().manual_seed(3))
    permuted = gsparse.Graph.from_edge_index(edges, num_nodes=50)
    in_order = gsparse.Graph.from_csr(permuted.rowptr, permuted.col, num_src=50)
    assert permuted.eid is not None and in_order.eid is None
    x = torch.randn(50, 4, dtype=torch.float64)

    def expected(g, weights):
        src, dst = g.edges()
        return torch.zeros(50, 4, dtype=torch.float64).index_add_(0, dst, x[src] * weights.unsqueeze(-1))

    for g in (in_order, permuted):
        calls.clear()
        w = torch.rand(400, dtype=torch.float64)

        def check():
            torch.testing.assert_close(gsparse.u_mul_e_sum(g, x, w), expected(g, w), rtol=0, atol=1e-12)

        for _ in range(3):
            check()
        assert calls == ["mm"] * 3
        w.mul_(2.0)
        check()
        w.data.add_(1.0)  # no version bump
        check()
        w.numpy()[:7] = -3.0  # none either
        check()
        w.data = torch.rand(400, dtype=torch.float64)  # other memory
        check()
        w[::3] = 0.5  # through a view
        check()
        other = torch.rand(400, dtype=torch.float64)
        torch.testing.assert_close(gsparse.u_mul_e_sum(g, x, other), expected(g, other))
        check()


def test_cpu_weighted_sums_leave_the_kept_csr_to_the_thread_writing_it(monkeypatch):
    """Two threads' calls cannot share the kept CSR's values: a call that finds them taken
    sums by embedding_bag instead, with the same result."""
    from gsparse.backends import cpu

    calls = []
    real_bag = torch.embedding_bag
    monkeypatch.setattr(torch, "embedding_bag", lambda x, *args: calls.append("bag") or real_bag(x, *args))
    g = _graph()
    x, w = torch.randn(20, 4, dtype=torch.float64), torch.rand(80, dtype=torch.float64)
    free = gsparse.u_mul_e_sum(g, x, w)
    assert calls == []
    kept = g.cpu.get(("weighted adjacency", torch.float64), None)
    with kept._lock:
        taken = gsparse.u_mul_e_sum(g, x, w)
    assert calls == ["bag"]
    torch.testing.assert_close(taken, free)
    assert isinstance(kept, cpu._WeightedAdjacency)


@pytest.mark.parametrize("kind", ["sorted", "random"], ids=["in CSR order", "out of CSR order"])
def test_cpu_narrow_weighted_sums_gather_weights_only_out_of_csr_order(monkeypatch, kind):
    """The kept CSR's values are the weights themselves, copied, where the user's edge order
    is the CSR's (no edge ids), and the weights gathered through the edge ids elsewhere;
    the sums are those of the float64 reference either way."""
    gathers = []
    real = torch.index_select
    monkeypatch.setattr(torch, "index_select", lambda *args, **kw: gathers.append(1) or real(*args, **kw))
    g = named_graph(kind)
    assert (g.eid is None) == (kind == "sorted")
    x, w = torch.randn(g.num_src, 4), torch.rand(g.num_edges)
    src, dst = g.edges()
    want = torch.zeros(g.num_dst, 4, dtype=torch.float64).index_add_(
        0, dst, x.double()[src] * w.double().unsqueeze(-1))
    for _ in range(2):
        torch.testing.assert_close(gsparse.u_mul_e_sum(g, x, w).double(), want, rtol=1e-5, atol=1e-5)
    assert len(gathers) == (0 if kind == "sorted" else 2)


def test_cpu_calls_resolve_once_for_operands_of_any_layout():
    """The PyTorch-ops backend makes its operands contiguous itself and reads them at any
    address: a CPU call's resolution keeps no layout facts (the CUDA path's does, see
    test_calls.py), and non-contiguous or misaligned operands reuse it, with their own sums."""
    g = _graph()
    flat = torch.randn(20 * 4 + 1, dtype=torch.float64)
    aligned, misaligned = flat[:-1].view(20, 4), flat[1:].view(20, 4)
    strided = torch.randn(4, 20, dtype=torch.float64).t()
    w = torch.rand(80, dtype=torch.float64)
    src, dst = g.edges()
    for x in (aligned, misaligned, strided):
        want = torch.zeros(20, 4, dtype=torch.float64).index_add_(0, dst, x[src] * w.unsqueeze(-1))
        torch.testing.assert_close(gsparse.u_mul_e_sum(g, x, w), want, rtol=0, atol=1e-12)
    assert len(g.calls._entries) == 1
    (key,) = g.calls._entries
    assert key[3] == (torch.Size([20, 4]), torch.float64)
