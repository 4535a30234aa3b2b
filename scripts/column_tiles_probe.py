"""The column-tiled skeleton against the g-SpMM hand rule's pick (and the output-tiled
one where the message is a whole ``lhs`` row), on the benchmark's presets and a corpus draw:
the evidence for keeping column tiles out of the rule.

    PYTHONPATH=src python3 scripts/column_tiles_probe.py [--presets reddit-like,...]
        [--seed 22] [--count 2] [--families rmat,power_law,lognormal,community,block_model,popular]
        [--min-edges 1e5] [--max-edges 1e7]

The column-tiled schedule is the one the rule took up to 4 features until 2026-11-29 (half
a warp a row, 1,024 threads a block, the widest tile shared memory holds, where the per-tile
row pointers stay below one per 8 edges), with the one-pass pick's feature lanes and
vectors. For every graph and g-SpMM task (copy_lhs and u_mul_e sums, fp32 and bf16, 1, 2
and 4 features) where it fits, this times on the same random inputs, outputs compared: the
column tiles, the one-pass rule's pick for the same statistics (``_row_groups``), and the
output-tiled schedule where the task's message is a whole ``lhs`` row. Device time, the
median of repeats after a warm-up (:func:`gsparse.tune.measure.time_calls`). Prints each
cell, then the geometric mean and range of column tiles over the one-pass pick.
"""

from __future__ import annotations

import argparse
import math

import torch

from gsparse.datasets import corpus, preset
from gsparse.kernels.spmm import ColumnTiled, OnePass, SplitRows, SpmmTask, run_spmm, task_for
from gsparse.kernels.spmm.default import RowReading, _row_groups
from gsparse.kernels.spmm.shapes import column_tile_for, output_tiled_schedule, output_tiled_warps
from gsparse.target import Target
from gsparse.tune.measure import time_calls

CASES = (("copy_lhs", False), ("mul", True))


def column_tiled_like(one_pass: OnePass | SplitRows, task: SpmmTask, stats, target: Target) -> ColumnTiled | None:
    """The rule's former column-tiled pick, or None where no tile fits or the per-tile row
    pointers would outnumber an eighth of the edges."""
    tile = column_tile_for(task.lhs_len, task.dtype, target)
    tiles = -(-stats.num_src // tile) if tile else 0
    if not tile or tiles * (stats.num_dst + 1) * 8 > stats.num_edges:
        return None
    edge_lanes = 16 // one_pass.feature_lanes
    return ColumnTiled(
        rows_per_block=1024 // (one_pass.feature_lanes * edge_lanes),
        feature_lanes=one_pass.feature_lanes, edge_lanes=edge_lanes,
        vector_width=one_pass.vector_width, outputs_per_thread=one_pass.outputs_per_thread,
        degree_sorted=False, column_tile=tile).validate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="reddit-like,products-like,proteins-like,citation-like,ppa-like")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--count", type=int, default=2)
    parser.add_argument("--families", default="rmat,power_law,lognormal,community,block_model,popular")
    parser.add_argument("--min-edges", type=float, default=1e5)
    parser.add_argument("--max-edges", type=float, default=1e7)
    args = parser.parse_args()
    device = torch.device("cuda")
    target = Target.of(device)
    graphs = [(name, preset(name, device=device)) for name in args.presets.split(",") if name]
    graphs += [(f"{name} {i}", g) for i, (name, _, g) in
               enumerate(corpus(args.families.split(","), args.count, seed=args.seed, device=device,
                                        min_edges=int(args.min_edges), max_edges=int(args.max_edges)))]
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
                    one_pass = _row_groups(task, RowReading.of(task, stats, target))
                    tiled = column_tiled_like(one_pass, task, stats, target)
                    if tiled is None:
                        continue
                    picks = {"column tiles": tiled, "one pass": one_pass}
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
