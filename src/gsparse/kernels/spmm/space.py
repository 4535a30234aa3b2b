"""The g-SpMM search space of a task on a graph and a target.

Pruned by construction to the shapes that can win (see :func:`one_pass_grid`), plus, where
they apply: column-tiled schedules for short features of tasks that read ``lhs``,
split-rows variants of the degree-sorted schedules on graphs whose longest row is far
longer than the mean, and output-tiled schedules for copy_lhs of up to 4 features.
"""

from __future__ import annotations

import math

import torch

from ...graph import GraphStats
from ...target import Target
from ..operands import VECTOR_BYTES, pow2_at_least, widest_vector
from ..space import Space
from .schedule import ColumnTiled, OnePass, OutputTiled, SplitRows
from .task import SpmmTask

__all__ = [
    "OUTPUT_TILED_FEATURES",
    "column_tile_for",
    "one_pass_grid",
    "output_tiled_schedule",
    "output_tiled_warps",
    "row_splits_for",
    "schedule_space",
]

_POWERS_OF_TWO = (1, 2, 4, 8, 16, 32)
# The most features the space and the default rule offer the output-tiled skeleton (wider
# ones stage too much of lhs per edge; any count runs when forced).
OUTPUT_TILED_FEATURES = 4
# The column-tiled skeleton's share of the space: up to this many features.
_COLUMN_TILED_FEATURES = 8


def one_pass_grid(feature_len: int, vector_ok: int) -> list[OnePass]:
    """The one-pass schedules worth measuring for ``feature_len`` features.

    The feature slice is 32, 64 or 128 features (or the whole feature vector when
    shorter); vectors are scalar or as wide as the data allows; a group fills its warp
    with edge lanes, or half of it; blocks have 256 threads; an index tile only where a
    group owns one edge at a time.
    """
    widest = widest_vector(feature_len, vector_ok)
    padded = pow2_at_least(feature_len)
    slices = sorted({min(padded, s) for s in (32, 64, 128)})
    grid = []
    for vector in sorted({1, widest}):
        for slice_ in slices:
            for outputs in (1, 2):
                feature_lanes = slice_ // (vector * outputs)
                if feature_lanes not in _POWERS_OF_TWO or (outputs > 1 and slice_ < 64):
                    continue
                fills = {32 // feature_lanes, max(1, 16 // feature_lanes)}
                for edge_lanes in sorted(fills):
                    tiles = (False, True) if edge_lanes == 1 and feature_lanes >= 8 else (False,)
                    for tile in tiles:
                        for nnz in (1,) if tile else (1, 2, 4):
                            for degree_sorted in (False, True):
                                grid.append(OnePass(
                                    rows_per_block=256 // (feature_lanes * edge_lanes),
                                    feature_lanes=feature_lanes,
                                    edge_lanes=edge_lanes,
                                    vector_width=vector,
                                    outputs_per_thread=outputs,
                                    nnz_tile=nnz,
                                    index_tile=tile,
                                    degree_sorted=degree_sorted,
                                ))
    return [s for s in dict.fromkeys(grid) if not s.problems()]


def row_splits_for(mean_degree: float, max_degree: int) -> list[int]:
    """Chunk lengths worth measuring on a graph with these row statistics (often none).

    Of 256, 1024, 4096 and 16384 edges, the two shortest that cut the longest row into more
    than 8 chunks and are at least the mean row, so that only the rare long rows pay for
    partial results and a merge.
    """
    fits = [s for s in (256, 1024, 4096, 16384) if mean_degree <= s and 8 * s < max_degree]
    return fits[:2]


def column_tile_for(lhs_len: int, dtype: torch.dtype, target: Target) -> int:
    """The widest column tile (a multiple of 1024 rows of ``lhs``) a block's shared memory
    holds for rows of ``lhs_len`` elements, or 0."""
    rows = target.shared_bytes_per_block // max(1, lhs_len * dtype.itemsize)
    return min(65536, rows // 1024 * 1024)


def output_tiled_warps(dtype: torch.dtype) -> tuple[int, int]:
    """Warps per block worth running for ``dtype``: 16 and 32 (8 and 16 for float64, whose
    wider registers would spill at 1,024 threads). The default takes the first for short
    rows, the second for long ones."""
    return (8, 16) if dtype == torch.float64 else (16, 32)


def output_tiled_schedule(num_features: int, dtype: torch.dtype, warps: int, column_groups: int,
                          vector_ok: int = 8) -> OutputTiled:
    """The output-tiled schedule of ``warps`` warps and ``column_groups`` groups for
    ``num_features`` features: vectors as wide as 16 bytes, ``vector_ok`` and the
    feature count allow, and enough of them (a power of two) to cover every feature."""
    widest = min(vector_ok, VECTOR_BYTES // dtype.itemsize)
    vector = max(v for v in (1, 2, 4) if v <= widest and num_features % v == 0)
    return OutputTiled(warps_per_block=warps, vector_width=vector,
                       outputs_per_thread=pow2_at_least(math.ceil(num_features / vector)),
                       column_groups=column_groups)


def schedule_space(task: SpmmTask, stats: GraphStats, target: Target) -> Space:
    """Every schedule worth measuring for ``task`` on a graph of ``stats`` on ``target``.

    The one-pass grid; for up to 8 features of a task that reads ``lhs``, column-tiled
    variants of its one-edge-at-a-time schedules with a warp or half a warp per row (tiles
    as wide as shared memory allows); the degree-sorted schedules with their long rows split
    (:func:`row_splits_for`); output-tiled schedules for a copy_lhs of up to 4 features
    (:func:`output_tiled_warps` x 1, 2 or 4 column groups).
    """
    feature_len, dtype = task.num_features, task.dtype
    grid = one_pass_grid(feature_len, min(task.vector_ok, VECTOR_BYTES // dtype.itemsize))
    space: list = list(grid)
    # Tiles sized for rows of all the output's features, whatever lhs broadcasts.
    tile = column_tile_for(feature_len, dtype, target)
    if task.lhs_shape is not None and feature_len <= _COLUMN_TILED_FEATURES and tile:
        for s in grid:
            if s.nnz_tile == 1 and not s.index_tile and s.group >= 16:
                space.append(ColumnTiled(
                    rows_per_block=1024 // s.group, feature_lanes=s.feature_lanes,
                    edge_lanes=s.edge_lanes, vector_width=s.vector_width,
                    outputs_per_thread=s.outputs_per_thread, degree_sorted=s.degree_sorted,
                    column_tile=tile))
    for split in row_splits_for(stats.rows.mean, stats.rows.max):
        space += [SplitRows(**s.knobs(), row_split=split) for s in grid if s.degree_sorted]
    if task.algorithm.message_is_lhs and feature_len <= OUTPUT_TILED_FEATURES:
        space += [output_tiled_schedule(feature_len, dtype, warps, groups, task.vector_ok)
                  for warps in output_tiled_warps(dtype) for groups in (1, 2, 4)]
    return Space(space)
