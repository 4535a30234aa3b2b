"""The g-SDDMM search space of a task on a graph and a target, and its pruning for the
graph at hand (:func:`pruned_space`, LO-SpMM's constraints of
:mod:`gsparse.kernels.pruning` over the :func:`facts` of each candidate)."""

from __future__ import annotations

import functools
import itertools
from typing import Literal

import torch

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
from .plan import grid
from .schedule import Edge, EdgeTransposed, Row, RowTransposed, SddmmSchedule
from .task import SddmmTask

__all__ = ["facts", "pruned_space", "register_spills", "schedule_space"]

_LANES = (1, 2, 4, 8, 16, 32)


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
    return _space(task.head_len, task.dtype, task.vector_ok, task.is_dot)


# Kept: every new graph of a task asks for the same space (every mini-batch block under the
# model policy, which prunes it by the graph's statistics), and building it is most of a decision.
@functools.lru_cache(maxsize=256)
def _space(feature_len: int, dtype: torch.dtype, vector_ok: int, is_dot: bool) -> Space:
    """:func:`schedule_space` for a head of ``feature_len`` features of ``dtype``, vectors
    of at most ``vector_ok`` elements, ``is_dot`` as :attr:`SddmmTask.is_dot`."""
    size = dtype.itemsize
    launches = [0]
    if size >= 4:
        launches += [w for w in (32, 128) if w < feature_len]
    vectors = sorted({1, widest_vector(feature_len, min(vector_ok, VECTOR_BYTES // size))})
    accumulator_words = 2 if dtype == torch.float64 else 1
    grid: list = []
    for launch in launches:
        span = launch or feature_len
        for vector, lanes, per_thread in itertools.product(vectors, _LANES, (1, 2, 4, 8)):
            slice_ = lanes * vector * per_thread
            if slice_ > max(pow2_at_least(span), vector) or slice_ * 4 < span:
                continue
            knobs = dict(lanes=lanes, features_per_thread=per_thread, vector_width=vector)
            for threads in (128, 256):
                grid.append(Edge(groups_per_block=threads // lanes, features_per_launch=launch,
                                 **knobs))
            if slice_ < span:
                continue
            if not launch:
                grid += [Row(groups_per_block=rows, **knobs) for rows in (4, 8)]
            lane_values = per_thread * vector
            for batch in sorted({8, lanes}) if lanes >= 8 else []:
                if batch_fits(batch, lane_values, accumulator_words, indices=1):
                    # Only a dot has a reduction to transpose: other operators run the row code.
                    grid.append(RowTransposed(groups_per_block=4, features_per_launch=launch,
                                              edges_per_batch=batch, **knobs) if is_dot
                                else Row(groups_per_block=4, features_per_launch=launch, **knobs))
            if not launch:
                for batch in sorted({4, 8, lanes}) if lanes >= 4 else []:
                    if batch <= lanes and batch_fits(batch, lane_values, accumulator_words,
                                                     indices=2):
                        grid.append(EdgeTransposed(groups_per_block=4, edges_per_batch=batch,
                                                   **knobs))
    return Space([s for s in grid if not s.problems()])


def facts(task: SddmmTask, stats: GraphStats, target: Target, schedule: SddmmSchedule) -> Facts:
    """What the pruning constraints read of ``schedule`` for ``task`` on a graph of ``stats``.

    - Blocks: one launch's grid (:func:`~.plan.grid`).
    - COV_row: the edge skeletons give each block equal edges (balanced); the row skeletons'
      row tile is the ``groups_per_block`` rows (a warp each) of a block, in graph order.
    - WASTE_col: the features a group's passes over each launch's span cover beyond it.
    """
    del target
    x, y = grid(schedule, task, stats.num_edges, stats.num_dst)
    balanced = isinstance(schedule, (Edge, EdgeTransposed))
    return Facts(blocks=x * y, row_cov=row_tile_cov(stats.rows.cov, schedule.groups_per_block, balanced),
                 column_waste=column_waste(task.head_len, schedule.feature_slice,
                                           schedule.features_per_launch))


def pruned_space(task: SddmmTask, stats: GraphStats, target: Target, thresholds: Thresholds = THRESHOLDS,
                 *, registers: Literal["off", "kept", "all"] = "off") -> Pruning:
    """:func:`schedule_space` and the hand rule's pick, pruned by LO-SpMM's constraints
    (:func:`gsparse.kernels.pruning.prune`), the hand rule's pick protected; ``registers``
    as for :func:`gsparse.kernels.spmm.space.pruned_space`.

    The pick joins the candidates where the space lacks it (a head more than four times
    its slice, such as 602 features in slices of 32): the tuner measures it first and
    searches from it."""
    default = default_schedule(task, stats, target)
    candidates = Space([*schedule_space(task, stats, target), default]).candidates()
    protected = (default,)
    measures = [facts(task, stats, target, s) for s in candidates]
    return prune(candidates, measures, target, thresholds, protected=protected,
                 registers=lambda s: register_spills(task, s, target), registers_on=registers)


def register_spills(task: SddmmTask, schedule: SddmmSchedule, target: Target) -> float:
    """The register constraint's measure of ``schedule``'s program for ``task`` on ``target``
    (:func:`~gsparse.kernels.pruning.program_spills`): compiles it with NVRTC, once."""
    return program_spills(codegen.program(task.algorithm, schedule), target)
