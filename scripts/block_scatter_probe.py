"""GPU time of a sampled block's backward g-SpMM: atomic adds over the block's edges
(``gsparse._block_scatter``) against the reverse graph built and walked, on blocks of the
mini-batch benchmark's sizes.

On a GPU machine, from the repository root: ``PYTHONPATH=src python3 scripts/block_scatter_probe.py``.

Each variant (the block built from its edge list, then the gradient of its sources) is
captured in a CUDA graph and replayed, so the figures are device time alone: what a
replayed training step pays. The host's time to issue each variant eagerly is printed
beside it (median of fresh blocks, no synchronisation inside the timed span). Every
result is checked against the other variant's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import gsparse
from gsparse import Graph, _block_scatter


def edge_list(num_dst: int, fanout: int, num_src: int, gen: torch.Generator) -> torch.Tensor:
    """A sampler's block: ``fanout`` uniform sources a destination, sorted by destination."""
    dst = torch.arange(num_dst).repeat_interleave(fanout)
    src = torch.randint(0, num_src, (dst.numel(),), generator=gen)
    return torch.stack([src, dst]).cuda()


def variants(edges: torch.Tensor, num_src: int, num_dst: int, fanout: int, op: str,
             grad: torch.Tensor, weight: torch.Tensor | None):
    features = tuple(grad.shape[1:])

    def scatter() -> torch.Tensor:
        g = Graph.from_block(edges, num_src=num_src, num_dst=num_dst, dst_sorted=True, max_degree=fanout)
        return _block_scatter.scatter(g, op, grad, weight, features)

    def reverse() -> torch.Tensor:
        g = Graph.from_block(edges, num_src=num_src, num_dst=num_dst, dst_sorted=True, max_degree=fanout)
        return gsparse.gspmm(g.reverse(), op, "sum", grad, weight)

    return {"scatter": scatter, "reverse": reverse}


def replayed_ms(fn, repeats: int) -> tuple[float, torch.Tensor]:
    fn()  # kernels loaded, plans built for these sizes' tasks
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), out


def host_us(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        begin = time.perf_counter()
        fn()
        times.append((time.perf_counter() - begin) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}")
    print("| block | op | features | scatter (ms) | reverse (ms) | reverse / scatter | "
          "host, scatter (us) | host, reverse (us) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    # the benchmark's blocks: 1024 seeds with 25 sources each, those with 10 each
    for name, num_dst, fanout, num_src in (("inner 25.6K edges", 1024, 25, 26_624),
                                           ("outer 266K edges", 26_624, 10, 292_864)):
        edges = edge_list(num_dst, fanout, num_src, gen)
        for op, features in (("copy_lhs", 41), ("copy_lhs", 256), ("mul", 256), ("copy_lhs", 602)):
            grad = torch.randn(num_dst, features, device="cuda")
            weight = torch.rand(edges.shape[1], 1, device="cuda") if op == "mul" else None
            results = {}
            for variant, fn in variants(edges, num_src, num_dst, fanout, op, grad, weight).items():
                ms, out = replayed_ms(fn, args.repeats)
                results[variant] = (ms, out.clone(), host_us(fn, args.repeats))
            torch.testing.assert_close(results["scatter"][1], results["reverse"][1], rtol=1e-4, atol=1e-4)
            s, r = results["scatter"], results["reverse"]
            print(f"| {name} | {op} | {features} | {s[0]:.3f} | {r[0]:.3f} | {r[0] / s[0]:.2f}x | "
                  f"{s[2]:.0f} | {r[2]:.0f} |")


if __name__ == "__main__":
    main()
