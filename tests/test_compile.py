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


def test_compiling_before_the_first_eager_call_says_what_to_do():
    torch._dynamo.reset()
    compiled = torch.compile(gnn.GCNConv(16, 4), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="run the model once eagerly on this graph first"):
        compiled(torch.randn(N, 16), _graph(2))


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
