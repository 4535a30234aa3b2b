"""Times gsparse.nn.gather_features against PyTorch's two kernels (index_select, then
F.dropout) on a mini-batch's input, in one process on the same inputs, and prints each
against the bytes it must move. Each is timed twice: called eagerly (CUDA events around the
call, the host's time to issue it included, as a training step without CUDA graphs sees
it) and replayed from a CUDA graph of that one call (the device's time alone).

    PYTHONPATH=src python3 scripts/gather_features_probe.py [--rows 150000] [--table 232965]

A step of the mini-batch benchmark gathers about 150K rows of Reddit's 602 features
(`n_id`, random rows of a 233K-row table) and drops out over them. The floor of either way
is one read and one write of the batch's features (2 * rows * F * itemsize bytes); PyTorch
moves them twice and writes a one-byte mask beside them.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F

from gsparse.nn import gather_features


def _replayed(fn):
    """``fn`` captured in a CUDA graph, as a function that replays it."""
    fn()  # loads the kernels before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _median_ms(fn, repeats: int = 50) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=150_000)
    parser.add_argument("--table", type=int, default=232_965)
    parser.add_argument("--features", type=int, nargs="+", default=[602, 128, 100, 32])
    args = parser.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(f"{'dtype':9} {'F':>4} {'floor GB':>9} {'timing':>8} | {'index_select':>12} {'+ dropout':>10} | "
          f"{'gather p=0':>10} {'gather p=.5':>11} | {'speedup':>7} {'GB/s fused':>10}")
    for dtype in (torch.float32, torch.bfloat16):
        for features in args.features:
            x = torch.randn(args.table, features, device="cuda", generator=gen).to(dtype)
            n_id = torch.randperm(args.table, device="cuda", generator=gen)[:args.rows]
            floor = 2 * args.rows * features * x.itemsize / 1e9
            calls = (lambda: torch.index_select(x, 0, n_id),
                     lambda: F.dropout(torch.index_select(x, 0, n_id), 0.5, True),
                     lambda: gather_features(x, n_id, 0.0),
                     lambda: gather_features(x, n_id, 0.5))
            for timing, wrap in (("eager", lambda fn: fn), ("replayed", _replayed)):
                select, two, plain, fused = (_median_ms(wrap(fn)) for fn in calls)
                print(f"{str(dtype).removeprefix('torch.'):9} {features:4d} {floor:9.3f} {timing:>8} | "
                      f"{select:12.3f} {two:10.3f} | {plain:10.3f} {fused:11.3f} | {two / fused:6.2f}x "
                      f"{floor / fused * 1e3:10.0f}")


if __name__ == "__main__":
    main()
