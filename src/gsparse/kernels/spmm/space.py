"""The g-SpMM search space of a task on a graph and a target.

Pruned by construction to the shapes that can win (see :func:`one_pass_grid`), plus, where
they apply: column-tiled schedules for short features of tasks that read ``lhs``,
split-rows variants of the degree-sorted schedules on graphs whose longest row is far
longer than the mean, and output-tiled schedules for copy_lhs of up to 4 features.
"""

from __future__ import annotations



from ...graph import GraphStats
from ...target import Target
from ..operands import VECTOR_BYTES, pow2_at_least, widest_vector
from ..space import Space
from .default import default_schedule
from .schedule import ColumnTiled, OnePass, SplitRows
from .shapes import (
    MAX_TILE_ROWS,
    OUTPUT_TILED_FEATURES,
    TILE_ROWS_PER_EDGE,
    column_tile_for,
    edge_lanes_for,
    output_tiled_schedule,
    output_tiled_warps,
    row_splits_for,
    tile_rows,
)
from .task import SpmmTask

__all__ = ["one_pass_grid", "schedule_space"]

_POWERS_OF_TWO = (1, 2, 4, 8, 16, 32)
# The column-tiled skeleton's share of the space: up to this many features.
_COLUMN_TILED_FEATURES = 8


def one_pass_grid(feature_len: int, vector_ok: int, mean_degree: float | None = None) -> list[OnePass]:
    """The one-pass schedules worth measuring for ``feature_len`` features.

    The feature slice is 32, 64 or 128 features (or the whole feature vector when
    shorter); vectors are scalar or as wide as the data allows; a group fills its warp
    with edge lanes, or half of it, or (given the graph's ``mean_degree``) has just enough
    edge lanes for an average row to give each a handful of edges, as the hand rule sizes
    them: on graphs of very short rows a whole warp per row leaves most lanes idle; blocks
    have 256 threads; an index tile only where a group owns one edge at a time.
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
                if mean_degree is not None:
                    fills.add(edge_lanes_for(mean_degree, 32 // feature_lanes))
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


def schedule_space(task: SpmmTask, stats: GraphStats, target: Target) -> Space:
    """Every schedule worth measuring for ``task`` on a graph of ``stats`` on ``target``.

    The one-pass grid; for up to 8 features of a task that reads ``lhs``, column-tiled
    variants of its one-edge-at-a-time schedules with a warp or half a warp per row (tiles
    as wide as shared memory allows); the degree-sorted schedules with their long rows split
    (:func:`row_splits_for`); output-tiled schedules for a copy_lhs of up to 4 features
    (:func:`output_tiled_warps` x 1, 2 or 4 column groups); and the hand rule's pick.
    Column-tiled schedules are pruned where their (tile, row) index would hold more than
    16 entries per edge (or more than 2**31).
    """
    feature_len, dtype = task.num_features, task.dtype
    grid = one_pass_grid(feature_len, min(task.vector_ok, VECTOR_BYTES // dtype.itemsize), stats.rows.mean)
    space: list = list(grid)
    # Tiles sized for rows of all the output's features, whatever lhs broadcasts.
    tile = column_tile_for(feature_len, dtype, target)
    index = tile_rows(stats.num_src, stats.num_dst, tile) if tile else 0
    if (task.lhs_shape is not None and feature_len <= _COLUMN_TILED_FEATURES and tile
            and index <= min(MAX_TILE_ROWS, TILE_ROWS_PER_EDGE * stats.num_edges)):
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
    # The hand rule's pick is always a candidate: a search never starts behind it.
    space.append(default_schedule(task, stats, target))
    return Space(space)
