"""How much each of LO-SpMM's constraints prunes the g-SpMM and g-SDDMM spaces, without a GPU.

    python scripts/pruning_report.py [--workloads reddit-like,...] [--families lognormal,...]
        [--max-edges 1e6] [--features 1,4,16,32,64,100,128,256,602] [--no-registers]
        [--cells docs/results/tuning/*.jsonl.gz] [--below 1.1]

Part 1, spaces: for each graph (benchmark presets shrunk to about ``--max-edges`` edges and
the real graphs shipped with gsparse, then one graph of each synthetic family the tuner is
trained and judged on, :func:`gsparse.datasets.corpus`), each case (g-SpMM ``copy_lhs`` +
sum and ``mul`` + sum with an edge scalar, g-SDDMM ``u_dot_v`` and ``u_add_v``, float32)
and each feature length, the task's space is pruned with the default thresholds on an
H100's facts (:data:`gsparse.kernels.pruning.THRESHOLDS`); the register constraint reads
ptxas's report of an NVRTC build for sm_90 of every candidate (through the kernel cache:
a second run compiles nothing). Per operator, summed by graph and by feature length:
the candidates, what each constraint removes on its own ("alone") and in the fixed order
utilisation, COV_row, WASTE_col, registers ("in order": these add up to the candidates
removed), and the candidates left.

Part 2, measured cells (``--cells``, H100 sweeps of every schedule of a cell's space,
:mod:`gsparse.tune.collect`): the constraints applied to each cell's measured schedules
(the cell's hand-rule pick protected; registers from sm_90 builds of each): how many each
removes, how often the fastest measured schedule is among them, the best kept over the best
measured, and the shipped model's pick with and without pruning, for three values of
``max_row_cov``.

Part 3, split rows where the space lost to cuSPARSE: for each g-SpMM cell of ``--cells``
whose fastest measured schedule ran below ``--below`` times cuSPARSE, the chunk lengths the
task's space offers on the cell's graph statistics today (:func:`gsparse.kernels.spmm.shapes.row_splits_for`),
and how many split-rows candidates the four constraints keep.
"""

from __future__ import annotations

import argparse
import collections
import glob
import sys
import time

import numpy as np
import torch

from gsparse import datasets
from gsparse.graph import GraphStats
from gsparse.kernels import sddmm, spmm
from gsparse.kernels.operands import VECTOR_BYTES
from gsparse.kernels.pruning import CONSTRAINTS, THRESHOLDS, Thresholds, prune
from gsparse.runtime import nvrtc_version
from gsparse.target import H100

_NAMES = {"utilisation": "utilisation", "row_balance": "COV_row", "column_waste": "WASTE_col",
          "registers": "registers"}
_CASES = ("spmm:copy_lhs:sum", "spmm:mul:sum", "sddmm:u:dot:v", "sddmm:u:add:v")
_OPERATORS = {"spmm": spmm, "sddmm": sddmm}


def _vector_ok(features: int, dtype: torch.dtype) -> int:
    return max(w for w in (1, 2, 4, 8) if w * dtype.itemsize <= VECTOR_BYTES and features % w == 0)


def task_of(case: str, features: int, dtype: torch.dtype = torch.float32):
    """The kernel task of ``case`` for ``features`` features on aligned, full-shape operands."""
    parts = case.split(":")
    vector = _vector_ok(features, dtype)
    if parts[0] == "spmm":
        op, reduce = parts[1], parts[2]
        return spmm.SpmmTask(op=op, reduce=reduce, lhs_shape=(features,),
                             rhs_shape=(1,) if op == "mul" else None, out_shape=(features,), dtype=dtype,
                             index_dtype=torch.int32, has_eid=False, with_arg=False, vector_ok=vector)
    _, lhs, op, rhs = parts
    return sddmm.SddmmTask(op=op, lhs_target=lhs, rhs_target=rhs, lhs_shape=(features,), rhs_shape=(features,),
                           full_shape=(features,), num_heads=1, dtype=dtype, index_dtype=torch.int32,
                           has_eid=False, vector_ok=vector)


def graphs(workloads: list[str], families: list[str], max_edges: int) -> list[tuple[str, GraphStats]]:
    """``(name, statistics)`` of the report's graphs (built on the CPU)."""
    found = []
    for spec in workloads:
        w = datasets.workload(spec, max_edges=max_edges)
        found.append((w.name, w.graph.stats))
    for family, _, g in datasets.corpus(families, 1, seed=0, min_edges=100_000, max_edges=max_edges):
        found.append((family, g.stats))
    return found


def _row(label: str, counts: dict) -> str:
    alone = " | ".join("—" if counts["alone"][c] is None else str(counts["alone"][c]) for c in CONSTRAINTS)
    order = " | ".join("—" if counts["in_order"][c] is None else str(counts["in_order"][c]) for c in CONSTRAINTS)
    removed = counts["candidates"] - counts["kept"]
    return (f"| {label} | {counts['candidates']} | {alone} | {order} | {removed} "
            f"({removed / max(counts['candidates'], 1):.0%}) | {counts['kept']} |")


def _table(title: str, key: str, groups: dict) -> list[str]:
    names = [_NAMES[c] for c in CONSTRAINTS]
    header = (f"| {key} | candidates | " + " | ".join(f"{n} alone" for n in names) + " | "
              + " | ".join(f"{n} in order" for n in names) + " | removed | kept |")
    lines = ["", title, "", header, "|" + "|".join(["---"] + ["---:"] * (2 * len(names) + 3)) + "|"]
    lines += [_row(label, counts) for label, counts in groups.items()]
    return lines


def _add(total: dict, result) -> None:
    total["candidates"] += len(result.candidates)
    total["kept"] += len(result.kept)
    for name, counts in (("alone", result.alone()), ("in_order", result.in_order())):
        for c in CONSTRAINTS:
            if counts[c] is None or total[name][c] is None:
                total[name][c] = None
            else:
                total[name][c] += counts[c]


def _empty() -> dict:
    return {"candidates": 0, "kept": 0, "alone": dict.fromkeys(CONSTRAINTS, 0),
            "in_order": dict.fromkeys(CONSTRAINTS, 0)}


def spaces_report(named: list[tuple[str, GraphStats]], features: list[int], registers: bool) -> list[str]:
    by_graph: dict = collections.defaultdict(lambda: collections.defaultdict(_empty))
    by_length: dict = collections.defaultdict(lambda: collections.defaultdict(_empty))
    totals: dict = collections.defaultdict(_empty)
    fallbacks = 0
    for name, stats in named:
        for case in _CASES:
            operator = case.split(":")[0]
            for f in features:
                result = _OPERATORS[operator].pruned_space(task_of(case, f), stats, H100,
                                                           registers="all" if registers else "off")
                fallbacks += result.fallback
                _add(by_graph[operator][name], result)
                _add(by_length[operator][f], result)
                _add(totals[operator], result)
    lines = []
    for operator in ("spmm", "sddmm"):
        cases = ", ".join(c for c in _CASES if c.startswith(operator))
        lines += [f"### {operator} ({cases}; float32; summed over cases and feature lengths {features})"]
        lines += _table("By graph:", "graph", {**by_graph[operator], "all": totals[operator]})
        lines += _table("By feature length (summed over graphs):", "F", by_length[operator])
        lines.append("")
    lines.append(f"Spaces where the constraints together left nothing (fallback): {fallbacks}.")
    return lines


def cells_report(paths: list[str], registers: bool) -> list[str]:
    from gsparse.tune import select
    from gsparse.tune.features import featurize
    from gsparse.tune.train import load_cells

    cells = load_cells(paths)
    prepared = []
    for c in cells:
        stats = c.structure.stats()
        space = _OPERATORS[c.operator].space
        facts = space.facts(c.task, stats, c.target, space.knob_table([space.knob_row(x) for x in c.schedules]))
        predicted = select._model(c.operator).predict(featurize(c.task, c.structure, c.target, c.schedules))
        prepared.append((c, facts, predicted))
    lines = [f"{len(cells)} measured cells ({', '.join(p.split('/')[-1] for p in paths)}); counts in order; "
             f"register constraint {'on (sm_90 builds of each measured schedule)' if registers else 'off'}", "",
             "| operator | max_row_cov | candidates | utilisation | COV_row | WASTE_col | registers | removed | "
             "best removed (cells) | best kept / best: geomean | worst | model pick / best, pruned | unpruned |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for operator in ("spmm", "sddmm"):
        mine = [p for p in prepared if p[0].operator == operator]
        for row_cov in (0.25, THRESHOLDS.max_row_cov, 1.0):
            thresholds = Thresholds(max_row_cov=row_cov)
            total, removed_best, kept_over_best, model_pruned, model_all = _empty(), 0, [], [], []
            for c, facts, predicted in mine:
                spills = (lambda x, c=c: _OPERATORS[c.operator].register_spills(c.task, x, c.target)) \
                    if registers else None
                result = prune(c.schedules, facts, c.target, thresholds, protected=(c.default_schedule,),
                               registers=spills)
                _add(total, result)
                kept = np.array([s in set(result.kept) for s in c.schedules])
                best_kept = min(float(c.times_ms[kept].min()) if kept.any() else np.inf, c.default_ms)
                removed_best += not kept[int(np.argmin(c.times_ms))]
                kept_over_best.append(best_kept / c.best_ms)
                model_pruned.append(c.times_ms[int(np.argmin(np.where(kept, predicted, np.inf)))] / c.best_ms)
                model_all.append(c.times_ms[int(np.argmin(predicted))] / c.best_ms)
            order = total["in_order"]
            removed = total["candidates"] - total["kept"]
            register_count = "—" if order["registers"] is None else order["registers"]
            lines.append(
                f"| {operator} ({len(mine)}) | {row_cov:g} | {total['candidates']} | {order['utilisation']} | "
                f"{order['row_balance']} | {order['column_waste']} | {register_count} | "
                f"{removed} ({removed / total['candidates']:.0%}) | "
                f"{removed_best} | {_geomean(kept_over_best):.3f} | {max(kept_over_best):.2f} | "
                f"{_geomean(model_pruned):.3f} | {_geomean(model_all):.3f} |")
    return lines


def splits_report(paths: list[str], below: float, registers: bool) -> list[str]:
    from gsparse.kernels.spmm.shapes import row_splits_for
    from gsparse.tune.train import load_cells

    lines = [f"g-SpMM cells below {below:g}x cuSPARSE; pruned on today's space with the register constraint "
             f"{'on' if registers else 'off'}", "",
             "| graph | rows | edges | row mean / max | cell | chunks offered | split candidates | kept | "
             "all candidates | kept |", "|---|---:|---:|---:|---|---|---:|---:|---:|---:|"]
    for c in load_cells(paths):
        if c.operator != "spmm" or not c.cusparse_ms / c.best_ms < below:
            continue
        s = c.structure
        stats = s.stats()
        result = spmm.pruned_space(c.task, stats, c.target, registers="kept" if registers else "off")
        split = [x for x in result.candidates if isinstance(x, spmm.SplitRows)]
        kept = [x for x in result.kept if isinstance(x, spmm.SplitRows)]
        cell = f"{c.task.op} {c.task.reduce}, F = {c.task.num_features}, {str(c.task.dtype).removeprefix('torch.')}"
        lines.append(f"| {c.family} | {s.num_dst:,} | {s.num_edges:,} | {s.row_mean:.0f} / {s.row_max:,} | {cell} | "
                     f"{', '.join(map(str, row_splits_for(stats, c.target))) or '—'} | {len(split)} | {len(kept)} | "
                     f"{len(result.candidates)} | {len(result.kept)} |")
    return lines


def _geomean(values) -> float:
    return float(np.exp(np.log(np.asarray(values, dtype=float)).mean()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="reddit-like,proteins-like,products-like,arxiv-like,ddi-like,cora")
    parser.add_argument("--families", default=",".join(datasets.FAMILIES))
    parser.add_argument("--max-edges", type=float, default=1e6)
    parser.add_argument("--features", default="1,4,16,32,64,100,128,256,602")
    parser.add_argument("--no-registers", action="store_true", help="leave the register constraint off")
    parser.add_argument("--cells", nargs="*", default=sorted(glob.glob("docs/results/tuning/*.jsonl.gz")))
    parser.add_argument("--below", type=float, default=1.1,
                        help="part 3: the cells whose best measured schedule ran below this many times cuSPARSE")
    args = parser.parse_args(argv)
    registers = not args.no_registers
    if registers and nvrtc_version() is None:
        print("NVRTC is not installed: the register constraint is left off (pip install 'gsparse[cuda]')",
              file=sys.stderr)
        registers = False
    started = time.perf_counter()
    named = graphs([w for w in args.workloads.split(",") if w], [f for f in args.families.split(",") if f],
                   int(args.max_edges))
    features = [int(f) for f in args.features.split(",")]
    compiler = (f"ptxas's report of NVRTC {'.'.join(map(str, nvrtc_version()))} builds for sm_90"
                if registers else "off")
    print(f"# Pruning the spaces before measuring\n\nTarget: {H100.name} ({H100.arch}, {H100.sms} SMs); "
          f"thresholds: {THRESHOLDS.to_json()}; registers: {compiler}.")
    print("\n## Graphs\n\n| graph | rows | edges | row mean | row max | row COV |\n"
          "|---|---:|---:|---:|---:|---:|")
    for name, s in named:
        print(f"| {name} | {s.num_dst:,} | {s.num_edges:,} | {s.rows.mean:.1f} | {s.rows.max:,} | "
              f"{s.rows.cov:.2f} |")
    print("\n## Spaces\n")
    print("\n".join(spaces_report(named, features, registers)))
    if args.cells:
        print("\n## Measured cells\n")
        print("\n".join(cells_report(args.cells, registers)))
        print("\n## Split rows where the space lost to cuSPARSE\n")
        print("\n".join(splits_report(args.cells, args.below, registers)))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
