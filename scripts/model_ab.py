"""Two cost models' first choices on the benchmark's graphs, timed against each other.

    python3 scripts/model_ab.py OLD_MODELS_DIR [--workloads reddit-like,proteins-like,products-like]
                                [--features 1,4,16,64,128,256] [--scale 1.0]   (needs a CUDA GPU)

For a retrained model (the shipped files, ``src/gsparse/tune/models``) against the models it
replaces (``OLD_MODELS_DIR``, the same two file names): on each preset graph, built on the
GPU, every cell (g-SpMM copy_lhs and u_mul_e sums, g-SDDMM u_dot_v; each feature length;
float32 and bfloat16) where the two first choices differ has both choices and cuSPARSE timed
in the same process, as the collector times them (device time, median of repeats, the L2
flushed where the inputs would stay in it, every output checked). Prints a line per cell
and the geometric mean of old time over new time: above 1, the new model's picks are faster.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from gsparse import kernels
from gsparse.datasets import preset
from gsparse.target import Target
from gsparse.tune import select
from gsparse.tune.collect import _TOLERANCE, Case, _measure
from gsparse.tune.measure import compile_ahead
from gsparse.tune.models import RankModel

_CASES = ("spmm:copy_lhs:sum", "spmm:mul:sum", "sddmm:u:dot:v")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="folder with the replaced spmm-rank.json and sddmm-rank.json")
    parser.add_argument("--workloads", default="reddit-like,proteins-like,products-like")
    parser.add_argument("--features", default="1,4,16,64,128,256")
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    device = torch.device("cuda")
    target = Target.of(device)
    gen = torch.Generator(device=device).manual_seed(0)
    old = {op: RankModel().load(Path(args.old) / f"{op}-rank.json") for op in ("spmm", "sddmm")}
    ratios = []
    for workload in args.workloads.split(","):
        g = preset(workload, scale=args.scale, device=device)
        structure = select._structure(g)
        for name in _CASES:
            case = Case(name)
            for feature_len in map(int, args.features.split(",")):
                for dtype in (torch.float32, torch.bfloat16):
                    operands = case.operands(g, feature_len, dtype, gen)
                    task, run = case.call(g, operands, feature_len)
                    new_pick = select.model_choice(case.operator, g, task, target)
                    space = select._SPACES.get(case.operator, task, g.stats, target)
                    old_pick = select._first_choice(case.operator, old[case.operator], space, structure)
                    if old_pick == new_pick:
                        continue
                    ops = kernels.OPERATORS[case.operator]
                    compile_ahead([lambda s=s: ops.load_kernels(task, s, device.index) for s in (old_pick, new_pick)],
                                  device)
                    ref, tolerance = run(old_pick).clone(), _TOLERANCE[dtype]
                    times = {label: _measure(lambda s=s: run(s), ref, tolerance, device, 0.05, True, warmup=2)
                             for label, s in (("old", old_pick), ("new", new_pick))}
                    baseline = case.cusparse(g, operands)
                    cusparse = (_measure(baseline[0], ref, tolerance, device, 0.05, True, baseline[1], warmup=2)
                                if baseline else {})
                    line = f"{workload} {name} F={feature_len} {str(dtype)[6:]}: "
                    if "ms" not in times["old"] or "ms" not in times["new"]:
                        print(line + f"old {times['old']}, new {times['new']}", flush=True)
                        continue
                    ratio = times["old"]["ms"] / times["new"]["ms"]
                    ratios.append(ratio)
                    versus = (f", x cuSPARSE old {cusparse['ms'] / times['old']['ms']:.2f} new "
                              f"{cusparse['ms'] / times['new']['ms']:.2f}" if "ms" in cusparse else "")
                    print(line + f"old {old_pick} {times['old']['ms']:.4f} ms, new {new_pick} "
                          f"{times['new']['ms']:.4f} ms, old/new {ratio:.3f}{versus}", flush=True)
    if ratios:
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"{len(ratios)} cells changed: old/new geomean {geomean:.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
