"""Where a mini-batch training step spends its time: GPU kernels and host calls.

On a GPU machine, from the repository root:
``PYTHONPATH=src python3 scripts/minibatch_profile.py [--models gcn gat sage] [--steps 10]
[--workload reddit-like] [--seeds 1024] [--fanouts 25,10]``.

For each model, the benchmark's step (``python -m gsparse.bench.training --minibatch``:
by default reddit-like, 1024 seeds, fanouts [25, 10], fresh blocks every step) is run for gsparse and
for PyG (edge_index), from the same blocks. It prints, per step: the wall time, the GPU's
busy time (the sum of kernel durations in a torch-profiler trace), the kernel groups that
take it, and the host functions that take the most time, cumulative and their own
(cProfile, which inflates calls of small functions; compare the two libraries' lists with
that in mind).
The GPU busy time is the floor a faster host path could reach; the gap between it and the
wall time is host time the GPU waits for. ``--captured`` traces gsparse's step replayed
from a CUDA graph as well, as the benchmark runs it (its blocks copied into static buffers
first).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from gsparse.bench.minibatch import (
    MINIBATCH_FANOUTS,
    MINIBATCH_SEEDS,
    MINIBATCH_WORKLOAD,
    BlockModel,
    NeighborSampler,
    _captured_run,
    _minibatch_step,
    block_graphs,
    pyg_block_graphs,
)
from gsparse.bench.training import (
    _model_pair,
    _optimizer,
    _pyg,
    build_model,
    load_workload,
)


def _runs(kind, w):
    bipartite = kind == "sage"
    ours, theirs = _model_pair(kind, w, 0, one_graph=False)
    runs = {"gsparse": (BlockModel(ours, bipartite, fused_input=True),
                        lambda b: (lambda: block_graphs(b, bipartite)))}
    if theirs is not None:
        model = build_model(kind, _pyg(), w.x.shape[1], w.num_classes, one_graph=False).to(w.x.device)
        model.load_state_dict(theirs.state_dict())
        runs["pyg"] = (BlockModel(model, bipartite), lambda b: _given(pyg_block_graphs(b, bipartite, "edge_index")))
    return runs


def _given(built):
    return lambda: built


def _group(name: str) -> str:
    lowered = name.lower()
    for key, words in (("gemm", ("gemm", "cutlass", "sm90_xmma", "ampere_sgemm", "sm80_xmma")),
                       ("gsparse", ("gspmm", "gsddmm", "softmax_", "edge_softmax", "check_block",
                                    "spmm", "sddmm")),
                       ("dropout", ("fused_dropout", "bernoulli")),
                       ("index/gather", ("index", "gather")),
                       ("scatter", ("scatter",)),
                       ("sort/scan", ("sort", "scan", "cub::")),
                       ("adam", ("adam", "multi_tensor")),
                       ("reduce", ("reduce",)),
                       ("elementwise", ("elementwise", "vectorized"))):
        if any(word in lowered for word in words):
            return key
    return "other"


def _timed(fn) -> float:
    torch.cuda.synchronize()
    begin = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - begin) * 1e3


def _orders(runs, opts, w, sampler, gen, seeds: int, steps: int) -> None:
    """Step times of each library in three orders over the same blocks: its steps back to
    back; each step after the sampler; and the benchmark's order (sampler, then every
    library's step on the blocks). Host-bound steps slow down when other work evicts the
    host's caches in between."""
    walls: dict[tuple[str, str], list[float]] = {}
    for _ in range(3):  # warm-up of the sampler and both libraries
        blocks = sampler.sample(_seeds(w, gen, seeds))
        for name, (model, graphs) in runs.items():
            _minibatch_step(model, opts[name], w.x, w.y, blocks, graphs(blocks))
    presampled = [sampler.sample(_seeds(w, gen, seeds)) for _ in range(steps)]
    for name, (model, graphs) in runs.items():
        for blocks in presampled:
            walls.setdefault(("back to back", name), []).append(_timed(
                lambda b=blocks, m=model, g=graphs, o=opts[name]: _minibatch_step(m, o, w.x, w.y, b, g(b))))
        for _ in range(steps):
            blocks = sampler.sample(_seeds(w, gen, seeds))
            walls.setdefault(("after the sampler", name), []).append(_timed(
                lambda b=blocks, m=model, g=graphs, o=opts[name]: _minibatch_step(m, o, w.x, w.y, b, g(b))))
    for _ in range(steps):
        blocks = sampler.sample(_seeds(w, gen, seeds))
        for name, (model, graphs) in runs.items():
            walls.setdefault(("interleaved", name), []).append(_timed(
                lambda b=blocks, m=model, g=graphs, o=opts[name]: _minibatch_step(m, o, w.x, w.y, b, g(b))))
    for (order, name), times in walls.items():
        print(f"   order {order:18s} {name:8s} median {statistics.median(times):6.2f} ms "
              f"(range {min(times):.2f}-{max(times):.2f})")


def _seeds(w, gen, count: int) -> torch.Tensor:
    return w.train_idx[torch.randperm(w.train_idx.numel(), generator=gen)[:count].to(w.x.device)]


def _trace(label: str, steps_fn, steps: int, walls: list[float]) -> None:
    """Print the wall time, the GPU's busy time and its kernel groups over ``steps`` steps
    that ``steps_fn`` runs, from a torch-profiler trace (kernels replayed from a CUDA graph
    included)."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        steps_fn()
        torch.cuda.synchronize()
    kernels: dict[str, float] = {}
    groups: dict[str, float] = {}
    runtime: dict[str, float] = {}
    launches = 0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CPU and event.name.startswith(("cuda", "cu")):
            runtime[event.name] = runtime.get(event.name, 0.0) + event.cpu_time_total
        # A user annotation (``Optimizer.step#Adam.step``) spans the GPU timeline from
        # its first kernel to its last, idle gaps included: it is no kernel.
        if (event.device_type == torch.autograd.DeviceType.CUDA and event.device_time > 0
                and not event.is_user_annotation):
            kernels[event.name] = kernels.get(event.name, 0.0) + event.device_time
            groups[_group(event.name)] = groups.get(_group(event.name), 0.0) + event.device_time
            launches += 1
    busy = sum(kernels.values()) / steps / 1e3
    print(f"\n== {label}: wall {statistics.median(walls):.2f} ms per step "
          f"(range {min(walls):.2f}-{max(walls):.2f}), GPU busy {busy:.2f} ms, "
          f"{launches / steps:.0f} kernels per step")
    for group, us in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"   {group:14s} {us / steps / 1e3:7.3f} ms")
    for kernel, us in sorted(kernels.items(), key=lambda kv: -kv[1])[:12]:
        print(f"     {us / steps:8.1f} us  {kernel[:110]}")
    for call, us in sorted(runtime.items(), key=lambda kv: -kv[1])[:8]:
        print(f"   runtime {call:32s} {us / steps:8.1f} us per step")


def _captured(kind: str, w, sampler, gen, seeds: int, fanouts: tuple[int, int], warmup: int, steps: int) -> None:
    """The benchmark's captured gsparse step (``_captured_run``: blocks copied into static
    buffers, the step replayed from a CUDA graph), traced like the eager ones."""
    bipartite = kind == "sage"
    ours, _ = _model_pair(kind, w, 0, one_graph=False)
    _, run = _captured_run(BlockModel(ours, bipartite, fused_input=True), w, seeds, max(fanouts), bipartite)
    replays = [run(sampler.sample(_seeds(w, gen, seeds))) for _ in range(warmup + steps)]
    for replay in replays[:warmup]:
        replay()
    walls = [_timed(replay) for replay in replays[warmup:]]
    _trace(f"{kind} / gsparse captured", lambda: [replay() for replay in replays[warmup:]], steps, walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["gcn", "gat", "sage"])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--no-trace", action="store_true", help="no trace of the eager steps: their times in three orders only")
    parser.add_argument("--captured", action="store_true",
                        help="also trace gsparse's step replayed from a CUDA graph, as the benchmark runs it")
    parser.add_argument("--workload", default=MINIBATCH_WORKLOAD)
    parser.add_argument("--seeds", type=int, default=MINIBATCH_SEEDS)
    parser.add_argument("--fanouts", default=",".join(map(str, MINIBATCH_FANOUTS)))
    args = parser.parse_args()
    fanouts = tuple(int(f) for f in args.fanouts.split(","))
    device = torch.device("cuda")
    w = load_workload(args.workload, device)
    seeds = args.seeds
    sampler = NeighborSampler(w.graph, fanouts)
    gen = torch.Generator().manual_seed(0)
    for kind in args.models:
        runs = _runs(kind, w)
        opts = {name: _optimizer(model) for name, (model, _) in runs.items()}
        print(f"\n== {kind}: step times by order")
        _orders(runs, opts, w, sampler, gen, seeds, args.steps)
        if args.captured:
            _captured(kind, w, sampler, gen, seeds, fanouts, args.warmup, args.steps)
            torch.cuda.empty_cache()
        if args.no_trace:
            continue
        block_list = [sampler.sample(_seeds(w, gen, seeds)) for _ in range(args.warmup + args.steps)]
        torch.cuda.synchronize()
        for name, (model, graphs) in runs.items():
            feeds = [graphs(b) for b in block_list]

            def step(i: int, model=model, opt=opts[name], feeds=feeds, blocks=block_list) -> None:
                _minibatch_step(model, opt, w.x, w.y, blocks[i], feeds[i])

            for i in range(args.warmup):
                step(i)
            torch.cuda.synchronize()
            walls = []
            for i in range(args.warmup, args.warmup + args.steps):
                begin = time.perf_counter()
                step(i)
                torch.cuda.synchronize()
                walls.append((time.perf_counter() - begin) * 1e3)
            _trace(f"{kind} / {name}", lambda: [step(i) for i in range(args.warmup, args.warmup + args.steps)],
                   args.steps, walls)
            profiler = cProfile.Profile()
            profiler.enable()
            for i in range(args.warmup, args.warmup + args.steps):
                step(i)
            torch.cuda.synchronize()
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
            print(text.getvalue())
            del feeds
        del runs, opts
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
