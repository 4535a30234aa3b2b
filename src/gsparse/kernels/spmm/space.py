"""The g-SpMM search space of a task on a graph and a target, and its pruning.

Pruned by construction to the shapes that can win (see :func:`one_pass_grid`), plus, where
they apply: column-tiled schedules for short features of tasks that read ``lhs``,
split-rows variants of the degree-sorted schedules on graphs with long rows, and
output-tiled schedules for copy_lhs of up to 4 features. Then :func:`pruned_space` removes,
for the graph at hand, the candidates LO-SpMM's constraints say cannot win
(:mod:`gsparse.kernels.pruning`), from the :func:`facts` of each.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from ...graph import GraphStats
from ...target import Target
from ..operands import VECTOR_BYTES, pow2_at_least, widest_vector
from ..pruning import (
    THRESHOLDS,
    FactTable,
    Pruning,
    Thresholds,
    column_waste,
    kept_positions,
    program_spills,
    prune,
    row_tile_cov,
)
from ..space import KnobCandidates, Space, with_row
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
    row_splits_for,
    split_items_at_least,
    tile_rows,
)
from .task import SpmmTask

__all__ = ["KNOB_COLUMNS", "SKELETONS", "candidate_table", "facts", "knob_row", "knob_table", "one_pass_grid",
           "pruned_rows", "pruned_space", "register_spills", "schedule_from_row", "schedule_space"]

_POWERS_OF_TWO = (1, 2, 4, 8, 16, 32)
# (index_tile, nnz_tile, degree_sorted) of the one-pass schedules of a group: edges fetched
# 1, 2 or 4 at a time, rows in order or longest first; and with an index tile, for groups
# that own one edge at a time.
_WALKS = np.array([(0, nnz, degree_sorted) for nnz in (1, 2, 4) for degree_sorted in (0, 1)])
_WALKS_OR_INDEX_TILE = np.concatenate([_WALKS, [(1, 1, 0), (1, 1, 1)]])
_WARP_LANES = 32
# The column-tiled skeleton's share of the space: up to this many features.
_COLUMN_TILED_FEATURES = 8

# A candidate as a row of integers, one layout for every skeleton (a knob a skeleton lacks
# at the value that means "none": an output-tiled block is a row of warps whose 32 lanes
# each take an edge with all its features). Every skeleton then runs rows * feature lanes *
# edge lanes threads per block and covers feature lanes * vector * outputs features per
# slice. The space is built, pruned and featurised as rows: a schedule object costs
# microseconds to make and check, and the "model" policy needs one, its pick.
SKELETONS = (OnePass, SplitRows, ColumnTiled, OutputTiled)
KNOB_COLUMNS = ("skeleton", "rows_per_block", "feature_lanes", "edge_lanes", "vector_width", "outputs_per_thread",
                "nnz_tile", "index_tile", "degree_sorted", "row_split", "column_tile", "column_groups")
_ONE_PASS, _SPLIT_ROWS, _COLUMN_TILED, _OUTPUT_TILED = range(len(SKELETONS))
_COLUMN = {name: i for i, name in enumerate(KNOB_COLUMNS)}


def knob_row(schedule: SpmmSchedule) -> tuple:
    """``schedule`` as a row of :data:`KNOB_COLUMNS` (the inverse of :func:`schedule_from_row`)."""
    s = schedule
    if type(s) is OutputTiled:
        return (_OUTPUT_TILED, s.warps_per_block, 1, 32, s.vector_width, s.outputs_per_thread, 1, False, False, 0, 0,
                s.column_groups)
    if type(s) is ColumnTiled:
        return (_COLUMN_TILED, s.rows_per_block, s.feature_lanes, s.edge_lanes, s.vector_width, s.outputs_per_thread,
                1, False, s.degree_sorted, 0, s.column_tile, 1)
    if type(s) in (OnePass, SplitRows):
        return (SKELETONS.index(type(s)), s.rows_per_block, s.feature_lanes, s.edge_lanes, s.vector_width,
                s.outputs_per_thread, s.nnz_tile, s.index_tile, s.degree_sorted, getattr(s, "row_split", 0), 0, 1)
    known = ", ".join(cls.__name__ for cls in SKELETONS)
    raise TypeError(f"schedules must be {known} schedules, got a {type(s).__name__}")


def knob_table(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """``[len(rows), len(KNOB_COLUMNS)]`` int64 of knob rows (flags as 0 and 1)."""
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows) * len(KNOB_COLUMNS))
    return flat.reshape(len(rows), len(KNOB_COLUMNS))


def schedule_from_row(row: Sequence[int]) -> SpmmSchedule:
    """The schedule of a row of :data:`KNOB_COLUMNS`."""
    skeleton, rows, feature_lanes, edge_lanes, vector, outputs, nnz, index_tile, degree_sorted, split, tile, groups = (
        int(value) for value in row)
    if skeleton == _OUTPUT_TILED:
        return OutputTiled(warps_per_block=rows, vector_width=vector, outputs_per_thread=outputs,
                           column_groups=groups)
    knobs = dict(rows_per_block=rows, feature_lanes=feature_lanes, edge_lanes=edge_lanes, vector_width=vector,
                 outputs_per_thread=outputs, degree_sorted=bool(degree_sorted))
    if skeleton == _COLUMN_TILED:
        return ColumnTiled(**knobs, column_tile=tile)
    knobs.update(nnz_tile=nnz, index_tile=bool(index_tile))
    return SplitRows(**knobs, row_split=split) if skeleton == _SPLIT_ROWS else OnePass(**knobs)


def one_pass_grid(feature_len: int, vector_ok: int, mean_degree: float | None = None) -> list[OnePass]:
    """The one-pass schedules worth measuring for ``feature_len`` features.

    The feature slice is 32, 64 or 128 features (or the whole feature vector when
    shorter); vectors are scalar or as wide as the data allows; a group fills its warp
    with edge lanes, or half of it, or (given the graph's ``mean_degree``) has just enough
    edge lanes for an average row to give each a handful of edges, as the hand rule sizes
    them: on graphs of very short rows a whole warp per row leaves most lanes idle; blocks
    have 256 threads; an index tile only where a group owns one edge at a time. At the
    widest vector, groups sized to the vectors of a width the slices pad (:func:`odd_groups`),
    with edge lanes while a warp keeps as many lanes busy. Every one is valid by
    construction (tests/kernels/spmm/test_space.py validates them).
    """
    return [schedule_from_row(row) for row in _grid_rows(feature_len, vector_ok, mean_degree).tolist()]


def _grid_rows(feature_len: int, vector_ok: int, mean_degree: float | None) -> np.ndarray:
    """:func:`one_pass_grid` as a read-only :func:`knob_table`. The mean degree matters only
    through the edge lanes it asks of a warp, so the table is made once per value of those."""
    return _grid_table(feature_len, vector_ok, None if mean_degree is None else edge_lanes_for(mean_degree, _WARP_LANES))


@functools.lru_cache(maxsize=512)
def _grid_table(feature_len: int, vector_ok: int, lanes_for_mean: int | None) -> np.ndarray:
    """:func:`_grid_rows` for a graph whose mean degree asks ``lanes_for_mean`` edge lanes of
    a warp (:func:`~.shapes.edge_lanes_for`; a narrower group asks as many, at most its
    share of the warp)."""
    widest = widest_vector(feature_len, vector_ok)
    padded = pow2_at_least(feature_len)
    slices = sorted({min(padded, s) for s in (32, 64, 128)})
    groups = {}  # (rows per block, feature lanes, edge lanes, vector, outputs) -> the group's walks
    for vector in sorted({1, widest}):
        for slice_ in slices:
            for outputs in (1, 2):
                feature_lanes = slice_ // (vector * outputs)
                if feature_lanes not in _POWERS_OF_TWO or (outputs > 1 and slice_ < 64):
                    continue
                fills = {32 // feature_lanes, max(1, 16 // feature_lanes)}
                if lanes_for_mean is not None:
                    fills.add(min(lanes_for_mean, 32 // feature_lanes))
                for edge_lanes in sorted(fills):
                    walks = _WALKS_OR_INDEX_TILE if edge_lanes == 1 and feature_lanes >= 8 else _WALKS
                    groups[256 // (feature_lanes * edge_lanes), feature_lanes, edge_lanes, vector, outputs] = walks
        # Odd groups at the widest vector only: scalar ones never won a measured cell (60 cells
        # of docs/results/tuning/not-in-training/h200-2026-11-28-widths-*), and each costs
        # the model policy's decision about 5 us.
        odd = odd_groups(-(-feature_len // vector), [s // vector for s in slices]) if vector == widest else []
        for feature_lanes, outputs in odd:
            # Edge lanes only while the warp keeps as many lanes busy as with one.
            busy = _WARP_LANES // feature_lanes * feature_lanes
            for edge_lanes in (1, 2, 4, 8):
                group = feature_lanes * edge_lanes
                if group > _WARP_LANES or _WARP_LANES // group * group < busy:
                    continue
                groups[256 // _WARP_LANES * (_WARP_LANES // group), feature_lanes, edge_lanes, vector, outputs] = _WALKS
    table = _one_pass_table(groups)
    table.flags.writeable = False
    return table


def _one_pass_table(groups: dict[tuple[int, ...], np.ndarray]) -> np.ndarray:
    """The :func:`knob_table` of one-pass schedules of each group's knobs (rows per block,
    feature lanes, edge lanes, vector width, outputs per thread) with each of its walks
    (``[walks, 3]``: index tile, nnz tile, degree sorted), group by group. Built from the
    groups, a few, rather than row by row: converting Python ints costs about 0.2 us a row,
    as much as the loops that choose them."""
    knobs, walks = list(groups), list(groups.values())
    counts = [len(w) for w in walks]
    table = np.zeros((sum(counts), len(KNOB_COLUMNS)), dtype=np.int64)
    table[:, _COLUMN["skeleton"]] = _ONE_PASS
    table[:, _COLUMN["rows_per_block"]:_COLUMN["outputs_per_thread"] + 1] = np.repeat(knobs, counts, axis=0)
    table[:, [_COLUMN["index_tile"], _COLUMN["nnz_tile"], _COLUMN["degree_sorted"]]] = np.concatenate(walks)
    table[:, _COLUMN["column_groups"]] = 1
    return table


# A group sized to an odd width's vectors joins the grid where its warps carry at least this
# much more of the features than the power-of-two groups' (whose slices pad the width).
_ODD_GROUP_GAIN = 1.1


def odd_groups(vectors: int, slice_vectors: Sequence[int]) -> list[tuple[int, int]]:
    """(feature lanes, vectors per thread) of groups that are not a power of two, cover
    ``vectors`` feature vectors in one slice, and use a warp's vector slots better (by
    :data:`_ODD_GROUP_GAIN`) than the power-of-two grid's slices of ``slice_vectors``
    vectors do. At 100 features (25 vectors of 4, slices of 32 vectors) five lanes of five
    vectors put six rows in a warp, 150 of its 160 slots used, where the grid uses 25 of
    each 32. Best first, at most two."""
    def use(lanes: int, outputs: int) -> float:  # a warp's vector slots that carry features
        return vectors / (lanes * outputs) * (_WARP_LANES // lanes * lanes) / _WARP_LANES

    power_of_two = max(vectors / (slots * -(-vectors // slots)) for slots in slice_vectors)
    odd = {(-(-vectors // outputs), outputs) for outputs in range(1, 9)}
    better = [(use(lanes, outputs), -lanes, lanes, outputs) for lanes, outputs in odd
              if 3 <= lanes <= _WARP_LANES and lanes not in _POWERS_OF_TWO
              and use(lanes, outputs) >= _ODD_GROUP_GAIN * power_of_two]
    return [(lanes, outputs) for *_, lanes, outputs in sorted(better, reverse=True)[:2]]


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
    return Space([schedule_from_row(row) for row in candidate_table(task, stats, target).tolist()])


def candidate_table(task: SpmmTask, stats: GraphStats, target: Target) -> np.ndarray:
    """The candidates of :func:`schedule_space` as a :func:`knob_table`, in its order,
    without making a schedule of each (each part is new: only the hand rule's pick may
    repeat one, and joins where it does not)."""
    return _candidates(task, stats, target).table


def _candidates(task: SpmmTask, stats: GraphStats, target: Target) -> KnobCandidates[_KnobFacts]:
    """:func:`candidate_table`, the row of the hand rule's pick in it and the candidates'
    facts that no graph changes, from the few things a graph decides of them (kept: every
    new graph of a task, a mini-batch block under the model policy, asks again)."""
    feature_len, dtype = task.num_features, task.dtype
    # Tiles sized for rows of all the output's features, whatever lhs broadcasts.
    tile = column_tile_for(feature_len, dtype, target)
    index = tile_rows(stats.num_src, stats.num_dst, tile) if tile else 0
    tiled = (task.lhs_shape is not None and feature_len <= _COLUMN_TILED_FEATURES and tile
             and index <= min(MAX_TILE_ROWS, TILE_ROWS_PER_EDGE * stats.num_edges))
    return _candidates_of(feature_len, dtype, min(task.vector_ok, VECTOR_BYTES // dtype.itemsize),
                          edge_lanes_for(stats.rows.mean, _WARP_LANES), tile if tiled else 0,
                          tuple(row_splits_for(stats, target)),
                          task.algorithm.message_is_lhs and feature_len <= OUTPUT_TILED_FEATURES,
                          knob_row(default_schedule(task, stats, target)), target)


@functools.lru_cache(maxsize=512)
def _candidates_of(feature_len: int, dtype: torch.dtype, vector_ok: int, lanes_for_mean: int, column_tile: int,
                   row_splits: tuple[int, ...], output_tiled: bool, default: tuple,
                   target: Target) -> KnobCandidates[_KnobFacts]:
    """:func:`_candidates` of a task of ``feature_len`` features of ``dtype`` and vectors of
    at most ``vector_ok`` elements, on a graph whose mean row asks ``lanes_for_mean`` edge
    lanes of a warp, with column-tiled variants of tiles of ``column_tile`` rows (0: none),
    split-rows variants of chunks of ``row_splits`` edges, output-tiled schedules or not,
    and the hand rule's pick ``default`` (a knob row)."""
    grid = _grid_table(feature_len, vector_ok, lanes_for_mean)
    parts = [grid]
    if column_tile:
        group = grid[:, _COLUMN["feature_lanes"]] * grid[:, _COLUMN["edge_lanes"]]
        one_edge = (grid[:, _COLUMN["nnz_tile"]] == 1) & (grid[:, _COLUMN["index_tile"]] == 0) & (group >= 16)
        parts.append(_variants(grid[one_edge], _COLUMN_TILED, rows_per_block=1024 // group[one_edge],
                               column_tile=column_tile))
    degree_sorted = grid[grid[:, _COLUMN["degree_sorted"]] == 1]
    # Edges one pass of a group's lanes walks: a chunk shorter than that runs as the same
    # knobs with fewer edges in flight would.
    per_pass = degree_sorted[:, _COLUMN["edge_lanes"]] * degree_sorted[:, _COLUMN["nnz_tile"]]
    for split in row_splits:
        parts.append(_variants(degree_sorted[per_pass <= split], _SPLIT_ROWS, row_split=split))
    if output_tiled:
        parts.append(knob_table([knob_row(output_tiled_schedule(feature_len, dtype, warps, groups, vector_ok))
                                 for warps in output_tiled_warps(dtype) for groups in (1, 2, 4)]))
    # The hand rule's pick is always a candidate: a search never starts behind it.
    table, position = with_row(np.concatenate(parts), default)
    table.flags.writeable = False
    return KnobCandidates(table, position, _KnobFacts.of(table, feature_len, target))


def _variants(table: np.ndarray, skeleton: int, **columns) -> np.ndarray:
    """``table``'s candidates as ``skeleton`` schedules, ``columns`` (by name) set."""
    variants = table.copy()
    variants[:, _COLUMN["skeleton"]] = skeleton
    for name, value in columns.items():
        variants[:, _COLUMN[name]] = value
    return variants


def facts(task: SpmmTask, stats: GraphStats, target: Target, table: np.ndarray) -> FactTable:
    """What the pruning constraints read of each candidate, a row of a :func:`knob_table`,
    for ``task`` on a graph of ``stats``.

    - Blocks: the row-walking skeletons' grid (as :func:`~.shapes.row_grid`; split rows over
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

    Computed over all rows at once.
    """
    return _KnobFacts.of(table, task.num_features, target).on(stats, target)


@dataclass(frozen=True, eq=False)
class _KnobFacts:
    """The parts of :func:`facts` that read the knobs, the feature count and the target
    alone (``[n]`` each), kept with a task's candidates: a graph adds its sizes."""

    rows_per_tile: np.ndarray  # the column-tiled ones' are the plan's, picked per graph
    slices: np.ndarray
    split_rows: np.ndarray  # bool
    chunk: np.ndarray  # a split row's chunk length, 1 for the others
    column_tiled: np.ndarray  # positions
    column_tile: np.ndarray  # their tiles
    output_tiled: np.ndarray  # bool
    output_tiled_blocks: np.ndarray  # row ranges times column groups, 0 for the others
    ordered: np.ndarray  # bool: balanced row tiles
    column_waste: np.ndarray

    @classmethod
    def of(cls, table: np.ndarray, features: int, target: Target) -> _KnobFacts:
        skeleton, rows_per_tile, feature_lanes, _, vector, outputs, _, _, degree_sorted, split, tile, groups = table.T
        output_tiled = skeleton == _OUTPUT_TILED
        # The features a slice covers: a group's, or all an output-tiled lane carries (its
        # row has one feature lane).
        covered = feature_lanes * vector * outputs
        column_tiled = (skeleton == _COLUMN_TILED).nonzero()[0]
        return cls(rows_per_tile=rows_per_tile, slices=-(-features // covered), split_rows=skeleton == _SPLIT_ROWS,
                   # (A row that is not split has row_split 0: its count, divided by 1, is not taken.)
                   chunk=np.maximum(split, 1), column_tiled=column_tiled, column_tile=tile[column_tiled],
                   output_tiled=output_tiled,
                   output_tiled_blocks=np.where(output_tiled, -(-target.sms // groups) * groups, 0),
                   ordered=(degree_sorted != 0) | output_tiled, column_waste=column_waste(features, covered))

    def on(self, stats: GraphStats, target: Target) -> FactTable:
        """The facts on a graph of ``stats``."""
        items = np.where(self.split_rows, split_items_at_least(stats.num_dst, stats.num_edges, self.chunk),
                         stats.num_dst)
        blocks = np.where(self.output_tiled, self.output_tiled_blocks, -(-items // self.rows_per_tile) * self.slices)
        rows_per_tile = self.rows_per_tile
        if len(self.column_tiled):  # a handful, each with the rows per block its plan picks
            rows_per_tile = rows_per_tile.copy()
            for i, tile in zip(self.column_tiled.tolist(), self.column_tile.tolist()):
                tiles = -(-stats.num_src // tile)
                rows_per_tile[i] = column_tiled_block_rows(stats.num_dst, tiles * int(self.slices[i]), target.sms)
                blocks[i] = -(-stats.num_dst // rows_per_tile[i]) * tiles * self.slices[i]
        return FactTable(blocks, row_tile_cov(stats.rows.cov, rows_per_tile, self.ordered), self.column_waste)


def pruned_space(task: SpmmTask, stats: GraphStats, target: Target, thresholds: Thresholds = THRESHOLDS,
                 *, registers: Literal["off", "kept", "all"] = "off") -> Pruning:
    """:func:`schedule_space` pruned by LO-SpMM's constraints
    (:func:`gsparse.kernels.pruning.prune`), the hand rule's pick protected.

    ``registers`` turns on the register constraint: ``"kept"`` compiles (NVRTC, for
    ``target.arch``, through the kernel cache) the candidates the arithmetic constraints
    leave, ``"all"`` every candidate; ``"off"`` compiles nothing (what the model policy
    uses).
    """
    found = _candidates(task, stats, target)  # the hand rule's pick, made once there
    candidates = [schedule_from_row(row) for row in found.table.tolist()]
    return prune(candidates, found.facts.on(stats, target), target, thresholds,
                 protected=(candidates[found.default],), registers=lambda s: register_spills(task, s, target),
                 registers_on=registers)


def pruned_rows(task: SpmmTask, stats: GraphStats, target: Target) -> np.ndarray:
    """The candidates :func:`pruned_space` keeps at the default thresholds, the register
    constraint off, as a :func:`knob_table` in its order: what the "model" policy ranks,
    pruned without making a schedule of each (the hand rule's pick, protected, is among
    them)."""
    found = _candidates(task, stats, target)
    return found.table[kept_positions(found.facts.on(stats, target), target, (found.default,))]


def register_spills(task: SpmmTask, schedule: SpmmSchedule, target: Target) -> float:
    """The register constraint's measure of ``schedule``'s program for ``task`` on ``target``
    (:func:`~gsparse.kernels.pruning.program_spills`): compiles it with NVRTC, once."""
    return program_spills(codegen.program(task.algorithm, schedule, task.num_features), target)
