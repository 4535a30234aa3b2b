"""LO-SpMM's listwise rank model: LambdaMART, trained with LightGBM, evaluated with NumPy.

Training (needs ``pip install 'gsparse[tune]'``, for LightGBM) turns each group's times
into relevance grades, ``grade = floor(G * (n - 1 - r) / (n - 1))`` for the row of rank
``r`` (0 = fastest) among the ``n`` rows of its group with ``G = grades - 1``, and fits
LightGBM's ``lambdarank`` objective (LambdaMART: gradient-boosted trees whose gradients
are pairwise swaps weighted by the change of NDCG). That learns the order within a group,
sharpest at its top, but not how far apart the schedules are.

Optionally (``pointwise_trees``), a second booster is fitted by least squares to each
group's log times standardised within the group (:func:`standardised_log_times`): it
learns the spacing too, and the sum of the two (each scaled to the same mean spread within
a training group) keeps LambdaMART's first choices while its costs follow the log times
far closer (within-group Pearson; ``scripts/lofo.py``).

``fit(..., weights=)`` weighs each group (one weight for all its rows): LightGBM multiplies
the rows' gradients and hessians by it in both boosters, and the two parts' spreads are
averaged over the training groups with the same weights.

Inference needs only NumPy: the booster is dumped to a :class:`TreeEnsemble` and saved as
JSON. ``predict`` returns the negated ranking score, a cost (lower is faster);
``predict_time`` the least-squares part alone, the model's prediction of time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..interfaces import check_features, check_training_data, group_rows
from .trees import MAX_LEAVES, TreeEnsemble

_FORMAT = "gsparse-rank-model"
_VERSION = 1


def standardised_log_times(times_ms: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """float ``[n]``: ``log(times_ms)`` standardised within each group (zero mean, unit
    deviation; a group of equal times gives zeros): the pointwise booster's target, free of
    each graph's scale, which no feature of a schedule can predict."""
    y = np.log(np.asarray(times_ms, dtype=np.float64))
    out = np.zeros(len(y))
    for rows in group_rows(groups) if len(y) else []:
        std = y[rows].std()
        if std > 0:
            out[rows] = (y[rows] - y[rows].mean()) / std
    return out


def _mean_spread(scores: np.ndarray, groups: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The mean over groups of two rows or more of the scores' deviation within the group
    (weighted by each group's weight, its first row's in ``weights``, where given)."""
    rows_of = [rows for rows in group_rows(groups) if len(rows) > 1]
    spreads = [scores[rows].std() for rows in rows_of]
    if not spreads:
        return 1.0
    mean = float(np.average(spreads, weights=None if weights is None else [weights[r[0]] for r in rows_of]))
    return mean if mean > 0 else 1.0


def relevance_grades(times_ms: np.ndarray, groups: np.ndarray, grades: int) -> np.ndarray:
    """int ``[n]``: each row's grade in ``0 .. grades - 1`` by its time's rank in its group.

    The fastest row of a group gets ``grades - 1``, the slowest 0, the others in between
    linearly in rank; equal times get the grade of their first rank.
    """
    t = np.asarray(times_ms, dtype=np.float64)
    out = np.zeros(len(t), dtype=np.int64)
    for rows in group_rows(groups) if len(t) else []:
        n = len(rows)
        if n == 1:
            out[rows] = grades - 1
            continue
        ranks = np.searchsorted(np.sort(t[rows]), t[rows], side="left")
        out[rows] = ((grades - 1) * (n - 1 - ranks)) // (n - 1)
    return out


class RankModel:
    """LambdaMART over schedule features (a :class:`~gsparse.tune.interfaces.CostModel`).

    Args:
        trees: boosting rounds (trees in the ensemble).
        leaves: most leaves per tree.
        max_depth: most splits on a path (bounds the NumPy evaluator's steps).
        learning_rate: shrinkage of each tree.
        min_rows_in_leaf: fewest training rows in a leaf.
        grades: relevance grades per group (see ``gsparse.tune.models.relevance_grades``; LightGBM's
            default gains ``2^g - 1`` weigh the fastest rows most).
        truncation: how many top positions of each group the lambdarank gradient covers.
        pointwise_trees: rounds of the least-squares booster added to LambdaMART's (0: none).
        seed: seed of LightGBM's randomness (training is deterministic for a seed).
    """

    def __init__(self, *, trees: int = 100, leaves: int = 31, max_depth: int = 8,
                 learning_rate: float = 0.1, min_rows_in_leaf: int = 20, grades: int = 16,
                 truncation: int = 30, pointwise_trees: int = 0, seed: int = 0) -> None:
        if not 2 <= grades <= 31:
            raise ValueError(f"grades must be in [2, 31] (LightGBM's default gains), got {grades}")
        if not 2 <= leaves <= MAX_LEAVES:
            raise ValueError(f"leaves must be in [2, {MAX_LEAVES}] (the NumPy evaluator's bit masks), "
                             f"got {leaves}")
        for name, value in (("trees", trees), ("max_depth", max_depth),
                            ("min_rows_in_leaf", min_rows_in_leaf), ("truncation", truncation)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if pointwise_trees < 0:
            raise ValueError(f"pointwise_trees must be >= 0, got {pointwise_trees}")
        self.params = dict(trees=trees, leaves=leaves, max_depth=max_depth, learning_rate=learning_rate,
                           min_rows_in_leaf=min_rows_in_leaf, grades=grades, truncation=truncation, seed=seed)
        if pointwise_trees:  # only then: LambdaMART alone saves the parameters it always did
            self.params["pointwise_trees"] = pointwise_trees
        self.ensemble: TreeEnsemble | None = None
        # The ensemble's last trees that are the least-squares part (0: none), and that part.
        self.time_trees = 0
        self._time_part: TreeEnsemble | None = None
        # the LightGBM boosters of the last fit (None after load): LambdaMART's, least squares'
        self.booster: Any = None
        self.pointwise_booster: Any = None

    def fit(self, features: np.ndarray, times_ms: np.ndarray, groups: np.ndarray,
            weights: np.ndarray | None = None) -> None:
        """Train the LambdaMART ensemble (with LightGBM) on ``features`` ``[n, d]``,
        ``times_ms`` ``[n]`` and ``groups`` ``[n]`` (see :class:`gsparse.tune.CostModel`).

        ``weights`` ``[n]``: each row's group's weight (finite, > 0, equal over a group's
        rows; module docstring). None: every group counts once, as an all-ones array would
        (the same trees)."""
        try:
            import lightgbm
        except ImportError as error:
            raise ImportError("training the rank model needs LightGBM: pip install 'gsparse[tune]' "
                              "(inference does not)") from error
        x, t, g = check_training_data(features, times_ms, groups)
        w = None
        if weights is not None:
            w = np.asarray(weights, dtype=np.float64)
            if w.shape != t.shape:
                raise ValueError(f"weights must have shape {t.shape} like the features' rows, got {w.shape}")
            if not np.all(np.isfinite(w) & (w > 0)):
                raise ValueError("weights must be finite and > 0 (leave a group out rather than weigh it 0)")
            if any(np.ptp(w[rows]) > 0 for rows in group_rows(g)):
                raise ValueError("weights must be equal over each group's rows (a weight is a group's)")
        order = np.argsort(g, kind="stable")  # LightGBM wants each group's rows together
        x, t, g = x[order], t[order], g[order]
        if w is not None:
            w = w[order]
        _, sizes = np.unique(g, return_counts=True)
        p = self.params
        trees = {"num_leaves": p["leaves"], "max_depth": p["max_depth"], "learning_rate": p["learning_rate"],
                 "min_data_in_leaf": p["min_rows_in_leaf"], "seed": p["seed"], "deterministic": True,
                 "force_row_wise": True, "num_threads": 1, "verbose": -1}
        data = lightgbm.Dataset(x, label=relevance_grades(t, g, p["grades"]), group=sizes, weight=w,
                                params={"verbose": -1})
        self.booster = lightgbm.train({**trees, "objective": "lambdarank",
                                       "lambdarank_truncation_level": p["truncation"]},
                                      data, num_boost_round=p["trees"])
        # The ensemble is a score (higher is faster): the pointwise part, a log time, counts negated.
        parts = [(TreeEnsemble.from_lightgbm(self.booster.dump_model()), 1.0)]
        self.pointwise_booster = None
        if p.get("pointwise_trees", 0):
            data = lightgbm.Dataset(x, label=standardised_log_times(t, g), weight=w, params={"verbose": -1})
            self.pointwise_booster = lightgbm.train({**trees, "objective": "regression"}, data,
                                                    num_boost_round=p["pointwise_trees"])
            parts.append((TreeEnsemble.from_lightgbm(self.pointwise_booster.dump_model()), -1.0))
            # Equal say: each part over its mean spread within a training group.
            parts = [(part, weight / _mean_spread(part.predict(x), g, w)) for part, weight in parts]
        self.ensemble = TreeEnsemble.weighted_sum(parts)
        self.time_trees = parts[1][0].num_trees if len(parts) > 1 else 0
        self._time_part = None

    def predict(self, features: np.ndarray, *, fixed: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """``[n]`` costs (lower is faster): the negated LambdaMART scores, plus the pointwise
        booster's standardised log times where there is one (each scaled: module docstring).

        ``fixed``: ``(columns, masks)``, the rows' masks over ``columns`` from an earlier
        :meth:`predict_apart` (features of a schedule alone, kept from graph to graph); the
        trees then read only the other columns of ``features``. The costs are the same."""
        if self.ensemble is None:
            raise RuntimeError("the rank model is not trained: call fit() or load() first")
        x = check_features(features, self.ensemble.num_features)
        if fixed is None:
            return -self.ensemble.predict(x)
        columns, masks = fixed
        bits = self.ensemble.masks(x, ~columns)
        return -self.ensemble.scores(np.bitwise_and(bits, masks, out=bits))

    def predict_apart(self, features: np.ndarray, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`predict`'s costs of ``features``, and the rows' masks over ``columns``
        (``[n, trees]``) for its ``fixed`` on later calls, from one pass of the trees."""
        if self.ensemble is None:
            raise RuntimeError("the rank model is not trained: call fit() or load() first")
        bits, masks = self.ensemble.masks_apart(check_features(features, self.ensemble.num_features), columns)
        return -self.ensemble.scores(bits), masks

    def predict_time(self, features: np.ndarray) -> np.ndarray:
        """``[n]`` the least-squares part's prediction alone: each row's log time standardised
        within its group, up to a positive scale. This is what the model predicts of time;
        :meth:`predict`'s costs add LambdaMART's score, which orders the schedules of a graph
        (its first choices) but does not space them.

        Raises:
            ValueError: the model has no least-squares part (``pointwise_trees`` 0).
        """
        if self.ensemble is None:
            raise RuntimeError("the rank model is not trained: call fit() or load() first")
        if not self.time_trees:
            raise ValueError("this rank model has no least-squares part (trained with pointwise_trees=0)")
        if self._time_part is None:
            self._time_part = self.ensemble.last_trees(self.time_trees)
        # weighted negatively in the score (a log time is a cost), as predict negates it back
        return -self._time_part.predict(check_features(features, self.ensemble.num_features))

    def save(self, path: str | Path) -> None:
        """Write the trained ensemble to ``path`` as JSON."""
        if self.ensemble is None:
            raise RuntimeError("the rank model is not trained: nothing to save")
        Path(path).write_text(json.dumps({"format": _FORMAT, "version": _VERSION, "params": self.params,
                                          "time_trees": self.time_trees, "ensemble": self.ensemble.to_dict()}))

    def load(self, path: str | Path) -> RankModel:
        """Read the ensemble :meth:`save` wrote into this model, and return it."""
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or data.get("format") != _FORMAT or data.get("version") != _VERSION:
            raise ValueError(f"{path} is not a rank model of format {_FORMAT!r} version {_VERSION}")
        self.params = data["params"]
        self.ensemble = TreeEnsemble.from_dict(data["ensemble"])
        # Files saved before "time_trees": the least-squares booster made all its rounds.
        self.time_trees = int(data.get("time_trees", self.params.get("pointwise_trees", 0)))
        self._time_part = None
        self.booster = None
        return self
