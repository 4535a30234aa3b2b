"""What lane groups sized to odd widths add to the g-SpMM space, from collected cells.

    python scripts/odd_groups_report.py CELLS.jsonl[.gz] [...]

For every g-SpMM cell whose space held groups that do not divide a warp (``python -m
gsparse.tune.collect ... --cells-per-graph 0`` times every schedule of each cell), prints the
best power-of-two schedule's time over the best odd group's, with one edge lane and with any
(above 1: the odd group wins), then over all such cells: the geometric mean of the best of
the space's gain over the power-of-two schedules alone, and the shipped rank model's first
choice over the cell's best with the odd groups among its candidates and without them
(docs/performance.md, "Lane groups sized to odd widths").
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from gsparse.tune import select
from gsparse.tune.features import featurize
from gsparse.tune.train import load_cells


def _geomean(values) -> float:
    return float(np.exp(np.mean(np.log(values))))


def _odd(schedule) -> bool:
    return not getattr(schedule, "packs_warp", True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+")
    args = parser.parse_args(argv)
    cells = [c for c in load_cells(args.cells) if c.operator == "spmm" and any(map(_odd, c.schedules))]
    if not cells:
        print("no g-SpMM cell whose space holds odd groups", file=sys.stderr)
        return 2
    model = select._model("spmm")
    print("| family | edges | case | F | dtype | power of two / odd, one edge lane | power of two / odd |")
    print("| --- | ---: | --- | ---: | --- | ---: | ---: |")
    gains, with_odd, without_odd = [], [], []
    for cell in cells:
        times = np.asarray(cell.times_ms)
        odd = np.array([_odd(s) for s in cell.schedules])
        one_lane = odd & np.array([getattr(s, "edge_lanes", 1) == 1 for s in cell.schedules])
        power_of_two = times[~odd].min()
        print(f"| {cell.family} | {cell.structure.num_edges:,} | {cell.task.op} {cell.task.reduce} | {cell.task.num_features} | "
              f"{str(cell.task.dtype).removeprefix('torch.')} | "
              f"{power_of_two / times[one_lane].min() if one_lane.any() else float('nan'):.2f} | "
              f"{power_of_two / times[odd].min():.2f} |")
        gains.append(power_of_two / times.min())
        costs = model.predict(featurize(cell.task, cell.structure, cell.target, cell.schedules))
        with_odd.append(times[np.argmin(costs)] / times.min())
        without_odd.append(times[np.argmin(np.where(odd, np.inf, costs))] / times.min())
    print(f"\n{len(cells)} cells: the best of the space {_geomean(gains):.3f}x the power-of-two "
          f"schedules' best (geometric mean; at most {max(gains):.2f}x)")
    for name, picks in (("with odd groups", with_odd), ("without them", without_odd)):
        picks = np.array(picks)
        print(f"the model's first choice {name}: {_geomean(picks):.3f}x the best, "
              f"{np.mean(picks <= 1.10):.0%} within 10%, worst {picks.max():.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
