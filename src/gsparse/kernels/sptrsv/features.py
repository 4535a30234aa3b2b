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
parallelism among neighbours), near 0 that neighbours are independent. Given the levels,
everything is a handful of vectorised passes over the rows, none over the entries (the
nearest dependency of a row is its last one in a lower system, its first in an upper one:
:func:`.analysis.nearest_dependencies`). The analysis (:func:`.plan.analyse`) computes them
with the levels, a few milliseconds at 500K rows (docs/sptrsv.md), so that choosing a scheme
is only the selector's forward pass.
"""

from __future__ import annotations

import numpy as np

from .analysis import RowGraph, nearest_dependencies

__all__ = ["FEATURE_NAMES", "COUNT_FEATURES", "matrix_features"]

FEATURE_NAMES = ("m", "nnz", "rnnz", "rnnz_max", "rnnz_cov", "lnnz", "lnnz_max", "lnnz_cov",
                 "layer_num", "dep_dist")

# Features that are counts or means of counts (spanning orders of magnitude across matrices).
COUNT_FEATURES = ("m", "nnz", "rnnz", "rnnz_max", "lnnz", "lnnz_max", "layer_num")


def matrix_features(rows: RowGraph, row_level: np.ndarray) -> np.ndarray:
    """``[10]`` float64 features in :data:`FEATURE_NAMES` order, for a row graph of
    :func:`.analysis.dependency_graph` and its levels (:func:`.analysis.levels`).

    ``dep_dist`` takes each row's nearest dependency from
    :func:`.analysis.nearest_dependencies`: exact when the CSR's rows have their columns
    sorted."""
    m = rows.n
    if m == 0:
        return np.zeros(len(FEATURE_NAMES), dtype=np.float64)
    row_nnz = rows.row_nnz
    nnz = float(row_nnz.sum())
    rnnz = nnz / m
    # Moments by einsum: one pass, no temporary, and not BLAS (whose threads cost more
    # than the work at these sizes, many times more on a busy machine).
    variance = max(float(np.einsum("i,i->", row_nnz, row_nnz)) / m - rnnz * rnnz, 0.0)
    rnnz_cov = variance ** 0.5 / rnnz if rnnz > 0 else 0.0
    per_level = np.bincount(row_level, weights=row_nnz)
    lnnz, lnnz_max = float(per_level.mean()), float(per_level.max())
    level_variance = max(float(np.einsum("i,i->", per_level, per_level)) / len(per_level) - lnnz * lnnz, 0.0)
    lnnz_cov = level_variance ** 0.5 / lnnz if lnnz > 0 else 0.0
    has, nearest = nearest_dependencies(rows)
    positions = np.flatnonzero(has)
    dep_dist = float(np.sum(1.0 / (positions - nearest[positions]))) / m if positions.size else 0.0
    return np.array([m, nnz, rnnz, float(row_nnz.max()), rnnz_cov, lnnz, lnnz_max, lnnz_cov,
                     len(per_level), dep_dist], dtype=np.float64)
