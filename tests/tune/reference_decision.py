"""Straightforward references for the "model" policy's decision, and random problems to
compare it on.

:func:`reference_featurize` computes each schedule's feature row with plain Python, one
schedule at a time (the formulas of ``gsparse.tune.features`` as first written);
:func:`reference_scores` evaluates a :class:`~gsparse.tune.models.TreeEnsemble` by
clearing, for every split a row goes right at, the leaves of its left subtree, and taking
the leftmost leaf left; :func:`reference_choice` is the first choice they make together.
The optimised path must agree with them bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gsparse.datasets import GraphStructure
from gsparse.graph import GraphStats, RowStats
from gsparse.kernels import sddmm, spmm
from gsparse.target import A100, H100, H200, Target

# ------------------------------------------------------------------ features


def _log2(value: float) -> float:
    return math.log2(value) if value > 0 else 0.0


def _problem(s: GraphStructure, target: Target, feature_len: int, dtype_bytes: int, extra) -> list[float]:
    return [
        s.num_src, s.num_dst, s.num_edges, s.row_mean, s.row_max, s.row_cov, s.empty_rows,
        s.col_max, s.col_cov, s.block_spread, s.block_range, s.window_fraction,
        feature_len, feature_len % 32, dtype_bytes,
        target.sms, target.l2_bytes / 2**20, target.shared_bytes_per_block / 1024,
        s.num_src * feature_len * dtype_bytes / target.l2_bytes,
        s.num_edges / target.resident_warps,
        *extra,
    ]


def _spmm_row(s, task: spmm.SpmmTask, structure: GraphStructure, target: Target) -> list[float]:
    F, elem = task.num_features, task.dtype.itemsize
    skeletons = (spmm.OnePass, spmm.SplitRows, spmm.ColumnTiled, spmm.OutputTiled)
    onehot = [float(isinstance(s, cls)) for cls in skeletons]
    if isinstance(s, spmm.OutputTiled):
        rows_per_block, feature_lanes, edge_lanes = s.warps_per_block, 1, 32
        vector, outputs, nnz, index_tile, sorted_ = s.vector_width, s.outputs_per_thread, 1, 0, 0
        slice_, slices, threads = s.features_covered, 1, s.threads
        blocks = target.sms
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
        groups, staged = 1, 0.0
        if column_tile:
            tiles = -(-structure.num_src // column_tile)
            staged = tiles * -(-structure.num_dst // 1024) * slices * column_tile * F * elem
    resident_blocks = target.sms * max(1, target.warps_per_sm * 32 // max(threads, 1))
    return [
        *onehot,
        _log2(rows_per_block), _log2(feature_lanes), _log2(edge_lanes), _log2(vector), _log2(outputs),
        _log2(nnz), index_tile, sorted_, _log2(split), _log2(column_tile), _log2(groups),
        threads, slice_, slices, F / (slices * slice_), blocks / resident_blocks,
        structure.num_src * min(slice_, F) * elem / target.l2_bytes,
        staged / max(structure.num_edges, 1),
        structure.row_max / split if split else 0.0,
        structure.row_mean / edge_lanes,
        min(rows_per_block / 8.0, 1.0), 1.0 / outputs, outputs,
        1.0 if rows_per_block * feature_lanes <= 128 else 128.0 / (rows_per_block * feature_lanes),
        nnz * rows_per_block,
    ]


def _spmm_estimate(s, task: spmm.SpmmTask, structure: GraphStructure, target: Target) -> tuple[float, ...]:
    """(estimate, memory, latency, longest row) in seconds, as ``features._spmm_estimate``."""
    F, elem, E = task.num_features, task.dtype.itemsize, max(structure.num_edges, 1)
    if isinstance(s, spmm.OutputTiled):
        feature_lanes, edge_lanes, nnz, split = 1, 32, 1, 0
        slices, slice_bytes = 1, min(s.features_covered, F) * elem
    else:
        feature_lanes, edge_lanes = s.feature_lanes, s.edge_lanes
        nnz, split = getattr(s, "nnz_tile", 1), getattr(s, "row_split", 0)
        slices, slice_bytes = -(-F // s.feature_slice), min(s.feature_slice, F) * elem
    sectors = slices * (math.ceil(slice_bytes / 32) * 32)
    rows_per_warp = min(max(32 // (feature_lanes * edge_lanes), 1), 32)
    wait = 0.5e-6
    outputs = structure.num_dst * F * elem
    dense = structure.num_src * slice_bytes
    miss = min(max(1 - target.l2_bytes / max(dense, 1), 0), 1)
    memory = max((E * (sectors + 4 * slices) + outputs) / 8.0e12,
                 (dense * slices + E * sectors * miss + (E * 8 + outputs)) / 3.0e12)
    padding = structure.lane_padding[int(math.log2(edge_lanes))]
    latency = (E * padding) * (slices * wait / (edge_lanes * nnz * rows_per_warp * target.resident_warps))
    longest_row = min(structure.row_max, split if split else math.inf) * (slices * wait / (edge_lanes * nnz))
    return max(memory, latency, longest_row), memory, latency, longest_row


def _sddmm_row(s, task: sddmm.SddmmTask, structure: GraphStructure, target: Target) -> list[float]:
    head, elem = task.head_len, task.dtype.itemsize
    skeletons = (sddmm.Edge, sddmm.Row, sddmm.RowTransposed, sddmm.EdgeTransposed)
    span = s.launch_len(head)
    passes = -(-span // s.feature_slice)
    blocks, chunks = sddmm.plan.grid(s, task, structure.num_edges, structure.num_dst)
    resident_blocks = target.sms * max(1, target.warps_per_sm * 32 // max(s.threads, 1))
    return [
        *(float(isinstance(s, cls)) for cls in skeletons),
        _log2(s.groups_per_block), _log2(s.lanes), _log2(s.features_per_thread), _log2(s.vector_width),
        _log2(s.features_per_launch), _log2(getattr(s, "edges_per_batch", 0)),
        s.threads, s.feature_slice, passes, span / (passes * s.feature_slice), -(-head // span),
        blocks * chunks / resident_blocks,
        structure.num_src * span * elem / target.l2_bytes,
        min(s.groups_per_block / 8.0, 1.0), min(s.lanes / 8.0, 1.0), s.groups_per_block * s.lanes,
        s.lanes / max(head, 1), 2.0 if head >= 32 else 1.0,
    ]


def reference_featurize(task, structure: GraphStructure, target: Target, schedules) -> np.ndarray:
    """The features of ``gsparse.tune.features.featurize``, one schedule at a time."""
    if isinstance(task, spmm.SpmmTask):
        a = task.algorithm
        extra = [float(a.lhs_layout is not None), float(a.rhs_layout is not None), float(task.rhs_len == 1),
                 float(a.reducer.keeps_arg), float(a.with_arg), float(a.reducer.divides_by_degree)]
        problem = _problem(structure, target, task.num_features, task.dtype.itemsize, extra)
        estimates = [_spmm_estimate(s, task, structure, target) for s in schedules]
        least = min((e[0] for e in estimates), default=1.0)
        rows = [problem + _spmm_row(s, task, structure, target) + [e[0] * 1e6, *(part / least for part in e)]
                for s, e in zip(schedules, estimates)]
    else:
        extra = [float(task.is_dot), task.num_heads, float(task.lhs_target == "e"),
                 float(task.rhs_target == "e"), float(task.rhs_len == 1)]
        problem = _problem(structure, target, task.head_len, task.dtype.itemsize, extra)
        rows = [problem + _sddmm_row(s, task, structure, target) for s in schedules]
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)


# ------------------------------------------------------------------ trees


def reference_scores(ensemble, x: np.ndarray) -> np.ndarray:
    """``[n]`` sums of the trees' leaves: a row reaches the leftmost leaf of each tree that
    no split it goes right at (``x[feature] > threshold``) removed with its left subtree."""
    x = np.asarray(x, dtype=np.float64)
    leaves = ensemble.values.shape[1]
    alive = np.ones((len(x), ensemble.num_trees, leaves), dtype=bool)
    goes_right = x[:, ensemble.feature] > ensemble.threshold
    for split, (tree, (lo, hi)) in enumerate(zip(ensemble.tree, ensemble.left_leaves)):
        alive[goes_right[:, split], tree, lo:hi] = False
    leaf = alive.argmax(axis=2)
    return ensemble.values[np.arange(ensemble.num_trees), leaf].sum(axis=1)


def reference_choice(model, operator: str, task, stats: GraphStats, structure: GraphStructure, target: Target):
    """The schedule of the task's pruned space and the hand rule's pick that ``model``
    ranks first, the plain way."""
    ops = spmm if operator == "spmm" else sddmm
    candidates = list(ops.pruned_space(task, stats, target).kept)
    default = ops.default_schedule(task, stats, target)
    if default not in candidates:
        candidates.append(default)
    costs = -reference_scores(model.ensemble, reference_featurize(task, structure, target, candidates))
    return candidates[int(costs.argmin())]


# ------------------------------------------------------------------ random problems

TARGETS = (H100, A100, H200)
_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_FEATURES = (1, 2, 3, 4, 7, 8, 16, 32, 50, 64, 100, 128, 256, 602)


def random_graph(rng: np.random.Generator) -> tuple[GraphStats, GraphStructure]:
    """The statistics and structure of a graph of random shape, from 10 to 10^7 rows with
    rows of 1 to 2,000 edges on average, skewed or not (not necessarily realisable)."""
    num_dst = int(10 ** rng.uniform(1, 7))
    num_src = num_dst if rng.random() < 0.5 else int(10 ** rng.uniform(1, 7))
    mean = min(10 ** rng.uniform(0, 3.3), num_src)
    num_edges = max(1, round(num_dst * mean))
    mean = num_edges / num_dst
    row_max = int(min(num_edges, max(math.ceil(mean), mean * 10 ** rng.uniform(0, 4))))
    cov = float(rng.choice([0.0, rng.uniform(0, 0.5), rng.uniform(0.5, 4)]))
    stats = GraphStats(num_src, num_dst, num_edges, RowStats(mean, row_max, cov))
    structure = GraphStructure(
        num_src, num_dst, num_edges, mean, row_max, cov, empty_rows=float(rng.uniform(0, 0.6)),
        col_max=int(min(num_dst, num_edges / num_src * 10 ** rng.uniform(0, 3))) + 1,
        col_cov=float(rng.uniform(0, 4)), block_spread=float(rng.uniform(0, 1)),
        block_range=float(rng.uniform(0, 1)), window_fraction=float(rng.uniform(0, 1)),
        rows_per_block=32, window=4096,
        # rows of about the mean's length, each group's padding raised for a spread of lengths
        lane_padding=tuple(math.ceil(mean / 2**k) * 2**k / mean * float(rng.uniform(1, 1 + cov)) if k else 1.0
                           for k in range(6)))
    return stats, structure


def _operand(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A contiguous operand of rows ``shape``, sometimes at an odd offset (narrower vectors)."""
    size = math.prod(shape)
    offset = int(rng.choice([0, 0, 1, 2]))
    return torch.empty(size * 2 + offset, dtype=dtype)[offset:offset + size].view(1, *shape)


def random_spmm_task(rng: np.random.Generator, g) -> spmm.SpmmTask:
    F, dtype = int(rng.choice(_FEATURES)), _DTYPES[rng.integers(len(_DTYPES))]
    op = str(rng.choice(["copy_lhs", "copy_rhs", "mul", "add", "div"]))
    reduce = str(rng.choice(["sum", "max", "min", "mean"]))
    lhs = _operand(rng, (F,), dtype) if op != "copy_rhs" else None
    rhs = None if op == "copy_lhs" else _operand(rng, (1,) if rng.random() < 0.6 else (F,), dtype)
    with_arg = reduce in ("max", "min") and rng.random() < 0.3
    return spmm.task_for(g, op, reduce, lhs, rhs, (F,), with_arg=with_arg)


def random_sddmm_task(rng: np.random.Generator, g) -> sddmm.SddmmTask:
    F, dtype = int(rng.choice(_FEATURES)), _DTYPES[rng.integers(len(_DTYPES))]
    op = str(rng.choice(["dot", "dot", "mul", "add", "sub"]))
    heads = int(rng.choice([1, 1, 2, 4, 8]))
    targets = [str(t) for t in rng.choice(["u", "v", "e"], size=2, replace=False)]
    if op == "dot":
        lhs, rhs = _operand(rng, (heads, F), dtype), _operand(rng, (heads, F), dtype)
        return sddmm.task_for(g, op, lhs, rhs, *targets, (heads, 1))
    lhs, rhs = _operand(rng, (F,), dtype), _operand(rng, (F,) if rng.random() < 0.7 else (1,), dtype)
    return sddmm.task_for(g, op, lhs, rhs, *targets, (F,))
