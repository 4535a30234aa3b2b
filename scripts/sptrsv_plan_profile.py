"""Where an SpTRSV plan's time goes on a GPU machine: a profile of ``FactorPlans.build_plan``.

    PYTHONPATH=src python3 scripts/sptrsv_plan_profile.py [--rows 500000] [--rhs 16]
        [--families laplacian2d,laplacian3d,road] [--top 25]

The benchmark's ``plan`` phase on an H100 host took 2-3 times what the same plan takes on a
CPU-only machine (``scripts/sptrsv_analysis_times.py``, which builds it with a loader that
loads nothing). For each factor (float64, the analysed scheme the benchmark runs): the plan's
wall time, then a cProfile of a second build of it (sorted by cumulative time), so that the
copies, allocations and host work can be told apart.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np
import torch

from gsparse.datasets import triangular
from gsparse.kernels.source import RUNTIME_LOADER
from gsparse.kernels.sptrsv import FactorPlans
from gsparse.kernels.sptrsv.codegen import KERNEL, program
from gsparse.target import Target


def _ms(fn) -> tuple[object, float]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--rhs", type=int, default=16)
    parser.add_argument("--families", default="laplacian2d,laplacian3d,road")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    device = torch.device("cuda")
    target = Target.of(device)
    for family in args.families.split(","):
        matrix = triangular.generate(family, args.rows, seed=0)
        crow = torch.from_numpy(matrix.indptr.astype(np.int64)).to(device)
        col = torch.from_numpy(matrix.indices.astype(np.int64)).to(device)
        plans = FactorPlans(crow, col, True)
        _, analysis_ms = _ms(lambda: plans.analysis(False))
        task = plans.task(torch.float64, False, False, args.rhs)
        schedule = plans.chosen_schedule(task, target)
        _, load_ms = _ms(lambda: RUNTIME_LOADER.kernel(program(task.algorithm, schedule), KERNEL, device.index))
        times = [_ms(lambda: plans.build_plan(task, schedule, target))[1] for _ in range(3)]
        print(f"## {family}: {matrix.shape[0]} rows, {matrix.nnz} entries, k={args.rhs}, {schedule.to_json()}")
        print(f"analysis {analysis_ms:.1f} ms, compile+load {load_ms:.1f} ms, plan "
              f"{', '.join(f'{t:.1f}' for t in times)} ms")
        profile = cProfile.Profile()
        profile.enable()
        plans.build_plan(task, schedule, target)
        torch.cuda.synchronize()
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
