"""Candidate hand rules for GAT's attention kernels, judged on the probe's recorded sweeps.

    python3 scripts/gat_rule_report.py FITTED.jsonl HELD_OUT.jsonl [--sms 132 --warps-per-sm 64]

Reads what ``scripts/gat_attention_probe.py --schedules --out`` wrote (every schedule's time
per cell) for the cells a rule is chosen on and for cells of other graphs and head counts.
A candidate sizes a row's lanes as the edge softmax's rule does (the heads' lanes times the
mean row over ``epl`` edges a lane, rounded up to a power of two, at least ``narrow``, at
most 32, and enough rows to fill half the resident warps) and takes its loads in flight by
``flights``. Prints, per direction, the best candidates on the fitted cells with their
figures on the held-out ones (geometric mean of the pick over the cell's best, the worst,
the cells within 10%), then the backward's picks cell by cell, before and after.
Needs no GPU and not the package.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math

FLIGHTS = {
    "cur": lambda epl: 8 if epl >= 8 else 4,
    "floor": lambda epl: min(8, 1 << int(math.log2(max(epl, 1)))),
    "8or1": lambda epl: 8 if epl >= 8 else 1,
    "8or2": lambda epl: 8 if epl >= 8 else 2,
    "4or1": lambda epl: 4 if epl >= 4 else 1,
}


def pow2_at_least(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1))))


def pick(cell: dict, epl: int, narrow: int, flights: str, kept: bool, resident_half: int) -> str:
    heads = pow2_at_least(cell["heads"])
    lanes = min(32, max(narrow, heads, pow2_at_least(heads * cell["mean"] / epl),
                        pow2_at_least(32 * resident_half / max(cell["rows"], 1))))
    flight = FLIGHTS[flights](cell["mean"] * heads / lanes)
    return ("warp_per_row.w8" + (f".f{flight}" if flight > 1 else "") + (f".l{lanes}" if lanes < 32 else "")
            + (".lo" if kept else ""))


def judge(cells: list[dict], key: str, rule: tuple, resident_half: int):
    """(geometric mean, worst, cells within 10%) of ``rule``'s picks over the cells' best;
    None where a pick was not measured. The logits are kept as the recorded rule kept them."""
    ratios = []
    for cell in cells:
        times = cell[key]["times"]
        chosen = pick(cell, *rule, cell[key]["rule"].endswith(".lo"), resident_half)
        if chosen not in times:
            return None
        ratios.append(times[chosen] / min(times.values()))
    return math.exp(sum(map(math.log, ratios)) / len(ratios)), max(ratios), sum(r <= 1.1 for r in ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fitted")
    parser.add_argument("held_out")
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--warps-per-sm", type=int, default=64)
    args = parser.parse_args()
    fitted, held = ([json.loads(line) for line in open(path)] for path in (args.fitted, args.held_out))
    resident_half = args.sms * args.warps_per_sm // 2
    for key in ("gat forward", "gat backward"):
        print(f"== {key}")
        rows = []
        for rule in itertools.product((4, 8, 16), (2, 4), FLIGHTS):
            a, b = judge(fitted, key, rule, resident_half), judge(held, key, rule, resident_half)
            if a and b:
                rows.append((a, b, rule))
        rows.sort(key=lambda row: row[0][0])
        for a, b, (epl, narrow, flights) in rows[:8] + [r for r in rows if r[2] == (4, 4, "cur")]:
            print(f"epl {epl} narrow {narrow} flights {flights}: fitted {a[0]:.3f}, worst {a[1]:.2f}, "
                  f"{a[2]}/{len(fitted)} within 10% | held out {b[0]:.3f}, worst {b[1]:.2f}, {b[2]}/{len(held)}")
    print("== gat backward cell by cell: the rule before (epl 4, narrow 4) -> now (epl 8, narrow 2)")
    for name, cells in (("fitted", fitted), ("held out", held)):
        for cell in cells:
            times = cell["gat backward"]["times"]
            best = min(times.values())
            before, now = (pick(cell, e, n, "cur", False, resident_half) for e, n in ((4, 4), (8, 2)))
            print(f"{name:8s} {cell['graph']:16s} {cell['heads']} {cell['dtype']:8s} {before[13:]:8s} "
                  f"{times[before]:.4f} -> {now[13:]:8s} {times[now]:.4f} ms ({times[before] / times[now]:.2f}x; "
                  f"over the best {times[before] / best:.2f} -> {times[now] / best:.2f})")


if __name__ == "__main__":
    main()
