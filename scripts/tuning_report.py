"""The tuner's figures on held-out families, from collected cells, as Markdown tables.

    python scripts/tuning_report.py CELLS.jsonl[.gz] [...] [--held-out knn,molecules,small_world,citation,cliques] [--worst N]

For every held-out cell (a cell of a family the shipped models never trained on), with
every time from the same sweep (:mod:`gsparse.tune.collect`):

- the ``model`` policy: the shipped rank model's first choice over the best of the space;
- the ``tune`` policy (cells collected with ``--tune``): its choice over the best, and its
  wall time (compilation included);
- the hand rule over the best;
- cuSPARSE over each of them, where cuSPARSE computes the cell;
- the shipped cost model's Pearson (log time, within each cell), Spearman and top-5 regret;
- with ``--worst N``, the N cells where the model's choice is furthest from the best, with
  their graphs' row statistics: where to look next.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

from gsparse.tune import select
from gsparse.tune.features import featurize
from gsparse.tune.train import judge, load_cells


def _geomean(values) -> float:
    values = np.asarray(list(values), dtype=float)
    return float(np.exp(np.log(values).mean())) if len(values) else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+")
    # The shipped models are trained on the thirteen families of docs/results/tuning; these
    # five are in none of its files (gsparse.datasets.FAMILIES), kept for a fresh judgement.
    parser.add_argument("--held-out", default="knn,molecules,small_world,citation,cliques")
    parser.add_argument("--worst", type=int, default=0, help="list the N cells the model misses most")
    args = parser.parse_args(argv)
    held_out = set(args.held_out.split(","))
    rows = []
    docs = []
    for path in args.cells:
        raw = Path(path).read_bytes()
        text = gzip.decompress(raw).decode() if path.endswith(".gz") else raw.decode()
        docs += [json.loads(line) for line in text.splitlines()]
    usable = [d for d in docs if sum("ms" in s for s in d["schedules"]) >= 2 and "ms" in d["default"]]
    cells = load_cells(args.cells)
    assert len(usable) == len(cells)
    for doc, cell in zip(usable, cells):
        if cell.family not in held_out:
            continue
        model = select._model(cell.operator)
        predicted = model.predict(featurize(cell.task, cell.structure, cell.target, cell.schedules))
        times = {s: t for s, t in zip(cell.schedules, cell.times_ms)}
        tune = doc.get("tune")
        tune_ms = np.nan
        if tune is not None:
            chosen = next((s for s in cell.schedules if s.to_json() == tune["schedule"]), None)
            tune_ms = times.get(chosen, np.nan)
        rows.append({
            "operator": cell.operator, "family": cell.family, "case": doc["case"],
            "feature_len": doc["feature_len"], "dtype": doc["dtype"], "best": cell.best_ms,
            "model": float(cell.times_ms[int(np.argmin(predicted))]), "default": cell.default_ms,
            "tune": tune_ms, "tune_s": tune["seconds"] if tune else np.nan, "cusparse": cell.cusparse_ms,
            "space_over_cusparse": cell.cusparse_ms / cell.best_ms,
            "graph": doc["graph"]["structure"],
            "picked": cell.schedules[int(np.argmin(predicted))], "fastest": cell.schedules[int(np.argmin(cell.times_ms))],
        })
    if not rows:
        print("no held-out cells", file=sys.stderr)
        return 2
    print(f"{len(rows)} held-out cells of {sorted({r['family'] for r in rows})}\n")
    print("| cells | policy | pick / best (geomean) | within 5% | within 10% | within 25% | worst |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for operator in ("spmm", "sddmm", None):
        mine = [r for r in rows if operator in (None, r["operator"])]
        for policy in ("model", "tune", "default"):
            ratios = np.array([r[policy] / r["best"] for r in mine if np.isfinite(r[policy])])
            if not len(ratios):
                continue
            print(f"| {operator or 'all'} ({len(ratios)}) | {policy} | {_geomean(ratios):.3f} | "
                  f"{np.mean(ratios <= 1.05):.0%} | {np.mean(ratios <= 1.10):.0%} | {np.mean(ratios <= 1.25):.0%} | "
                  f"{ratios.max():.2f} |")
    seconds = np.array([r["tune_s"] for r in rows if np.isfinite(r["tune_s"])])
    if len(seconds):
        print(f"\ntune policy wall time per cell: median {np.median(seconds):.2f} s, "
              f"max {seconds.max():.2f} s ({len(seconds)} cells)")
    with_cusparse = [r for r in rows if np.isfinite(r["cusparse"])]
    if with_cusparse:
        print("\n| cells with cuSPARSE | x cuSPARSE (geomean) | lowest |")
        print("| --- | ---: | ---: |")
        for name in ("best", "model", "tune", "default"):
            ratios = np.array([r["cusparse"] / r[name] for r in with_cusparse if np.isfinite(r[name])])
            if len(ratios):
                print(f"| {name} ({len(ratios)}) | {_geomean(ratios):.2f} | {ratios.min():.2f} |")
        missed = [r for r in with_cusparse if r["space_over_cusparse"] >= 1.1 and r["cusparse"] / r["model"] < 1.0]
        print(f"\ncells where the space holds a schedule >= 1.1x cuSPARSE but the model's pick is "
              f"below 1.0x: {len(missed)} of {sum(r['space_over_cusparse'] >= 1.1 for r in with_cusparse)}")
    print("\n| operator | Pearson (log time, standardised within each cell) | the same, of the predicted time "
          "(least-squares part) | mean within-cell Spearman | top-5 regret, max |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for operator in ("spmm", "sddmm"):
        mine = [c for c in cells if c.operator == operator and c.family in held_out]
        if mine:
            quality = judge(select._model(operator), mine)
            print(f"| {operator} | {quality['pearson_log_within_cell']:.2f} | "
                  f"{quality['pearson_time_part_within_cell']:.2f} | {quality['spearman_within_cell']:.2f} | "
                  f"{quality['top5_regret_max']:.2f} |")
    if args.worst:
        print("\n| model / best | family | case | F | dtype | rows | mean / max row | row COV | model's pick | best |")
        print("| ---: | --- | --- | ---: | --- | ---: | --- | ---: | --- | --- |")
        for r in sorted(rows, key=lambda r: r["best"] / r["model"])[:args.worst]:
            g = r["graph"]
            print(f"| {r['model'] / r['best']:.2f} | {r['family']} | {r['case']} | {r['feature_len']} | {r['dtype']} | "
                  f"{g['num_dst']:,} | {g['row_mean']:.1f} / {g['row_max']} | {g['row_cov']:.2f} | {r['picked']} | "
                  f"{r['fastest']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
