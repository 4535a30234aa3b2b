"""GAT with edge features under ``torch.compile(fullgraph=True)``: the same numbers as eager, timed.

A two-layer ``gsparse.nn.GATConv`` model (several heads, ``edge_dim=1``) on Cora, with one
feature per edge derived from the degrees of its endpoints, ``1 / sqrt(deg(u) deg(v))``
(GCN's edge weight). The graph is a ``gsparse.Graph`` built outside the compiled model, so
the model compiles as one graph (``fullgraph=True``: a graph break raises). The example

1. checks that the compiled model gives the eager model's output and parameter gradients
   (dropout off) and prints the largest differences;
2. times a training step (forward, loss, backward; dropout on) eagerly and compiled, after
   warm-up, and the compiled model's first call (tracing and compiling);
3. trains the compiled model with Adam and reports the test accuracy at the epoch of best
   validation accuracy.

    python examples/gat_compile.py                      # 30 epochs on the CPU, under a minute
    python examples/gat_compile.py --epochs 200 --device cuda
    python examples/gat_compile.py --backend aot_eager  # no code generation: compiles in seconds
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import gsparse


class GAT(torch.nn.Module):
    """``conv2(dropout(elu(conv1(x))))`` with ``heads`` heads in the first layer, one in the
    second: ``[N, in_channels]`` -> ``[N, out_channels]``; ``edge_attr`` ``[E, 1]``."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.conv1 = gsparse.nn.GATConv(in_channels, hidden, heads=heads, dropout=dropout, edge_dim=1)
        self.conv2 = gsparse.nn.GATConv(hidden * heads, out_channels, heads=1, concat=False, dropout=dropout,
                                        edge_dim=1)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, graph: gsparse.Graph, edge_attr: torch.Tensor) -> torch.Tensor:
        h = F.elu(self.conv1(x, graph, edge_attr))
        return self.conv2(F.dropout(h, self.dropout, self.training), graph, edge_attr)


def loss_and_grads(model, x, graph, edge_attr, labels, train_idx) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    out = model(x, graph, edge_attr)
    F.cross_entropy(out[train_idx], labels[train_idx]).backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30, help="training epochs (default 30)")
    parser.add_argument("--heads", type=int, default=8, help="attention heads of the first layer (default 8)")
    parser.add_argument("--hidden", type=int, default=8, help="channels per head (default 8)")
    parser.add_argument("--repeats", type=int, default=10, help="timed training steps of each model (default 10)")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (default inductor)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA device is visible to PyTorch")
    torch.manual_seed(args.seed)

    data = gsparse.datasets.cora()
    edge_index = data.edge_index
    degree = torch.bincount(edge_index[1], minlength=data.num_nodes).float()
    edge_attr = (degree[edge_index[0]] * degree[edge_index[1]]).rsqrt().unsqueeze(-1).to(device)  # [E, 1]
    graph = gsparse.Graph.from_edge_index(edge_index, num_nodes=data.num_nodes).to(device)
    x = (data.features / data.features.sum(1, keepdim=True)).to(device)  # row-normalised
    labels = data.labels.to(device)
    train_idx, val_idx, test_idx = (idx.to(device) for idx in (data.train_idx, data.val_idx, data.test_idx))
    model = GAT(data.num_features, args.hidden, data.num_classes, args.heads, dropout=0.6).to(device)
    compiled = torch.compile(model, fullgraph=True, backend=args.backend)  # shares model's parameters

    def wait() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    # 1. Same output and gradients, dropout off.
    model.eval()
    want_out, want_grads = loss_and_grads(model, x, graph, edge_attr, labels, train_idx)
    wait()
    start = time.perf_counter()
    got_out, got_grads = loss_and_grads(compiled, x, graph, edge_attr, labels, train_idx)
    wait()
    first_call_s = time.perf_counter() - start
    torch.testing.assert_close(got_out, want_out, rtol=1e-4, atol=1e-5)
    for got, want in zip(got_grads, want_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    out_diff = (got_out - want_out).abs().max().item()
    grad_diff = max((g - w).abs().max().item() for g, w in zip(got_grads, want_grads))
    print(f"compiled (fullgraph=True, backend {args.backend}) vs eager: max |output diff| {out_diff:.1e}, "
          f"max |gradient diff| {grad_diff:.1e}; first compiled call (tracing, compiling) {first_call_s:.1f} s")

    # 2. A training step, dropout on: eager and compiled.
    model.train()
    step_ms = {}
    for name, run in (("eager", model), ("compiled", compiled)):
        loss_and_grads(run, x, graph, edge_attr, labels, train_idx)  # warm-up (compiles train mode)
        times = []
        for _ in range(args.repeats):
            wait()
            start = time.perf_counter()
            loss_and_grads(run, x, graph, edge_attr, labels, train_idx)
            wait()
            times.append(time.perf_counter() - start)
        step_ms[name] = 1e3 * statistics.median(times)
    print(f"training step (forward, loss, backward), median of {args.repeats}: eager {step_ms['eager']:.1f} ms, "
          f"compiled {step_ms['compiled']:.1f} ms ({step_ms['eager'] / step_ms['compiled']:.2f}x) on {device}")

    # 3. Train the compiled model; evaluate eagerly (the same parameters, no recompile for eval).
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    best_val, test_at_best, best_epoch = -1.0, 0.0, 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        optimizer.zero_grad()
        F.cross_entropy(compiled(x, graph, edge_attr)[train_idx], labels[train_idx]).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, graph, edge_attr).argmax(1)
        val, test = ((pred[idx] == labels[idx]).float().mean().item() for idx in (val_idx, test_idx))
        if val > best_val:
            best_val, test_at_best, best_epoch = val, test, epoch
    print(f"test accuracy {test_at_best:.3f} at the best validation epoch ({best_epoch}) of {args.epochs}, "
          f"trained compiled")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
