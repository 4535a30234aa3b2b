"""Leave-one-family-out judgement of the rank models, per family, as Markdown tables.

    python scripts/lofo.py [CELLS.jsonl[.gz] ...] [--operators spmm,sddmm] [--model rank|blend]

Every family of the collected cells (all of ``docs/results/tuning`` by default) is held out
in turn: a rank model (:func:`gsparse.tune.train.make_model`: LambdaMART alone, or ``--model
blend``, with least-squares trees, as shipped) is trained on the
cells of the other families and ranks each held-out cell's schedules (the hand rule's pick
among them, as the "model" policy ranks it). Per family and over all: the model's first
choice within 5%, 10% and 25% of the cell's best, the worst cell, the geometric mean of
pick over best, Pearson (log time, standardised within each cell) and the mean within-cell
Spearman; the hand rule's figures next to them. This is how features, model kind and
hyper-parameters are chosen, never on a file of held-out cells alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")  # LightGBM's threads fight over a small machine

from gsparse.tune.features import featurize
from gsparse.tune.metrics import pearson, spearman
from gsparse.tune.train import load_cells, make_model

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
    args = parser.parse_args(argv)
    cells = load_cells(args.cells)
    features = [featurize(c.task, c.structure, c.target, c.schedules) for c in cells]
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
            model = make_model(args.model)
            model.fit(np.concatenate([features[i] for i in train]),
                      np.concatenate([cells[i].times_ms for i in train]),
                      np.concatenate([np.full(len(cells[i].times_ms), i) for i in train]))
            everything.update((i, model.predict(features[i])) for i in test)
            print(_summary(family, test, cells, everything))
        print(_summary("**all**", sorted(everything), cells, everything))
    return 0


def _summary(name: str, rows: list[int], cells, predicted: dict[int, np.ndarray]) -> str:
    ratios = np.array([cells[i].times_ms[int(np.argmin(predicted[i]))] / cells[i].best_ms for i in rows])
    default = np.array([cells[i].default_ms / cells[i].best_ms for i in rows])
    return _row(name, ratios, default, [predicted[i] for i in rows], [cells[i].times_ms for i in rows])


if __name__ == "__main__":
    sys.exit(main())
