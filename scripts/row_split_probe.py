"""Do split rows close the g-SpMM cells where the space lost to cuSPARSE?

    python3 scripts/row_split_probe.py CELLS.jsonl.gz [...] [--below 1.1] [--out DIR]   (needs a CUDA GPU)

For every collected cell (``python -m gsparse.tune.collect``) whose best measured schedule
is below ``--below`` times cuSPARSE: rebuild the graph from its family parameters on the
GPU and, each as a speed-up over cuSPARSE timed in the same process (device time, median of
repeats, the L2 flushed before each call, every output checked):

- ``recorded best``: the cell's best schedule again, and the same knobs as a degree-sorted
  split-rows schedule at 32 to 512 edges per chunk (one line, as in docs/performance.md);
- ``space``: every schedule of today's space for the cell's task on the graph
  (:func:`gsparse.tune.collect.collect_cell`), summed up as the best of the space, the best
  whole-row schedule, the best split-rows schedule (and its chunk length), the best the
  pruning keeps (LO-SpMM's arithmetic constraints, as the "model" policy prunes), the
  shipped model's pick and the hand rule's.

With ``--out``, the space's measurements are appended to ``DIR/cells.jsonl`` in the format
of ``python -m gsparse.tune.collect``.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import torch

from gsparse import datasets
from gsparse.datasets.structure import describe_structure
from gsparse.kernels import spmm
from gsparse.kernels.schedule import schedule_from_json
from gsparse.target import Target
from gsparse.tune import select
from gsparse.tune.collect import (
    _TOLERANCE,
    Case,
    _measure,
    collect_cell,
    row_length_profile,
)

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


def _recorded_best(case: Case, g, doc: dict, best: dict, device: torch.device,
                   gen: torch.Generator) -> str:
    """The cell's recorded best and its knobs split at 32 to 512 edges, over cuSPARSE."""
    F, dtype = doc["feature_len"], getattr(torch, doc["dtype"])
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
    return f"recorded best {cusparse_ms / again['ms']:.2f}x cuSPARSE; its knobs split {', '.join(speedups)}"


def _space_summary(cell: dict, task, g, target: Target) -> str:
    """Today's space of the cell, measured by collect_cell, over its cuSPARSE time."""
    cusparse_ms = cell["cusparse"]["ms"]
    times = {}
    for entry in cell["schedules"]:
        if "ms" in entry:
            times[schedule_from_json(entry["schedule"])] = entry["ms"]
    default = schedule_from_json(cell["default"]["schedule"])
    times.setdefault(default, cell["default"].get("ms", float("inf")))

    def best(schedules) -> str:
        found = [(times[s], s) for s in schedules if s in times]
        if not found:
            return "-"
        ms, s = min(found, key=lambda x: x[0])
        chunk = f" ({s.row_split})" if isinstance(s, spmm.SplitRows) else ""
        return f"{cusparse_ms / ms:.2f}{chunk}"

    kept = spmm.pruned_space(task, g.stats, target).kept
    model = select.model_choice("spmm", g, task, target)
    split = [s for s in times if isinstance(s, spmm.SplitRows)]
    whole = [s for s in times if not isinstance(s, spmm.SplitRows)]
    return (f"space ({len(cell['schedules'])}): best {best(times)}, whole rows {best(whole)}, "
            f"split rows {best(split)}, pruned {best(kept)}, model {best([model])}, "
            f"default {best([default])} x cuSPARSE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+")
    parser.add_argument("--below", type=float, default=1.1)
    parser.add_argument("--out", help="folder for cells.jsonl (the space's measurements)")
    args = parser.parse_args()
    cells = _losing_cells(args.cells, args.below)
    print(f"{len(cells)} cells below {args.below}x cuSPARSE", flush=True)
    device = torch.device("cuda")
    target = Target.of(device)
    gen = torch.Generator(device=device).manual_seed(0)
    sink = None
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        sink = open(Path(args.out) / "cells.jsonl", "a")
    built: dict[str, object] = {}
    for doc, best in cells:
        family, parameters = doc["graph"]["family"], doc["graph"]["parameters"]
        key = json.dumps(parameters, sort_keys=True)
        if key not in built:
            built = {key: datasets.FAMILIES[family].build(parameters, seed=parameters["seed"], device=device,
                                                          max_edges=30_000_000)}
        g = built[key]
        case, F, dtype = Case(doc["case"]), doc["feature_len"], getattr(torch, doc["dtype"])
        recorded = _recorded_best(case, g, doc, best, device, gen)
        cell = collect_cell(case, g, F, dtype, target, gen)
        task, _ = case.call(g, case.operands(g, F, dtype, gen), F)
        st = doc["graph"]["structure"]
        print(f"{family} E={st['num_edges']} rows={st['num_dst']} mean={st['row_mean']:.0f} max={st['row_max']} "
              f"{doc['case']} F={F} {doc['dtype']}:\n    {recorded}\n    {_space_summary(cell, task, g, target)}",
              flush=True)
        if sink is not None:
            graph_doc = {"index": doc["graph"]["index"], "family": family, "parameters": parameters,
                         "structure": describe_structure(g).as_dict(), "row_lengths": row_length_profile(g)}
            sink.write(json.dumps({"graph": graph_doc, "target": target.to_json(), **cell}) + "\n")
            sink.flush()
    if sink is not None:
        sink.close()


if __name__ == "__main__":
    main()
