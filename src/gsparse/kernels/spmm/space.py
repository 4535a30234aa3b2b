"""The g-SpMM search space of a task on a graph and a target, and its pruning.

Pruned by construction to the shapes that can win (see :func:`one_pass_grid`), plus, where
they apply: column-tiled schedules for short features of tasks that read ``lhs``,
split-rows variants of the degree-sorted schedules on graphs with long rows, and
output-tiled schedules for copy_lhs of up to 4 features. Then :func:`pruned_space` removes,
for the graph at hand, the candidates LO-SpMM's constraints say cannot win
(:mod:`gsparse.kernels.pruning`), from the :func:`facts` of each.
"""

from __future__ import annotations

from typing import Literal

from ...graph import GraphStats
from ...target import Target
from ..operands import VECTOR_BYTES, pow2_at_least, widest_vector
from ..pruning import (
    THRESHOLDS,
    Facts,
    Pruning,
    Thresholds,
    column_waste,
    program_spills,
    prune,
    row_tile_cov,
)
from ..space import Space
from . import codegen
from .default import default_schedule
from .schedule import ColumnTiled, OnePass, OutputTiled, SplitRows, SpmmSchedule
from .shapes import (
    MAX_TILE_ROWS,
    OUTPUT_TILED_FEATURES,
    TILE_ROWS_PER_EDGE,
    column_tile_for,
    column_tiled_block_rows,
    edge_lanes_for,
    output_tiled_schedule,
    output_tiled_warps,
    row_grid,
    row_splits_for,
    split_items_at_least,
    tile_rows,
)
from .task import SpmmTask

__all__ = ["facts", "one_pass_grid", "pruned_space", "register_spills", "schedule_space"]

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
    (:func:`row_splits_for`; chunks at least one pass of the group's lanes long);
    output-tiled schedules for a copy_lhs of up to 4 features (:func:`output_tiled_warps`
    x 1, 2 or 4 column groups); and the hand rule's pick.
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
    for split in row_splits_for(stats, target):
        # A chunk shorter than one pass of the group's lanes (edge_lanes x nnz_tile edges)
        # runs as the same knobs with fewer edges in flight would.
        space += [SplitRows(**s.knobs(), row_split=split) for s in grid
                  if s.degree_sorted and s.edge_lanes * s.nnz_tile <= split]
    if task.algorithm.message_is_lhs and feature_len <= OUTPUT_TILED_FEATURES:
        space += [output_tiled_schedule(feature_len, dtype, warps, groups, task.vector_ok)
                  for warps in output_tiled_warps(dtype) for groups in (1, 2, 4)]
    # The hand rule's pick is always a candidate: a search never starts behind it.
    space.append(default_schedule(task, stats, target))
    return Space(space)


def facts(task: SpmmTask, stats: GraphStats, target: Target, schedule: SpmmSchedule) -> Facts:
    """What the pruning constraints read of ``schedule`` for ``task`` on a graph of ``stats``.

    - Blocks: the row-walking skeletons' grid (:func:`~.shapes.row_grid`; split rows over
      the work items the statistics guarantee, :func:`~.shapes.split_items_at_least`, a
      lower bound); the column-tiled grid with the rows per block its plan picks; the
      output-tiled skeleton's row ranges times column groups, at least one block per SM.
    - COV_row (:func:`~gsparse.kernels.pruning.row_tile_cov`): a row tile is the rows one
      block walks, ``rows_per_block`` for the one-pass and split-rows skeletons (split rows
      counted whole: an upper bound) and the plan's rows per block for the column-tiled
      one; degree-sorted walks and the output-tiled row ranges (cut at equal edge counts)
      count as balanced.
    - WASTE_col: the features a group's slices cover beyond the feature vector, or those a
      lane of the output-tiled skeleton carries beyond it.
    """
    features = task.num_features
    row_cov = stats.rows.cov
    if isinstance(schedule, OutputTiled):
        groups = schedule.column_groups
        return Facts(blocks=-(-target.sms // groups) * groups, row_cov=0.0,
                     column_waste=column_waste(features, schedule.features_covered))
    waste = column_waste(features, schedule.feature_slice)
    slices = -(-features // schedule.feature_slice)
    if isinstance(schedule, ColumnTiled):
        tiles = -(-stats.num_src // schedule.column_tile)
        rows = column_tiled_block_rows(stats.num_dst, tiles * slices, target.sms)
        blocks = -(-stats.num_dst // rows) * tiles * slices
        return Facts(blocks=blocks, row_cov=row_tile_cov(row_cov, rows, schedule.degree_sorted),
                     column_waste=waste)
    items = stats.num_dst
    if isinstance(schedule, SplitRows):
        items = split_items_at_least(stats.num_dst, stats.num_edges, schedule.row_split)
    x, y = row_grid(schedule, items, features)
    return Facts(blocks=x * y, column_waste=waste,
                 row_cov=row_tile_cov(row_cov, schedule.rows_per_block, schedule.degree_sorted))


def pruned_space(task: SpmmTask, stats: GraphStats, target: Target, thresholds: Thresholds = THRESHOLDS,
                 *, registers: Literal["off", "kept", "all"] = "off") -> Pruning:
    """:func:`schedule_space` pruned by LO-SpMM's constraints
    (:func:`gsparse.kernels.pruning.prune`), the hand rule's pick protected.

    ``registers`` turns on the register constraint: ``"kept"`` compiles (NVRTC, for
    ``target.arch``, through the kernel cache) the candidates the arithmetic constraints
    leave, ``"all"`` every candidate; ``"off"`` compiles nothing (what the model policy
    uses).
    """
    candidates = schedule_space(task, stats, target).candidates()
    protected = (default_schedule(task, stats, target),)
    measures = [facts(task, stats, target, s) for s in candidates]
    return prune(candidates, measures, target, thresholds, protected=protected,
                 registers=lambda s: register_spills(task, s, target), registers_on=registers)


def register_spills(task: SpmmTask, schedule: SpmmSchedule, target: Target) -> float:
    """The register constraint's measure of ``schedule``'s program for ``task`` on ``target``
    (:func:`~gsparse.kernels.pruning.program_spills`): compiles it with NVRTC, once."""
    return program_spills(codegen.program(task.algorithm, schedule, task.num_features), target)
