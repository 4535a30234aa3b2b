"""Layer and training cases run by the pool's ranks (and their single-process references)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from cases import device_of, features, make_graph, rows_of, share

import gsparse
from gsparse.distributed import train as dist_train

IN, OUT = 4, 3
LAYERS = ("gcn", "gcn_edge_weight", "gcn_unnormalized", "gat", "sage_mean", "sage_max", "sage_bipartite")


def build_layer(name: str) -> torch.nn.Module:
    """The layer ``name`` with seeded weights, in float64."""
    torch.manual_seed(3)
    nn = gsparse.nn
    layer = {
        "gcn": lambda: nn.GCNConv(IN, OUT),
        "gcn_edge_weight": lambda: nn.GCNConv(IN, OUT),
        "gcn_unnormalized": lambda: nn.GCNConv(IN, OUT, normalize=False),
        "gat": lambda: nn.GATConv(IN, OUT, heads=2),
        "sage_mean": lambda: nn.SAGEConv(IN, OUT, aggr="mean"),
        "sage_max": lambda: nn.SAGEConv(IN, OUT, aggr="max"),
        "sage_bipartite": lambda: nn.SAGEConv((IN, 2), OUT, aggr="sum"),
    }[name]()
    return layer.double()


def layer_graph(name: str) -> str:
    return "bipartite" if name == "sage_bipartite" else "square"


def layer_inputs(name: str, graph: gsparse.Graph):
    """``(x, edge_weight)`` on the whole graph; ``x`` a pair for the bipartite layer."""
    x = features((graph.num_src, IN), 1)
    if name == "sage_bipartite":
        x = (x, features((graph.num_dst, 2), 2))
    weight = features((graph.num_edges,), 4).abs() + 0.1 if name == "gcn_edge_weight" else None
    return x, weight


def call(layer, x, graph, weight):
    return layer(x, graph) if weight is None else layer(x, graph, weight)


def dist_layer(group, name: str, part_kind: str, exchange: str):
    """The layer on this rank's share: its output rows, the gradient of its features and
    edge weights, and the parameters' gradients summed over the ranks."""
    graph, dg = share(group, layer_graph(name), part_kind, exchange)
    layer = build_layer(name).to(dg.device)
    x, weight = layer_inputs(name, graph)
    if isinstance(x, tuple):
        x = (rows_of(x[0], dg.src_nodes).requires_grad_(), rows_of(x[1], dg.dst_nodes).requires_grad_())
    else:
        x = rows_of(x, dg.src_nodes).requires_grad_()
    if weight is not None:
        weight = rows_of(weight, dg.edge_ids).requires_grad_()
    out = call(layer, x, dg, weight)
    out.backward(rows_of(features((graph.num_dst, out.shape[1]), 5), dg.dst_nodes))
    grads = {}
    for pname, p in layer.named_parameters():
        g = p.grad.clone()
        dist.all_reduce(g, group=group)
        grads[pname] = _numpy(g)
    x_grad = x[0].grad if isinstance(x, tuple) else x.grad
    return (_numpy(dg.dst_nodes), _numpy(dg.src_nodes), _numpy(dg.edge_ids), _numpy(out), _numpy(x_grad),
            None if weight is None else _numpy(weight.grad), grads)


def _numpy(t: torch.Tensor):
    return t.detach().cpu().numpy()


def single_layer(name: str):
    """The same on the whole graph in one process."""
    graph = make_graph(layer_graph(name))
    layer = build_layer(name)
    x, weight = layer_inputs(name, graph)
    if isinstance(x, tuple):
        x = (x[0].requires_grad_(), x[1].requires_grad_())
    else:
        x = x.requires_grad_()
    if weight is not None:
        weight = weight.requires_grad_()
    out = call(layer, x, graph, weight)
    out.backward(features((graph.num_dst, out.shape[1]), 5))
    x_grad = x[0].grad if isinstance(x, tuple) else x.grad
    return out.detach(), x_grad, None if weight is None else weight.grad, \
        {pname: p.grad for pname, p in layer.named_parameters()}


# ---------------------------------------------------------------------- training

CLASSES, EPOCHS, LR = 3, 4, 0.05


def global_data(graph: gsparse.Graph):
    x = features((graph.num_src, IN), 11, torch.float32)
    y = torch.randint(0, CLASSES, (graph.num_dst,), generator=torch.Generator().manual_seed(12))
    train_mask = torch.rand(graph.num_dst, generator=torch.Generator().manual_seed(13)) < 0.6
    return x, y, train_mask


def model(recompute_first: bool = False):
    torch.manual_seed(21)
    return dist_train.GCN(IN, 8, CLASSES, dropout=0.0, recompute_first=recompute_first)


def dist_training(group, part_kind: str, recompute_first: bool = False):
    """Losses of ``EPOCHS`` full-graph epochs with DDP (``gsparse.distributed.train.train``)."""
    graph, dg = share(group, "square", part_kind)
    x, y, train_mask = global_data(graph)
    data = dist_train.Data("square", dg, rows_of(x, dg.src_nodes), rows_of(y, dg.dst_nodes),
                           rows_of(train_mask, dg.dst_nodes), CLASSES, int(train_mask.sum()), graph.num_dst,
                           graph.num_edges)
    result = dist_train.train(model(recompute_first).to(dg.device), data, epochs=EPOCHS, warmup=0, lr=LR,
                              group=group)
    return result["losses"]


def single_training():
    graph = make_graph("square")
    x, y, train_mask = global_data(graph)
    net = model()
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    losses = []
    for _ in range(EPOCHS):
        opt.zero_grad()
        loss = F.cross_entropy(net(x, graph)[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def dist_train_load(group, spec: str):
    """A few epochs of the training script's own data and model, as torchrun would run it."""
    device = device_of(group)
    data = dist_train.load(spec, group=group, device=device, num_features=8, num_classes=5)
    result = dist_train.train(dist_train.GCN(8, 16, 5).to(device), data, epochs=2, warmup=1, group=group)
    return data.graph.partition_report().to_dict(), result


def dist_bench(group, graph: str):
    """The distributed benchmark's document for this job (tiny sizes)."""
    from gsparse.bench import distributed as bench

    args = bench.parser().parse_args(["--graph", graph, "--hidden", "8", "--features", "6", "--classes", "3",
                                      "--epochs", "1", "--warmup", "0", "--reps", "1"])
    return bench.run(args, device_of(group), group, progress=lambda *_: None)
