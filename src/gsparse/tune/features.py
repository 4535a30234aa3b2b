"""Features of (task, graph, target, schedule) for the cost models.

One fixed-length row per candidate schedule, in three parts:

- the *problem*: the graph's structure (:class:`~gsparse.datasets.GraphStructure`: sizes,
  row and column length statistics, column locality), the task (feature length, dtype,
  what the message reads) and the :class:`~gsparse.target.Target`;
- the *schedule*: a one-hot of its skeleton and its knobs (as log2 of the powers of two
  they are, 0 where the skeleton has no such knob);
- *derived* quantities that tie the two together: G-Sparse's Algorithm 4 metrics (output
  access efficiency, parallel degree, data reuse, block-size penalty, shared memory), lane
  utilisation (features a group covers over the slice it spans), the grid in waves of the
  GPU, the bytes of the dense input per slice over the L2, staged bytes per edge of the
  tiled skeletons, and how many chunks long rows are cut into.

Models are trained per operator (g-SpMM, g-SDDMM), so each operator has its own layout;
:func:`feature_names` names the columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..datasets.structure import GraphStructure
from ..kernels import sddmm, spmm
from ..target import Target

__all__ = ["feature_names", "featurize"]


def _log2(value: float) -> float:
    return math.log2(value) if value > 0 else 0.0


def _problem(structure: GraphStructure, target: Target, feature_len: int, dtype_bytes: int,
             extra: Sequence[float]) -> list[float]:
    s = structure
    return [
        s.num_src, s.num_dst, s.num_edges, s.row_mean, s.row_max, s.row_cov, s.empty_rows,
        s.col_max, s.col_cov, s.block_spread, s.block_range, s.window_fraction,
        feature_len, feature_len % 32, dtype_bytes,
        target.sms, target.l2_bytes / 2**20, target.shared_bytes_per_block / 1024,
        # the dense input's bytes over the L2: whether gathers can hit in it at all
        s.num_src * feature_len * dtype_bytes / target.l2_bytes,
        s.num_edges / target.resident_warps,
        *extra,
    ]


_PROBLEM_NAMES = ["num_src", "num_dst", "num_edges", "row_mean", "row_max", "row_cov", "empty_rows",
                  "col_max", "col_cov", "block_spread", "block_range", "window_fraction",
                  "feature_len", "feature_len_mod32", "dtype_bytes", "sms", "l2_mib", "shared_kib",
                  "dense_over_l2", "edges_per_resident_warp"]


# ------------------------------------------------------------------ g-SpMM

_SPMM_SKELETONS = (spmm.OnePass, spmm.SplitRows, spmm.ColumnTiled, spmm.OutputTiled)
_SPMM_TASK_NAMES = ["uses_lhs", "uses_rhs", "rhs_scalar", "selects", "with_arg", "divides"]
_SPMM_SCHEDULE_NAMES = [
    *(f"is_{cls.__name__}" for cls in _SPMM_SKELETONS),
    "log2_rows_per_block", "log2_feature_lanes", "log2_edge_lanes", "log2_vector", "log2_outputs",
    "log2_nnz_tile", "index_tile", "degree_sorted", "log2_row_split", "log2_column_tile",
    "log2_column_groups", "threads", "feature_slice", "slices", "lane_use", "waves",
    "slice_over_l2", "staged_bytes_per_edge", "chunks_of_longest_row", "edges_per_lane",
    "out_access_eff", "par_degree", "data_reuse", "block_penalty", "shared_size",
]


def _spmm_task(task: spmm.SpmmTask) -> list[float]:
    a = task.algorithm
    return [float(a.lhs_layout is not None), float(a.rhs_layout is not None),
            float(task.rhs_len == 1), float(a.reducer.keeps_arg), float(a.with_arg),
            float(a.reducer.divides_by_degree)]


def _spmm_schedule(s, task: spmm.SpmmTask, structure: GraphStructure, target: Target) -> list[float]:
    F, elem = task.num_features, task.dtype.itemsize
    onehot = [float(isinstance(s, cls)) for cls in _SPMM_SKELETONS]
    if isinstance(s, spmm.OutputTiled):
        rows_per_block, feature_lanes, edge_lanes = s.warps_per_block, 1, 32
        vector, outputs, nnz, index_tile, sorted_ = s.vector_width, s.outputs_per_thread, 1, 0, 0
        slice_, slices = s.features_covered, 1
        threads = s.threads
        blocks = target.sms  # one block per SM (row ranges), times column groups
        staged = -(-target.sms // s.column_groups) * structure.num_src * F * elem
        column_tile, groups, split = 0, s.column_groups, 0
    else:
        rows_per_block, feature_lanes, edge_lanes = s.rows_per_block, s.feature_lanes, s.edge_lanes
        vector, outputs = s.vector_width, s.outputs_per_thread
        nnz = getattr(s, "nnz_tile", 1)
        index_tile = float(getattr(s, "index_tile", False))
        sorted_ = float(s.degree_sorted)
        slice_, threads = s.feature_slice, s.threads
        slices = -(-F // slice_)
        blocks = -(-structure.num_dst // rows_per_block) * slices
        column_tile = getattr(s, "column_tile", 0)
        split = getattr(s, "row_split", 0)
        groups = 1
        staged = 0.0
        if column_tile:
            tiles = -(-structure.num_src // column_tile)
            staged = tiles * -(-structure.num_dst // 1024) * slices * column_tile * F * elem
    edges = max(structure.num_edges, 1)
    resident_blocks = target.sms * max(1, target.warps_per_sm * 32 // max(threads, 1))
    return [
        *onehot,
        _log2(rows_per_block), _log2(feature_lanes), _log2(edge_lanes), _log2(vector), _log2(outputs),
        _log2(nnz), index_tile, sorted_, _log2(split), _log2(column_tile), _log2(groups),
        threads, slice_, slices, F / (slices * slice_), blocks / resident_blocks,
        structure.num_src * min(slice_, F) * elem / target.l2_bytes,
        staged / edges,
        structure.row_max / split if split else 0.0,
        structure.row_mean / edge_lanes,
        # G-Sparse's Algorithm 4 (kMTile = rows per block, kNTile = feature lanes,
        # kNRegTile = outputs per thread, kNnzTile = edges fetched ahead)
        min(rows_per_block / 8.0, 1.0), 1.0 / outputs, outputs,
        1.0 if rows_per_block * feature_lanes <= 128 else 128.0 / (rows_per_block * feature_lanes),
        nnz * rows_per_block,
    ]


# ------------------------------------------------------------------ g-SDDMM

_SDDMM_SKELETONS = (sddmm.Edge, sddmm.Row, sddmm.RowTransposed, sddmm.EdgeTransposed)
_SDDMM_TASK_NAMES = ["is_dot", "num_heads", "lhs_on_edge", "rhs_on_edge", "rhs_scalar"]
_SDDMM_SCHEDULE_NAMES = [
    *(f"is_{cls.__name__}" for cls in _SDDMM_SKELETONS),
    "log2_groups", "log2_lanes", "log2_per_thread", "log2_vector", "log2_launch", "log2_batch",
    "threads", "feature_slice", "passes", "lane_use", "launches", "waves", "slice_over_l2",
    "mem_eff", "mem_eff2", "total_threads", "shuffle_factor", "feat_factor",
]


def _sddmm_task(task: sddmm.SddmmTask) -> list[float]:
    return [float(task.is_dot), task.num_heads, float(task.lhs_target == "e"),
            float(task.rhs_target == "e"), float(task.rhs_len == 1)]


def _sddmm_schedule(s, task: sddmm.SddmmTask, structure: GraphStructure, target: Target) -> list[float]:
    head, elem = task.head_len, task.dtype.itemsize
    onehot = [float(isinstance(s, cls)) for cls in _SDDMM_SKELETONS]
    span = s.launch_len(head)
    passes = -(-span // s.feature_slice)
    launches = -(-head // span)
    groups = sddmm.plan.grid(s, task, structure.num_edges, structure.num_dst)
    resident_blocks = target.sms * max(1, target.warps_per_sm * 32 // max(s.threads, 1))
    return [
        *onehot,
        _log2(s.groups_per_block), _log2(s.lanes), _log2(s.features_per_thread), _log2(s.vector_width),
        _log2(s.features_per_launch), _log2(getattr(s, "edges_per_batch", 0)),
        s.threads, s.feature_slice, passes, span / (passes * s.feature_slice), launches,
        groups[0] * groups[1] / resident_blocks,
        structure.num_src * span * elem / target.l2_bytes,
        # G-Sparse's Algorithm 4 (kMTile = edges or rows per block, kLaneWidth = lanes)
        min(s.groups_per_block / 8.0, 1.0), min(s.lanes / 8.0, 1.0), s.groups_per_block * s.lanes,
        s.lanes / max(head, 1), 2.0 if head >= 32 else 1.0,
    ]


# ------------------------------------------------------------------ both

def feature_names(operator: str) -> list[str]:
    """The column names of :func:`featurize` for ``"spmm"`` or ``"sddmm"``."""
    if operator == "spmm":
        return [*_PROBLEM_NAMES, *_SPMM_TASK_NAMES, *_SPMM_SCHEDULE_NAMES]
    if operator == "sddmm":
        return [*_PROBLEM_NAMES, *_SDDMM_TASK_NAMES, *_SDDMM_SCHEDULE_NAMES]
    raise ValueError(f"operator must be 'spmm' or 'sddmm', got {operator!r}")


def featurize(task, structure: GraphStructure, target: Target, schedules: Sequence) -> np.ndarray:
    """``[len(schedules), d]`` float64 features of each schedule for ``task`` on a graph of
    ``structure`` on ``target``; ``d = len(feature_names(operator))``."""
    if isinstance(task, spmm.SpmmTask):
        problem = _problem(structure, target, task.num_features, task.dtype.itemsize, _spmm_task(task))
        rows = [problem + _spmm_schedule(s, task, structure, target) for s in schedules]
        width = len(feature_names("spmm"))
    elif isinstance(task, sddmm.SddmmTask):
        problem = _problem(structure, target, task.head_len, task.dtype.itemsize, _sddmm_task(task))
        rows = [problem + _sddmm_schedule(s, task, structure, target) for s in schedules]
        width = len(feature_names("sddmm"))
    else:
        raise TypeError(f"task must be an SpmmTask or SddmmTask, got {type(task).__name__}")
    out = np.asarray(rows, dtype=np.float64).reshape(len(rows), width)
    return out
