"""Leave-one-family-out judgement of the rank models, per family, as Markdown tables.

    python scripts/lofo.py [CELLS.jsonl[.gz] ...] [--operators spmm,sddmm] [--model rank|blend]
        [--weight CELLS.jsonl.gz=W ...]

Every family of the collected cells (all of ``docs/results/tuning`` by default) is held out
in turn: a rank model (:func:`gsparse.tune.train.make_model`: LambdaMART alone, or ``--model
blend``, with least-squares trees, as shipped) is trained on the
cells of the other families and ranks each held-out cell's schedules (the hand rule's pick
among them, as the "model" policy ranks it). Per family and over all: the model's first
choice within 5%, 10% and 25% of the cell's best, the worst cell, the geometric mean of
pick over best, Pearson (log time, standardised within each cell) and the mean within-cell
Spearman; the hand rule's figures next to them; over all, the same for copy_lhs at one
feature and at one to four (the model's most repeated miss). ``--weight FILE=W`` weighs the
training cells of one of the files W against 1 (``gsparse.tune.train``'s option); at W = 0
they are judged, never trained on, and with any weight each such file's cells and the
others' get rows of their own, so that recipes are compared on the same cells. This is how
features, model kind, hyper-parameters and weights are chosen, never on a file of held-out
cells alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")  # LightGBM's threads fight over a small machine

from gsparse.tune.metrics import pearson, spearman
from gsparse.tune.train import featurize_cells, fit, load_cells, make_model, parse_weights

_CELLS = sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "docs/results/tuning").glob("*.jsonl.gz"))


def _row(name: str, ratios: np.ndarray, default: np.ndarray, predicted: list, times: list) -> str:
    g = np.concatenate([np.full(len(t), i) for i, t in enumerate(times)])
    p, t = np.concatenate(predicted), np.concatenate(times)
    return (f"| {name} | {len(ratios)} | {np.mean(ratios <= 1.05):.0%} | {np.mean(ratios <= 1.10):.0%} | "
            f"{np.mean(ratios <= 1.25):.0%} | {ratios.max():.2f} | {np.exp(np.log(ratios).mean()):.3f} | "
            f"{pearson(p, t, g):.2f} | {spearman(p, t, g):.2f} | {np.mean(default <= 1.10):.0%} | "
            f"{default.max():.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="*", default=_CELLS)
    parser.add_argument("--operators", default="spmm,sddmm")
    parser.add_argument("--model", choices=("rank", "blend"), default="blend",
                        help="rank: LambdaMART alone; blend: with least-squares trees, as shipped (make_model)")
    parser.add_argument("--weight", action="append", default=[], metavar="FILE=W",
                        help="weigh the cells of FILE (one of the cell files) W in training against 1; "
                             "0: judged only; repeatable")
    args = parser.parse_args(argv)
    try:
        weights = parse_weights(args.weight, args.cells)
    except ValueError as error:
        parser.error(str(error))
    cells, source = [], []
    for path in args.cells:  # one file at a time, to know each cell's file
        mine = load_cells([path], weights)
        cells += mine
        source += [Path(path).resolve()] * len(mine)
    features = featurize_cells(cells)
    for operator in args.operators.split(","):
        mine = [i for i, c in enumerate(cells) if c.operator == operator]
        print(f"\n{operator}: {len(mine)} cells, each family held out in turn\n")
        print("| held out | cells | within 5% | within 10% | within 25% | worst | geomean | Pearson | "
              "Spearman | hand rule within 10% | hand rule worst |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        everything: dict[int, np.ndarray] = {}
        for family in sorted({cells[i].family for i in mine}):
            train = [i for i in mine if cells[i].family != family]
            test = [i for i in mine if cells[i].family == family]
            model = fit(make_model(args.model), [cells[i] for i in train], [features[i] for i in train])
            everything.update((i, model.predict(features[i])) for i in test)
            print(_summary(family, test, cells, everything))
        judged = sorted(everything)
        print(_summary("**all**", judged, cells, everything))
        for path, weight in weights.items():
            print(_summary(f"all but {path.name}", [i for i in judged if source[i] != path], cells, everything))
            print(_summary(f"{path.name} (weight {weight:g})", [i for i in judged if source[i] == path],
                           cells, everything))
        for name, most in (("1 feature", 1), ("1-4 features", 4)):
            rows = [i for i in judged if _copy_lhs_features(cells[i]) <= most]
            if rows:
                print(_summary(f"copy_lhs, {name}", rows, cells, everything))
    return 0


def _copy_lhs_features(cell) -> float:
    """A g-SpMM copy_lhs cell's feature length (its output's elements a row); inf otherwise."""
    task = cell.task
    if cell.operator != "spmm" or getattr(task, "op", None) != "copy_lhs":
        return float("inf")
    return float(np.prod(task.out_shape))


def _summary(name: str, rows: list[int], cells, predicted: dict[int, np.ndarray]) -> str:
    ratios = np.array([cells[i].times_ms[int(np.argmin(predicted[i]))] / cells[i].best_ms for i in rows])
    default = np.array([cells[i].default_ms / cells[i].best_ms for i in rows])
    return _row(name, ratios, default, [predicted[i] for i in rows], [cells[i].times_ms for i in rows])


if __name__ == "__main__":
    sys.exit(main())
