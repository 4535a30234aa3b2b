"""The 10 matrix features of AG-SpTRSV's scheme selector (§4.5, Table 4).

For an ``m x m`` factor with ``nnz`` stored entries (diagonal included), over its row
graph in solve order (:class:`.analysis.RowGraph`) and the rows' levels:

==============  ================================================================
``m``           rows
``nnz``         stored entries
``rnnz``        mean entries per row; ``rnnz_max``, ``rnnz_cov``: max, std / mean
``lnnz``        mean entries per level; ``lnnz_max``, ``lnnz_cov``: max, std / mean
``layer_num``   levels
``dep_dist``    ``(1/m) sum_k dep(k)``: ``dep(k) = 1 / (k - j)`` for the nearest row
                ``j < k`` that row ``k`` depends on (in solve order), 0 without one
==============  ================================================================

``dep_dist`` near 1 means rows mostly depend on the row just before them (little
parallelism among neighbours), near 0 that neighbours are independent. Everything is a
handful of vectorised passes over the rows and entries, given the levels (which the
analysis computes anyway): about 40 ms for a 1M-row factor.
"""

from __future__ import annotations

import numpy as np

from .analysis import RowGraph

__all__ = ["FEATURE_NAMES", "COUNT_FEATURES", "matrix_features"]

FEATURE_NAMES = ("m", "nnz", "rnnz", "rnnz_max", "rnnz_cov", "lnnz", "lnnz_max", "lnnz_cov",
                 "layer_num", "dep_dist")

# Features that are counts or means of counts (spanning orders of magnitude across matrices).
COUNT_FEATURES = ("m", "nnz", "rnnz", "rnnz_max", "lnnz", "lnnz_max", "layer_num")


def _mean_max_cov(x: np.ndarray) -> tuple[float, float, float]:
    if x.size == 0:
        return 0.0, 0.0, 0.0
    mean = float(x.mean())
    return mean, float(x.max()), float(x.std()) / mean if mean > 0 else 0.0


def matrix_features(rows: RowGraph, row_level: np.ndarray) -> np.ndarray:
    """``[10]`` float64 features in :data:`FEATURE_NAMES` order, for a row graph and its
    levels (:func:`.analysis.levels`)."""
    m = rows.n
    row_nnz = rows.row_nnz
    rnnz, rnnz_max, rnnz_cov = _mean_max_cov(row_nnz.astype(np.float64))
    per_level = np.bincount(row_level, weights=row_nnz) if m else np.zeros(0)
    lnnz, lnnz_max, lnnz_cov = _mean_max_cov(per_level)
    counts = np.diff(rows.ptr)
    has = np.flatnonzero(counts)
    dep_dist = 0.0
    if has.size:
        nearest = np.maximum.reduceat(rows.deps, rows.ptr[has])
        dep_dist = float(np.sum(1.0 / (has - nearest))) / m
    return np.array([m, float(row_nnz.sum()), rnnz, rnnz_max, rnnz_cov, lnnz, lnnz_max, lnnz_cov,
                     len(per_level), dep_dist], dtype=np.float64)
