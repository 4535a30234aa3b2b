"""torch.compile and torch.autocast with gsparse's operators and layers."""

from __future__ import annotations

import pytest
import torch

import gsparse
from gsparse import nn as gnn

N = 50


def _graph(seed: int = 0) -> gsparse.Graph:
    ei = torch.randint(0, N - 3, (2, 300), generator=torch.Generator().manual_seed(seed))
    return gsparse.Graph.from_edge_index(ei, num_nodes=N)


class TwoLayer(torch.nn.Module):
    def __init__(self, conv1: torch.nn.Module, conv2: torch.nn.Module):
        super().__init__()
        self.conv1, self.conv2 = conv1, conv2

    def forward(self, x, g):
        return self.conv2(torch.relu(self.conv1(x, g)), g)


MODELS = {
    "gcn": lambda: TwoLayer(gnn.GCNConv(16, 32), gnn.GCNConv(32, 4)),
    "gat": lambda: TwoLayer(gnn.GATConv(16, 8, heads=4), gnn.GATConv(32, 4, heads=1, concat=False)),
    "sage-max": lambda: TwoLayer(gnn.SAGEConv(16, 32, aggr="max"), gnn.SAGEConv(32, 4)),
}


def _loss_and_grads(model, x, g):
    out = model(x, g)
    grads = torch.autograd.grad((out * out).sum(), [x, *model.parameters()])
    return out.detach(), grads


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_compile_without_graph_breaks_and_match_eager(name):
    torch.manual_seed(0)
    model, g = MODELS[name](), _graph()
    x = torch.randn(N, 16, requires_grad=True)
    eager_out, eager_grads = _loss_and_grads(model, x, g)  # also builds the derived structures
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(2):
            out, grads = _loss_and_grads(compiled, x, g)
            torch.testing.assert_close(out, eager_out)
            for got, want in zip(grads, eager_grads):
                torch.testing.assert_close(got, want)


def test_operators_compile_as_single_nodes():
    g = _graph(1)
    x = torch.randn(N, 2, 4)

    def attention(x):
        logits = gsparse.gsddmm(g, "dot", x, x, "u", "v")
        return gsparse.gspmm(g, "mul", "max", x, gsparse.edge_softmax(g, logits))

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(attention, fullgraph=True, backend=backend)(x)
    torch.testing.assert_close(out, attention(x))
    targets = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert [t for t in targets if t.startswith("gsparse.")] == \
        ["gsparse.sddmm.default", "gsparse.edge_softmax.default", "gsparse.spmm.default"]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_compile_without_an_eager_warm_up(name):
    torch.manual_seed(0)
    model, g = MODELS[name](), _graph(2)
    x = torch.randn(N, 16, requires_grad=True)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out, grads = _loss_and_grads(compiled, x, g)  # the graph's structures are built while tracing
    with torch._dynamo.config.patch(error_on_recompile=True):
        again, _ = _loss_and_grads(compiled, x, g)
    eager_out, eager_grads = _loss_and_grads(model, x, g)
    torch.testing.assert_close(out, eager_out)
    torch.testing.assert_close(again, eager_out)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("name", ["gcn", "gat"])
def test_a_compiler_that_cannot_build_while_tracing_reads_what_an_eager_call_built(name, monkeypatch):
    """PyTorch before 2.13 cannot run the builder while tracing (2.11 fails inside the
    compiler): there a missing structure is a CompileError asking for an eager call, and
    after one the model compiles whole, reading what it built."""
    monkeypatch.setattr(gsparse.derived, "_BUILDS_WHILE_TRACING", False)
    torch.manual_seed(0)
    model, g = MODELS[name](), _graph(7)
    x = torch.randn(N, 16, requires_grad=True)
    torch._dynamo.reset()
    with pytest.raises(gsparse.CompileError, match="run the model once eagerly"):
        torch.compile(model, fullgraph=True, backend="aot_eager")(x, g)
    eager_out, eager_grads = _loss_and_grads(model, x, g)
    torch._dynamo.reset()
    out, grads = _loss_and_grads(torch.compile(model, fullgraph=True, backend="aot_eager"), x, g)
    torch.testing.assert_close(out, eager_out)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want)


def test_layers_of_every_kind_share_a_graph_under_compile():
    # Structures built while tracing are read as they are built, also after the compiler
    # has read the graph's other structures.
    torch.manual_seed(1)
    gat, gcn = gnn.GATConv(16, 8, heads=2, edge_dim=3), gnn.GCNConv(16, 4)
    g = _graph(6)
    attr = torch.randn(g.num_edges, 3)

    def model(x, g, attr):
        out, (edges, alpha) = gat(x, g, attr, return_attention_weights=True)
        return gcn(torch.relu(out), g), edges, alpha

    x = torch.randn(N, 16)
    torch._dynamo.reset()
    got = torch.compile(model, fullgraph=True, backend="aot_eager")(x, g, attr)
    for a, b in zip(got, model(x, g, attr)):
        torch.testing.assert_close(a, b)


def test_a_pyg_graph_argument_under_compile_says_what_to_do():
    ei = torch.randint(0, N, (2, 100), generator=torch.Generator().manual_seed(3))
    layer = gnn.GCNConv(16, 4)
    for fullgraph in (True, False):
        torch._dynamo.reset()
        compiled = torch.compile(layer, fullgraph=fullgraph, backend="aot_eager")
        with pytest.raises(gsparse.CompileError, match=r"build it once outside the compiled model, "
                                                       r"g = gsparse.Graph.from_pyg\(edge_index\)"):
            compiled(torch.randn(N, 16), ei)


def test_a_missing_structure_under_compile_is_a_gsparse_error():
    g = _graph(7)

    def read(x):
        return g.layers.get("never built", lambda: x) + x

    torch._dynamo.reset()
    with pytest.raises(gsparse.CompileError, match="is not built yet and cannot be built inside a "
                                                   "torch.compile graph"):
        torch.compile(read, fullgraph=True, backend="aot_eager")(torch.randn(3))


def test_functions_run_while_tracing_are_marked_as_the_public_decorator_marks_them():
    # gsparse.derived marks them by hand, so that importing gsparse does not import the compiler.
    from gsparse import derived

    def f():
        return None

    torch.compiler.assume_constant_result(f)
    marks = {k: v for k, v in vars(f).items()}
    assert marks == {"_dynamo_marked_constant": True}
    for fn in (derived._build_while_tracing, derived._raise_while_tracing):
        assert all(getattr(fn, k, None) == v for k, v in marks.items())


def test_autocast_casts_operands_to_the_region_dtype():
    g = _graph(3)
    x32 = torch.randn(N, 4)
    w16 = torch.randn(g.num_edges, 1, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="lhs and rhs must have the same dtype"):
        gsparse.gspmm(g, "mul", "sum", x32, w16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert gsparse.gspmm(g, "mul", "sum", x32, w16).dtype == torch.bfloat16
        assert gsparse.gsddmm(g, "dot", x32, x32, "u", "v").dtype == torch.bfloat16
        # Softmax runs in float32 under autocast, as torch.softmax does.
        assert gsparse.edge_softmax(g, w16).dtype == torch.float32
        # float64 is left alone, as autocast leaves it.
        assert gsparse.gspmm(g, "copy_lhs", "sum", x32.double()).dtype == torch.float64


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_train_under_bf16_autocast(name):
    torch.manual_seed(1)
    model, g = MODELS[name](), _graph(4)
    x = torch.randn(N, 16)
    reference = model(x, g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x, g)
    assert (out.float() - reference).abs().max() <= 0.05 * reference.abs().max()
    out.float().square().sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()
               for p in model.parameters())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_gpu_models_compile_with_inductor_under_autocast(name, dtype):
    torch.manual_seed(2)
    model, g = MODELS[name]().cuda(), _graph(5).to("cuda")
    x = torch.randn(N, 16, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=dtype):
        eager_out, eager_grads = _loss_and_grads(model, x, g)
        torch._dynamo.reset()
        out, grads = _loss_and_grads(torch.compile(model, fullgraph=True), x, g)
    torch.testing.assert_close(out, eager_out, rtol=2e-2, atol=2e-2)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
