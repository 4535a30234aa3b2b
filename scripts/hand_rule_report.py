"""The hand rules of this tree (g-SpMM's, g-SDDMM's), judged on every collected cell: no GPU
needed.

    PYTHONPATH=src python3 scripts/hand_rule_report.py [--operator spmm|sddmm] [FILES...]
        (default: g-SpMM, every docs/results/tuning/**/*.jsonl.gz)

Each collected cell (``python -m gsparse.tune.collect``) holds the measured time of every
schedule of its space and of the hand rule's pick when it was collected. This recomputes
the rule's pick from the cell's task, graph statistics and target, with the rule as it is
now, and reads its time where the cell measured that schedule. Prints, per family: the
cells judged, the pick's time over the cell's best (geometric mean, share within 10%,
worst), and the cells whose pick the cell did not measure (a rule changed since, or a pick
outside the space); then the cells where the pick differs from the collected one, with
their new time over the old. The sampled family's cells were collected on graphs with exact
statistics, so they judge the rule as full graphs meet it (sampled blocks read only their
mean row length and a bound of the longest).
"""

from __future__ import annotations

import argparse
import collections
import glob
import math

from gsparse import kernels
from gsparse.tune.train import load_cells


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operator", choices=("spmm", "sddmm"), default="spmm")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = args.files or sorted(glob.glob("docs/results/tuning/**/*.jsonl.gz", recursive=True))
    cells = [c for c in load_cells(files) if c.operator == args.operator]
    default_schedule = kernels.OPERATORS[args.operator].default_schedule
    by_family, unmeasured, changed = collections.defaultdict(list), collections.Counter(), []
    for cell in cells:
        pick = default_schedule(cell.task, cell.structure.stats(), cell.target)
        times = dict(zip(cell.schedules, cell.times_ms))
        if pick not in times:
            unmeasured[cell.family] += 1
            continue
        by_family[cell.family].append(times[pick] / cell.best_ms)
        if pick != cell.default_schedule:
            changed.append(times[pick] / cell.default_ms)
    print("| family | cells | pick / best (geomean) | within 10% | worst | pick not measured |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    every = []
    for family in sorted({c.family for c in cells}):
        ratios = by_family[family]
        every += ratios
        if ratios:
            print(f"| {family} | {len(ratios)} | {geomean(ratios):.3f} | "
                  f"{sum(r <= 1.1 for r in ratios) / len(ratios):.0%} | {max(ratios):.2f} | {unmeasured[family]} |")
    print(f"| all | {len(every)} | {geomean(every):.3f} | {sum(r <= 1.1 for r in every) / len(every):.0%} | "
          f"{max(every):.2f} | {sum(unmeasured.values())} |")
    if changed:
        print(f"\nPicks that differ from the collected ones: {len(changed)} cells; their time over the "
              f"collected pick's: geometric mean {geomean(changed):.3f}, {sum(r > 1 for r in changed)} "
              f"slower, range {min(changed):.3f}-{max(changed):.3f}")


if __name__ == "__main__":
    main()
