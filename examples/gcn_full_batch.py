"""Full-batch GCN on Cora with ``gsparse.nn.GCNConv``: the smallest complete training script.

Loads Cora (shipped with gsparse, no download), builds the graph once with
``gsparse.Graph.from_edge_index``, trains a two-layer GCN with Adam on the whole graph
every epoch and reports the test accuracy at the epoch of best validation accuracy, and
the time per epoch. ``examples/cora.py`` trains the same model (and GAT, GraphSAGE) next
to PyTorch Geometric's layers.

    python examples/gcn_full_batch.py                   # 100 epochs on the CPU, a few seconds
    python examples/gcn_full_batch.py --epochs 200 --device cuda
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

import gsparse


class GCN(torch.nn.Module):
    """``conv2(dropout(relu(conv1(x))))``: ``[N, in_channels]`` -> ``[N, out_channels]``."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int, dropout: float) -> None:
        super().__init__()
        self.conv1 = gsparse.nn.GCNConv(in_channels, hidden)
        self.conv2 = gsparse.nn.GCNConv(hidden, out_channels)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, graph: gsparse.Graph) -> torch.Tensor:
        h = F.relu(self.conv1(x, graph))
        return self.conv2(F.dropout(h, self.dropout, self.training), graph)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=100, help="training epochs (default 100)")
    parser.add_argument("--hidden", type=int, default=16, help="hidden channels (default 16)")
    parser.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate (default 0.01)")
    parser.add_argument("--dropout", type=float, default=0.5, help="dropout of the hidden layer (default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA device is visible to PyTorch")
    torch.manual_seed(args.seed)

    data = gsparse.datasets.cora()
    graph = gsparse.Graph.from_edge_index(data.edge_index, num_nodes=data.num_nodes).to(device)
    x = (data.features / data.features.sum(1, keepdim=True)).to(device)  # row-normalised
    labels = data.labels.to(device)
    split = {name: idx.to(device) for name, idx in
             (("train", data.train_idx), ("val", data.val_idx), ("test", data.test_idx))}
    model = GCN(data.num_features, args.hidden, data.num_classes, args.dropout).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)

    best_val, test_at_best, best_epoch, seconds = -1.0, 0.0, 0, 0.0
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x, graph)[split["train"]], labels[split["train"]])
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, graph).argmax(1)
        acc = {name: (pred[idx] == labels[idx]).float().mean().item() for name, idx in split.items()}
        seconds += time.perf_counter() - start  # .item() above waits for the device
        if acc["val"] > best_val:
            best_val, test_at_best, best_epoch = acc["val"], acc["test"], epoch
        if epoch % 20 == 0 or epoch == args.epochs:
            print(f"epoch {epoch:4d}  loss {loss.item():.3f}  train {acc['train']:.3f}  "
                  f"val {acc['val']:.3f}  test {acc['test']:.3f}")
    print(f"test accuracy {test_at_best:.3f} at the best validation epoch ({best_epoch}); "
          f"{1e3 * seconds / args.epochs:.1f} ms per epoch (train step and evaluation) on {device}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
