"""Mini-batch GraphSAGE on Cora: a neighbour sampler, ``Graph.from_block`` and ``SAGEConv``.

Every step draws a batch of training nodes (the *seeds*), samples up to ``fanout`` of each
node's in-neighbours, hop by hop outwards, with a uniform sampler written with torch ops
(:class:`NeighborSampler`), and runs a two-layer ``gsparse.nn.SAGEConv`` model on the
sampled *blocks*: bipartite graphs whose destinations are the nodes a layer computes and
whose sources are those nodes followed by the neighbours sampled for them (DGL's blocks,
PyG's ``NeighborLoader`` subgraphs). Each block is built with ``gsparse.Graph.from_block``
from its destination-sorted edge list and the sizes the sampler knows, which on a GPU
never waits for the device. Evaluation runs the same layers on the whole graph (every
neighbour, no sampling). Reports the test accuracy at the epoch of best validation
accuracy, and the time of a step, split into sampling and training.

    python examples/minibatch_sage.py                   # 10 epochs on the CPU, a few seconds
    python examples/minibatch_sage.py --epochs 30 --batch-size 16 --fanouts 15,10 --device cuda
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

import gsparse


class NeighborSampler:
    """Uniform neighbour sampling without replacement, with torch ops on the graph's device.

    ``sample(seeds)`` returns ``(nodes, blocks)``: ``nodes`` ``[num_src]`` the base-graph
    ids of the outermost block's sources (the input features to gather), ``blocks`` one
    ``gsparse.Graph`` per layer, outermost first. In every block the destinations are the
    first ``num_dst`` sources, so a layer's output rows are the next layer's first sources.
    """

    def __init__(self, graph: gsparse.Graph, fanouts: list[int], seed: int = 0) -> None:
        self.rowptr, self.col = graph.rowptr.long(), graph.col.long()  # row v: v's in-neighbours
        self.fanouts = fanouts
        self.local = torch.full((graph.num_dst,), -1, dtype=torch.long, device=graph.device)
        self.generator = torch.Generator(graph.device).manual_seed(seed)

    def _pick(self, nodes: torch.Tensor, fanout: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(sources, dst)``: up to ``fanout`` distinct in-neighbours of each node (base-graph
        ids) and the position in ``nodes`` of the node each was picked for, grouped by it."""
        start, degree = self.rowptr[nodes], self.rowptr[nodes + 1] - self.rowptr[nodes]
        dst = torch.repeat_interleave(torch.arange(nodes.numel(), device=nodes.device), degree)
        position = torch.arange(dst.numel(), device=dst.device) - (torch.cumsum(degree, 0) - degree)[dst]
        # Shuffle each row's edges (a random order, then a stable sort back into rows) and
        # keep the first fanout of every row.
        order = torch.randperm(dst.numel(), device=dst.device, generator=self.generator)
        order = order[torch.sort(dst[order], stable=True).indices]
        edges = (start[dst] + position)[order]
        keep = position < fanout
        return self.col[edges[keep]], dst[keep]

    def sample(self, seeds: torch.Tensor) -> tuple[torch.Tensor, list[gsparse.Graph]]:
        nodes, blocks = seeds, []
        self.local[seeds] = torch.arange(seeds.numel(), device=seeds.device)
        for fanout in self.fanouts:
            sources, dst = self._pick(nodes, fanout)
            new = torch.unique(sources[self.local[sources] < 0])
            self.local[new] = torch.arange(nodes.numel(), nodes.numel() + new.numel(), device=new.device)
            edge_index = torch.stack([self.local[sources], dst])  # sorted by destination
            blocks.append(gsparse.Graph.from_block(edge_index, num_src=nodes.numel() + new.numel(),
                                                   num_dst=nodes.numel(), dst_sorted=True, max_degree=fanout))
            nodes = torch.cat([nodes, new])
        self.local[nodes] = -1
        return nodes, blocks[::-1]


class SAGE(torch.nn.Module):
    """Two ``SAGEConv`` layers (mean aggregation) over a list of blocks, outermost first."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int, dropout: float) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList([gsparse.nn.SAGEConv(in_channels, hidden),
                                          gsparse.nn.SAGEConv(hidden, out_channels)])
        self.dropout = dropout

    def forward(self, x: torch.Tensor, blocks: list[gsparse.Graph]) -> torch.Tensor:
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            x = conv((x, x[: block.num_dst]), block)
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training nodes (default 10)")
    parser.add_argument("--batch-size", type=int, default=32, help="seeds per step (default 32)")
    parser.add_argument("--fanouts", default="10,10",
                        help="neighbours sampled per node, from the seeds outwards (default 10,10)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden channels (default 64)")
    parser.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate (default 0.01)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA device is visible to PyTorch")
    fanouts = [int(f) for f in args.fanouts.split(",")]
    if len(fanouts) != 2 or min(fanouts) < 1:
        parser.error(f"--fanouts takes two positive counts (the model has two layers), got {args.fanouts}")
    torch.manual_seed(args.seed)

    data = gsparse.datasets.cora()
    graph = gsparse.Graph.from_edge_index(data.edge_index, num_nodes=data.num_nodes).to(device)
    x = (data.features / data.features.sum(1, keepdim=True)).to(device)  # row-normalised
    labels = data.labels.to(device)
    train_idx, val_idx, test_idx = (idx.to(device) for idx in (data.train_idx, data.val_idx, data.test_idx))
    sampler = NeighborSampler(graph, fanouts, seed=args.seed)
    model = SAGE(data.num_features, args.hidden, data.num_classes, dropout=0.5).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)

    def wait() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    best_val, test_at_best, best_epoch = -1.0, 0.0, 0
    sample_s = train_s = 0.0
    steps = 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        for seeds in train_idx[torch.randperm(train_idx.numel(), device=device)].split(args.batch_size):
            wait()
            start = time.perf_counter()
            nodes, blocks = sampler.sample(seeds)
            wait()
            sampled = time.perf_counter()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[nodes], blocks), labels[seeds])
            loss.backward()
            optimizer.step()
            wait()
            sample_s += sampled - start
            train_s += time.perf_counter() - sampled
            steps += 1
        model.eval()
        with torch.no_grad():  # every neighbour: the whole graph is each layer's block
            pred = model(x, [graph, graph]).argmax(1)
        val, test = ((pred[idx] == labels[idx]).float().mean().item() for idx in (val_idx, test_idx))
        if val > best_val:
            best_val, test_at_best, best_epoch = val, test, epoch
        print(f"epoch {epoch:3d}  loss {loss.item():.3f}  val {val:.3f}  test {test:.3f}")
    print(f"test accuracy {test_at_best:.3f} at the best validation epoch ({best_epoch}); "
          f"{1e3 * (sample_s + train_s) / steps:.2f} ms per step ({1e3 * sample_s / steps:.2f} sampling, "
          f"{1e3 * train_s / steps:.2f} training) over {steps} steps of {args.batch_size} seeds, "
          f"fanouts {args.fanouts}, on {device}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
