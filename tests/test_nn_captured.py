"""StaticBlocks and CapturedStep: padded blocks give every real row the result of the
unpadded blocks (GCN, GAT, GraphSAGE; square and bipartite), padding never makes a row
longer than a real one, capacities grow when a batch outgrows them, bad input is named;
on a GPU the captured step replays what an eager step computes."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from gsparse import Graph
from gsparse import nn as gnn
from gsparse.bench import minibatch
from gsparse.bench.minibatch import BlockModel, NeighborSampler, block_graphs
from gsparse.bench.training import TwoLayer

MODELS = {
    "gcn": lambda: (gnn.GCNConv(12, 16), gnn.GCNConv(16, 5)),
    "gat": lambda: (gnn.GATConv(12, 4, heads=4), gnn.GATConv(16, 5, heads=1, concat=False)),
    "sage": lambda: (gnn.SAGEConv(12, 16), gnn.SAGEConv(16, 5)),
}
FANOUTS = (4, 3)
SEEDS = 16


def _base(device: str = "cpu") -> Graph:
    gen = torch.Generator().manual_seed(0)
    n = 400
    ei = torch.randint(0, n, (2, 4000), generator=gen)
    return Graph.from_edge_index(ei, num_nodes=n).to(device)


def _sample(g: Graph, seed: int, batch: int = SEEDS):
    sampler = NeighborSampler(g, FANOUTS, seed=seed)
    seeds = torch.randperm(g.num_dst, generator=torch.Generator().manual_seed(seed))[:batch].to(g.device)
    return sampler.sample(seeds)


def _model(kind: str, device: str = "cpu") -> BlockModel:
    torch.manual_seed(0)
    conv1, conv2 = MODELS[kind]()
    return BlockModel(TwoLayer(conv1, conv2, torch.relu), bipartite=kind == "sage").to(device)


def _load(static: gnn.StaticBlocks, blocks) -> bool:
    seeds, n1, n0 = blocks.sizes
    return static.load(blocks.n_id, (n0, n1, seeds), (blocks.outer, blocks.inner))


def _padded_forward(model: BlockModel, static: gnn.StaticBlocks, x: torch.Tensor) -> torch.Tensor:
    n0, n1, seeds = static.sizes
    return model(x[static.n_id], tuple(static.graphs()), (seeds, n1, n0))


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_padded_blocks_give_the_seeds_the_unpadded_result(kind):
    g = _base()
    x = torch.randn(g.num_dst, 12, generator=torch.Generator().manual_seed(1))
    model = _model(kind).eval()
    static = gnn.StaticBlocks(max(FANOUTS), square=kind != "sage", margin=0.5)
    for seed in range(4):  # the first batch sets the capacities, later ones fit or grow them
        blocks = _sample(g, seed, batch=SEEDS - seed)
        _load(static, blocks)
        assert all(c >= n for c, n in zip(static.sizes, reversed(blocks.sizes)))
        want = model(x[blocks.n_id], block_graphs(blocks, kind == "sage"), blocks.sizes)
        got = _padded_forward(model, static, x)[:blocks.sizes[0]]
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("square", [False, True])
def test_no_padded_row_is_longer_than_max_degree_in_the_graph_or_its_reverse(square):
    g = _base()
    static = gnn.StaticBlocks(max(FANOUTS), square=square, margin=0.25)
    big, small = _sample(g, 0), _sample(g, 1, batch=3)  # the small batch leaves most capacity to trash
    _load(static, big)
    assert _load(static, small) is False  # more padding than the trash rows hold: they grow
    for layer, graph in enumerate(static.graphs()):
        assert int((graph.rowptr[1:] - graph.rowptr[:-1]).max()) <= max(FANOUTS)
        src = static.edge_index[layer][0]
        used = small.outer.shape[1] if layer == 0 else small.inner.shape[1]
        assert int(torch.bincount(src[used:]).max()) <= max(FANOUTS)  # trash sources feed one row each
        # trash edges join trash nodes only: beyond every real node's id
        real = (small.sizes[2], small.sizes[1], small.sizes[0])
        assert int(static.edge_index[layer][1, used:].min()) >= real[layer if square else layer + 1]
        assert int(src[used:].min()) >= real[layer]


def test_capacities_grow_with_a_margin_and_only_when_a_batch_does_not_fit():
    g = _base()
    static = gnn.StaticBlocks(max(FANOUTS), margin=0.5)
    first = _sample(g, 0)
    assert _load(static, first) is False and static.version == 1  # the first batch allocates
    sizes = static.sizes
    assert _load(static, _sample(g, 1)) is True and static.sizes == sizes and static.version == 1
    bigger = _sample(g, 2, batch=3 * SEEDS)
    assert _load(static, bigger) is False and static.version == 2
    assert all(c >= n for c, n in zip(static.sizes, reversed(bigger.sizes)))
    # whole multiples of 8 nodes a level, so that vectorised kernels take their widest path
    assert all(size % 8 == 0 for size in sizes + static.sizes)
    n0 = bigger.sizes[2]
    assert torch.equal(static.n_id[:n0], bigger.n_id) and int(static.n_id[n0:].abs().sum()) == 0


def test_bad_blocks_are_named():
    static = gnn.StaticBlocks(3)
    ei = torch.zeros(2, 5, dtype=torch.int64)
    with pytest.raises(ValueError, match="num_nodes must give L \\+ 1 node counts for L edge lists"):
        static.load(torch.arange(4), (4, 2), (ei, ei))
    with pytest.raises(ValueError, match="num_nodes\\[0\\] must be len\\(n_id\\) = 4, got 5"):
        static.load(torch.arange(4), (5, 2, 1), (ei, ei))
    with pytest.raises(ValueError, match="non-increasing"):
        static.load(torch.arange(4), (4, 6, 1), (ei, ei))
    with pytest.raises(ValueError, match="edge_index\\[1\\] must be a \\[2, E\\] int32 or int64 tensor"):
        static.load(torch.arange(4), (4, 2, 1), (ei, ei.float()))
    with pytest.raises(ValueError, match="max_degree must be a positive int"):
        gnn.StaticBlocks(0)
    with pytest.raises(ValueError, match="margin must be a number in \\(0, 4\\]"):
        gnn.StaticBlocks(3, margin=0)
    with pytest.raises(RuntimeError, match="load a batch first"):
        static.graphs()


def _trainer(kind: str, device: str):
    model = _model(kind, device)
    static = gnn.StaticBlocks(max(FANOUTS), square=kind != "sage")
    opt = torch.optim.Adam(model.parameters(), lr=0.01, capturable=device == "cuda")
    g = _base(device)
    x = torch.randn(g.num_dst, 12, generator=torch.Generator().manual_seed(1)).to(device)
    y = torch.randint(0, 5, (g.num_dst,), generator=torch.Generator().manual_seed(2)).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        out = _padded_forward(model, static, x)
        loss = F.cross_entropy(out[:SEEDS], y[static.n_id[:SEEDS]])
        loss.backward()
        opt.step()
        return loss.detach()

    return model, static, g, step


def test_a_captured_step_runs_eagerly_off_the_gpu():
    model, static, g, step = _trainer("sage", "cpu")
    captured = gnn.CapturedStep(step, static)
    before = copy.deepcopy(model.state_dict())
    _load(static, _sample(g, 0))
    assert torch.isfinite(captured()) and captured.captures == 0
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())  # it trained


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_captured_step_trains_as_the_eager_step_does(kind, monkeypatch):
    """Dropout-free models, the same batches: the captured step's losses and weights follow
    the eager step's; a batch that outgrows the buffers is captured again."""
    monkeypatch.setattr(minibatch, "DROPOUT", 0.0)
    model, static, g, step = _trainer(kind, "cuda")
    eager_model, eager_static, _, eager_step = _trainer(kind, "cuda")
    eager_model.load_state_dict(model.state_dict())
    captured = gnn.CapturedStep(step, static)
    for seed, batch in enumerate((SEEDS, SEEDS, SEEDS - 2, SEEDS, 3 * SEEDS, SEEDS)):
        blocks = _sample(g, seed, batch=batch)
        _load(static, blocks)
        _load(eager_static, blocks)
        got = captured().clone()
        want = eager_step()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    # captured again for each growth: the first batch, the smaller batches' wider trash, the
    # larger batch
    assert captured.captures == static.version >= 3
    for (name, a), b in zip(model.state_dict().items(), eager_model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
