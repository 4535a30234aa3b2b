"""Train GCN, GAT and GraphSAGE on Cora with gsparse, next to the same models in PyG.

Each model is trained for 200 epochs on the CPU with the usual Planetoid settings (row-
normalised features, Adam, weight decay 5e-4, the standard 140 / 500 / 1000 split), once
with ``gsparse.nn`` layers and once with ``torch_geometric.nn`` layers of the same
arguments, from the same seeds. The reported test accuracy is the one at the epoch of best
validation accuracy, averaged over the seeds.

GAT is built with ``edge_dim=1`` and gets one feature per edge, derived from the degrees
of its endpoints: ``1 / sqrt(deg(u) * deg(v))`` (GCN's edge weight), with the self loops
the layer adds filled with the mean of each node's incoming features, as PyG does.

The graph is built twice: ``Graph.from_edge_index(edge_index, num_nodes=N)`` for
training, and ``Graph.from_edge_index(edge_index)`` (the node count read from the
edges) fresh for the compile check: each trained model is compiled with
``torch.compile(fullgraph=True)`` (a graph break raises) and its first call, with no eager
run on that graph before it, must match the eager model.

    python examples/cora.py                 # 3 seeds, 200 epochs: a few minutes on 2 cores
    python examples/cora.py --seeds 1 --epochs 20 --no-pyg
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import gsparse


class InputDropout:
    """``F.dropout(x, p)`` of node features that are mostly zero, drawn for the nonzeros only.

    Dropout leaves a zero at zero, so this is the same dropout; Cora's features are 1.3%
    nonzero, and dropping out all 3.9M entries takes most of a training step on a CPU.
    """

    def __init__(self, x: torch.Tensor, p: float):
        self.index = x.nonzero(as_tuple=True)
        self.values, self.shape, self.p = x[self.index], x.shape, p

    def __call__(self) -> torch.Tensor:
        out = torch.zeros(self.shape)
        out[self.index] = F.dropout(self.values, self.p)
        return out


# Each model takes its input features already dropped out (by InputDropout, in training).
class GCN(torch.nn.Module):
    def __init__(self, layers, in_channels: int, hidden: int, out_channels: int, dropout: float = 0.5):
        super().__init__()
        self.conv1 = layers.GCNConv(in_channels, hidden)
        self.conv2 = layers.GCNConv(hidden, out_channels)
        self.dropout = dropout

    def forward(self, x, graph, edge_attr=None):
        x = F.relu(self.conv1(x, graph))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, graph)


class GAT(torch.nn.Module):
    def __init__(self, layers, in_channels: int, hidden: int, out_channels: int, heads: int = 8,
                 dropout: float = 0.6, edge_dim: int = 1):
        super().__init__()
        self.conv1 = layers.GATConv(in_channels, hidden, heads=heads, dropout=dropout, edge_dim=edge_dim)
        self.conv2 = layers.GATConv(hidden * heads, out_channels, heads=1, concat=False, dropout=dropout,
                                    edge_dim=edge_dim)
        self.dropout = dropout

    def forward(self, x, graph, edge_attr=None):
        x = F.elu(self.conv1(x, graph, edge_attr))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, graph, edge_attr)


class SAGE(torch.nn.Module):
    def __init__(self, layers, in_channels: int, hidden: int, out_channels: int, dropout: float = 0.5):
        super().__init__()
        self.conv1 = layers.SAGEConv(in_channels, hidden)
        self.conv2 = layers.SAGEConv(hidden, out_channels)
        self.dropout = dropout

    def forward(self, x, graph, edge_attr=None):
        x = F.relu(self.conv1(x, graph))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, graph)


# name: (model class, hidden size, learning rate, dropout); weight decay 5e-4 for all.
MODELS = {"GCN": (GCN, 16, 0.01, 0.5), "GAT": (GAT, 8, 0.005, 0.6), "SAGE": (SAGE, 16, 0.01, 0.5)}
WEIGHT_DECAY = 5e-4


def load_cora():
    """Cora with row-normalised features (PyG's ``NormalizeFeatures``) and GAT's edge features."""
    data = gsparse.datasets.cora()
    x = data.features / data.features.sum(1, keepdim=True).clamp(min=1)
    edge_index = data.edge_index
    degree = torch.bincount(edge_index[1], minlength=data.num_nodes).float()
    edge_attr = (degree[edge_index[0]] * degree[edge_index[1]]).rsqrt().unsqueeze(-1)  # [E, 1]
    return data, x, edge_index, edge_attr


def accuracy(out: torch.Tensor, labels: torch.Tensor, idx: torch.Tensor) -> float:
    return (out[idx].argmax(-1) == labels[idx]).float().mean().item()


def train(model, x, graph, edge_attr, data, epochs: int, lr: float, dropout: float) -> float:
    """Full-batch training; returns the test accuracy at the epoch of best validation accuracy."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=WEIGHT_DECAY)
    input_dropout = InputDropout(x, dropout)
    best_val, test_at_best = -1.0, 0.0
    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        out = model(input_dropout(), graph, edge_attr)
        F.cross_entropy(out[data.train_idx], data.labels[data.train_idx]).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            out = model(x, graph, edge_attr)
        val = accuracy(out, data.labels, data.val_idx)
        if val > best_val:
            best_val, test_at_best = val, accuracy(out, data.labels, data.test_idx)
    return test_at_best


def compiled_matches_eager(model, x, edge_index, edge_attr, eager_graph) -> float:
    """Max |compiled - eager| of the trained model in eval mode; the compiled model runs first on
    a graph built fresh with ``from_edge_index(edge_index)``, so nothing was derived from it."""
    fresh = gsparse.Graph.from_edge_index(edge_index)
    model.eval()
    compiled = torch.compile(model, fullgraph=True)  # a graph break raises
    with torch.no_grad():
        got = compiled(x, fresh, edge_attr)
        want = model(x, eager_graph, edge_attr)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    return (got - want).abs().max().item()


def run(seeds: int, epochs: int, with_pyg: bool, compile_check: bool, models=tuple(MODELS)) -> list[dict]:
    data, x, edge_index, edge_attr = load_cora()
    graph = gsparse.Graph.from_edge_index(edge_index, num_nodes=data.num_nodes)
    if with_pyg:
        import torch_geometric.nn as pyg_layers
    rows = []
    for name in models:
        model_cls, hidden, lr, dropout = MODELS[name]
        row = {"model": name, "gsparse": [], "pyg": []}
        for seed in range(seeds):
            torch.manual_seed(seed)
            model = model_cls(gsparse.nn, data.num_features, hidden, data.num_classes, dropout=dropout)
            row["gsparse"].append(train(model, x, graph, edge_attr, data, epochs, lr, dropout))
            if with_pyg:
                torch.manual_seed(seed)
                reference = model_cls(pyg_layers, data.num_features, hidden, data.num_classes, dropout=dropout)
                row["pyg"].append(train(reference, x, edge_index, edge_attr, data, epochs, lr, dropout))
        if compile_check:
            row["compiled_max_diff"] = compiled_matches_eager(model, x, edge_index, edge_attr, graph)
        rows.append(row)
    return rows


def _mean_std(values: list[float]) -> str:
    if not values:
        return "-"
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):.1f} ± {100 * spread:.1f}"


def table(rows: list[dict], seeds: int, epochs: int) -> str:
    lines = [f"Cora, {epochs} epochs, CPU, test accuracy (%) at the best validation epoch, mean ± std "
             f"over {seeds} seed(s)",
             "",
             "| model | gsparse | PyG | gsparse - PyG | torch.compile(fullgraph=True) vs eager |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        diff = f"{100 * (statistics.mean(r['gsparse']) - statistics.mean(r['pyg'])):+.1f}" if r["pyg"] else "-"
        compiled = f"no graph break, max |diff| {r['compiled_max_diff']:.1e}" if "compiled_max_diff" in r else "-"
        name = r["model"] + (" (edge_dim=1)" if r["model"] == "GAT" else "")
        lines.append(f"| {name} | {_mean_std(r['gsparse'])} | {_mean_std(r['pyg'])} | {diff} | {compiled} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds to average over (default 3)")
    parser.add_argument("--epochs", type=int, default=200, help="training epochs (default 200)")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of GCN,GAT,SAGE")
    parser.add_argument("--no-pyg", action="store_true", help="skip the PyG models")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile check")
    args = parser.parse_args(argv)
    models = tuple(m.strip().upper() for m in args.models.split(","))
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"--models takes names among {', '.join(MODELS)}, got {', '.join(unknown)}")
    start = time.perf_counter()
    rows = run(args.seeds, args.epochs, not args.no_pyg, not args.no_compile, models)
    print(table(rows, args.seeds, args.epochs))
    print(f"\n{time.perf_counter() - start:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
