"""The g-SDDMM search space of a task on a graph and a target, and its pruning for the
graph at hand (:func:`pruned_space`, LO-SpMM's constraints of
:mod:`gsparse.kernels.pruning` over the :func:`facts` of each candidate)."""

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
from .plan import MAX_GRID_X, MAX_GRID_Y
from .schedule import RANGE_BATCHES, Edge, EdgeTransposed, Row, RowTransposed, SddmmSchedule
from .task import SddmmTask

__all__ = ["KNOB_COLUMNS", "SKELETONS", "TABLE_COLUMNS", "candidate_table", "facts", "grids", "knob_row",
           "knob_table", "pruned_rows", "pruned_space", "register_spills", "schedule_from_row", "schedule_space",
           "with_properties"]

_LANES = (1, 2, 4, 8, 16, 32)

# A candidate as a row of integers, one layout for every skeleton (a knob a skeleton lacks
# at 0): the space is built, pruned and featurised as rows, since a schedule object costs
# microseconds to make and check and the "model" policy needs one, its pick.
SKELETONS = (Edge, Row, RowTransposed, EdgeTransposed)
KNOB_COLUMNS = ("skeleton", "groups_per_block", "lanes", "features_per_thread", "vector_width",
                "features_per_launch", "edges_per_batch")
# knob_table's columns: the knobs, then what the schedule's properties say of them.
TABLE_COLUMNS = (*KNOB_COLUMNS, "threads", "feature_slice", "launch_len", "edges_per_warp")
_EDGE, _ROW, _ROW_TRANSPOSED, _EDGE_TRANSPOSED = range(len(SKELETONS))


def knob_row(schedule: SddmmSchedule) -> tuple:
    """``schedule`` as a row of :data:`KNOB_COLUMNS` (the inverse of :func:`schedule_from_row`)."""
    s = schedule
    if type(s) not in SKELETONS:
        known = ", ".join(cls.__name__ for cls in SKELETONS)
        raise TypeError(f"schedules must be {known} schedules, got a {type(s).__name__}")
    return (SKELETONS.index(type(s)), s.groups_per_block, s.lanes, s.features_per_thread, s.vector_width,
            s.features_per_launch, getattr(s, "edges_per_batch", 0))


def schedule_from_row(row: Sequence[int]) -> SddmmSchedule:
    """The schedule of a row of :data:`KNOB_COLUMNS`."""
    skeleton, groups, lanes, per_thread, vector, launch, batch = (int(value) for value in row)
    knobs = dict(groups_per_block=groups, lanes=lanes, features_per_thread=per_thread, vector_width=vector,
                 features_per_launch=launch)
    if skeleton in (_ROW_TRANSPOSED, _EDGE_TRANSPOSED):
        knobs["edges_per_batch"] = batch
    return SKELETONS[skeleton](**knobs)


def batch_fits(batch: int, lane_values: int, accumulator_words: int, indices: int) -> bool:
    """Whether a transposed skeleton's lane keeps its registers within half of the 128 a
    row skeleton's thread gets (more spills in fp64): the batch's sums, ``v``'s features
    (``lane_values``) and the next batch's ``indices`` indices per edge (source on
    ``row_transposed``, source and destination on ``edge_transposed``; two words each in
    int64)."""
    return (batch + lane_values) * accumulator_words + 2 * indices * batch <= 64


def schedule_space(task: SddmmTask, stats: GraphStats, target: Target) -> Space:
    """The schedules worth measuring for ``task`` (all valid for it).

    Heads of ``task.head_len`` features: the reduced last dimension for ``dot``, all output
    features for element-wise operators. Edge skeletons cover the head in one launch, or in
    launches of 32 or 128 features where the head is longer (not for 2-byte dtypes, whose
    ``dot`` cannot keep partial sums in ``out``). Pruned to the shapes that can win:
    vectors scalar or as wide as the length allows; group slices no wider than the
    features of a launch (rounded up to a power of two) and at most four passes short of
    them; 128 or 256 threads per edge block; row skeletons only where one slice covers the
    head, with 4 or 8 rows per block; where such a slice has 8 or more lanes,
    ``row_transposed`` for a ``dot`` (``row`` with 4 rows per block otherwise) with batches
    of 8 edges and of ``lanes`` edges, where their partial sums, ``v``'s features and the
    next batch's indices fit in 64 registers, also over the launches of 32 or 128
    features where one slice covers a launch; where it has 4 or more lanes,
    ``edge_transposed`` with 4 warps per block and batches of 4, 8 and ``lanes`` edges
    under the same budget (two indices per edge). The graph and target do not shape it.
    """
    del stats, target
    return Space([schedule_from_row(row) for row in _space(task.head_len, task.dtype, task.vector_ok,
                                                            task.is_dot).tolist()])


def candidate_table(task: SddmmTask, stats: GraphStats, target: Target) -> np.ndarray:
    """The candidates :func:`pruned_space` prunes, the space and the hand rule's pick where
    the space lacks it, as a :func:`knob_table` in its order, without making a schedule of
    each."""
    return _candidates(task, stats, target).table


def _candidates(task: SddmmTask, stats: GraphStats, target: Target) -> KnobCandidates[_KnobFacts]:
    """:func:`candidate_table`, the row of the hand rule's pick in it and the candidates'
    facts that no graph changes (kept: every new graph of a task, a mini-batch block under
    the model policy, asks again)."""
    return _candidates_of(task.head_len, task.dtype, task.vector_ok, task.is_dot,
                          knob_row(default_schedule(task, stats, target)))


@functools.lru_cache(maxsize=512)
def _candidates_of(feature_len: int, dtype: torch.dtype, vector_ok: int, is_dot: bool,
                   default: tuple) -> KnobCandidates[_KnobFacts]:
    """:func:`_candidates` of the space of :func:`_space`'s arguments and the hand rule's
    pick ``default`` (a knob row)."""
    table, position = with_row(_space(feature_len, dtype, vector_ok, is_dot), default)
    table.flags.writeable = False
    return KnobCandidates(table, position, _KnobFacts.of(table, feature_len))


# Kept: every new graph of a task asks for the same space (every mini-batch block under the
# model policy, which prunes it by the graph's statistics).
@functools.lru_cache(maxsize=256)
def _space(feature_len: int, dtype: torch.dtype, vector_ok: int, is_dot: bool) -> np.ndarray:
    """:func:`schedule_space` as a read-only :func:`knob_table`, for a head of
    ``feature_len`` features of ``dtype``, vectors of at most ``vector_ok`` elements,
    ``is_dot`` as :attr:`SddmmTask.is_dot`. Valid by construction (the tests validate
    every candidate): no lane handles more than 16 elements per pass, which would spill
    registers."""
    size = dtype.itemsize
    launches = [0]
    if size >= 4:
        launches += [w for w in (32, 128) if w < feature_len]
    vectors = sorted({1, widest_vector(feature_len, min(vector_ok, VECTOR_BYTES // size))})
    accumulator_words = 2 if dtype == torch.float64 else 1
    grid: list = []
    for launch in launches:
        span = launch or feature_len
        padded = pow2_at_least(span)
        for vector, lanes, per_thread in itertools.product(vectors, _LANES, (1, 2, 4, 8)):
            slice_ = lanes * vector * per_thread
            if slice_ > padded and slice_ > vector or slice_ * 4 < span or per_thread * vector > 16:
                continue
            knobs = (lanes, per_thread, vector)
            for threads in (128, 256):
                grid.append((_EDGE, threads // lanes, *knobs, launch, 0))
            if slice_ < span:
                continue
            if not launch:
                grid += [(_ROW, rows, *knobs, 0, 0) for rows in (4, 8)]
            lane_values = per_thread * vector
            for batch in sorted({8, lanes}) if lanes >= 8 else []:
                if batch_fits(batch, lane_values, accumulator_words, indices=1):
                    # Only a dot has a reduction to transpose: other operators run the row code.
                    grid.append((_ROW_TRANSPOSED, 4, *knobs, launch, batch) if is_dot
                                else (_ROW, 4, *knobs, launch, 0))
            if not launch:
                for batch in sorted({4, 8, lanes}) if lanes >= 4 else []:
                    if batch <= lanes and batch_fits(batch, lane_values, accumulator_words, indices=2):
                        grid.append((_EDGE_TRANSPOSED, 4, *knobs, 0, batch))
    table = knob_table(list(dict.fromkeys(grid)))
    table.flags.writeable = False  # shared by every call of the task
    return table


def knob_table(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """``[len(rows), len(KNOB_COLUMNS)]`` int64 of knob rows."""
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows) * len(KNOB_COLUMNS))
    return flat.reshape(len(rows), len(KNOB_COLUMNS))


def with_properties(table: np.ndarray, head_len: int) -> np.ndarray:
    """``[len(TABLE_COLUMNS), len(table)]`` int64: each candidate's knobs (a row of a
    :func:`knob_table`) and, for heads of ``head_len`` features, what the schedule's
    properties say of them: threads per block, the features a group covers per pass, those
    a launch covers, and the edges a warp of the edge-transposed skeleton walks (0 for the
    others)."""
    skeleton, groups, lanes, per_thread, vector, launch, batch = knobs = table.T
    return np.vstack([
        knobs,
        groups * np.where(skeleton == _EDGE, lanes, 32),
        lanes * vector * per_thread,
        np.where(launch > 0, np.minimum(head_len, launch), head_len),
        np.where(skeleton == _EDGE_TRANSPOSED, 32 // lanes * batch * RANGE_BATCHES, 0),
    ])


def grids(table: np.ndarray, task: SddmmTask, num_edges: int, num_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~.plan.grid` of every schedule of a table :func:`with_properties` at once."""
    skeleton, groups_per_block, *_, slice_, span, edges_per_warp = table
    edge = skeleton == _EDGE
    chunks = np.where(edge, 1, task.num_heads if task.is_dot else -(-span // slice_))
    groups = np.where(edge, num_edges, np.where(skeleton == _EDGE_TRANSPOSED,
                                                -(-num_edges // np.maximum(edges_per_warp, 1)), num_rows))
    return np.minimum(-(-groups // groups_per_block), MAX_GRID_X), np.minimum(chunks, MAX_GRID_Y)


def facts(task: SddmmTask, stats: GraphStats, target: Target, table: np.ndarray) -> FactTable:
    """What the pruning constraints read of each candidate, a row of a :func:`knob_table`,
    for ``task`` on a graph of ``stats``.

    - Blocks: one launch's grid (:func:`~.plan.grid`).
    - COV_row: the edge skeletons give each block equal edges (balanced); the row skeletons'
      row tile is the ``groups_per_block`` rows (a warp each) of a block, in graph order.
    - WASTE_col: the features a group's passes over each launch's span cover beyond it.

    Computed over all rows at once.
    """
    del target
    return _KnobFacts.of(table, task.head_len).on(task, stats)


@dataclass(frozen=True, eq=False)
class _KnobFacts:
    """The parts of :func:`facts` that read the knobs and the head's length alone, kept
    with a task's candidates: a graph adds its sizes."""

    properties: np.ndarray  # with_properties of the candidates
    balanced: np.ndarray  # bool: the edge skeletons' equal edges per block
    column_waste: np.ndarray

    @classmethod
    def of(cls, table: np.ndarray, head_len: int) -> _KnobFacts:
        properties = with_properties(table, head_len)
        skeleton, _, _, _, _, launch, _, _, slice_, _, _ = properties
        return cls(properties, (skeleton == _EDGE) | (skeleton == _EDGE_TRANSPOSED),
                   column_waste(head_len, slice_, launch))

    def on(self, task: SddmmTask, stats: GraphStats) -> FactTable:
        """The facts for ``task`` (the one they were made for) on a graph of ``stats``."""
        x, y = grids(self.properties, task, stats.num_edges, stats.num_dst)
        groups_per_block = self.properties[TABLE_COLUMNS.index("groups_per_block")]
        return FactTable(x * y, row_tile_cov(stats.rows.cov, groups_per_block, self.balanced), self.column_waste)


def pruned_space(task: SddmmTask, stats: GraphStats, target: Target, thresholds: Thresholds = THRESHOLDS,
                 *, registers: Literal["off", "kept", "all"] = "off") -> Pruning:
    """:func:`schedule_space` and the hand rule's pick, pruned by LO-SpMM's constraints
    (:func:`gsparse.kernels.pruning.prune`), the hand rule's pick protected; ``registers``
    as for :func:`gsparse.kernels.spmm.space.pruned_space`.

    The pick joins the candidates where the space lacks it (a head more than four times
    its slice, such as 602 features in slices of 32): the tuner measures it first and
    searches from it."""
    found = _candidates(task, stats, target)  # the hand rule's pick, made once there
    candidates = [schedule_from_row(row) for row in found.table.tolist()]
    return prune(candidates, found.facts.on(task, stats), target, thresholds,
                 protected=(candidates[found.default],), registers=lambda s: register_spills(task, s, target),
                 registers_on=registers)


def pruned_rows(task: SddmmTask, stats: GraphStats, target: Target) -> np.ndarray:
    """The candidates :func:`pruned_space` keeps at the default thresholds, the register
    constraint off, as a :func:`knob_table` in its order: what the "model" policy ranks,
    pruned without making a schedule of each (the hand rule's pick, protected, is among
    them)."""
    found = _candidates(task, stats, target)
    return found.table[kept_positions(found.facts.on(task, stats), target, (found.default,))]


def register_spills(task: SddmmTask, schedule: SddmmSchedule, target: Target) -> float:
    """The register constraint's measure of ``schedule``'s program for ``task`` on ``target``
    (:func:`~gsparse.kernels.pruning.program_spills`): compiles it with NVRTC, once."""
    return program_spills(codegen.program(task.algorithm, schedule), target)
