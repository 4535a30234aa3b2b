"""Full-graph training of a 2-layer GCN over several processes: ``torchrun ... -m gsparse.distributed.train``.

Each rank builds its share of the graph (a :class:`DistGraph`), its nodes' features and
labels, and trains ``gsparse.nn.GCNConv`` layers, unchanged, with their weights under
``DistributedDataParallel``; the halo exchange runs on a process group of its own.

Graphs (``--graph``):

* a preset of :mod:`gsparse.datasets` (``products-like``, ``reddit-like@0.1``, ...):
  every rank generates the same global graph on its device, partitions it (``--partition``;
  METIS and the locality partition run on rank 0 and are broadcast) and keeps its rows;
* ``papers100m-like[@SCALE]``: ogbn-papers100M's sizes (111 M nodes, 1.6 B edges, 128
  features, 172 classes), each rank drawing only its own rows
  (:func:`gsparse.distributed.synthetic.local_rows`): the graph exists nowhere whole.

Features and labels are random (seeded per rank), 66% of the nodes train. The loss is
the mean cross-entropy over all training nodes of all ranks: each rank's sum, scaled so
that DDP's average of the gradients is the gradient of that mean.

Prints one line per epoch (rank 0) and a summary; ``--json`` writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint

from .. import nn as gsparse_nn
from .dist_graph import EXCHANGES, DistGraph
from .partition import METHODS, Partition, partition
from .synthetic import PAPERS100M, equal_ranges, local_rows

__all__ = ["GCN", "Data", "load", "train", "init", "exchange_group", "main"]

PAPERS = "papers100m-like"
# Presets with --locality draw that fraction of each row's sources from its own block of
# nodes: num_nodes / LOCALITY_BLOCKS consecutive ids, so that ranges of up to 64 ranks
# hold whole blocks whatever the world size.
LOCALITY_BLOCKS = 64


class _ReLUDropout(torch.autograd.Function):
    """``dropout(relu(h), p)``, saving only its output ``y``: the gradient passes where
    ``y > 0`` (a kept, positive entry), scaled as dropout scales. Unfused, the ReLU's
    output, the dropout's mask and its output (the next layer's saved input) are all kept
    for the backward: at papers100M sizes 2.3 KiB per node instead of 1 KiB, a quarter of
    an epoch's peak memory. The same function as ``F.dropout(F.relu(h))``; the mask comes
    from ``torch.native_dropout``, the kernel ``F.dropout`` runs on CUDA."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, p: float) -> torch.Tensor:
        ctx.scale = 1.0 / (1.0 - p)
        y, _ = torch.native_dropout(F.relu(h), p, True)  # the mask is not kept
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (y,) = ctx.saved_tensors
        return torch.ops.aten.threshold_backward(grad, y, 0.0).mul_(ctx.scale), None


class GCN(nn.Module):
    """``conv2(dropout(relu(conv1(x))))`` with :class:`gsparse.nn.GCNConv` layers (the ReLU
    and the dropout fused in training, see :class:`_ReLUDropout`).

    ``recompute_first``: the first layer keeps nothing for the backward and runs again
    there (``torch.utils.checkpoint``), its halo exchange included. That frees its
    propagated features, which its linear map would keep (4 bytes per input feature and
    row, alive at the epoch's peak), for one more forward of the first layer per epoch.
    Every rank recomputes at the same point of the backward, so the exchange stays in step.
    """

    def __init__(self, in_channels: int, hidden: int, out_channels: int, dropout: float = 0.5,
                 recompute_first: bool = False) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.conv1 = gsparse_nn.GCNConv(in_channels, hidden)
        self.conv2 = gsparse_nn.GCNConv(hidden, out_channels)
        self.dropout = dropout
        self.recompute_first = recompute_first

    def forward(self, x: torch.Tensor, graph: Any) -> torch.Tensor:
        if self.recompute_first and self.training and torch.is_grad_enabled():
            h = checkpoint(self.conv1, x, graph, use_reentrant=False)
        else:
            h = self.conv1(x, graph)
        if self.training and self.dropout > 0:
            h = _ReLUDropout.apply(h, self.dropout)
        else:
            h = F.relu(h)
        return self.conv2(h, graph)


@dataclass
class Data:
    """This rank's share: graph, features ``[num_src, F]``, labels and training mask
    ``[num_dst]``, and ``num_train``, the training nodes over all ranks."""

    name: str
    graph: DistGraph
    x: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    num_classes: int
    num_train: int
    num_nodes: int
    num_edges: int


def _parse(spec: str) -> tuple[str, float]:
    base, _, scale = spec.partition("@")
    try:
        return base, float(scale) if scale else 1.0
    except ValueError:
        raise ValueError(f"graph {spec!r}: the scale after '@' must be a number, got {scale!r}") from None


def _shared_partition(graph, num_parts: int, method: str, seed: int, group: Any) -> Partition:
    """The partition computed once, on the group's first rank, and broadcast (METIS and
    the locality partition are costly and their ties need not break alike everywhere)."""
    if method == "range":
        return partition(graph, num_parts, "range")
    box = [partition(graph, num_parts, method, seed=seed) if dist.get_rank(group) == 0 else None]
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0), group=group)
    return box[0]


def _check_same_everywhere(graph, group: Any) -> None:
    """Raise unless every rank drew the same graph (compared by a cheap fingerprint)."""
    col = graph.col.long()
    weights = torch.arange(1, col.numel() + 1, device=col.device) % 1_000_003
    mine = torch.stack([torch.tensor(graph.num_edges, device=col.device), col.sum(), (col * weights).sum()])
    low, high = mine.clone(), mine.clone()
    dist.all_reduce(low, dist.ReduceOp.MIN, group=group)
    dist.all_reduce(high, dist.ReduceOp.MAX, group=group)
    if not torch.equal(low, high):
        raise RuntimeError("the ranks generated different graphs from the same preset and seed "
                           "(a nondeterministic generator on this device?)")


def load(spec: str, *, group: Any = None, device: torch.device | str = "cpu", method: str = "range",
         num_features: int | None = None, num_classes: int | None = None, remote_fraction: float = 0.1,
         cov: float = 1.0, locality: float = 0.0, exchange: str = "overlap", seed: int = 0) -> Data:
    """This rank's share of graph ``spec`` (a preset ``NAME[@SCALE]`` or
    ``papers100m-like[@SCALE]``) with random features and labels. Collective.

    A preset's sources are uniform over all nodes (as in the bench), or with
    ``locality > 0`` that fraction of them lies in the row's own block of
    ``num_nodes / LOCALITY_BLOCKS`` nodes (the locality of real graphs, which the uniform
    stand-ins lack: with uniform sources the halo is nearly every remote node).
    ``remote_fraction`` and ``cov`` shape ``papers100m-like``."""
    group = dist.group.WORLD if group is None else group
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    device = torch.device(device)
    base, scale = _parse(spec)
    if base == PAPERS:
        n = max(1, round(PAPERS100M["num_nodes"] * scale))
        num_edges = round(PAPERS100M["num_edges"] * scale)
        part = equal_ranges(n, world)
        rowptr, col = local_rows(part, rank, num_edges, cov=cov, remote_fraction=remote_fraction, seed=seed,
                                 device=device)
        graph = DistGraph.from_local_csr(rowptr, col, part, group=group, device=device, exchange=exchange)
        del rowptr, col
        features = num_features or PAPERS100M["num_features"]
        classes = num_classes or PAPERS100M["num_classes"]
    else:
        from .. import datasets

        # Drawn on the rank's own device (a GPU draws products-like in well under a second,
        # a CPU core takes a minute), then checked to be the same graph on every rank.
        if locality > 0:
            preset = datasets.PRESETS.get(base)
            if preset is None:
                raise ValueError(f"graph must be a preset {sorted(datasets.PRESETS)} or {PAPERS}, got {base!r}")
            nodes = round(preset.num_nodes * scale)
            blocks = datasets.Clustered(locality, -(-nodes // LOCALITY_BLOCKS))
            full = datasets.synthetic(nodes, preset.degree, locality=blocks, seed=seed, device=device)
        else:
            full = datasets.preset(base, scale=scale, seed=seed, device=device)
        _check_same_everywhere(full, group)
        n = full.num_dst
        part = _shared_partition(full, world, method, seed, group)
        graph = DistGraph.from_global(full, part, group=group, device=device, exchange=exchange)
        del full
        features, classes = num_features or 100, num_classes or 47  # ogbn-products' sizes
    gen = torch.Generator().manual_seed(seed * 7919 + rank)
    x = torch.randn(graph.num_src, features, generator=gen).to(device)
    y = torch.randint(0, classes, (graph.num_dst,), generator=gen).to(device)
    train_mask = (torch.rand(graph.num_dst, generator=gen) < 0.66).to(device)
    counts = torch.tensor([int(train_mask.sum()), graph.num_edges], device=device)
    dist.all_reduce(counts, group=group)
    return Data(spec, graph, x, y, train_mask, classes, int(counts[0]), n, int(counts[1]))


def _now(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def train(model: nn.Module, data: Data, *, epochs: int, lr: float = 0.01, group: Any = None,
          warmup: int = 1, log: Any = None) -> dict[str, Any]:
    """Train ``model`` (wrapped in DDP on ``group``) for ``warmup + epochs`` full-graph
    epochs; the figures are over the last ``epochs``: per-epoch time (the slowest rank's),
    losses, bytes this rank sent per epoch, peak memory of each rank."""
    group = dist.group.WORLD if group is None else group
    device = data.x.device
    ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None,
                                  process_group=group)
    opt = torch.optim.Adam(ddp.parameters(), lr=lr)
    world = dist.get_world_size(group)
    scale = world / max(data.num_train, 1)
    times, losses = [], []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for epoch in range(warmup + epochs):
        if epoch == warmup:
            data.graph.comm.reset()
        dist.barrier(group=group)
        start = _now(device)
        ddp.train()
        opt.zero_grad(set_to_none=True)
        # The logits are not kept in a name: nothing holds them through the backward.
        loss_sum = F.cross_entropy(ddp(data.x, data.graph)[data.train_mask], data.y[data.train_mask],
                                   reduction="sum")
        (loss_sum * scale).backward()
        opt.step()
        elapsed = torch.tensor([_now(device) - start], dtype=torch.float64, device=device)
        total = loss_sum.detach().to(torch.float64).reshape(1)
        dist.all_reduce(elapsed, dist.ReduceOp.MAX, group=group)
        dist.all_reduce(total, group=group)
        loss = float(total) / max(data.num_train, 1)
        if epoch >= warmup:
            times.append(float(elapsed) * 1e3)
            losses.append(loss)
        if log is not None:
            log(f"epoch {epoch - warmup:>3}{' (warm-up)' if epoch < warmup else ''}: loss {loss:.4f}, "
                f"{float(elapsed) * 1e3:.1f} ms")
    peak = torch.tensor([torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0,
                         data.graph.comm.bytes_sent], dtype=torch.int64, device=device)
    peaks = [torch.zeros_like(peak) for _ in range(world)]
    dist.all_gather(peaks, peak, group=group)
    return {"epoch_ms": statistics.median(times) if times else None, "epoch_ms_all": times, "losses": losses,
            "bytes_per_epoch": sum(int(p[1]) for p in peaks) // max(epochs, 1),
            "peak_memory_bytes": [int(p[0]) for p in peaks]}


def init(backend: str = "auto") -> tuple[torch.device, Any]:
    """Join the job torchrun started; returns this rank's device and a process group for the
    halo exchange (apart from DDP's, so that the two never share a communicator). Sets
    ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` unless it is set."""
    # Before CUDA starts (set_device below), when the allocator reads it: full-graph
    # activations are a few GiB each, and fixed segments' leftovers cost a rank 14.6 GiB at
    # papers100M sizes.
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    cuda = torch.cuda.is_available()
    if backend == "auto":
        backend = "nccl" if cuda else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    return device, exchange_group(backend)


def exchange_group(backend: str) -> Any:
    """A process group of every rank for the halo exchange. Under NCCL its streams have high
    priority: the exchange overlaps computation only if the GPU schedules its kernels while
    a g-SpMM's thousands of blocks wait, and at equal priority the g-SpMM's blocks go first
    (measured on 4 H100s: none of the exchange hidden)."""
    if backend != "nccl":
        return dist.new_group(backend=backend)
    options = dist.ProcessGroupNCCL.Options()
    options.is_high_priority_stream = True
    return dist.new_group(backend=backend, pg_options=options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchrun --nproc-per-node N -m gsparse.distributed.train",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--graph", default="products-like",
                        help=f"a bench preset NAME[@SCALE] or {PAPERS}[@SCALE] (default products-like)")
    parser.add_argument("--partition", choices=METHODS, default="range",
                        help="how preset graphs are partitioned (papers100m-like is drawn under ranges)")
    parser.add_argument("--exchange", choices=EXCHANGES, default="overlap")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--features", type=int, default=None, help="input features (default: the graph's)")
    parser.add_argument("--classes", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--remote-fraction", type=float, default=0.1,
                        help=f"{PAPERS}: the fraction of edges whose source is drawn over all nodes")
    parser.add_argument("--cov", type=float, default=1.0, help=f"{PAPERS}: COV of the row lengths")
    parser.add_argument("--locality", type=float, default=0.0,
                        help="presets: the fraction of each row's sources drawn from its own block of "
                             f"1/{LOCALITY_BLOCKS} of the nodes (default 0: uniform, as in the bench)")
    parser.add_argument("--recompute-first", action="store_true",
                        help="recompute the first layer in the backward instead of keeping its propagated "
                             "features (4 bytes per input feature and row less at the peak, one more "
                             "first-layer forward per epoch)")
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the summary to this file (rank 0)")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.warmup < 0:
        parser.error("--epochs must be >= 1 and --warmup >= 0")
    device, exchange_group = init(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    say = print if rank == 0 else (lambda *_: None)
    begin = time.perf_counter()
    data = load(args.graph, group=exchange_group, device=device, method=args.partition,
                num_features=args.features, num_classes=args.classes, remote_fraction=args.remote_fraction,
                cov=args.cov, locality=args.locality, exchange=args.exchange, seed=args.seed)
    report = data.graph.partition_report()
    say(f"{args.graph}: {data.num_nodes} nodes, {data.num_edges} edges on {world} rank(s), built in "
        f"{time.perf_counter() - begin:.1f} s")
    say(report.markdown())
    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = GCN(data.x.shape[1], args.hidden, data.num_classes, recompute_first=args.recompute_first).to(device)
    result = train(model, data, epochs=args.epochs, lr=args.lr, warmup=args.warmup, log=say)
    summary = {"graph": args.graph, "locality": args.locality, "world_size": world, "backend": dist.get_backend(),
               "exchange": args.exchange, "recompute_first": args.recompute_first,
               "hidden": args.hidden, "num_nodes": data.num_nodes, "num_edges": data.num_edges,
               "partition": report.to_dict(), **result}
    say(f"epoch {result['epoch_ms']:.1f} ms (median of {args.epochs}); peak memory per rank "
        f"{[round(p / 2**30, 2) for p in result['peak_memory_bytes']]} GiB; exchanged "
        f"{result['bytes_per_epoch'] / 2**20:.1f} MiB per epoch")
    if args.json and rank == 0:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
