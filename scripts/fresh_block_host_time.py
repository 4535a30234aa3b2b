"""Host time of the first calls on a fresh sampled block (``Graph.from_block``), what a
mini-batch step pays for every block it builds.

On a GPU machine, from the repository root:
``PYTHONPATH=src python3 scripts/fresh_block_host_time.py [--blocks 40] [--profile]``.
Without a GPU, ``--cpu-mock`` runs the CUDA backend's host path on CPU tensors with
launches that do nothing (``tests/cuda_path.py``; a block's checks are one such launch,
as on a GPU), on smaller blocks (``--seeds 32 --fanouts 4 3`` unless given), where the
tensor work is as cheap as a GPU's launches.

Blocks are built ahead, sorted by destination as a neighbour sampler emits them: the
outer block of a two-layer step (``seeds`` destinations with ``fanouts[0]`` sources each,
their sources with ``fanouts[1]`` each; square on every node, as GCN and GAT take it, and
bipartite for SAGE). Every figure is host microseconds (no synchronisation inside the
timed span; the median over ``--blocks`` blocks):

- ``bind``: per operator, its first call on a fresh block less a repeated call on the same
  block (``first`` and ``resolved`` are printed too): the task, schedule, plan and bound
  launch that a fresh graph resolves;
- ``layer``: forward and backward of a GCN, GAT and SAGE layer on a fresh block, on a block
  it has run on before, and the difference: what the layer builds per block (normalised
  graph, self loops, binds); on a GPU with torch_geometric, PyG's same layer on the same
  blocks' edge lists beside it;
- ``torch ops``: the torch functions a layer's fresh forward and backward call from Python,
  less those of a repeated one, of those the ones that are not reads of a tensor's
  metadata (``.shape``, ``.device``, ``numel()``, ...), and of those the ones that are not
  views either (a reshape, a slice, ``contiguous()`` of a contiguous tensor): on a GPU each
  of these is a kernel launch or an allocation. The backward's own calls are counted (the
  autograd engine is run inside the counting mode). ``calls resolved``: the operator calls a layer resolves on the new
  graphs (each a ``bind``);
- ``step``: the mini-batch benchmark's step (``gsparse.bench.minibatch``: its two-layer
  models, of ``--hidden`` and ``--heads`` here) less the optimizer, on a fresh pair of
  blocks every step: both graphs built with ``Graph.from_block``, the feature gather,
  forward, loss and backward. Host time, torch calls (as for ``torch ops``), operator calls
  resolved and the autograd nodes the backward runs, per step.

Output lines are ``name: value`` with a stable format, so that two runs can be compared.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import functools
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F

import gsparse
from gsparse import Graph, _calls, nn as gnn
from gsparse.bench.minibatch import BlockModel, Blocks, block_graphs
from gsparse.bench.training import DROPOUT, TwoLayer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cuda_path import (  # noqa: E402
    TorchCalls,
    autograd_nodes,
    backward_counted,
    block_checks_on_gpu,
    cuda_path_on_cpu,
    step_blocks,
)


class _NoLaunch:
    """A kernel loader whose launches do nothing (the block scatter's, modelled by
    ``cuda_path``, record their names in ``order``, which this one keeps short)."""

    def __init__(self) -> None:
        self.order = collections.deque(maxlen=1)

    def kernel(self, program, name, device_index):
        return self

    def prepare(self, grid, block, args, *, shared_bytes=0, context=""):
        return lambda *operands, stream=None, grid=None: None


def block(seeds: int, fanouts: tuple[int, int], bipartite: bool, device: str,
          gen: torch.Generator) -> tuple[Graph, int, int]:
    """A fresh outer block: ``(graph, num_src, num_dst)``."""
    n1 = seeds * (1 + fanouts[0])
    n0 = n1 * (1 + fanouts[1])
    degree = torch.cat([torch.full((seeds,), fanouts[0]), torch.full((n1 - seeds,), fanouts[1])])
    dst = torch.repeat_interleave(torch.arange(n1), degree)
    src = torch.randint(0, n0, (dst.numel(),), generator=gen)
    num_dst = n1 if bipartite else n0
    edge_index = torch.stack([src, dst]).to(device)
    g = Graph.from_block(edge_index, num_src=n0, num_dst=num_dst, dst_sorted=True,
                         max_degree=max(fanouts))
    return g, n0, num_dst


def _two_layer(kind: str, features: int, hidden: int, heads: int, classes: int) -> TwoLayer:
    """``gsparse.bench.training.build_model``'s model of ``kind``, of these sizes."""
    if kind == "gcn":
        return TwoLayer(gnn.GCNConv(features, hidden), gnn.GCNConv(hidden, classes), F.relu)
    if kind == "gat":
        return TwoLayer(gnn.GATConv(features, hidden // heads, heads=heads, dropout=DROPOUT),
                        gnn.GATConv(hidden, classes, heads=1, concat=False, dropout=DROPOUT), F.elu)
    return TwoLayer(gnn.SAGEConv(features, hidden), gnn.SAGEConv(hidden, classes), F.relu)


def _step(model: BlockModel, kind: str, x: torch.Tensor, y: torch.Tensor, blocks: Blocks,
          counted: bool = False) -> int:
    """The benchmark's step less the optimizer (``gsparse.bench.minibatch._minibatch_step``);
    with ``counted``, the backward's torch calls are seen by the modes around it, and it
    returns the autograd nodes the backward runs (0 otherwise)."""
    out = model(x[blocks.n_id], block_graphs(blocks, kind == "sage"), blocks.sizes)
    loss = F.cross_entropy(out, y[blocks.n_id[: blocks.sizes[0]]])
    if not counted:
        loss.backward()
        return 0
    nodes = autograd_nodes(loss)
    backward_counted(loss)
    return nodes


def run_steps(args: argparse.Namespace, device: str, sync: Callable[[], None]) -> dict[str, str]:
    """The ``step`` lines: host time, torch calls and resolved calls per step."""
    gen = torch.Generator().manual_seed(1)
    fanouts = tuple(args.fanouts)
    nodes, classes = 8 * args.seeds * (1 + fanouts[0]) * (1 + fanouts[1]), 8
    x = torch.randn(nodes, args.features, device=device)
    y = torch.randint(0, classes, (nodes,), device=device)
    report = {}
    for kind in ("gcn", "gat", "sage"):
        torch.manual_seed(0)
        model = BlockModel(_two_layer(kind, args.features, args.hidden, args.heads, classes),
                           kind == "sage").to(device).train()
        steps = [step_blocks(args.seeds, fanouts, device, gen, nodes) for _ in range(args.blocks + 2)]
        _step(model, kind, x, y, steps[0])  # kernels compiled and loaded
        times = []
        for blocks in steps[2:]:
            model.zero_grad(set_to_none=True)
            sync()
            times.append(_host_us(functools.partial(_step, model, kind, x, y, blocks)))
            sync()
        model.zero_grad(set_to_none=True)
        with _binds_counted() as binds, TorchCalls() as counted:
            autograd = _step(model, kind, x, y, steps[1], counted=True)
        report[f"step {kind}"] = (f"{statistics.median(times):.1f} us, {counted.count} torch calls, "
                                  f"{counted.launching} not metadata reads, {counted.kernels} not views "
                                  f"either, {len(binds)} calls resolved, {autograd} autograd nodes")
    return report


@contextlib.contextmanager
def _binds_counted() -> Iterator[list[str]]:
    """The operator calls resolved meanwhile (``gsparse._calls._bind``), by the name of
    their backend function, in the list yielded."""
    bind, binds = _calls._bind, []

    def counted(*args):
        binds.append(args[1])
        return bind(*args)

    _calls._bind = counted
    try:
        yield binds
    finally:
        _calls._bind = bind


def _print_profile(profile: cProfile.Profile, calls: int, rows: int = 30) -> None:
    """The functions of ``profile`` by their own time, in microseconds per one of ``calls``
    (pstats prints milliseconds at best, too coarse for one bind)."""
    stats = pstats.Stats(profile).stats
    by_own = sorted(stats.items(), key=lambda item: -item[1][2])
    print(f"{'own us':>8} {'cum us':>8} {'calls':>6}  function")
    for (path, line, function), (_, count, own, cumulative, _) in by_own[:rows]:
        print(f"{own * 1e6 / calls:8.1f} {cumulative * 1e6 / calls:8.1f} {count / calls:6.1f}  "
              f"{Path(path).name}:{line}({function})")


def _host_us(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def _operator_cases(g: Graph, features: int, heads: int) -> dict[str, Callable[[], object]]:
    device = g.device
    x = torch.randn(g.num_src, features, device=device)
    y = torch.randn(g.num_dst, features, device=device)
    w = torch.randn(g.num_edges, 1, device=device)
    s_src = torch.randn(g.num_src, heads, device=device)
    s_dst = torch.randn(g.num_dst, heads, device=device)
    logits = torch.randn(g.num_edges, heads, device=device)
    return {
        "gspmm copy_lhs sum": lambda: gsparse.gspmm(g, "copy_lhs", "sum", x),
        "gspmm mul sum": lambda: gsparse.gspmm(g, "mul", "sum", x, w),
        "gspmm copy_rhs sum": lambda: gsparse.gspmm(g, "copy_rhs", "sum", None, w),
        "gsddmm add u v": lambda: gsparse.gsddmm(g, "add", s_src, s_dst, "u", "v"),
        "gsddmm dot u v": lambda: gsparse.gsddmm(g, "dot", x[: g.num_dst] if g.num_src >= g.num_dst
                                                 else x, y, "u", "v"),
        "edge_softmax": lambda: gsparse.edge_softmax(g, logits),
    }


def _layers(features: int, hidden: int, heads: int) -> dict[str, tuple[torch.nn.Module, bool]]:
    return {"GCN": (gnn.GCNConv(features, hidden), False),
            "GAT": (gnn.GATConv(features, hidden // heads, heads=heads), False),
            "SAGE": (gnn.SAGEConv(features, hidden), True)}


def _pyg_layers(features: int, hidden: int, heads: int) -> dict[str, torch.nn.Module] | None:
    """PyG's layers of :func:`_layers`, or None without torch_geometric."""
    try:
        import torch_geometric.nn as pyg_nn
    except ImportError:
        return None
    return {"GCN": pyg_nn.GCNConv(features, hidden), "GAT": pyg_nn.GATConv(features, hidden // heads, heads=heads),
            "SAGE": pyg_nn.SAGEConv(features, hidden)}


def _layer_step(module: torch.nn.Module, bipartite: bool, g: Graph, x: torch.Tensor,
                counted: bool = False) -> None:
    out = module((x, x[: g.num_dst]), g) if bipartite else module(x, g)
    if counted:  # the backward's torch calls seen by the counting mode
        backward_counted(out.sum())
    else:
        out.sum().backward()


def run(args: argparse.Namespace, device: str, sync: Callable[[], None]) -> None:
    gen = torch.Generator().manual_seed(0)
    fanouts = tuple(args.fanouts)
    report: dict[str, str] = {}

    # Warm-up: one block of each kind runs everything once (kernels compiled and loaded).
    square = [block(args.seeds, fanouts, False, device, gen)[0] for _ in range(args.blocks + 1)]
    bipartite = [block(args.seeds, fanouts, True, device, gen)[0] for _ in range(args.blocks + 1)]
    sync()
    for name in _operator_cases(square[0], args.features, args.heads):
        _operator_cases(square[0], args.features, args.heads)[name]()
    for name, (module, bip) in _layers(args.features, args.hidden, args.heads).items():
        g = (bipartite if bip else square)[0]
        x = torch.randn(g.num_src, args.features, device=device, requires_grad=True)
        _layer_step(module.to(device), bip, g, x)
    sync()

    for name in _operator_cases(square[0], args.features, args.heads):
        first, resolved = [], []
        for g in square[1:]:
            case = _operator_cases(g, args.features, args.heads)[name]
            sync()
            first.append(_host_us(case))
            resolved.append(_host_us(case))
            sync()
        f, r = statistics.median(first), statistics.median(resolved)
        report[f"bind {name}"] = f"{f - r:.1f} us (first {f:.1f}, resolved {r:.1f})"
        if args.profile:
            graphs = [block(args.seeds, fanouts, False, device, gen)[0] for _ in range(args.blocks)]
            cases = [_operator_cases(g, args.features, args.heads)[name] for g in graphs]
            sync()
            profile = cProfile.Profile()
            profile.enable()
            for case in cases:
                case()
            profile.disable()
            sync()
            print(f"--- profile of {name}'s first call on a fresh block, us per call")
            _print_profile(profile, len(cases))

    for name, (module, bip) in _layers(args.features, args.hidden, args.heads).items():
        module = module.to(device)
        fresh, seen = [], []
        for g in (bipartite if bip else square)[1:]:
            x = torch.randn(g.num_src, args.features, device=device, requires_grad=True)
            sync()
            fresh.append(_host_us(lambda: _layer_step(module, bip, g, x)))
            seen.append(_host_us(lambda: _layer_step(module, bip, g, x)))
            sync()
        g = (bipartite if bip else square)[0]
        x = torch.randn(g.num_src, args.features, device=device, requires_grad=True)
        fresh_g = block(args.seeds, fanouts, bip, device, gen)[0]
        x_fresh = torch.randn(fresh_g.num_src, args.features, device=device, requires_grad=True)
        with _binds_counted() as binds, TorchCalls() as counted_fresh:
            _layer_step(module, bip, fresh_g, x_fresh, counted=True)
        with TorchCalls() as counted_seen:
            _layer_step(module, bip, fresh_g, x_fresh, counted=True)
        f, s = statistics.median(fresh), statistics.median(seen)
        report[f"layer {name} forward+backward"] = (f"{f - s:.1f} us per fresh block (fresh {f:.1f}, "
                                                    f"seen {s:.1f})")
        report[f"torch ops {name}"] = (
            f"{counted_fresh.count - counted_seen.count} per fresh block, "
            f"{counted_fresh.launching - counted_seen.launching} not metadata reads "
            f"(fresh {counted_fresh.count}/{counted_fresh.launching}, "
            f"seen {counted_seen.count}/{counted_seen.launching}), "
            f"{counted_fresh.kernels - counted_seen.kernels} not views either")
        report[f"calls resolved {name}"] = f"{len(binds)} per fresh block"
        theirs = None if args.cpu_mock else _pyg_layers(args.features, args.hidden, args.heads)
        if theirs is not None:  # the same layer of PyG on the same blocks' edge lists
            layer, times = theirs[name].to(device), []
            for g in (bipartite if bip else square)[1:]:
                edge_index, x = g.edge_index, torch.randn(g.num_src, args.features, device=device,
                                                          requires_grad=True)
                inputs = (x, x[: g.num_dst]) if bip else x
                sync()
                times.append(_host_us(lambda: layer(inputs, edge_index).sum().backward()))
                sync()
            report[f"layer {name} forward+backward, PyG"] = (f"{statistics.median(times):.1f} us on "
                                                             f"the same blocks (gsparse: fresh {f:.1f})")
        if args.profile:
            profile = cProfile.Profile()
            graphs = [block(args.seeds, fanouts, bip, device, gen)[0] for _ in range(args.blocks)]
            xs = [torch.randn(g.num_src, args.features, device=device, requires_grad=True) for g in graphs]
            profile.enable()
            for g, x in zip(graphs, xs):
                _layer_step(module, bip, g, x)
            profile.disable()
            print(f"--- profile of {name} forward+backward on {args.blocks} fresh blocks")
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)

    report.update(run_steps(args, device, sync))
    sizes = block(args.seeds, fanouts, False, device, gen)[0]
    print(f"device: {device}{' (mocked launches)' if args.cpu_mock else ''}; square block "
          f"{sizes.num_src} nodes, {sizes.num_edges} edges; median of {args.blocks} fresh blocks")
    for name, value in report.items():
        print(f"{name}: {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-mock", action="store_true",
                        help="no GPU: the CUDA backend's host path on CPU tensors, launches doing nothing")
    parser.add_argument("--seeds", type=int, default=None, help="default 1024 (32 with --cpu-mock)")
    parser.add_argument("--fanouts", type=int, nargs=2, default=None,
                        help="default 25 10 (4 3 with --cpu-mock)")
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--profile", action="store_true", help="also profile each operator's first call and each layer on fresh blocks")
    args = parser.parse_args()
    small = args.cpu_mock
    args.seeds = args.seeds if args.seeds is not None else (32 if small else 1024)
    args.fanouts = args.fanouts if args.fanouts is not None else ([4, 3] if small else [25, 10])
    if args.cpu_mock:
        context, device, sync = contextlib.ExitStack(), "cpu", lambda: None
        context.enter_context(cuda_path_on_cpu(_NoLaunch()))
        context.enter_context(block_checks_on_gpu())  # one launch per block, as on a GPU
        # One thread: some CPU kernels (repeat_interleave) take milliseconds to wake a pool.
        torch.set_num_threads(1)
    else:
        context, device, sync = contextlib.nullcontext(), "cuda", torch.cuda.synchronize
    torch.manual_seed(0)
    with context:
        run(args, device, sync)


if __name__ == "__main__":
    main()
