"""Distributed benchmark: ``torchrun --nproc-per-node W -m gsparse.bench.distributed``.

One job measures one world size ``W``, on the graph of ``--graph`` (a preset, or
``papers100m-like[@SCALE]`` drawn per rank), all in the same job and on the same share:

* **operator**: the GCN aggregation ``gspmm(copy_lhs, sum)`` at ``--hidden`` features,
  forward and forward+backward, with the overlapped exchange; the exchange alone (halo
  gather, and its reverse scatter for the backward; all-gather and reduce-scatter where
  the halos are dense, ``exchange.DENSE_HALO``); the computation alone (inner and
  boundary edges, the halo already there). The fraction of the exchange hidden behind
  computation is ``(exchange + compute - overlapped) / exchange``, clipped to [0, 1];
* **layer**: ``gsparse.nn.GCNConv(F, hidden)`` forward+backward;
* **epoch**: a 2-layer GCN (:class:`gsparse.distributed.train.GCN`) full-graph training
  epoch with DDP;

each with ``exchange="overlap"`` (ours), ``"halo"`` (exchange first, no overlap) and the
naive baseline ``"allgather"`` (all-gather the whole feature matrix, then the
single-GPU operator), and the bytes each sends. With ``W = 1`` the operator and the
layer also run on the rank's plain :class:`gsparse.Graph` (the single-GPU figure).
Every time is the slowest rank's, median over repetitions after warm-up.

Writes ``distributed-w{W}.json`` (format :data:`FORMAT`) under ``--out`` and rewrites
``distributed.md`` from every such file there: one row per world size, strong scaling
against the smallest.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from .. import gspmm as single_gspmm
from .. import nn as gsparse_nn
from ..distributed import exchange as ex
from ..distributed import gspmm as dist_gspmm
from ..distributed import train as dt
from ..distributed.partition import METHODS

__all__ = ["FORMAT", "run", "markdown", "main"]

FORMAT = "gsparse-distributed/1"
STRATEGIES = ("overlap", "halo", "allgather")


class _Timer:
    """Median over ``reps`` of the slowest rank's time of ``fn`` (ms), after ``warmup`` runs."""

    def __init__(self, device: torch.device, group: Any, reps: int, warmup: int) -> None:
        self.device, self.group, self.reps, self.warmup = device, group, reps, warmup

    def _sync(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def __call__(self, fn: Callable[[], Any]) -> float:
        times = []
        for i in range(self.warmup + self.reps):
            dist.barrier(group=self.group)
            start = self._sync()
            fn()
            elapsed = torch.tensor([self._sync() - start], dtype=torch.float64, device=self.device)
            dist.all_reduce(elapsed, dist.ReduceOp.MAX, group=self.group)
            if i >= self.warmup:
                times.append(float(elapsed) * 1e3)
        return statistics.median(times)


def _bytes(graph, group: Any, fn: Callable[[], Any]) -> int:
    """Bytes all ranks send to each other while ``fn`` runs once."""
    graph.comm.reset()
    fn()
    sent = torch.tensor([graph.comm.bytes_sent], dtype=torch.int64, device=graph.device)
    dist.all_reduce(sent, group=group)
    return int(sent)


def _hidden(exchange_ms: float, compute_ms: float, overlap_ms: float) -> float | None:
    if exchange_ms <= 0:
        return None
    return min(1.0, max(0.0, (exchange_ms + compute_ms - overlap_ms) / exchange_ms))


def _operator(dg, hidden: int, timer: _Timer, group: Any) -> dict[str, Any]:
    """The aggregation ``copy_lhs``/``sum`` at ``hidden`` features: strategies, exchange
    alone, computation alone, the hidden fraction; forward and forward+backward."""
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(dg.num_src, hidden, generator=gen).to(dg.device).requires_grad_()
    grad = torch.randn(dg.num_dst, hidden, generator=gen).to(dg.device)
    out: dict[str, Any] = {"features": hidden}
    for strategy in STRATEGIES:
        g = dg.with_exchange(strategy)
        with torch.no_grad():
            out[f"{strategy}_forward_ms"] = timer(lambda: dist_gspmm(g, "copy_lhs", "sum", h))
        out[f"{strategy}_train_ms"] = timer(lambda: dist_gspmm(g, "copy_lhs", "sum", h).backward(grad))
        out[f"{strategy}_bytes"] = _bytes(g, group, lambda: dist_gspmm(g, "copy_lhs", "sum", h).backward(grad))
    (inner, _), (outer, _) = dg.inner, dg.boundary
    halo = ex.receive(dg.plan, h.detach()).requires_grad_() if dg.plan.active else h.new_zeros((0, hidden))
    halo_grad = torch.randn_like(halo)

    def compute() -> torch.Tensor:
        return single_gspmm(inner, "copy_lhs", "sum", h) + single_gspmm(outer, "copy_lhs", "sum", halo)

    with torch.no_grad():
        out["compute_forward_ms"] = timer(compute)
    out["compute_train_ms"] = timer(lambda: compute().backward(grad))
    if dg.plan.active:
        with torch.no_grad():
            out["exchange_forward_ms"] = timer(lambda: ex.receive(dg.plan, h))
        out["exchange_train_ms"] = timer(lambda: ex.receive(dg.plan, h).backward(halo_grad))
        for phase in ("forward", "train"):
            out[f"hidden_{phase}"] = _hidden(out[f"exchange_{phase}_ms"], out[f"compute_{phase}_ms"],
                                             out[f"overlap_{phase}_ms"])
    if dg.world_size == 1:
        local = dg.local
        with torch.no_grad():
            out["single_forward_ms"] = timer(lambda: single_gspmm(local, "copy_lhs", "sum", h))
        out["single_train_ms"] = timer(lambda: single_gspmm(local, "copy_lhs", "sum", h).backward(grad))
    return out


def _layer(data: dt.Data, hidden: int, timer: _Timer, group: Any) -> dict[str, Any]:
    """``GCNConv(F, hidden)`` forward+backward per strategy (and on the plain Graph at W = 1)."""
    torch.manual_seed(0)
    layer = gsparse_nn.GCNConv(data.x.shape[1], hidden).to(data.x.device)
    x = data.x.detach().requires_grad_()
    grad = torch.randn(data.graph.num_dst, hidden, device=data.x.device)
    out: dict[str, Any] = {}
    graphs = {s: data.graph.with_exchange(s) for s in STRATEGIES}
    if data.graph.world_size == 1:
        graphs["single"] = data.graph.local
    for name, g in graphs.items():
        out[f"{name}_ms"] = timer(lambda: layer(x, g).backward(grad))
        if name != "single":
            out[f"{name}_bytes"] = _bytes(g, group, lambda: layer(x, g).backward(grad))
    return out


def _epochs(data: dt.Data, hidden: int, epochs: int, warmup: int, group: Any) -> dict[str, Any]:
    """A training epoch of the 2-layer GCN per strategy, from the same initial weights."""
    torch.manual_seed(0)
    initial = dt.GCN(data.x.shape[1], hidden, data.num_classes)
    out: dict[str, Any] = {}
    for strategy in STRATEGIES:
        share = copy.copy(data)
        share.graph = data.graph.with_exchange(strategy)
        result = dt.train(copy.deepcopy(initial).to(data.x.device), share, epochs=epochs, warmup=warmup,
                          group=group)
        out[strategy] = {k: result[k] for k in ("epoch_ms", "bytes_per_epoch", "peak_memory_bytes", "losses")}
    return out


def _environment(device: torch.device, world: int) -> dict[str, Any]:
    from .runner import environment

    return {**environment(device), "world_size": world, "backend": dist.get_backend()}


def run(args: argparse.Namespace, device: torch.device, group: Any, ddp_group: Any = None,
        progress: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole measurement on this job's ranks (collective); the same document on every rank."""
    world = dist.get_world_size(group)
    begin = time.perf_counter()
    data = dt.load(args.graph, group=group, device=device, method=args.partition, num_features=args.features,
                   num_classes=args.classes, remote_fraction=args.remote_fraction, locality=args.locality,
                   seed=args.seed)
    report = data.graph.partition_report()
    progress(f"{args.graph}: {data.num_nodes} nodes, {data.num_edges} edges, W={world}, "
             f"built in {time.perf_counter() - begin:.1f} s; edge cut {100 * report.cut_fraction:.1f}%")
    timer = _Timer(device, group, args.reps, args.warmup)
    doc: dict[str, Any] = {
        "format": FORMAT, "environment": _environment(device, world),
        "config": {k: getattr(args, k) for k in ("graph", "partition", "features", "classes", "hidden", "epochs",
                                                 "warmup", "reps", "remote_fraction", "locality", "seed")},
        "world_size": world, "num_nodes": data.num_nodes, "num_edges": data.num_edges,
        "partition": report.to_dict(),
        # What the overlapped strategy exchanges: the halo, or all rows where it is dense.
        "overlap_exchange": ("all-gather" if data.graph.plan.dense else "halo") if data.graph.plan.active else "-",
    }
    doc["operator"] = _operator(data.graph, args.hidden, timer, group)
    progress(f"  operator: overlap {doc['operator']['overlap_train_ms']:.2f} ms, allgather "
             f"{doc['operator']['allgather_train_ms']:.2f} ms (forward+backward)")
    doc["layer"] = _layer(data, args.hidden, timer, group)
    progress(f"  layer: overlap {doc['layer']['overlap_ms']:.2f} ms, allgather {doc['layer']['allgather_ms']:.2f} ms")
    doc["epoch"] = _epochs(data, args.hidden, args.epochs, args.warmup, ddp_group if ddp_group is not None else group)
    progress(f"  epoch: overlap {doc['epoch']['overlap']['epoch_ms']:.2f} ms, allgather "
             f"{doc['epoch']['allgather']['epoch_ms']:.2f} ms")
    return doc


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def markdown(docs: list[dict[str, Any]]) -> str:
    """One table row per world size (epochs, layers, operator, exchange), strong scaling
    against the smallest world size, and the speedup over the naive all-gather baseline."""
    docs = sorted(docs, key=lambda d: d["world_size"])
    if not docs:
        return "no results\n"
    env, cfg = docs[0]["environment"], docs[0]["config"]
    base = docs[0]["epoch"]["overlap"]["epoch_ms"]
    locality = f", locality {cfg['locality']}" if cfg.get("locality") else ""
    lines = [f"# Distributed GCN ({env.get('gpu') or env['device']}, {env['backend']}): {cfg['graph']}{locality}, "
             f"{cfg['partition']} partition, F={cfg['features'] or 'default'}, hidden {cfg['hidden']}", "",
             f"| W | epoch ms | epoch allgather ms | x allgather | scaling vs W={docs[0]['world_size']} "
             f"| epoch MiB | allgather MiB | layer ms | layer allgather ms | aggregation fwd+bwd ms "
             f"| exchange hidden fwd | fwd+bwd | edge cut | max halo | edge imbalance | overlap exchanges |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: | --- |"]
    for d in docs:
        ep, layer, op, part = d["epoch"], d["layer"], d["operator"], d["partition"]
        hidden = [("-" if op.get(f"hidden_{p}") is None else f"{100 * op[f'hidden_{p}']:.0f}%")
                  for p in ("forward", "train")]
        lines.append(
            f"| {d['world_size']} | {_ms(ep['overlap']['epoch_ms'])} | {_ms(ep['allgather']['epoch_ms'])} | "
            f"{_ratio(ep['allgather']['epoch_ms'], ep['overlap']['epoch_ms'])} | "
            f"{_ratio(base, ep['overlap']['epoch_ms'])} | {_mib(ep['overlap']['bytes_per_epoch'])} | "
            f"{_mib(ep['allgather']['bytes_per_epoch'])} | {_ms(layer['overlap_ms'])} | "
            f"{_ms(layer['allgather_ms'])} | {_ms(op['overlap_train_ms'])} | {hidden[0]} | {hidden[1]} | "
            f"{100 * part['cut_fraction']:.1f}% | {max(part['halo'])} | {part['edge_imbalance']:.3f} | "
            f"{d.get('overlap_exchange', '-')} |")
    single = [d for d in docs if d["world_size"] == 1]
    if single:
        op, layer = single[0]["operator"], single[0]["layer"]
        lines += ["", "World size 1 against the single-GPU operators on the same graph (ratio > 1: slower):", "",
                  "| what | DistGraph ms | Graph ms | ratio |", "| --- | ---: | ---: | ---: |",
                  f"| aggregation forward | {_ms(op['overlap_forward_ms'])} | {_ms(op['single_forward_ms'])} | "
                  f"{_ratio(op['overlap_forward_ms'], op['single_forward_ms'])} |",
                  f"| aggregation forward+backward | {_ms(op['overlap_train_ms'])} | {_ms(op['single_train_ms'])} | "
                  f"{_ratio(op['overlap_train_ms'], op['single_train_ms'])} |",
                  f"| GCNConv forward+backward | {_ms(layer['overlap_ms'])} | {_ms(layer['single_ms'])} | "
                  f"{_ratio(layer['overlap_ms'], layer['single_ms'])} |"]
    peaks = [f"W={d['world_size']}: {max(d['epoch']['overlap']['peak_memory_bytes']) / 2**30:.2f}" for d in docs]
    lines += ["", f"Peak memory of the busiest rank during training (GiB): {', '.join(peaks)}."]
    return "\n".join(lines) + "\n"


def collect(out: Path) -> list[dict[str, Any]]:
    """Every ``distributed-w*.json`` under ``out``."""
    docs = [json.loads(p.read_text()) for p in sorted(out.glob("distributed-w*.json"))]
    return [d for d in docs if d.get("format") == FORMAT]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchrun --nproc-per-node W -m gsparse.bench.distributed",
                                description=__doc__.split("\n")[0])
    p.add_argument("--graph", default="products-like", help="a preset NAME[@SCALE] or papers100m-like[@SCALE]")
    p.add_argument("--partition", choices=METHODS, default="range")
    p.add_argument("--features", type=int, default=None, help="input features (default: the graph's)")
    p.add_argument("--classes", type=int, default=None)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--epochs", type=int, default=10, help="timed training epochs per strategy")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=20, help="timed repetitions of the operator and the layer")
    p.add_argument("--remote-fraction", type=float, default=0.1, help="papers100m-like: see the train script")
    p.add_argument("--locality", type=float, default=0.0, help="presets: see the train script")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench-out", help="directory of distributed-w{W}.json and distributed.md")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.epochs < 1 or args.reps < 1 or args.warmup < 0:
        parser().error("--epochs and --reps must be >= 1, --warmup >= 0")
    device, group = dt.init(args.backend)
    rank = dist.get_rank()
    doc = run(args, device, group, ddp_group=dist.group.WORLD,
              progress=print if rank == 0 else (lambda *_: None))
    if rank == 0:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"distributed-w{doc['world_size']}.json").write_text(json.dumps(doc, indent=1))
        table = markdown(collect(out))
        (out / "distributed.md").write_text(table)
        print(table)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
