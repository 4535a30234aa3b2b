"""The g-SpMM hand rule's column-tiled picks against the one-pass rule's, on the
benchmark's presets and a fresh corpus seed: what a rule for the column tiles needs.

    PYTHONPATH=src python3 scripts/column_tiles_probe.py [--presets reddit-like,...]
        [--seed 22] [--count 2] [--families rmat,power_law,lognormal,community,block_model,popular]

Judged on the collected cells (``scripts/hand_rule_report.py``), the rule's column-tiled
picks (up to 4 features, few source tiles) ran 3.1-4.2x the space's best in geometric mean,
and the one-pass rule's pick instead was 2.2x faster on 146 of 159 cells but up to 3.1x
slower on 13; the presets, where the first wave fitted the column tiles, are not among the
collected cells (docs/performance.md, open problems). For every graph and g-SpMM task
(copy_lhs and u_mul_e sums, fp32 and bf16, 1, 2 and 4 features) where the rule takes column
tiles, this times on the same random inputs, outputs compared: the rule's pick, the one-pass
rule's pick for the same statistics (``_row_groups``), and the output-tiled schedule where
the task's message is a whole ``lhs`` row. Device time, the median of repeats after a
warm-up (:func:`gsparse.tune.measure.time_calls`). Prints each cell, then the geometric mean
and range of column tiles over the one-pass pick.
"""

from __future__ import annotations

import argparse
import math

import torch

from gsparse.datasets import corpus, preset
from gsparse.kernels.spmm import ColumnTiled, default_schedule, run_spmm, task_for
from gsparse.kernels.spmm.default import RowReading, _row_groups
from gsparse.kernels.spmm.shapes import output_tiled_schedule, output_tiled_warps
from gsparse.target import Target
from gsparse.tune.measure import time_calls

CASES = (("copy_lhs", False), ("mul", True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="reddit-like,products-like,proteins-like,citation-like,ppa-like")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--count", type=int, default=2)
    parser.add_argument("--families", default="rmat,power_law,lognormal,community,block_model,popular")
    args = parser.parse_args()
    device = torch.device("cuda")
    target = Target.of(device)
    graphs = [(name, preset(name, device=device)) for name in args.presets.split(",") if name]
    graphs += [(f"{name} {i}", g) for i, (name, _, g) in
               enumerate(corpus(args.families.split(","), args.count, seed=args.seed, device=device))]
    gen = torch.Generator(device=device).manual_seed(0)
    ratios = []
    for name, g in graphs:
        stats = g.stats
        for op, weighted in CASES:
            for dtype in (torch.float32, torch.bfloat16):
                for features in (1, 2, 4):
                    lhs = torch.randn(g.num_src, features, generator=gen, device=device).to(dtype)
                    rhs = torch.rand(g.num_edges, 1, generator=gen, device=device).to(dtype) if weighted else None
                    task = task_for(g, op, "sum", lhs, rhs, (features,))
                    tiled = default_schedule(task, stats, target)
                    if not isinstance(tiled, ColumnTiled):
                        continue
                    picks = {"column tiles": tiled,
                             "one pass": _row_groups(task, RowReading.of(task, stats, target))}
                    if task.algorithm.message_is_lhs:
                        warps = output_tiled_warps(dtype)[0 if stats.rows.mean < 128 else 1]
                        picks["output tiles"] = output_tiled_schedule(features, dtype, warps, 2, task.vector_ok)
                    runs = {label: (lambda s=s: run_spmm(g, op, "sum", lhs, rhs, (features,), schedule=s))
                            for label, s in picks.items()}
                    first = runs["column tiles"]()
                    for label, run in runs.items():
                        torch.testing.assert_close(run().float(), first.float(), rtol=2e-2, atol=2e-2)
                    ms = {label: time_calls(run, [()], device, budget_s=0.2, min_repeats=10).median_ms
                          for label, run in runs.items()}
                    ratios.append(ms["column tiles"] / ms["one pass"])
                    print(f"{name}: {g.num_src:,} sources, {g.num_edges:,} edges, mean {stats.rows.mean:.1f}; "
                          f"{op} {str(dtype)[6:]} F={features}: "
                          + ", ".join(f"{label} {picks[label]} {t:.4f} ms" for label, t in ms.items())
                          + f"; column tiles / one pass {ms['column tiles'] / ms['one pass']:.2f}", flush=True)
    if ratios:
        print(f"{len(ratios)} cells: column tiles / one pass, geometric mean "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
