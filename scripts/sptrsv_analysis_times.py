"""Times of SpTRSV's host-side preprocessing per matrix family: what the benchmark's
``gsparse prep ms`` spends on the host, stage by stage.

    PYTHONPATH=src python scripts/sptrsv_analysis_times.py --rows 500000 --rhs 1,16 --repeats 3

Prints one Markdown table, a row per family and number of right-hand sides (float64): the
factor's size and levels, the milliseconds to generate it (once), then those of each stage of
:func:`gsparse.bench.sptrsv`'s ``_gsparse``, each the least of ``--repeats`` runs (a shared
machine's noise only ever adds):

- ``graph``, ``levels``, ``features``: the NumPy analysis (``plan.analyse``'s stages);
- ``select``: the hand rule's scheme (``default_schedule``);
- ``schedule``: the scheme's transform and scheduling (``scheduling.plan``);
- ``plan``: the whole plan (``SptrsvPlan``: the device preparation's scheduling and launch
  tables in torch ops, here on the CPU, with a loader that compiles nothing);
- ``prep``: analysis + select + plan, what the benchmark's phases add up to without its
  ``codegen`` (NVRTC, cold only on a new kernel cache) and the copies to the GPU.

With ``--compile``, a column of NVRTC's time for the chosen scheme's program (sm_90, no
cache). With ``--schemes``, one more column per fixed scheme below: its plan's seconds.
The grid is an H100's: 132 blocks, 8,448 resident warps.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv import FactorPlans, analysis, features, scheduling
from gsparse.kernels.sptrsv.codegen import program
from gsparse.kernels.sptrsv.default import default_schedule
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.target import H100

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sptrsv"))
from loader import RecordingLoader  # noqa: E402  (the tests' loader: records, compiles nothing)

SCHEMES = {
    "rr": SptrsvSchedule(),
    "balance32": SptrsvSchedule(merge_rows=32, grouping="rg_balance", warp_schedule="ws_balance", alpha_level=2),
    "locality": SptrsvSchedule(subwarps=4, sw_rnnz=2, merge="merge_avg", merge_rows=32, merge_thresh=8,
                               reorder=True, warp_schedule="ws_locality", alpha_level=math.inf),
    "locality1": SptrsvSchedule(warp_schedule="ws_locality", alpha_level=0),
}


def _best_ms(fn, repeats: int):
    """``(fn(), least milliseconds over repeats runs)``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1e3)
    return out, min(times)


def _compile_ms(task, schedule) -> float:
    from gsparse.runtime._compile import compile_cuda

    source = program(task.algorithm, schedule).source
    start = time.perf_counter()
    compile_cuda(source, arch=H100.arch, cache=None)
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--families", default=",".join(triangular.FAMILIES))
    parser.add_argument("--rhs", default="1,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="time NVRTC on the chosen scheme's program")
    parser.add_argument("--schemes", action="store_true", help="time the plans of the fixed schemes too")
    args = parser.parse_args()
    extra = (["nvrtc"] if args.compile else []) + ([f"plan {k}" for k in SCHEMES] if args.schemes else [])
    columns = ["build", "graph", "levels", "features", "select", "schedule", "plan", "prep"] + extra
    print(f"| family | rows | nnz | levels | k | {' | '.join(f'{c} ms' for c in columns)} | scheme |")
    print("|" + "---|" * (6 + len(columns)))
    r = args.repeats
    for family in args.families.split(","):
        matrix, build_ms = _best_ms(lambda: triangular.generate(family, args.rows, seed=0), 1)
        crow, col = (torch.from_numpy(a.astype(np.int64)) for a in (matrix.indptr, matrix.indices))
        rows, graph_ms = _best_ms(lambda: analysis.dependency_graph(matrix.indptr, matrix.indices, True), r)
        level, levels_ms = _best_ms(lambda: analysis.levels(rows.ptr, rows.deps), r)
        feats, features_ms = _best_ms(lambda: features.matrix_features(rows, level), r)
        for k in (int(v) for v in args.rhs.split(",")):
            plans = FactorPlans(crow, col, True)
            plans.loader = RecordingLoader()
            system = plans.analysis(False).host  # the NumPy scheduling's input
            task = plans.task(torch.float64, False, False, k)
            schedule, select_ms = _best_ms(lambda: default_schedule(feats, task, H100), r)
            _, schedule_ms = _best_ms(lambda: scheduling.plan(system.rows, system.row_level, schedule, H100.sms,
                                                              H100.resident_warps), r)
            _, plan_ms = _best_ms(lambda: plans.build_plan(task, schedule, H100), r)
            times = [build_ms, graph_ms, levels_ms, features_ms, select_ms, schedule_ms, plan_ms,
                     graph_ms + levels_ms + features_ms + select_ms + plan_ms]
            if args.compile:
                times.append(_compile_ms(task, schedule))
            if args.schemes:
                times += [_best_ms(lambda s=s: plans.build_plan(task, s, H100), r)[1] for s in SCHEMES.values()]
            print(f"| {family} | {matrix.shape[0]:,} | {matrix.nnz:,} | {int(level.max()) + 1:,} | {k} | "
                  f"{' | '.join(f'{t:.1f}' for t in times)} | {schedule} |", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    torch.set_num_threads(1)
    main()
