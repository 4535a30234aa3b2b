"""The SpTRSV hand rule: a scheme from the matrix features, the task and the target, with no
measurement; and the analysed default (:func:`analysed_schedule`), which asks the MLP
selector (:mod:`.selector`) first where one is trained and answers, the hand rule
otherwise. The rule's schemes lie in the reduced space (:func:`.space.reduced_space`) but
for ``ready_by_value``, which is on (valid for every task: float32 and float64 have a
sentinel), so its choices can be compared with the tuner's records; all of them lie in the
selector's space (:func:`.space.selection_space`).

The evidence is the H100 sweep of six 500K-row families
(``docs/results/sptrsv/h100-2026-11-25-sweep-500k.jsonl.gz``): the rule gives each factor
the best scheme measured there (with ``ready_by_value`` added where it was not measured).
"""

from __future__ import annotations

import math

import numpy as np

from ...target import Target
from .features import FEATURE_NAMES
from .schedule import NaturalOrderSchedule, SptrsvSchedule
from .selector import SelectorSet
from .task import SptrsvTask

__all__ = ["analysed_schedule", "default_schedule", "natural_schedule"]

_F = {name: i for i, name in enumerate(FEATURE_NAMES)}
# Rows averaging at least this many entries are shared by a whole warp; at least
# _SUBWARP_ROW_NNZ by an 8-lane subwarp; shorter ones go a row per thread.
_WARP_ROW_NNZ = 16
_SUBWARP_ROW_NNZ = 4
# Row lengths whose standard deviation exceeds this times their mean have a heavy tail
# (power-law and R-MAT factors: 12 and 8, with rows of 10^4 entries; meshes, roads and
# bands stay under 0.3): a warp shares every row, so the long ones get 32 lanes.
_SKEWED_ROW_COV = 1.0
# Neighbouring rows are independent enough to be merged four at a time below this
# dep_dist (power-law, R-MAT: 0); meshes (0.99) would chain a level into each group.
_INDEPENDENT_DEP_DIST = 0.5
# Up to this many levels, each level is a kernel of its own (level-set: no flags at all).
_FEW_LEVELS = 32
# Fewer rows per level than this is a chain: one row group after another.
_CHAIN_ROWS_PER_LEVEL = 2


def default_schedule(features: np.ndarray, task: SptrsvTask, target: Target) -> SptrsvSchedule:
    """The scheme used when none is given, from the 10 features of :mod:`.features`.

    - Rows: a warp shares each row (``ng`` 1, ``sw_rnnz`` 0) when rows average 16 entries
      or more, or when their lengths are heavy-tailed (``rnnz_cov`` at least 1); an 8-lane
      subwarp (``ng`` 4, row groups averaging at most 2 entries per row go a row per
      thread) from 4 entries, or whenever there are several right-hand sides (the lanes
      then span right-hand sides); below that a thread per row group (``ng`` 32).
    - Warps: 32 per block when the levels hold enough work to give every SM 4 warps at a
      time, counting a warp's work as one shared row, or 32 rows solved a row per thread;
      else 4 (fewer warps spin on their dependencies). Laplacian3d's ~2,000-row levels fill
      only 64 thread-per-row warps: 4 per block ran 1.9x faster than 32 in the sweep.
    - Transform: rows alone, except chains (under 2 rows per level), whose rows are merged
      32 at a time (a subwarp solves them in order without waiting between them), and
      warp-shared rows whose neighbours are independent (``dep_dist`` under 0.5), merged 4
      at a time (one warp's node group carries 4 short rows: 1.6x to 1.8x on power-law and
      R-MAT; on a mesh, whose neighbours depend on each other, the same merge was 280x slower).
    - Kernels: one per level up to 32 levels (no waiting, no flags); else a level with more
      node groups than twice the GPU's resident warps is a kernel of its own (it needs no
      waiting then, and its launch is small next to it) and the others share one.
    - Readiness: rows signal it by their values (``ready_by_value``), not by flags: it
      halved the latency-bound factors in the sweep (laplacian2d 5.2 -> 2.4 ms).
    """
    rows, rnnz, depth = features[_F["m"]], features[_F["rnnz"]], max(features[_F["layer_num"]], 1.0)
    skewed = features[_F["rnnz_cov"]] >= _SKEWED_ROW_COV
    if rnnz >= _WARP_ROW_NNZ or skewed:
        subwarps, sw_rnnz = 1, 0
    elif rnnz >= _SUBWARP_ROW_NNZ or task.num_rhs > 1:
        subwarps, sw_rnnz = 4, 2
    else:
        subwarps, sw_rnnz = 32, math.inf
    rows_per_level = rows / depth
    if rows_per_level < _CHAIN_ROWS_PER_LEVEL:
        merge_rows = 32
    elif subwarps == 1 and features[_F["dep_dist"]] < _INDEPENDENT_DEP_DIST:
        merge_rows = 4
    else:
        merge_rows = 1
    warp_work_per_level = rows_per_level / (32 if sw_rnnz == math.inf else 1)
    return SptrsvSchedule(
        warps_per_block=32 if warp_work_per_level >= 4 * target.sms else 4,
        subwarps=subwarps, sw_rnnz=sw_rnnz, ready_by_value=True,
        merge="merge_fixed", merge_rows=merge_rows, merge_thresh=0, reorder=False,
        grouping="rg_sequential", warp_schedule="ws_rr",
        alpha_level=0 if depth <= _FEW_LEVELS else 2,
    ).validate()


def analysed_schedule(features: np.ndarray, task: SptrsvTask, target: Target,
                      selectors: SelectorSet | None) -> SptrsvSchedule:
    """The scheme of an analysed solve that forces none: the MLP selector's pick
    (:meth:`.selector.SelectorSet.select`: the selector of the nearest number of right-hand
    sides, for a factor within its training sizes on the GPU model it was measured on), else
    the hand rule's (:func:`default_schedule`)."""
    if selectors is not None:
        picked = selectors.select(features, task.num_rhs, target.sms)
        if picked is not None:
            return picked
    return default_schedule(features, task, target)


def natural_serves(n: int, nnz: int, task: SptrsvTask) -> bool:
    """Whether the fast start is the better choice for ``task`` without knowing how many
    solves follow: everywhere but short rows with several right-hand sides.

    Measured on the H100 (2026-11-27, float64, 500K rows, docs/performance.md "Fast start"):
    with one right-hand side the fast start solved every factor of the benchmark as fast as
    the analysed hand rule or faster (0.63-1.03x of its time), after ~2 ms of preparation
    against 120-500 ms. With 16 right-hand sides, factors of short rows (meshes and roads,
    under 4 entries a row) took 1.4-5x the analysed solve: a lane walks a row's 16 columns
    alone, or a warp shares a 3-entry row and holds too few rows in flight. Long rows with
    16 right-hand sides matched the analysed solve (0.96-1.07x).
    """
    return task.num_rhs == 1 or not _short_rows(n, nnz)


def _short_rows(n: int, nnz: int) -> bool:
    """Rows averaging under :data:`_SUBWARP_ROW_NNZ` entries (meshes, roads, bands)."""
    return bool(n) and nnz / n < _SUBWARP_ROW_NNZ


# The fast start's two schemes, which :func:`natural_schedule` chooses between (``gsparse
# precompile`` compiles both).
LANE_PER_ROW = NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=32, rows_per_thread=True)
WARP_SHARED_ROWS = NaturalOrderSchedule(warps_per_block=8, rows_per_ticket=4, rows_per_thread=False)


def natural_schedule(n: int, nnz: int, task: SptrsvTask) -> NaturalOrderSchedule:
    """The fast start's scheme, from what is known without any analysis: the mean row length
    ``nnz / n`` and the task.

    - Rows averaging under 4 entries with one right-hand side (meshes, roads, bands): a
      lane per row, 32 rows per ticket, 32 warps per block. Rows are solved in natural order,
      so the rows in flight (32 rows x 32 warps x 132 blocks = 135,168 on an H100) bound the
      parallelism: a 2-D mesh's dependencies chain each row to the one before it and to the
      row above, so the window must span many grid lines. Measured (H100, 500K rows): 8 warps per block
      solved laplacian2d in 4.73 ms, 32 in 1.94 ms (laplacian3d 1.84 and 0.76, road 1.60
      and 1.33).
    - Otherwise the warp shares each row, 4 rows per ticket, 8 warps per block: long rows
      (power law, R-MAT) and several right-hand sides spread over the lanes.
    """
    return LANE_PER_ROW if _short_rows(n, nnz) and task.num_rhs == 1 else WARP_SHARED_ROWS
