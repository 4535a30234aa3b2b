"""gsparse.nn layers against PyTorch Geometric's, with the same weights, on random graphs."""

from __future__ import annotations

import pytest
import torch

import gsparse
from gsparse import nn as gnn

pyg_nn = pytest.importorskip("torch_geometric.nn")

N, F_IN, F_OUT = 40, 12, 6


def _edge_index(seed: int, num_nodes: int = N, num_edges: int = 200, repeated_loops: bool = True) -> torch.Tensor:
    """Random edges with duplicates, self loops at ten nodes (three of them repeated unless
    ``repeated_loops`` is off), and isolated nodes (the last five receive and send nothing)."""
    gen = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, num_nodes - 5, (2, num_edges), generator=gen)
    ei[:, 10:20] = ei[:, :10]  # duplicates
    ei[:, 20:30] = torch.arange(10)  # self loops
    if repeated_loops:
        ei[:, 30:33] = ei[:, 20:23]
    else:  # no other self loops either
        outside = (torch.arange(num_edges) < 20) | (torch.arange(num_edges) >= 30)
        ei[1] = torch.where((ei[0] == ei[1]) & outside, (ei[1] + 1) % (num_nodes - 5), ei[1])
    return ei


def _features(seed: int, rows: int = N, cols: int = F_IN) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))


def _compare(ours, theirs, args_ours, args_theirs, seed=0):
    """Same weights, same inputs: outputs and every gradient (parameters and input) agree."""
    ours.load_state_dict(theirs.state_dict())
    x = _features(seed).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    out_ours = ours(x, *args_ours)
    out_theirs = theirs(x2, *args_theirs)
    torch.testing.assert_close(out_ours, out_theirs, rtol=1e-5, atol=1e-5)
    grad_out = torch.randn(out_theirs.shape, generator=torch.Generator().manual_seed(seed + 1))
    out_ours.backward(grad_out)
    out_theirs.backward(grad_out)
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-5, atol=1e-5)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, theirs_params[name].grad, rtol=1e-5, atol=1e-5, msg=name)


def _unit_weights(ei: torch.Tensor) -> torch.Tensor:
    # PyG's edge_index path drops `improved` without edge weights (its self loops get weight
    # 1); with explicit unit weights it builds A + 2I as documented, which we always do.
    return torch.ones(ei.shape[1])


@pytest.mark.parametrize("as_graph", [False, True], ids=["edge_index", "Graph"])
@pytest.mark.parametrize("kwargs", [{}, {"improved": True}, {"add_self_loops": False},
                                    {"normalize": False}, {"bias": False}], ids=str)
def test_gcn_matches_pyg(kwargs, as_graph):
    ei = _edge_index(1)
    graph = gsparse.Graph.from_edge_index(ei, num_nodes=N) if as_graph else ei
    _compare(gnn.GCNConv(F_IN, F_OUT, **kwargs), pyg_nn.GCNConv(F_IN, F_OUT, **kwargs), (graph,),
             (ei, _unit_weights(ei)))


@pytest.mark.parametrize("kwargs", [{}, {"improved": True}, {"normalize": False}], ids=str)
def test_gcn_with_edge_weight_matches_pyg(kwargs):
    # With a repeated self loop, PyG uses the last one's weight but sends gradient to all of
    # them; we send it to the one used, so compare on unique loops.
    ei = _edge_index(2, repeated_loops=False)
    w = torch.rand(ei.shape[1], generator=torch.Generator().manual_seed(3)) + 0.1
    w_ours, w_theirs = w.clone().requires_grad_(), w.clone().requires_grad_()
    _compare(gnn.GCNConv(F_IN, F_OUT, **kwargs), pyg_nn.GCNConv(F_IN, F_OUT, **kwargs),
             (ei, w_ours), (ei, w_theirs))
    torch.testing.assert_close(w_ours.grad, w_theirs.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{}, {"normalize": False}, {"improved": True}], ids=str)
def test_a_widening_gcn_propagates_its_input_width(monkeypatch, kwargs):
    # Θ after A when the layer widens the features (DGL's order): the same result as PyG's,
    # with fewer features through g-SpMM.
    from gsparse.nn import gcn_conv

    ei = _edge_index(7)
    widths = []
    spmm = gcn_conv.gspmm
    def recorded(g, op, reduce, lhs, *rest):
        if lhs is not None:  # not the degrees' g-SpMM
            widths.append(lhs.shape[-1])
        return spmm(g, op, reduce, lhs, *rest)

    monkeypatch.setattr(gcn_conv, "gspmm", recorded)
    ours, theirs = gnn.GCNConv(F_OUT, F_IN, **kwargs), pyg_nn.GCNConv(F_OUT, F_IN, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    x = _features(8, cols=F_OUT)
    torch.testing.assert_close(ours(x, ei), theirs(x, ei, _unit_weights(ei)), rtol=1e-5, atol=1e-5)
    assert widths == [F_OUT]


@pytest.mark.parametrize("graph_kind", ["Graph", "block"])
@pytest.mark.parametrize("kwargs", [{}, {"improved": True}], ids=str)
def test_gcn_normalises_float64_features_in_float64(kwargs, graph_kind):
    # PyG normalises in the features' dtype. A float32 normalisation would be off from it by
    # about 1e-8 relative in float64, and by the device's float32 pow on a GPU.
    ei = _edge_index(5, repeated_loops=False)
    if graph_kind == "block":
        graph = gsparse.Graph.from_block(ei, num_src=N, num_dst=N)
    else:
        graph = gsparse.Graph.from_edge_index(ei, num_nodes=N)
    ours, theirs = gnn.GCNConv(F_IN, F_OUT, **kwargs).double(), pyg_nn.GCNConv(F_IN, F_OUT, **kwargs).double()
    ours.load_state_dict(theirs.state_dict())
    x = _features(6).double()
    want = theirs(x, ei, _unit_weights(ei).double())
    torch.testing.assert_close(ours(x, graph), want, rtol=1e-13, atol=1e-13)


def test_gcn_improved_when_every_node_has_a_loop():
    # Every node already has a self loop: PyG keeps those (weight 1) instead of adding 2s.
    n = 6
    ei = torch.cat([torch.arange(n).repeat(2, 1), torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])], dim=1)
    ours, theirs = gnn.GCNConv(3, 2, improved=True), pyg_nn.GCNConv(3, 2, improved=True)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, 3)
    torch.testing.assert_close(ours(x, ei), theirs(x, ei, _unit_weights(ei)))


@pytest.mark.parametrize("kwargs", [{"heads": 3}, {"heads": 2, "concat": False},
                                    {"heads": 1, "negative_slope": 0.5, "add_self_loops": False},
                                    {"heads": 2, "residual": True, "bias": False}], ids=str)
def test_gat_matches_pyg(kwargs):
    ei = _edge_index(4)
    _compare(gnn.GATConv(F_IN, F_OUT, **kwargs), pyg_nn.GATConv(F_IN, F_OUT, **kwargs),
             (gsparse.Graph.from_edge_index(ei, num_nodes=N),), (ei,))


@pytest.mark.parametrize("fill_value", ["mean", "add", "max", "min", 0.5], ids=str)
@pytest.mark.parametrize("edge_dim", [1, 3])
def test_gat_with_edge_features_matches_pyg(edge_dim, fill_value):
    ei = _edge_index(14)
    attr = torch.randn(ei.shape[1], edge_dim, generator=torch.Generator().manual_seed(15))
    attr_ours, attr_theirs = attr.clone().requires_grad_(), attr.clone().requires_grad_()
    kwargs = {"heads": 2, "edge_dim": edge_dim, "fill_value": fill_value}
    _compare(gnn.GATConv(F_IN, F_OUT, **kwargs), pyg_nn.GATConv(F_IN, F_OUT, **kwargs),
             (gsparse.Graph.from_edge_index(ei, num_nodes=N), attr_ours), (ei, attr_theirs))
    torch.testing.assert_close(attr_ours.grad, attr_theirs.grad, rtol=1e-5, atol=1e-5)


def test_gat_with_edge_features_and_no_self_loops_matches_pyg():
    ei = _edge_index(16)
    attr = torch.randn(ei.shape[1], generator=torch.Generator().manual_seed(17))  # [E]: edge_dim 1
    kwargs = {"heads": 3, "edge_dim": 1, "add_self_loops": False}
    _compare(gnn.GATConv(F_IN, F_OUT, **kwargs), pyg_nn.GATConv(F_IN, F_OUT, **kwargs), (ei, attr), (ei, attr))


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_gat_returns_the_attention_weights_of_each_edge(add_self_loops):
    ei = _edge_index(18, repeated_loops=False)
    ei = ei[:, (ei[0] != ei[1]) | ~torch.tensor(add_self_loops)]  # PyG keeps loops without add_self_loops
    ours = gnn.GATConv(F_IN, F_OUT, heads=2, add_self_loops=add_self_loops)
    theirs = pyg_nn.GATConv(F_IN, F_OUT, heads=2, add_self_loops=add_self_loops)
    ours.load_state_dict(theirs.state_dict())
    x = _features(19)
    out, (edges, alpha) = ours(x, ei, return_attention_weights=True)
    out_theirs, (edges_theirs, alpha_theirs) = theirs(x, ei, return_attention_weights=True)
    torch.testing.assert_close(out, out_theirs, rtol=1e-5, atol=1e-5)
    assert edges.dtype == torch.int64 and alpha.shape == alpha_theirs.shape
    # The same (edge, weight) pairs, each list in its own edge order.
    def by_edge(e, a):
        order = sorted(range(e.shape[1]), key=lambda i: (int(e[0, i]), int(e[1, i]), *a[i].tolist()))
        return e[:, order], a.detach()[order]
    (e, a), (e_theirs, a_theirs) = by_edge(edges, alpha), by_edge(edges_theirs, alpha_theirs)
    assert torch.equal(e, e_theirs)
    torch.testing.assert_close(a, a_theirs, rtol=1e-5, atol=1e-5)


def test_gat_attention_dropout_only_in_training():
    ei = _edge_index(5)
    layer = gnn.GATConv(F_IN, F_OUT, heads=2, dropout=0.5)
    x = _features(6)
    torch.manual_seed(0)
    a, b = layer(x, ei), layer(x, ei)
    assert not torch.allclose(a, b)
    layer.eval()
    torch.testing.assert_close(layer(x, ei), layer(x, ei))


@pytest.mark.parametrize("kwargs", [{"aggr": "mean"}, {"aggr": "max"}, {"aggr": "sum"}, {"aggr": "add"},
                                    {"aggr": "min"},
                                    {"aggr": "mean", "normalize": True, "project": True},
                                    {"aggr": "max", "root_weight": False, "bias": False}], ids=str)
@pytest.mark.parametrize("out_channels", [F_OUT, 20], ids=["narrowing", "widening"])
def test_sage_matches_pyg(kwargs, out_channels):
    ei = _edge_index(7)
    _compare(gnn.SAGEConv(F_IN, out_channels, **kwargs), pyg_nn.SAGEConv(F_IN, out_channels, **kwargs),
             (ei,), (ei,))


def test_sage_on_a_bipartite_graph_matches_pyg():
    gen = torch.Generator().manual_seed(8)
    ei = torch.stack([torch.randint(0, 30, (90,), generator=gen), torch.randint(0, 10, (90,), generator=gen)])
    ours, theirs = gnn.SAGEConv((F_IN, 5), F_OUT), pyg_nn.SAGEConv((F_IN, 5), F_OUT)
    ours.load_state_dict(theirs.state_dict())
    x_src, x_dst = _features(9, 30), _features(10, 10, 5)
    out = ours((x_src, x_dst), gsparse.Graph.from_edge_index(ei, num_src=30, num_dst=10))
    torch.testing.assert_close(out, theirs((x_src, x_dst), ei), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("num_src, num_dst, projected_rows", [(40, 40, 40), (400, 10, 10)],
                         ids=["square: projects the sources", "block: projects the aggregates"])
def test_sage_projects_on_the_side_with_fewer_rows(num_src, num_dst, projected_rows):
    """A sampled block has many more sources than destinations: projecting every source
    before the aggregation (right for a square graph narrowing its features) would cost
    num_src / num_dst times the dense work. The result is the same either way."""
    from torch.overrides import TorchFunctionMode

    gen = torch.Generator().manual_seed(13)
    ei = torch.stack([torch.randint(0, num_src, (100,), generator=gen),
                      torch.randint(0, num_dst, (100,), generator=gen)])
    ours, theirs = gnn.SAGEConv(64, 48), pyg_nn.SAGEConv(64, 48)
    ours.load_state_dict(theirs.state_dict())
    x_src, x_dst = _features(14, num_src, 64), _features(15, num_dst, 64)

    class LinearRows(TorchFunctionMode):
        rows: list[int] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.nn.functional.linear and args[1] is ours.lin_l.weight:
                self.rows.append(args[0].shape[0])
            return func(*args, **(kwargs or {}))

    with LinearRows() as mode:
        out = ours((x_src, x_dst), gsparse.Graph.from_edge_index(ei, num_src=num_src, num_dst=num_dst))
    assert mode.rows == [projected_rows]
    torch.testing.assert_close(out, theirs((x_src, x_dst), ei), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layer", [gnn.GCNConv(F_IN, F_OUT), gnn.GATConv(F_IN, F_OUT, heads=2),
                                   gnn.SAGEConv(F_IN, F_OUT)], ids=lambda m: type(m).__name__)
def test_derived_structures_are_built_once_per_graph(layer, monkeypatch):
    from gsparse.nn import _graph

    builds = []
    original = _graph._build_self_loops
    monkeypatch.setattr(_graph, "_build_self_loops", lambda g: builds.append(g) or original(g))
    ei = _edge_index(11)
    x = _features(12)
    first = layer(x, ei)
    torch.testing.assert_close(layer(x, ei), first)
    g = _graph._ADJACENCY_GRAPHS.get(ei, N, N).graph
    assert len(builds) == (0 if isinstance(layer, gnn.SAGEConv) else 1)
    assert _graph.self_loops(g).graph.eid is None  # CSR order: no edge permutation in kernels
    assert _graph.as_graph(ei, N, N) is g
    ei.add_(0)  # an in-place change invalidates the graph built from this edge_index
    assert _graph.as_graph(ei, N, N) is not g


def test_reset_parameters_initialises_like_pyg():
    layer = gnn.GATConv(64, 16, heads=4, residual=True)
    bound = (6.0 / (4 + 16)) ** 0.5
    assert layer.att_src.abs().max() <= bound and layer.att_src.std() > bound / 4
    assert torch.count_nonzero(layer.bias) == 0
    before = layer.lin.weight.detach().clone()
    layer.reset_parameters()
    assert not torch.equal(before, layer.lin.weight)
    assert set(dict(layer.named_parameters())) == set(dict(pyg_nn.GATConv(64, 16, heads=4, residual=True)
                                                         .named_parameters()))


@pytest.mark.parametrize("make", [
    lambda nn: nn.GCNConv(16, 8),
    lambda nn: nn.GATConv(16, 8, heads=2, edge_dim=3, residual=True),
    lambda nn: nn.SAGEConv(16, 8),
], ids=["gcn", "gat", "sage"])
def test_the_same_seed_gives_pygs_parameters(make):
    torch.manual_seed(0)
    ours = make(gnn).state_dict()
    torch.manual_seed(0)
    theirs = make(pyg_nn).state_dict()
    assert sorted(ours) == sorted(theirs)
    for name, value in ours.items():
        assert torch.equal(value, theirs[name]), name


def test_layers_reject_bad_inputs():
    g = gsparse.Graph.from_edge_index(_edge_index(13), num_nodes=N)
    with pytest.raises(ValueError, match=r"x must have shape \[num_nodes, 12\], got \(40, 7\)"):
        gnn.GCNConv(F_IN, F_OUT)(torch.randn(N, 7), g)
    with pytest.raises(ValueError, match="the source-node features have 39 rows but the graph has 40"):
        gnn.GATConv(F_IN, F_OUT)(torch.randn(N - 1, F_IN), g)
    with pytest.raises(TypeError, match="graph must be a gsparse.Graph, an edge_index tensor"):
        gnn.SAGEConv(F_IN, F_OUT)(torch.randn(N, F_IN), [[0], [1]])
    with pytest.raises(ValueError, match=r"edge_weight must be a tensor of shape \[200\]"):
        gnn.GCNConv(F_IN, F_OUT)(torch.randn(N, F_IN), g, torch.ones(3))
    with pytest.raises(ValueError, match="aggr must be one of"):
        gnn.SAGEConv(F_IN, F_OUT, aggr="lstm")
    with pytest.raises(ValueError, match="add_self_loops=True needs normalize=True"):
        gnn.GCNConv(F_IN, F_OUT, add_self_loops=True, normalize=False)
    bipartite = gsparse.Graph.from_edge_index(torch.tensor([[0, 1], [0, 0]]), num_src=2, num_dst=1)
    with pytest.raises(ValueError, match="self loops need a square graph, got 2 source and 1 destination"):
        gnn._graph.self_loops(bipartite)


@pytest.mark.gpu
@pytest.mark.parametrize("make", [
    lambda lib: lib.GCNConv(F_IN, F_OUT),
    lambda lib: lib.GATConv(F_IN, F_OUT, heads=4),
    lambda lib: lib.SAGEConv(F_IN, 64, aggr="max"),
    lambda lib: lib.SAGEConv(F_IN, F_OUT, aggr="mean"),
], ids=["gcn", "gat", "sage-max", "sage-mean"])
def test_gpu_layers_match_pyg(make):
    ei = _edge_index(14).cuda()
    ours, theirs = make(gnn).cuda(), make(pyg_nn).cuda()
    ours.load_state_dict(theirs.state_dict())
    x = _features(15).cuda().requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    out_ours, out_theirs = ours(x, gsparse.Graph.from_edge_index(ei, num_nodes=N)), theirs(x2, ei)
    torch.testing.assert_close(out_ours, out_theirs, rtol=1e-4, atol=1e-4)
    out_ours.square().sum().backward()
    out_theirs.square().sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-4)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, theirs_params[name].grad, rtol=1e-4, atol=1e-4, msg=name)


def _adj_t(ei: torch.Tensor, layout: str, values: torch.Tensor | None = None) -> torch.Tensor:
    """PyG's transposed adjacency (rows are destinations) in a torch.sparse layout."""
    values = torch.ones(ei.shape[1]) if values is None else values
    with torch.sparse.check_sparse_tensor_invariants(False):
        coo = torch.sparse_coo_tensor(ei.flip(0), values, (N, N)).coalesce()
    return {"coo": coo, "csr": coo.to_sparse_csr(), "csc": coo.to_sparse_csc()}[layout]


def _no_loops(seed: int) -> torch.Tensor:
    """Edges without repeats (a sparse adjacency holds each once) and without self loops: on a
    torch.sparse adj_t PyG's GCNConv adds a loop even where one exists (its edge_index path
    and gsparse replace existing loops)."""
    ei = torch.unique(_edge_index(seed), dim=1)
    return ei[:, ei[0] != ei[1]]


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
@pytest.mark.parametrize("make", [lambda: (gnn.GCNConv(F_IN, F_OUT), pyg_nn.GCNConv(F_IN, F_OUT)),
                                  lambda: (gnn.GATConv(F_IN, F_OUT, heads=2), pyg_nn.GATConv(F_IN, F_OUT, heads=2)),
                                  lambda: (gnn.SAGEConv(F_IN, F_OUT, aggr="sum"), pyg_nn.SAGEConv(F_IN, F_OUT, aggr="sum"))],
                         ids=["GCNConv", "GATConv", "SAGEConv"])
def test_layers_take_pyg_sparse_adj_t(make, layout):
    ei = _no_loops(20)
    ours, theirs = make()
    # PyG's GCNConv and GATConv take no CSC adjacency: compare with the same graph as CSR.
    theirs_layout = "csr" if layout == "csc" and not isinstance(theirs, pyg_nn.SAGEConv) else layout
    _compare(ours, theirs, (_adj_t(ei, layout),), (_adj_t(ei, theirs_layout),))


def test_gcn_takes_the_weights_of_a_sparse_adj_t_as_pyg():
    ei = _no_loops(21)
    w = torch.rand(ei.shape[1], generator=torch.Generator().manual_seed(22)) + 0.1
    adj_t = _adj_t(ei, "csr", w)
    _compare(gnn.GCNConv(F_IN, F_OUT), pyg_nn.GCNConv(F_IN, F_OUT), (adj_t,), (adj_t,))


def test_layers_take_pyg_edge_index_objects():
    pyg = pytest.importorskip("torch_geometric")
    ei = _edge_index(23)
    _compare(gnn.GATConv(F_IN, F_OUT, heads=2), pyg_nn.GATConv(F_IN, F_OUT, heads=2),
             (pyg.EdgeIndex(ei, sparse_size=(N, N)),), (ei,))


def test_gat_scores_bf16_features_in_float32_under_autocast():
    # As PyG's (h * att).sum(-1) promotes: the contraction must not run in bf16.
    layer = gnn.GATConv(F_IN, F_OUT, heads=2)
    h = torch.randn(7, 2, F_OUT).to(torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        score_src, score_dst = layer._scores(h)
    assert score_src.dtype == score_dst.dtype == torch.float32
    torch.testing.assert_close(score_src, (h.float() * layer.att_src).sum(-1))
