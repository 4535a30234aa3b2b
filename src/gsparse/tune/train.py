"""Train and judge the cost models on collected cells, holding out whole graph families.

    python -m gsparse.tune.train CELLS.jsonl [...] --held-out community,rmat,road,sampled
        [--out DIR] [--model dnn|rank|blend|both] [--weight CELLS.jsonl=W ...]

Reads the cells :mod:`gsparse.tune.collect` wrote, recomputes every schedule's features
(:func:`~gsparse.tune.features.featurize`), trains one model per operator on the cells of
the training families and reports, on the held-out families: Pearson (log time, within each
cell; of the costs, and for a blended rank model also of its prediction of time, the
least-squares part), mean within-cell Spearman, and the regret of the model's top-1 and top-5 picks
(their best measured time over the cell's best, minus 1), next to the hand rule's regret.
With ``--out`` the models trained on the training families are written there, ready to
ship (``--ship-all`` trains them on every family instead, and the held-out judgement no
longer holds for them). Cell files may be gzipped (``.jsonl.gz``). ``--weight FILE=W``
weighs each training cell of one of the files W against 1 for the others' (rank models: see
:class:`~gsparse.tune.models.RankModel`'s ``fit``); W = 0 leaves its cells out of training.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..datasets.structure import GraphStructure
from ..kernels import sddmm, spmm
from ..kernels.schedule import schedule_from_json
from ..target import Target
from .features import featurize
from .metrics import pearson, spearman, top_k_regret
from .models import DnnCostModel, RankModel

__all__ = ["Cell", "fit", "load_cells", "main", "parse_weights"]


@dataclass(frozen=True)
class Cell:
    """One measured cell: its family, task, graph structure, target, and every schedule that
    ran (with its median time; the hand rule's pick among them, with its own measurement
    where the sweep's space lacks it, as the "model" policy ranks it), the hand rule's and
    cuSPARSE's times; and its weight in training (its file's, :func:`load_cells`)."""

    operator: str
    family: str
    task: object
    structure: GraphStructure
    target: Target
    schedules: tuple
    times_ms: np.ndarray
    default_ms: float
    default_schedule: object
    cusparse_ms: float
    weight: float = 1.0

    @property
    def best_ms(self) -> float:
        return float(min(self.times_ms.min(), self.default_ms))


def _task(operator: str, fields: dict):
    fields = dict(fields)
    for key in ("dtype", "index_dtype"):
        fields[key] = getattr(torch, fields[key])
    for key in ("lhs_shape", "rhs_shape", "out_shape", "full_shape"):
        if fields.get(key) is not None:
            fields[key] = tuple(fields[key])
    return (spmm.SpmmTask if operator == "spmm" else sddmm.SddmmTask)(**fields)


def parse_weights(items: Iterable[str], paths: Iterable[str | Path]) -> dict[Path, float]:
    """``{resolved path: weight}`` from ``FILE=W`` items, each FILE one of ``paths``.

    Raises:
        ValueError: an item is not ``FILE=W`` with W a finite number >= 0, or names a file
            that is not among ``paths``.
    """
    known = {Path(p).resolve() for p in paths}
    weights = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = math.nan
        if not sep or not name or not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"a weight is FILE=W with W a number >= 0, got {item!r}")
        if Path(name).resolve() not in known:
            raise ValueError(f"{name} is not one of the cell files given, so its weight would weigh nothing")
        weights[Path(name).resolve()] = weight
    return weights


def load_cells(paths: Iterable[str | Path], weights: dict[Path, float] | None = None) -> list[Cell]:
    """Every cell of the collected files that has at least two schedules that ran; a cell's
    ``weight`` is its file's in ``weights`` (keyed by resolved path, :func:`parse_weights`),
    else 1."""
    cells = []
    for path in paths:
        path = Path(path)
        weight = (weights or {}).get(path.resolve(), 1.0)
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        for line in text.splitlines():
            doc = json.loads(line)
            operator = doc["case"].split(":")[0]
            ran = [(schedule_from_json(s["schedule"]), s["ms"]) for s in doc["schedules"] if "ms" in s]
            if len(ran) < 2 or "ms" not in doc["default"]:
                continue
            structure = dict(doc["graph"]["structure"])
            structure["lane_padding"] = tuple(structure["lane_padding"])  # a JSON list
            # The hand rule's time as the sweep measured it, next to every other schedule's
            # (collections before this version timed the policy's pick under its name).
            default = schedule_from_json(doc["default"]["schedule"])
            default_ms = next((t for s, t in ran if s == default), None)
            if default_ms is None:  # outside the space: the policy ranks it too
                default_ms = doc["default"]["ms"]
                ran.append((default, default_ms))
            cells.append(Cell(
                operator=operator, family=doc["graph"]["family"], task=_task(operator, doc["task"]),
                structure=GraphStructure(**structure), target=Target(**doc["target"]),
                schedules=tuple(s for s, _ in ran), times_ms=np.array([t for _, t in ran]),
                default_ms=default_ms, default_schedule=default,
                cusparse_ms=doc.get("cusparse", {}).get("ms", math.nan), weight=weight,
            ))
    return cells


def featurize_cells(cells: list[Cell]) -> list[np.ndarray]:
    """Each cell's :func:`featurize` rows, one per schedule."""
    return [featurize(c.task, c.structure, c.target, c.schedules) for c in cells]


def _matrix(cells: list[Cell], features: list[np.ndarray] | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, times, groups)`` of ``cells``, from their :func:`featurize_cells` rows where given."""
    features = featurize_cells(cells) if features is None else features
    groups = np.concatenate([np.full(len(c.schedules), i) for i, c in enumerate(cells)])
    return np.concatenate(features), np.concatenate([c.times_ms for c in cells]), groups


# The model kinds: the DNN, LambdaMART alone, and the blend of 100 LambdaMART trees with 100
# least-squares trees (RankModel's pointwise_trees; saved as a rank model), as shipped: its
# costs follow log time far closer on held-out families at about the same first picks
# (docs/tuning.md).
MODEL_KINDS = ("dnn", "rank", "blend")
# What ``--model both`` writes: the kinds the package ships (rank alone would overwrite the
# shipped blend's file).
SHIPPED_KINDS = ("dnn", "blend")


def fit(model, cells: list[Cell], features: list[np.ndarray] | None = None):
    """Fit ``model`` on ``cells`` with their weights (cells of weight 0 left out), and return
    it. With every weight 1 no weights are passed: the trees are those of an unweighted fit.
    ``features``: each cell's :func:`featurize_cells` rows, where already computed."""
    kept = [i for i, c in enumerate(cells) if c.weight > 0]
    cells = [cells[i] for i in kept]
    x, t, g = _matrix(cells, None if features is None else [features[i] for i in kept])
    if all(c.weight == 1 for c in cells):
        model.fit(x, t, g)
    elif isinstance(model, RankModel):
        model.fit(x, t, g, weights=np.concatenate([np.full(len(c.schedules), c.weight) for c in cells]))
    else:
        raise ValueError(f"{type(model).__name__} takes no weights: weigh cells for rank models only")
    return model


def make_model(kind: str):
    if kind == "dnn":
        return DnnCostModel(epochs=60)
    return RankModel(trees=100, pointwise_trees=100) if kind == "blend" else RankModel(trees=200)


def _model_file(out: str, operator: str, kind: str) -> Path:
    Path(out).mkdir(parents=True, exist_ok=True)
    return Path(out) / f"{operator}-{'rank' if kind == 'blend' else kind}.json"


def judge(model, cells: list[Cell], features: list[np.ndarray] | None = None) -> dict[str, float]:
    """The model's quality on ``cells`` (see the module docstring); ``features``: their
    :func:`featurize_cells` rows, where already computed."""
    x, t, g = _matrix(cells, features)
    predicted = model.predict(x)
    regret1 = top_k_regret(predicted, t, g, 1)
    regret5 = top_k_regret(predicted, t, g, 5)
    picks = [c.times_ms[int(np.argmin(predicted[g == i]))] for i, c in enumerate(cells)]
    within = [p / c.best_ms for p, c in zip(picks, cells)]
    default = [c.default_ms / c.best_ms for c in cells]
    # A blended rank model's prediction of time is its least-squares part alone.
    has_time_part = getattr(model, "time_trees", 0) > 0
    return {
        "cells": len(cells),
        "pearson_log_within_cell": pearson(predicted, t, g),
        "pearson_time_part_within_cell": pearson(model.predict_time(x), t, g) if has_time_part else float("nan"),
        "spearman_within_cell": spearman(predicted, t, g),
        "top1_regret_median": float(np.median(regret1)), "top1_regret_max": float(regret1.max()),
        "top5_regret_median": float(np.median(regret5)), "top5_regret_max": float(regret5.max()),
        "pick_within_10pct": float(np.mean(np.array(within) <= 1.10)),
        "pick_within_25pct": float(np.mean(np.array(within) <= 1.25)),
        "pick_over_best_geomean": float(np.exp(np.mean(np.log(within)))),
        "default_over_best_geomean": float(np.exp(np.mean(np.log(default)))),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gsparse.tune.train", description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", help="cells.jsonl files from gsparse.tune.collect")
    parser.add_argument("--held-out", default="community,rmat,road,sampled",
                        help="families judged but never trained on")
    parser.add_argument("--model", choices=(*MODEL_KINDS, "both"), default="both",
                        help="both: the shipped kinds, dnn and blend (a blend is written as the rank "
                             "model, as rank is)")
    parser.add_argument("--out", help="write the models here")
    parser.add_argument("--weight", action="append", default=[], metavar="FILE=W",
                        help="weigh the training cells of FILE (one of the cell files) W against 1 "
                             "(rank and blend models; 0 leaves them out); repeatable")
    parser.add_argument("--ship-all", action="store_true",
                        help="train the written models on every family (default: the training "
                             "families only, so that the held-out judgement stays true of them)")
    args = parser.parse_args(argv)
    try:
        weights = parse_weights(args.weight, args.cells)
    except ValueError as error:
        parser.error(str(error))
    if weights and args.model in ("dnn", "both"):
        parser.error("--weight is for the rank models: pass --model rank or blend")
    cells = load_cells(args.cells, weights)
    held_out = set(args.held_out.split(","))
    kinds = SHIPPED_KINDS if args.model == "both" else (args.model,)
    report = {}
    for operator in ("spmm", "sddmm"):
        mine = [c for c in cells if c.operator == operator]
        train = [c for c in mine if c.family not in held_out and c.weight > 0]
        test = [c for c in mine if c.family in held_out]
        if not train:
            print(f"{operator}: no training cells; skipped")
            continue
        if not test:  # the families held out are in no file: train on all, judge nothing
            print(f"{operator}: no cells of {sorted(held_out)}; trained on all {len(train)} cells")
            if args.out:
                features = featurize_cells(train)
                for kind in kinds:
                    fit(make_model(kind), train, features).save(_model_file(args.out, operator, kind))
            continue
        features, test_features = featurize_cells(train), featurize_cells(test)  # once for every kind
        for kind in kinds:
            model = fit(make_model(kind), train, features)
            report[f"{operator}/{kind}"] = judge(model, test, test_features)
            print(f"{operator} {kind}: trained on {len(train)} cells of "
                  f"{sorted({c.family for c in train})}, judged on {len(test)} held-out cells of "
                  f"{sorted(held_out)}:")
            for name, value in report[f"{operator}/{kind}"].items():
                print(f"    {name}: {value:.4g}" if isinstance(value, float) else f"    {name}: {value}")
            if args.out:
                final = model
                if args.ship_all:
                    final = fit(make_model(kind), mine)
                final.save(_model_file(args.out, operator, kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
