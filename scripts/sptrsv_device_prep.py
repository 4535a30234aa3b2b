"""The SpTRSV preparation on the host (NumPy) against the same in PyTorch ops on the factor's
device (:mod:`gsparse.kernels.sptrsv.device_prep`), stage by stage, with a check that
they agree.

    PYTHONPATH=src python scripts/sptrsv_device_prep.py [--rows 500000] [--rhs 16]
        [--families laplacian3d,laplacian2d,road] [--repeats 5] [--device cuda] [--trace DIR]

For each factor (lower, float64, the analysed default's scheme for ``--rhs``; a scheme
outside the device port's scope, ``ws_locality``, is given ``ws_balance`` instead, said
so; a merging scheme's group levels are ``FactorPlans.dag_levels``': the levels kernel's on a
GPU, inside ``plan``), prints
one Markdown table: each stage's median milliseconds over ``--repeats`` runs, wall clock
with the device synchronised before and after.

- host: ``graph`` (:func:`.analysis.dependency_graph`), ``chain``
  (:func:`.analysis.longest_chain`), ``levels`` (:func:`.analysis.levels`, what a factor
  with a chain too long for the levels kernel pays), ``features``, ``plan``
  (:func:`.scheduling.plan`), ``arrays`` (:func:`.plan._schedule_arrays`), ``put`` (the
  plan's arrays converted and copied to the device, as :class:`.plan.SptrsvPlan` does);
- device: the same stages, ``levels`` being the levels kernel (:func:`.natural.device_levels`,
  CUDA only) and ``put`` the conversion to the kernel's index type.

``total`` adds what a GPU factor's preparation runs: graph, chain, levels (the kernel's on
both sides: the host's analysis reads it back), features, plan, arrays, put. ``reads``: the
times the solver's own preparation of the scheme (``FactorPlans.analysis`` and
``build_plan`` on a new factor, its kernels compiled before) waits for the GPU, as CUDA's
sync debug mode counts them. With ``--trace DIR``, one Chrome trace per factor of that
preparation (``torch.profiler``). Both on CUDA only.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv import (
    FactorPlans,
    analysis,
    device_prep,
    features,
    scheduling,
)
from gsparse.kernels.sptrsv.default import analysed_schedule
from gsparse.kernels.sptrsv.plan import _schedule_arrays
from gsparse.kernels.sptrsv.selector import default_selectors
from gsparse.target import H100, Target
from gsparse.testing import device_waits

STAGES = ("graph", "chain", "levels", "features", "plan", "arrays", "put")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_ms(fn, repeats: int, device: torch.device):
    """``(fn(), median milliseconds over repeats runs)``, the device synchronised around each."""
    times = []
    out = None
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        out = fn()
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return out, statistics.median(times)


def _device_reads(fn, device: torch.device) -> int | str:
    """Times ``fn()`` waits for the device (CUDA's sync debug mode warns at each), "-" on a CPU."""
    return len(device_waits(fn)) if device.type == "cuda" else "-"


def _in_scope(schedule):
    """The scheme itself when the device port covers it, else the nearest one it does."""
    changes = {}
    if schedule.warp_schedule == "ws_locality":
        changes.update(warp_schedule="ws_balance")
    return schedule if not changes else type(schedule)(**{**schedule.__dict__, **changes})


def _host_put(solve, arrays, device: torch.device, index=np.int32) -> list[torch.Tensor]:
    out = [torch.from_numpy(np.ascontiguousarray(a, index)).to(device)
           for a in (*arrays.values(), solve.group_starts)]
    out.append(torch.from_numpy(np.ascontiguousarray(solve.row_flag, np.uint8)).to(device))
    _sync(device)
    return out


def _device_put(plan: device_prep.TorchSolvePlan, dtype=torch.int32) -> list[torch.Tensor]:
    return [a.to(dtype) for a in (*plan.arrays.values(), plan.group_starts)] + [plan.row_flag.to(torch.uint8)]


def _check(plan: device_prep.TorchSolvePlan, solve, arrays) -> list[str]:
    """Names of the arrays that differ."""
    nodes = solve.nodes
    pairs = {"order": (plan.rows.order, solve.rows.order), "deps": (plan.rows.deps, solve.rows.deps),
             "ptr": (plan.rows.ptr, solve.rows.ptr), "group_level": (plan.group_level, solve.group_level),
             "group_per_thread": (plan.group_per_thread, solve.group_per_thread),
             "node_ptr": (plan.node_ptr, nodes.ptr), "members": (plan.node_members, nodes.members),
             "node_level": (plan.node_level, nodes.level), "node_nnz": (plan.node_nnz, nodes.nnz),
             "node_warp": (plan.node_warp, solve.node_warp), "kernel_ptr": (plan.kernel_ptr, solve.kernel_ptr),
             "kernel_waits": (plan.kernel_waits, solve.kernel_waits), "row_flag": (plan.row_flag, solve.row_flag)}
    pairs.update({name: (plan.arrays[name], arrays[name]) for name in arrays})
    return [name for name, (a, b) in pairs.items()
            if not (a.cpu().numpy().dtype == b.dtype and np.array_equal(a.cpu().numpy(), b))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--rhs", type=int, default=16)
    parser.add_argument("--families", default="laplacian3d,laplacian2d,road")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--trace", type=Path, default=None, help="a folder for Chrome traces of the device side")
    args = parser.parse_args()
    device = torch.device(args.device)
    target = Target.of(device) if device.type == "cuda" else H100
    selectors = default_selectors()
    r = args.repeats
    print(f"device {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}, torch "
          f"{torch.__version__}, {r} repeats, median ms\n")
    print(f"| family | side | {' | '.join(STAGES)} | total | reads | scheme | equal |")
    print("|" + "---|" * (len(STAGES) + 6))
    for family in args.families.split(","):
        matrix = triangular.generate(family, args.rows, seed=0)
        factor = tuple(torch.from_numpy(a.astype(np.int64)).to(device) for a in (matrix.indptr, matrix.indices))
        plans = FactorPlans(*factor, True)
        # Both sides prepare the system the solver solves: its long rows split (power law, R-MAT).
        system = plans.device_system(False)
        crow_d, col_d = system.crow, system.col
        crow, col = crow_d.cpu().numpy(), col_d.cpu().numpy()
        task = plans.task(torch.float64, False, False, args.rhs)

        host = {}
        rows, host["graph"] = _median_ms(lambda: analysis.dependency_graph(crow, col, True), r, device)
        _, host["chain"] = _median_ms(lambda: analysis.longest_chain(rows), r, device)
        level, host["levels"] = _median_ms(lambda: analysis.levels(rows.ptr, rows.deps), min(r, 2), device)
        feats, host["features"] = _median_ms(lambda: features.matrix_features(rows, level), r, device)
        chosen = analysed_schedule(feats, task, target, selectors)
        schedule = _in_scope(chosen)
        solve, host["plan"] = _median_ms(lambda: scheduling.plan(rows, level, schedule, target.sms,
                                                                 target.resident_warps), r, device)
        arrays, host["arrays"] = _median_ms(lambda: _schedule_arrays(solve), r, device)
        _, host["put"] = _median_ms(lambda: _host_put(solve, arrays, device), r, device)

        dev = {}
        graph, dev["graph"] = _median_ms(lambda: device_prep.dependency_graph(crow_d, col_d, True), r, device)
        _, dev["chain"] = _median_ms(lambda: device_prep.longest_chain(graph), r, device)
        if device.type == "cuda":
            from gsparse.kernels.sptrsv.natural import device_levels
            from gsparse.kernels.sptrsv.task import index_dtype_for

            system = plans.device_system(False)
            index = index_dtype_for(len(crow) - 1, len(col))
            device_levels(system, index, target)  # compiled and loaded once, outside the times
            kernel_level, dev["levels"] = _median_ms(lambda: device_levels(system, index, target), r, device)
            level_d = kernel_level.long()[graph.order]
            assert np.array_equal(level_d.cpu().numpy(), level), "the levels kernel disagrees with the host's"
            host_levels_ms = dev["levels"] + _median_ms(lambda: kernel_level.cpu(), r, device)[1]
        else:
            level_d, dev["levels"] = torch.from_numpy(level), math.nan
            host_levels_ms = host["levels"]
        feats_d, dev["features"] = _median_ms(lambda: device_prep.matrix_features(graph, level_d), r, device)
        levels = int(feats_d[8])  # layer_num: the plan need not read it again
        group_levels = plans.dag_levels()
        plan_d, dev["plan"] = _median_ms(lambda: device_prep.solve_plan(graph, level_d, schedule, target.sms,
                                                                        target.resident_warps, levels,
                                                                        group_levels), r, device)
        dev["arrays"] = 0.0  # inside solve_plan's time
        _, dev["put"] = _median_ms(lambda: _device_put(plan_d), r, device)

        def prepare() -> None:  # the solver's preparation of the scheme, on a new factor
            fresh = FactorPlans(*factor, True)
            fresh.build_plan(fresh.task(torch.float64, False, False, args.rhs), schedule, target)

        if device.type == "cuda":
            prepare()  # its kernels compiled and loaded outside the count and the trace
        reads = _device_reads(prepare, device)
        differ = _check(plan_d, solve, arrays)
        if not np.allclose(feats_d, feats, rtol=1e-13, atol=0):  # dep_dist: a sum in another order
            differ.append("features")
        host_total = host["graph"] + host["chain"] + host_levels_ms + sum(host[s] for s in STAGES[3:])
        dev_total = sum(0.0 if math.isnan(dev[s]) else dev[s] for s in STAGES)
        note = str(schedule) + ("" if schedule == chosen else f" (chosen {chosen}, outside the port)")
        for side, times, total, waits in (("host", host, host_total, "-"), ("device", dev, dev_total, reads)):
            print(f"| {family} | {side} | {' | '.join(f'{times[s]:.2f}' for s in STAGES)} | {total:.1f} | {waits} | "
                  f"{note} | {'yes' if not differ else 'NO: ' + ','.join(differ)} |", flush=True)
        if args.trace is not None and device.type == "cuda":
            args.trace.mkdir(parents=True, exist_ok=True)
            with torch.profiler.profile() as profile:
                prepare()
                _sync(device)
            profile.export_chrome_trace(str(args.trace / f"{family}.json"))
            print(profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=15), file=sys.stderr)


if __name__ == "__main__":
    np.seterr(all="ignore")
    torch.set_num_threads(1)
    main()
