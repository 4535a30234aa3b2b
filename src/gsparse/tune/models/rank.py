"""LO-SpMM's listwise rank model: LambdaMART, trained with LightGBM, evaluated with NumPy.

Training (needs ``pip install 'gsparse[tune]'``, for LightGBM) turns each group's times
into relevance grades, ``grade = floor(G * (n - 1 - r) / (n - 1))`` for the row of rank
``r`` (0 = fastest) among the ``n`` rows of its group with ``G = grades - 1``, and fits
LightGBM's ``lambdarank`` objective (LambdaMART: gradient-boosted trees whose gradients
are pairwise swaps weighted by the change of NDCG). Only the order within a group is
learnt.

Inference needs only NumPy: the booster is dumped to a :class:`TreeEnsemble` and saved as
JSON. ``predict`` returns the negated ranking score, a cost (lower is faster).
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
        seed: seed of LightGBM's randomness (training is deterministic for a seed).
    """

    def __init__(self, *, trees: int = 100, leaves: int = 31, max_depth: int = 8,
                 learning_rate: float = 0.1, min_rows_in_leaf: int = 20, grades: int = 16,
                 truncation: int = 30, seed: int = 0) -> None:
        if not 2 <= grades <= 31:
            raise ValueError(f"grades must be in [2, 31] (LightGBM's default gains), got {grades}")
        if not 2 <= leaves <= MAX_LEAVES:
            raise ValueError(f"leaves must be in [2, {MAX_LEAVES}] (the NumPy evaluator's bit masks), "
                             f"got {leaves}")
        for name, value in (("trees", trees), ("max_depth", max_depth),
                            ("min_rows_in_leaf", min_rows_in_leaf), ("truncation", truncation)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.params = dict(trees=trees, leaves=leaves, max_depth=max_depth, learning_rate=learning_rate,
                           min_rows_in_leaf=min_rows_in_leaf, grades=grades, truncation=truncation, seed=seed)
        self.ensemble: TreeEnsemble | None = None
        self.booster: Any = None  # the LightGBM booster of the last fit (None after load)

    def fit(self, features: np.ndarray, times_ms: np.ndarray, groups: np.ndarray) -> None:
        """Train the LambdaMART ensemble (with LightGBM) on ``features`` ``[n, d]``,
        ``times_ms`` ``[n]`` and ``groups`` ``[n]`` (see :class:`gsparse.tune.CostModel`)."""
        try:
            import lightgbm
        except ImportError as error:
            raise ImportError("training the rank model needs LightGBM: pip install 'gsparse[tune]' "
                              "(inference does not)") from error
        x, t, g = check_training_data(features, times_ms, groups)
        order = np.argsort(g, kind="stable")  # LightGBM wants each group's rows together
        x, t, g = x[order], t[order], g[order]
        _, sizes = np.unique(g, return_counts=True)
        p = self.params
        data = lightgbm.Dataset(x, label=relevance_grades(t, g, p["grades"]), group=sizes,
                                params={"verbose": -1})
        self.booster = lightgbm.train(
            {
                "objective": "lambdarank", "num_leaves": p["leaves"], "max_depth": p["max_depth"],
                "learning_rate": p["learning_rate"], "min_data_in_leaf": p["min_rows_in_leaf"],
                "lambdarank_truncation_level": p["truncation"], "seed": p["seed"],
                "deterministic": True, "force_row_wise": True, "num_threads": 1, "verbose": -1,
            },
            data,
            num_boost_round=p["trees"],
        )
        self.ensemble = TreeEnsemble.from_lightgbm(self.booster.dump_model())

    def predict(self, features: np.ndarray) -> np.ndarray:
        """``[n]`` costs (lower is faster): the negated LambdaMART scores."""
        if self.ensemble is None:
            raise RuntimeError("the rank model is not trained: call fit() or load() first")
        return -self.ensemble.predict(check_features(features, self.ensemble.num_features))

    def save(self, path: str | Path) -> None:
        """Write the trained ensemble to ``path`` as JSON."""
        if self.ensemble is None:
            raise RuntimeError("the rank model is not trained: nothing to save")
        Path(path).write_text(json.dumps({"format": _FORMAT, "version": _VERSION, "params": self.params,
                                          "ensemble": self.ensemble.to_dict()}))

    def load(self, path: str | Path) -> RankModel:
        """Read the ensemble :meth:`save` wrote into this model, and return it."""
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or data.get("format") != _FORMAT or data.get("version") != _VERSION:
            raise ValueError(f"{path} is not a rank model of format {_FORMAT!r} version {_VERSION}")
        self.params = data["params"]
        self.ensemble = TreeEnsemble.from_dict(data["ensemble"])
        self.booster = None
        return self
