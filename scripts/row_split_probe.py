"""Would shorter row splits close the g-SpMM cells where the space loses to cuSPARSE?

    python3 scripts/row_split_probe.py CELLS.jsonl.gz [...] [--below 1.1]   (needs a CUDA GPU)

For every collected cell (``python -m gsparse.tune.collect``) whose best measured schedule
is below ``--below`` times cuSPARSE: rebuild the graph from its family parameters on the
GPU, time cuSPARSE and the best schedule again, and the same knobs as a degree-sorted
split-rows schedule at 32 to 512 edges per chunk; prints each as a speed-up over cuSPARSE
(device time, median of repeats, the L2 flushed before each call, every output checked).
"""

from __future__ import annotations

import argparse
import gzip
import json

import torch

from gsparse import datasets
from gsparse.kernels import spmm
from gsparse.kernels.schedule import schedule_from_json
from gsparse.tune.collect import _TOLERANCE, Case, _measure

_SPLITS = (32, 64, 128, 256, 512)


def _losing_cells(paths: list[str], below: float) -> list[tuple[dict, dict]]:
    cells = []
    for path in paths:
        for line in gzip.open(path, "rt"):
            doc = json.loads(line)
            ran = [s for s in doc["schedules"] if "ms" in s]
            if "ms" not in doc.get("cusparse", {}) or not ran:
                continue
            best = min(ran, key=lambda s: s["ms"])
            if doc["cusparse"]["ms"] / best["ms"] < below:
                cells.append((doc, best))
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+")
    parser.add_argument("--below", type=float, default=1.1)
    args = parser.parse_args()
    cells = _losing_cells(args.cells, args.below)
    print(f"{len(cells)} cells below {args.below}x cuSPARSE", flush=True)
    device = torch.device("cuda")
    gen = torch.Generator(device=device).manual_seed(0)
    built: dict[str, object] = {}
    for doc, best in cells:
        family, parameters = doc["graph"]["family"], doc["graph"]["parameters"]
        key = json.dumps(parameters, sort_keys=True)
        if key not in built:
            built = {key: datasets.FAMILIES[family].build(parameters, seed=parameters["seed"], device=device,
                                                          max_edges=30_000_000)}
        g = built[key]
        case, F, dtype = Case(doc["case"]), doc["feature_len"], getattr(torch, doc["dtype"])
        operands = case.operands(g, F, dtype, gen)
        _, run = case.call(g, operands, F)
        ref, tolerance = case.reference(g, operands, F), _TOLERANCE[dtype]
        call, pick = case.cusparse(g, operands)
        cusparse_ms = _measure(call, ref, tolerance, device, 0.02, True, pick)["ms"]
        schedule = schedule_from_json(best["schedule"])
        again = _measure(lambda: run(schedule), ref, tolerance, device, 0.02, True)
        speedups = []
        if isinstance(schedule, (spmm.OnePass, spmm.SplitRows)):
            knobs = {**schedule.knobs(), "degree_sorted": True}
            knobs.pop("row_split", None)
            for split in _SPLITS:
                s = spmm.SplitRows(**knobs, row_split=split).validate()
                m = _measure(lambda s=s: run(s), ref, tolerance, device, 0.02, True)
                speedups.append(f"{split}: {cusparse_ms / m['ms']:.2f}" if "ms" in m else f"{split}: {m['error']}")
        st = doc["graph"]["structure"]
        print(f"{family} E={st['num_edges']} rows={st['num_dst']} mean={st['row_mean']:.0f} max={st['row_max']} "
              f"{doc['case']} F={F} {doc['dtype']}: best of space {cusparse_ms / again['ms']:.2f}x cuSPARSE; "
              f"splits {', '.join(speedups)}", flush=True)


if __name__ == "__main__":
    main()
