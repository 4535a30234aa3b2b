"""Times gsparse.nn.gather_features against PyTorch's two kernels (index_select, then
F.dropout) on a mini-batch's input, in one process on the same inputs, and prints each
against the bytes it must move. Each is timed twice with the project's timing
(:func:`gsparse.tune.measure.time_calls`, the median of repeats after a warm-up): as called
("eager": CUDA events around the call, the host's time to issue it included, as a training
step without CUDA graphs sees it) and with the host's time hidden ("device": the device
held while the calls are enqueued, so that the events hold the kernels alone).

    PYTHONPATH=src python3 scripts/gather_features_probe.py [--rows 150000] [--table 232965]

Last, the host's time to issue each call on a small input (1,000 rows of 64 features out of
2,708, Cora's size): the wall time of 3,000 calls between two synchronisations, where the
kernels take less than the host.

A step of the mini-batch benchmark gathers about 150K rows of Reddit's 602 features
(`n_id`, random rows of a 233K-row table) and drops out over them. The floor of either way
is one read and one write of the batch's features (2 * rows * F * itemsize bytes); PyTorch
moves them twice and writes a one-byte mask beside them.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from gsparse.nn import gather_features
from gsparse.tune.measure import time_calls


def _median_ms(fn, hide_host: bool) -> float:
    return time_calls(fn, [()], torch.device("cuda"), budget_s=0.2, min_repeats=30,
                      hide_host=hide_host).median_ms


def _host_us(fn, calls: int = 3_000) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - begin) / calls * 1e6


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
            for timing, hide_host in (("eager", False), ("device", True)):
                select, two, plain, fused = (_median_ms(fn, hide_host) for fn in calls)
                print(f"{str(dtype).removeprefix('torch.'):9} {features:4d} {floor:9.3f} {timing:>8} | "
                      f"{select:12.3f} {two:10.3f} | {plain:10.3f} {fused:11.3f} | {two / fused:6.2f}x "
                      f"{floor / fused * 1e3:10.0f}")
    x = torch.randn(2_708, 64, device="cuda", generator=gen)
    n_id = torch.randint(0, 2_708, (1_000,), device="cuda", generator=gen)
    print("host us per call (1,000 rows of 64 features):")
    for name, fn in (("index_select", lambda: torch.index_select(x, 0, n_id)),
                     ("index_select + F.dropout", lambda: F.dropout(torch.index_select(x, 0, n_id), 0.5, True)),
                     ("gather_features p=0", lambda: gather_features(x, n_id, 0.0)),
                     ("gather_features p=0.5", lambda: gather_features(x, n_id, 0.5))):
        print(f"  {name:26s} {min(_host_us(fn) for _ in range(3)):6.1f}")


if __name__ == "__main__":
    main()
