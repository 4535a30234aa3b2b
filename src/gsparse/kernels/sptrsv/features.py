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
parallelism among neighbours), near 0 that neighbours are independent. Given the levels
(which the analysis computes anyway) everything is a handful of vectorised passes over the
rows, none over the entries: the nearest dependency of a row is its first or its last one,
since a row graph lists each row's dependencies in its CSR's column order (increasing
positions for a lower system, decreasing for an upper one; ``plan.analyse`` works on the
canonical CSR, columns sorted). A few milliseconds at 500K rows (docs/sptrsv.md).
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
    levels (:func:`.analysis.levels`).

    ``dep_dist`` takes each row's nearest dependency as the later of its first and last
    one: exact when every row lists its dependencies in increasing or decreasing order, as
    :func:`.analysis.dependency_graph` does for a CSR whose rows' columns are sorted."""
    m = rows.n
    if m == 0:
        return np.zeros(len(FEATURE_NAMES), dtype=np.float64)
    row_nnz = rows.row_nnz
    nnz = float(row_nnz.sum())
    rnnz = nnz / m
    # Integer moments: one pass each, no float copy of the rows.
    variance = max(float(np.dot(row_nnz, row_nnz)) / m - rnnz * rnnz, 0.0)
    rnnz_cov = variance ** 0.5 / rnnz if rnnz > 0 else 0.0
    per_level = np.bincount(row_level, weights=row_nnz)
    lnnz, lnnz_max, lnnz_cov = _mean_max_cov(per_level)
    ptr, deps = rows.ptr, rows.deps
    has = np.flatnonzero(ptr[1:] != ptr[:-1])
    dep_dist = 0.0
    if has.size:
        nearest = np.maximum(deps[ptr[has]], deps[ptr[has + 1] - 1])
        dep_dist = float(np.sum(1.0 / (has - nearest))) / m
    return np.array([m, nnz, rnnz, float(row_nnz.max()), rnnz_cov, lnnz, lnnz_max, lnnz_cov,
                     len(per_level), dep_dist], dtype=np.float64)
