"""Where the host time of a g-SpMM's first call on a fresh sampled block goes, stage by stage,
without a profiler's distortion (cProfile inflates small calls several times over).

On a GPU machine, from the repository root: ``PYTHONPATH=src python3 scripts/bind_stages.py``;
``--cpu-mock`` runs the CUDA backend's host path on CPU tensors (``tests/cuda_path.py``).

Each stage is timed by ``time.perf_counter`` around the same functions the front end
calls, in order, on a new block each time (the median over ``--blocks`` blocks, in
microseconds): the front end's whole first call; the backend's bind
(``_calls.resolve_spmm``), and inside it the task, the schedule's choice, the plan (its
launch prepared) and the run's closures; the call's record; then a repeated call.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

import gsparse
from gsparse import Graph, _calls
from gsparse.kernels import spmm as spmm_kernels
from gsparse.tune import select

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def fresh_block(seeds: int, fanout: int, num_src: int, device: str, gen: torch.Generator) -> Graph:
    dst = torch.arange(seeds).repeat_interleave(fanout)
    src = torch.randint(0, num_src, (dst.numel(),), generator=gen)
    return Graph.from_block(torch.stack([src, dst]).to(device), num_src=num_src, num_dst=seeds,
                            dst_sorted=True, max_degree=fanout)


def stages(g: Graph, x: torch.Tensor) -> dict[str, float]:
    """One block's stages, each timed alone (a stage's result feeds the next)."""
    clock = time.perf_counter
    times = {}
    t0 = clock()
    task = spmm_kernels.task_for(g, "copy_lhs", "sum", x, None, tuple(x.shape[1:]))
    t1 = clock()
    schedule = select.choose("spmm", g, task, lambda s: None)
    t2 = clock()
    plan = spmm_kernels._plan(g, task, schedule)
    t3 = clock()
    plan.positional("lhs", "rhs", "out", "arg_u", "arg_e")
    t4 = clock()
    times.update(task=t1 - t0, choose=t2 - t1, plan=t3 - t2, positional=t4 - t3)
    return times


def run(args: argparse.Namespace, device: str, sync) -> None:
    gen = torch.Generator().manual_seed(0)
    make = lambda: fresh_block(args.seeds, args.fanout, args.num_src, device, gen)  # noqa: E731
    x = torch.randn(args.num_src, args.features, device=device)
    warm = make()
    gsparse.gspmm(warm, "copy_lhs", "sum", x)  # kernels loaded
    sync()
    rows: dict[str, list[float]] = {}

    def keep(name: str, seconds: float) -> None:
        rows.setdefault(name, []).append(seconds * 1e6)

    for _ in range(args.blocks):
        g = make()
        sync()
        t0 = time.perf_counter()
        gsparse.gspmm(g, "copy_lhs", "sum", x)
        t1 = time.perf_counter()
        gsparse.gspmm(g, "copy_lhs", "sum", x)
        t2 = time.perf_counter()
        keep("first call, whole", t1 - t0)
        keep("repeated call", t2 - t1)
        g = make()
        sync()
        t0 = time.perf_counter()
        run_ = _calls.resolve_spmm(g, "copy_lhs", "sum", x, None, tuple(x.shape[1:]))
        t1 = time.perf_counter()
        _calls.Call(g, run_, (None, False), tuple(x.shape[1:]), ("copy_lhs", "sum"))
        t2 = time.perf_counter()
        keep("bind (resolve_spmm)", t1 - t0)
        keep("call record", t2 - t1)
        g = make()
        sync()
        for name, seconds in stages(g, x).items():
            keep(f"  bind stage: {name}", seconds)
        g = make()
        sync()
        t0 = time.perf_counter()
        g.stats
        t1 = time.perf_counter()
        keep("  of choose: g.stats", t1 - t0)
        sync()
    print(f"device: {device}{' (mocked launches)' if args.cpu_mock else ''}; blocks of {args.seeds} rows x "
          f"{args.fanout} edges, {args.num_src} sources, {args.features} features; median of {args.blocks}")
    for name, values in rows.items():
        print(f"{name}: {statistics.median(values):.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-mock", action="store_true")
    parser.add_argument("--blocks", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=1024)
    parser.add_argument("--fanout", type=int, default=25)
    parser.add_argument("--num-src", type=int, default=20_000)
    parser.add_argument("--features", type=int, default=64)
    args = parser.parse_args()
    if args.cpu_mock:
        from cuda_path import cuda_path_on_cpu

        context, device, sync = cuda_path_on_cpu(), "cpu", lambda: None
        torch.set_num_threads(1)
    else:
        context, device, sync = contextlib.nullcontext(), "cuda", torch.cuda.synchronize
    with context:
        run(args, device, sync)


if __name__ == "__main__":
    main()
