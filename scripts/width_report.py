"""Issue 18's width bar, from collected cells: does a feature length between two multiples
of 32 cost about what its neighbours cost per feature?

    python scripts/width_report.py CELLS.jsonl[.gz] [...]

For every graph, case and dtype measured at a feature length F above 32 that is not a
multiple of 32 and at the next multiple of 32 (say 100 and 128), it prints the best time of the space
per feature at each, their ratio (the bar: at most 1.10), and the best schedules. Cells
come from ``python -m gsparse.tune.collect ... --features 96,100,128``, which times every
schedule of each cell's space.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from pathlib import Path

BAR = 1.10


def _docs(paths: list[str]):
    for path in paths:
        raw = Path(path).read_bytes()
        text = gzip.decompress(raw).decode() if path.endswith(".gz") else raw.decode()
        for line in text.splitlines():
            yield path, json.loads(line)


def _best(doc) -> tuple[float, str] | None:
    ran = [(s["ms"], s["schedule"]) for s in doc["schedules"] if "ms" in s]
    return min(ran) if ran else None


def _label(schedule_json: str) -> str:
    knobs = json.loads(schedule_json)
    skeleton = knobs.pop("skeleton", "?").split(".")[-1]
    short = {"rows_per_block": "r", "feature_lanes": "f", "edge_lanes": "e", "vector_width": "v",
             "outputs_per_thread": "o", "nnz_tile": "n", "row_split": "split"}
    parts = [f"{short[k]}{v}" for k, v in knobs.items() if k in short]
    flags = [k for k, v in knobs.items() if v is True]
    return ".".join([skeleton, *parts, *flags])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+")
    args = parser.parse_args(argv)
    groups: dict[tuple, dict[int, dict]] = defaultdict(dict)
    for path, doc in _docs(args.cells):
        key = (path, doc["graph"]["index"], doc["graph"]["family"], doc["case"], doc["dtype"])
        groups[key][doc["feature_len"]] = doc
    print("| family | edges | case | dtype | F | best ms | per feature vs next multiple of 32 "
          "| cuSPARSE / best | best schedule |")
    print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | --- |")
    ratios = []
    for (_, _, family, case, dtype), by_width in sorted(groups.items()):
        for width, doc in sorted(by_width.items()):
            upper = -(-width // 32) * 32
            if width < 32 or width % 32 == 0 or upper not in by_width:
                continue
            best, best_upper = _best(doc), _best(by_width[upper])
            if best is None or best_upper is None:
                continue
            ratio = (best[0] / width) / (best_upper[0] / upper)
            ratios.append(ratio)
            edges = doc["graph"]["structure"]["num_edges"]
            for w, b, d, r in ((width, best, doc, f"{ratio:.2f}"), (upper, best_upper, by_width[upper], "")):
                cusparse = d.get("cusparse", {}).get("ms")
                vs = f"{cusparse / b[0]:.2f}" if cusparse else "-"
                print(f"| {family} | {edges:,} | {case} | {dtype} | {w} | {b[0]:.4f} | {r} | {vs} "
                      f"| {_label(b[1])} |")
    if ratios:
        over = sum(r > BAR for r in ratios)
        print(f"\n{len(ratios)} pairs: per-feature ratio max {max(ratios):.2f}, "
              f"{over} above {BAR:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
