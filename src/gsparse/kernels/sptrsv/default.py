"""The SpTRSV hand rule: a scheme from the matrix features, the task and the target, with no
measurement; and the analysed default (:func:`analysed_schedule`), which asks the MLP
selector (:mod:`.selector`) first where one is trained and answers, the hand rule
otherwise. The rule's schemes lie in the reduced space (:func:`.space.reduced_space`) but
for ``ready_by_value``, which is on (valid for every task: float32 and float64 have a
sentinel), so its choices can be compared with the tuner's records; all of them lie in the
selector's space (:func:`.space.selection_space`).

The evidence is the H100 sweep of 12 families of 2026-11-28 (:func:`default_schedule`).
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

# Fewer rows per level than this is a chain (a banded factor): one row after another.
_CHAIN_ROWS_PER_LEVEL = 2
# Warps per block (one block per SM) of the rule's schemes for rows that are not a chain.
_ROW_WARPS = 32
# At least this many rows per level per resident warp are wide levels (see default_schedule).
_WIDE_ROWS_PER_WARP = 1.5


def default_schedule(features: np.ndarray, task: SptrsvTask, target: Target) -> SptrsvSchedule:
    """The scheme used when none is given (and none is selected), from the features of
    :mod:`.features` and the task:

    - a chain (under 2 rows per level: banded factors) with one right-hand side: a thread
      per row over 4 warps per block, a kernel per two resident waves of levels
      (``nw4.ng32.swinf``, ``alpha_level`` 2);
    - wide levels (on average at least 1.5 rows a level per resident warp of the grid,
      ``target.sms`` x 32): 8-thread subwarps, four rows a warp at once (``nw32.ng4.sw2``,
      ``alpha_level`` ∞). With several rows of a level per warp, a warp's rows of one level
      run one after another; four rows a warp at once take fewer turns. (What each turn
      waits for is not settled: prefetching the next rows' pointers changed nothing.);
    - everything else: a warp per row over 32 warps per block, every level in one kernel
      (``nw32.ng1.sw0``, ``alpha_level`` ∞), rows not merged.

    Values are the ready signals (``ready_by_value``) throughout. The evidence is the H100
    sweep of 2026-11-28 (``docs/results/sptrsv/h100-2026-11-28-selector-sweep.jsonl.gz``:
    96 factors of 12 families, 50K-300K rows, each family's systems with their long rows
    split): the warp scheme's geometric mean over each family's best measured scheme was
    1.00-1.23 at one right-hand side (banded 2.30, where the thread scheme's is 1.01) and
    1.00-1.10 at 16. The rule it replaced (a subwarp or a thread per row on short rows,
    merged rows on power-law graphs, fitted to the 500K-row sweep of 2026-11-25 with the
    kernels of then) was 1.07-2.90 at one and 1.53-4.47 at 16 on the same factors. The wide
    level branch: over all 96 factors, within 10% of the best on 89% (was 87%) at one
    right-hand side and 93% (was 88%) at 16, geometric mean 1.055 (1.071) and 1.023 (1.029);
    on an H200, 4M-row laplacian3d (1.9 rows a level per warp) took 1.53 ms against the warp
    scheme's 1.93 at one right-hand side, and a 500K-row community factor (2.6) 0.169 ms
    against 0.247 (docs/performance.md, "Wide levels").
    """
    rows, depth = features[_F["m"]], max(features[_F["layer_num"]], 1.0)
    if rows / depth < _CHAIN_ROWS_PER_LEVEL and task.num_rhs == 1:
        return _scheme(warps_per_block=4, subwarps=32, sw_rnnz=math.inf, alpha_level=2)
    if rows / depth >= _WIDE_ROWS_PER_WARP * target.sms * _ROW_WARPS:
        return _scheme(warps_per_block=_ROW_WARPS, subwarps=4, sw_rnnz=2, alpha_level=math.inf)
    return _scheme(warps_per_block=_ROW_WARPS, subwarps=1, sw_rnnz=0, alpha_level=math.inf)


def _scheme(**parallel: float) -> SptrsvSchedule:
    """A scheme of the rule: rows alone (not merged or reordered), values as ready signals,
    sequential grouping and round-robin warps."""
    return SptrsvSchedule(ready_by_value=True, merge="merge_fixed", merge_rows=1, merge_thresh=0, reorder=False,
                          grouping="rg_sequential", warp_schedule="ws_rr", **parallel).validate()


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


# Rows averaging fewer entries than this are short (meshes, roads, bands).
_SHORT_ROW_NNZ = 4


def _short_rows(n: int, nnz: int) -> bool:
    """Rows averaging under :data:`_SHORT_ROW_NNZ` entries (meshes, roads, bands)."""
    return bool(n) and nnz / n < _SHORT_ROW_NNZ


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
