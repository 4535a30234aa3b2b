"""The SpTRSV hand rule: a scheme from the matrix features, the task and the target, with no
measurement. It stands in for the MLP selector (:mod:`.selector`) until that is trained on
GPU measurements; every scheme it gives lies in the reduced space (:func:`.space.reduced_space`),
so its choices can be compared with the tuner's records.
"""

from __future__ import annotations

import math

import numpy as np

from ...target import Target
from .features import FEATURE_NAMES
from .schedule import SptrsvSchedule
from .task import SptrsvTask

__all__ = ["default_schedule"]

_F = {name: i for i, name in enumerate(FEATURE_NAMES)}
# Rows averaging at least this many entries are shared by a whole warp; at least
# _SUBWARP_ROW_NNZ by an 8-lane subwarp; shorter ones go a row per thread.
_WARP_ROW_NNZ = 16
_SUBWARP_ROW_NNZ = 4
# Up to this many levels, each level is a kernel of its own (level-set: no flags at all).
_FEW_LEVELS = 32
# Fewer rows per level than this is a chain: one row group after another.
_CHAIN_ROWS_PER_LEVEL = 2


def default_schedule(features: np.ndarray, task: SptrsvTask, target: Target) -> SptrsvSchedule:
    """The scheme used when none is given, from the 10 features of :mod:`.features`.

    - Rows: a warp shares each row (``ng`` 1) when rows average 16 entries or more; an
      8-lane subwarp (``ng`` 4, row groups averaging at most 2 entries per row go a row per
      thread) from 4 entries, or whenever there are several right-hand sides (the lanes
      then span right-hand sides); below that a thread per row group (``ng`` 32).
    - Warps: all 32 of a block when the levels hold enough rows to give every SM 4 rows at
      a time, else 4 (deep factors: fewer warps spin on flags).
    - Transform: rows alone, except chains (under 2 rows per level), whose rows are merged
      32 at a time: a subwarp solves them in order without a flag between them.
    - Kernels: one per level up to 32 levels (no waiting, no flags), else one in all.
    """
    rows, rnnz, depth = features[_F["m"]], features[_F["rnnz"]], max(features[_F["layer_num"]], 1.0)
    if rnnz >= _WARP_ROW_NNZ:
        subwarps, sw_rnnz = 1, 0
    elif rnnz >= _SUBWARP_ROW_NNZ or task.num_rhs > 1:
        subwarps, sw_rnnz = 4, 2
    else:
        subwarps, sw_rnnz = 32, math.inf
    rows_per_level = rows / depth
    chain = rows_per_level < _CHAIN_ROWS_PER_LEVEL
    return SptrsvSchedule(
        warps_per_block=32 if rows_per_level >= 4 * target.sms else 4,
        subwarps=subwarps, sw_rnnz=sw_rnnz,
        merge="merge_fixed", merge_rows=32 if chain else 1, merge_thresh=0, reorder=False,
        grouping="rg_sequential", warp_schedule="ws_rr",
        alpha_level=0 if depth <= _FEW_LEVELS else math.inf,
    ).validate()
