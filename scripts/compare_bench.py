"""Compare two `gsparse bench` result documents cell by cell: before / after time ratios.

    python scripts/compare_bench.py before/results.json after/results.json

Cells are matched by (operator, case, workload, feature length, dtype). For every
implementation measured in both runs it prints the median times and their ratio (after /
before: above 1 is slower), then the geometric mean of the ratios per implementation. The
baselines' ratios show the run-to-run noise of the machine: the two runs time the same
cuSPARSE and PyG calls.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


def _cells(path: str) -> dict[tuple, dict]:
    doc = json.loads(Path(path).read_text())
    return {(c["op"], c["case"], c["workload"], c["feature_len"], c["dtype"]): c for c in doc["cells"]}


def _ms(cell: dict, name: str) -> float | None:
    entry = cell["results"].get(name)
    return entry["median_ms"] if entry and entry.get("status") == "ok" else None


def main(before_path: str, after_path: str) -> int:
    before, after = _cells(before_path), _cells(after_path)
    keys = [k for k in before if k in after]
    if not keys:
        print("no cell is in both documents")
        return 1
    names = sorted({n for k in keys for n in before[k]["results"]} & {n for k in keys for n in after[k]["results"]},
                   key=lambda n: (n != "gsparse", n))
    ratios: dict[str, list[float]] = {n: [] for n in names}
    print("| cell | " + " | ".join(f"{n} before ms | {n} after ms | ratio" for n in names) + " |")
    print("| --- |" + " ---: | ---: | ---: |" * len(names))
    for key in keys:
        row = [f"{key[0]}/{key[1]} {key[2]} F={key[3]} {key[4]}"]
        for name in names:
            old, new = _ms(before[key], name), _ms(after[key], name)
            if old is None or new is None:
                row += ["-", "-", "-"]
                continue
            ratios[name].append(new / old)
            row += [f"{old:.4g}", f"{new:.4g}", f"{new / old:.3f}"]
        print("| " + " | ".join(row) + " |")
    print()
    for name in names:
        values = ratios[name]
        if values:
            geomean = math.exp(sum(math.log(v) for v in values) / len(values))
            print(f"{name}: geometric mean of after / before over {len(values)} cells = {geomean:.4f} "
                  f"(min {min(values):.3f}, max {max(values):.3f})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
