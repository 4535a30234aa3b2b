"""The layers on sampled blocks (graphs built without reading the device) compute what they
compute on the same graphs built by the validating constructors."""

from __future__ import annotations

import pytest
import torch

import torch.nn.functional as F

from gsparse import Graph, _calls, nn as gnn
from gsparse.bench.minibatch import BlockModel, Blocks, block_graphs
from gsparse.bench.training import DROPOUT, TwoLayer
from gsparse.nn._graph import self_loops

from cuda_path import (
    TorchCalls,
    autograd_nodes,
    backward_counted,
    block_checks_on_gpu,
    cuda_path_on_cpu,
    step_blocks,
)


def _edges(seed: int, n: int = 30, e: int = 200) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=gen)
    ei[1, :12] = ei[0, :12]  # self loops, two at node ei[0, 0]
    ei[:, 12] = ei[:, 0]
    return ei


LAYERS = {
    "gcn": lambda: gnn.GCNConv(8, 4),
    "gcn-improved": lambda: gnn.GCNConv(8, 4, improved=True),
    "gcn-no-loops": lambda: gnn.GCNConv(8, 4, add_self_loops=False),
    "gat": lambda: gnn.GATConv(8, 3, heads=2),
    "gat-one-head": lambda: gnn.GATConv(8, 5, heads=1, concat=False),
    "sage": lambda: gnn.SAGEConv(8, 4),
    "sage-max": lambda: gnn.SAGEConv(8, 4, aggr="max"),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("seed", range(3))
def test_layers_on_a_block_match_the_validated_graph(name, seed):
    torch.manual_seed(seed)
    layer = LAYERS[name]()
    ei = _edges(seed)
    validated = Graph.from_edge_index(ei, num_nodes=30)
    block = Graph.from_block(ei, num_src=30, num_dst=30)
    outs, grads = [], []
    for g in (validated, block):
        x = torch.randn(30, 8, generator=torch.Generator().manual_seed(seed), requires_grad=True)
        out = layer(x, g)
        params = list(layer.parameters())
        grads.append(torch.autograd.grad((out * out).sum(), [x, *params]))
        outs.append(out)
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_gcn_with_edge_weights_on_a_block_matches_the_validated_graph():
    ei = _edges(7)
    w = torch.rand(ei.shape[1]) + 0.1
    layer = gnn.GCNConv(8, 4)
    x = torch.randn(30, 8)
    torch.testing.assert_close(layer(x, Graph.from_block(ei, num_src=30, num_dst=30), w),
                               layer(x, Graph.from_edge_index(ei, num_nodes=30), w))


def test_a_blocks_self_loops_are_kept_and_masked_with_one_new_loop_per_node():
    ei = _edges(3)
    block = self_loops(Graph.from_block(ei, num_src=30, num_dst=30))
    validated = self_loops(Graph.from_edge_index(ei, num_nodes=30))
    loops = int((ei[0] == ei[1]).sum())
    assert block.graph.num_edges == ei.shape[1] + 30 and block.graph.sync_free
    assert int(block.masked.sum()) == loops and not hasattr(validated, "masked")
    assert validated.graph.num_edges == ei.shape[1] - loops + 30
    assert torch.equal(block.loop_edge, validated.loop_edge)
    # Unmasked, the block's graph is the validated one, edge for edge and origin for origin.
    src, dst = block.graph.edges()
    keep = ~block.masked
    pairs = sorted(zip(src[keep].tolist(), dst[keep].tolist(), block.origin[keep].tolist()))
    vsrc, vdst = validated.graph.edges()
    assert pairs == sorted(zip(vsrc.tolist(), vdst.tolist(), validated.origin.tolist()))


@pytest.mark.parametrize("dst_sorted", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_a_blocks_loop_graph_is_each_row_then_its_loop(seed, dst_sorted):
    ei = _edges(seed)
    if dst_sorted:
        ei = ei[:, torch.argsort(ei[1], stable=True)]
    block = Graph.from_block(ei, num_src=30, num_dst=30, dst_sorted=dst_sorted)
    loops = self_loops(block)
    rowptr, col = block.rowptr.tolist(), block.col.tolist()
    eid = list(range(block.num_edges)) if block.eid is None else block.eid.tolist()
    want = {"rowptr": [0], "col": [], "dst": [], "masked": [], "origin": []}
    for v in range(30):  # the row's edges in the block's CSR order, then the row's loop
        for p in range(rowptr[v], rowptr[v + 1]):
            for name, value in zip(("col", "dst", "masked", "origin"), (col[p], v, col[p] == v, eid[p])):
                want[name].append(value)
        for name, value in zip(("col", "dst", "masked", "origin"), (v, v, False, block.num_edges + v)):
            want[name].append(value)
        want["rowptr"].append(len(want["col"]))
    got = {"rowptr": loops.graph.rowptr, "col": loops.graph.col, "dst": loops.graph.csr_dst,
           "masked": loops.masked, "origin": loops.origin}
    assert {name: t.tolist() for name, t in got.items()} == want
    assert loops.graph.eid is None and loops.graph.index_dtype == block.index_dtype
    loop_ids = [max((eid[p] for p in range(rowptr[v], rowptr[v + 1]) if col[p] == v), default=-1)
                for v in range(30)]
    assert loops.loop_edge.tolist() == loop_ids
    assert loops.loop_at.tolist() == [r - 1 for r in want["rowptr"][1:]]


def test_sage_on_bipartite_blocks_matches_the_validated_graph():
    gen = torch.Generator().manual_seed(0)
    ei = torch.stack([torch.randint(0, 40, (150,), generator=gen), torch.randint(0, 12, (150,), generator=gen)])
    ei = ei[:, torch.argsort(ei[1], stable=True)]
    layer = gnn.SAGEConv(8, 4)
    x = torch.randn(40, 8, generator=gen)
    block = Graph.from_block(ei, num_src=40, num_dst=12, dst_sorted=True, max_degree=150)
    torch.testing.assert_close(layer((x, x[:12]), block),
                               layer((x, x[:12]), Graph.from_edge_index(ei, num_src=40, num_dst=12)))


def test_a_blocks_loop_graph_knows_its_destinations_without_expanding_its_rows():
    block = Graph.from_block(_edges(3), num_src=30, num_dst=30)
    graph = self_loops(block).graph
    assert "csr_dst" in graph.__dict__  # set where the loops are built
    expanded = torch.repeat_interleave(torch.arange(30, dtype=graph.index_dtype), graph.in_degrees())
    assert graph.csr_dst.dtype == graph.index_dtype and torch.equal(graph.csr_dst, expanded)


@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_gcn_block_weights_are_bitwise_the_generic_normalisation_without_its_operator_calls(
        monkeypatch, improved, seed):
    from gsparse.nn import gcn_conv

    block = Graph.from_block(_edges(seed), num_src=30, num_dst=30)
    graph, w = gcn_conv._normalize(block, None, improved, True, torch.float32)
    calls = []
    monkeypatch.setattr(gcn_conv, "gspmm", lambda *a, **k: calls.append("gspmm"))
    monkeypatch.setattr(gcn_conv, "gsddmm", lambda *a, **k: calls.append("gsddmm"))
    norm = gcn_conv._build_normalized(block, improved, True, torch.float32)
    assert norm.graph is graph and norm.dinv is None and torch.equal(norm.weight, w)
    assert calls == []  # no g-SpMM or g-SDDMM resolved on the loop graph, new with each block


# What a fresh block adds to a layer's forward and backward through the CUDA host path:
# torch calls other than metadata reads (on a GPU, most launch a kernel or allocate: the
# loop graph is one launch of gsparse._block_loops into three new tensors, GCN's weights two
# more into two; no reverse graph, the backward scatters over the block's edges), and the
# operator calls resolved on the block's new graphs. Bounds to lower, never to raise without
# a reason (scripts/fresh_block_host_time.py prints the same counts).
FRESH_BLOCK_COSTS = {"gcn": (7, 1), "gat": (5, 3), "sage": (0, 1)}


def _sampled_block(seed: int, bipartite: bool) -> Graph:
    """A two-hop outer block as a neighbour sampler emits it (sorted by destination)."""
    gen = torch.Generator().manual_seed(seed)
    seeds, fanouts = 16, (4, 3)
    n1 = seeds * (1 + fanouts[0])
    n0 = n1 * (1 + fanouts[1])
    degree = torch.cat([torch.full((seeds,), fanouts[0]), torch.full((n1 - seeds,), fanouts[1])])
    dst = torch.repeat_interleave(torch.arange(n1), degree)
    src = torch.randint(0, n0, (dst.numel(),), generator=gen)
    return Graph.from_block(torch.stack([src, dst]), num_src=n0, num_dst=n1 if bipartite else n0,
                            dst_sorted=True, max_degree=max(fanouts))


@pytest.mark.parametrize("name", sorted(FRESH_BLOCK_COSTS))
def test_a_fresh_block_costs_a_bounded_number_of_torch_calls_and_resolved_calls(name, monkeypatch):
    layer, bipartite = {"gcn": (gnn.GCNConv(32, 16), False), "gat": (gnn.GATConv(32, 4, heads=4), False),
                        "sage": (gnn.SAGEConv(32, 16), True)}[name]

    def step(g: Graph, x: torch.Tensor) -> None:
        out = layer((x, x[: g.num_dst]), g) if bipartite else layer(x, g)
        backward_counted(out.sum())

    resolved = []
    bind = _calls._bind
    with cuda_path_on_cpu():
        step(_sampled_block(0, bipartite), torch.randn(_sampled_block(0, bipartite).num_src, 32,
                                                       requires_grad=True))  # kernels and plans once
        block = _sampled_block(1, bipartite)
        x = torch.randn(block.num_src, 32, requires_grad=True)
        monkeypatch.setattr(_calls, "_bind", lambda *args: (resolved.append(args[1]), bind(*args))[1])
        with TorchCalls() as fresh:
            step(block, x)
        monkeypatch.setattr(_calls, "_bind", bind)
        with TorchCalls() as seen:
            step(block, x)
    calls, resolutions = FRESH_BLOCK_COSTS[name]
    assert fresh.launching - seen.launching <= calls
    assert len(resolved) == resolutions


# What a mini-batch step (gsparse.bench.minibatch: both blocks built, the two-layer model's
# forward, loss and backward) costs through the CUDA host path on a fresh pair of blocks:
# torch calls that are neither metadata reads nor views (on a GPU, a kernel launch or an
# allocation each; a block's checks are one launch), operator calls resolved, and the
# nodes the autograd engine runs. Bounds to lower, never to raise without a reason
# (scripts/fresh_block_host_time.py prints the same counts).
STEP_COSTS = {"gcn": (27, 2, 18), "gat": (43, 6, 52), "sage": (19, 2, 23)}


def _step_blocks(seed: int) -> Blocks:
    """8 seeds with 4 sources each in the first hop's nodes, those with 3 each."""
    return step_blocks(8, (4, 3), "cpu", torch.Generator().manual_seed(seed), 320)


@pytest.mark.parametrize("name", sorted(STEP_COSTS))
def test_a_minibatch_step_costs_a_bounded_number_of_kernels_resolved_calls_and_autograd_nodes(
        name, monkeypatch):
    torch.manual_seed(0)
    # Features that narrow as the benchmark's do (SAGEConv then aggregates first on a block).
    two_layer = {"gcn": lambda: TwoLayer(gnn.GCNConv(64, 32), gnn.GCNConv(32, 5), F.relu),
                 "gat": lambda: TwoLayer(gnn.GATConv(64, 8, heads=4, dropout=DROPOUT),
                                         gnn.GATConv(32, 5, heads=1, concat=False, dropout=DROPOUT), F.elu),
                 "sage": lambda: TwoLayer(gnn.SAGEConv(64, 32), gnn.SAGEConv(32, 5), F.relu)}[name]()
    model = BlockModel(two_layer, bipartite=name == "sage").train()
    x, y = torch.randn(320, 64), torch.randint(0, 5, (320,))

    def step(blocks: Blocks) -> torch.Tensor:
        out = model(x[blocks.n_id], block_graphs(blocks, name == "sage"), blocks.sizes)
        return F.cross_entropy(out, y[blocks.n_id[: blocks.sizes[0]]])

    resolved = []
    bind = _calls._bind
    with cuda_path_on_cpu(), block_checks_on_gpu() as checks:
        backward_counted(step(_step_blocks(0)))  # kernels and plans once
        blocks = _step_blocks(1)
        checks.clear()
        monkeypatch.setattr(_calls, "_bind", lambda *args: (resolved.append(args[1]), bind(*args))[1])
        with TorchCalls() as calls:
            loss = step(blocks)
            nodes = autograd_nodes(loss)
            backward_counted(loss)
    kernels, resolutions, autograd = STEP_COSTS[name]
    assert len(checks) == 2  # one launch per block
    assert calls.kernels <= kernels
    assert len(resolved) == resolutions
    assert nodes <= autograd
