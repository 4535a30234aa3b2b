"""Does the L2's fetch granularity from DRAM explain what F = 100 costs per feature?

    PYTHONPATH=src python3 scripts/fetch_granularity_probe.py [--scale 19] [--edge-factor 32]

Rows of 100 fp32 features are 400 bytes and start 16 bytes off a 32-byte sector on every
other row. Fetched from DRAM in 64-byte blocks, a random row costs 448 bytes (7 blocks)
against 384 for 96 features (6) and 512 for 128 (8): 4.48 bytes per feature against 4.0,
so a gather that misses the L2 should pay 1.12x per feature at 100 what it pays at 128.
In 32-byte sectors it would be 416 bytes (13): 1.04x.

On an R-MAT graph (its gathers miss the L2), this times g-SpMM copy_u sum at 96, 100 and
128 features with the default schedule, under each maximum L2 fetch granularity the CUDA
runtime accepts (``cudaLimitMaxL2FetchGranularity``: 32, 64 and 128 bytes; a hint the
hardware may round), in one process on the same graph; CUDA events, median of 30 calls
after a warm-up. Prints ms and the per-feature ratio of 100 to 128 and of 96 to 128.
"""

from __future__ import annotations

import argparse
import statistics

import cupy
import torch

import gsparse
from gsparse.datasets import reorder
from gsparse.datasets.rmat import rmat_graph

_MAX_L2_FETCH_GRANULARITY = 0x05  # cudaLimitMaxL2FetchGranularity


def _median_ms(fn, calls: int = 30) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=19)
    parser.add_argument("--edge-factor", type=int, default=32)
    args = parser.parse_args()
    device = torch.device("cuda")
    g = reorder(rmat_graph(args.scale, args.edge_factor, seed=1, device=device), "random", seed=1)
    print(f"{torch.cuda.get_device_name()}: R-MAT scale {args.scale}, {g.num_edges:,} edges")
    gen = torch.Generator(device=device).manual_seed(0)
    features = {F: torch.randn(g.num_src, F, generator=gen, device=device) for F in (96, 100, 128)}
    for F, x in features.items():  # checked once against the CPU reference
        ref = gsparse.copy_u_sum(g.to("cpu"), x.double().cpu())
        err = (gsparse.copy_u_sum(g, x).double().cpu() - ref).abs().max().item()
        assert err < 1e-3 * (1 + ref.abs().max().item()), f"F={F}: error {err}"
    print("| fetch granularity | F = 96 ms | F = 100 ms | F = 128 ms | 100 vs 128 per feature "
          "| 96 vs 128 per feature |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for granularity in (32, 64, 128):
        cupy.cuda.runtime.deviceSetLimit(_MAX_L2_FETCH_GRANULARITY, granularity)
        actual = cupy.cuda.runtime.deviceGetLimit(_MAX_L2_FETCH_GRANULARITY)
        ms = {F: _median_ms(lambda x=x: gsparse.copy_u_sum(g, x)) for F, x in features.items()}
        per = {F: ms[F] / F for F in ms}
        print(f"| {granularity} (reads back {actual}) | {ms[96]:.4f} | {ms[100]:.4f} | {ms[128]:.4f} "
              f"| {per[100] / per[128]:.3f} | {per[96] / per[128]:.3f} |")


if __name__ == "__main__":
    main()
