"""Where ``Graph.from_block``'s time goes on a sampled block, on a GPU.

Run from the repository root on a GPU machine::

    PYTHONPATH=src python3 scripts/block_build_profile.py [--edges 141000] [--cprofile]

The block is ``scripts/minibatch_check.py``'s (14,100 destinations with 10 sources each out
of 160,000, int64 as a sampler hands it over), sorted by destination and shuffled; built
with its bound (``max_degree``, the fanout: a shuffled block is then bucketed), without it
(sorted), and without checks. For the build and for each of its steps alone, on the same
tensors, three figures in microseconds per call:

- ``wall``: many calls between two synchronisations (what ``minibatch_check.py`` reports:
  the larger of the host's and the device's time);
- ``host``: the host time of one call, nothing waited for inside it (the median; the queue
  is drained every 20 calls, outside the timed spans);
- ``device``: the kernels' time per call, from the profiler.

The four builds a training step would make (sorted with the bound, shuffled with it:
bucketed, shuffled without it: sorted, and unchecked) come first, interleaved over
``--rounds`` rounds, since a GPU machine's host speed drifts within a run.

``--cprofile`` adds the Python functions of the shuffled build with checks by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from gsparse import Graph
from gsparse import _block_checks as block_checks
from gsparse import _graph_build as build
from gsparse._graph_build import offsets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from minibatch_check import per_call_us as wall_us, sampled_block  # noqa: E402  the same block and timer


def _block(shuffle: bool, edges: int):
    """``minibatch_check.py``'s block of ``edges`` edges, 10 a destination."""
    return sampled_block(shuffle, num_dst=edges // 10)


def host_us(fn: Callable[[], object], calls: int = 400) -> float:
    times = []
    for index in range(calls):
        begin = time.perf_counter()
        fn()
        times.append(time.perf_counter() - begin)
        if index % 20 == 19:
            torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def device_us(fn: Callable[[], object], calls: int = 50) -> tuple[float, list[tuple[str, float]]]:
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels: dict[str, float] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels[event.name] = kernels.get(event.name, 0.0) + event.device_time / calls
    total = sum(kernels.values())
    return total, sorted(kernels.items(), key=lambda item: -item[1])


def compare_builds(edges: int, rounds: int) -> None:
    """The builds a step would make, interleaved round by round (a GPU machine's host speed
    drifts within a run): wall and host microseconds per call, median [lowest, highest] of
    the rounds."""
    sorted_block, shuffled_block = _block(False, edges), _block(True, edges)
    builds = {
        "sorted, bound": (sorted_block, dict(dst_sorted=True, max_degree=sorted_block[3])),
        "shuffled, bound (bucketed)": (shuffled_block, dict(max_degree=shuffled_block[3])),
        "shuffled, no bound (sorted)": (shuffled_block, {}),
        "shuffled, no bound, no checks": (shuffled_block, dict(check=False)),
    }
    walls: dict[str, list[float]] = {name: [] for name in builds}
    hosts: dict[str, list[float]] = {name: [] for name in builds}
    for _ in range(rounds):
        for name, ((ei, ns, nd, _), options) in builds.items():
            fn = functools.partial(Graph.from_block, ei, num_src=ns, num_dst=nd, **options)
            walls[name].append(wall_us(fn, calls=200, rounds=1))
            hosts[name].append(host_us(fn, calls=200))
    for name in builds:
        w, h = sorted(walls[name]), sorted(hosts[name])
        print(f"build {name:30s} wall {statistics.median(w):7.1f} [{w[0]:.1f}, {w[-1]:.1f}]  "
              f"host {statistics.median(h):7.1f} [{h[0]:.1f}, {h[-1]:.1f}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=141_000)
    parser.add_argument("--rounds", type=int, default=7, help="of the interleaved builds")
    parser.add_argument("--cprofile", action="store_true")
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    compare_builds(args.edges, args.rounds)
    for shuffle in (False, True):
        ei, ns, nd, fanout = _block(shuffle, args.edges)
        idx = ei.to(torch.int32).contiguous()
        src, dst = idx[0], idx[1]
        sorted_dst, order = torch.sort(dst, stable=True)
        csr, _, csr_dst = build.block_from_edge_index(ei, ns, nd, not shuffle, fanout, False)
        label = "shuffled" if shuffle else "sorted"
        steps: dict[str, Callable[[], object]] = {
            "from_block, checks": lambda: Graph.from_block(
                ei, num_src=ns, num_dst=nd, dst_sorted=not shuffle, max_degree=fanout),
            "from_block, no bound": lambda: Graph.from_block(
                ei, num_src=ns, num_dst=nd, dst_sorted=not shuffle),
            "from_block, no checks": lambda: Graph.from_block(
                ei, num_src=ns, num_dst=nd, dst_sorted=not shuffle, check=False),
            "to int32": lambda: ei.to(torch.int32).contiguous(),
            "check kernel": lambda: block_checks.check_edges(ei, sorted_dst, ns, nd, fanout),
            "offsets": lambda: offsets(sorted_dst, nd),
            "CSR parts, no checks": lambda: build.block_from_edge_index(
                ei, ns, nd, not shuffle, fanout, False),
            "Graph of the parts": lambda: Graph._made(csr, sync_free=True, max_degree=fanout,
                                                      csr_dst=csr_dst),
        }
        if not shuffle:
            steps["sorted_edges"] = lambda: block_checks.sorted_edges(ei, ns, nd, fanout, torch.int32)
        if shuffle:
            steps.update({
                "bucket_edges": lambda: block_checks.bucket_edges(ei, ns, nd, fanout, torch.int32),
                "sort int32 keys": lambda: torch.sort(dst, stable=True),
                "sort int64 keys": lambda: torch.sort(ei[1], stable=True),
                "sort int16 keys": lambda: torch.sort(dst.to(torch.int16), stable=True),
                "argsort int32 keys": lambda: torch.argsort(dst, stable=True),
                "index_select": lambda: src.index_select(0, order),
                "order to int32": lambda: order.to(torch.int32),
            })
        for name, fn in steps.items():
            device, kernels = device_us(fn)
            print(f"{label:9s} {name:24s} wall {wall_us(fn, calls=200):8.1f}  host {host_us(fn):8.1f}  "
                  f"device {device:8.1f}  kernels {len(kernels)}")
            if name.startswith("from_block") or name.startswith("sort"):
                for kernel, us in kernels:
                    print(f"{'':12s}{us:8.2f} us  {kernel[:110]}")
        if shuffle and args.cprofile:
            run = steps["from_block, checks"]
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(200):
                run()
            profiler.disable()
            torch.cuda.synchronize()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
