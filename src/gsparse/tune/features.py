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
  tiled skeletons, and how many chunks long rows are cut into; for g-SpMM also a rough
  estimate of the time in physical units (:func:`_spmm_estimate`), given as over the
  space's least estimate, with its memory, latency and longest-row parts over the same.

Models are trained per operator (g-SpMM, g-SDDMM), so each operator has its own layout;
:func:`feature_names` names the columns.

The tuner featurises a task's whole space on every new graph, so the work is done over
all candidates at once (:class:`SpaceFeatures`): they come as an integer table, a row of
knobs each (the spaces are built as such; :func:`featurize` reads a schedule's), the
columns are NumPy expressions over it, and those that do not read the graph are computed
once per list of candidates.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from ..datasets.structure import GraphStructure
from ..kernels import sddmm, spmm
from ..kernels.sddmm import space as sddmm_space
from ..kernels.spmm import space as spmm_space
from ..target import Target

__all__ = ["SpaceFeatures", "feature_names", "featurize"]


def _log2(values: np.ndarray) -> np.ndarray:
    """``math.log2`` of each value, 0 where it is 0 (knobs: never negative). A power of two's
    is its exponent; the others (a column tile, a forced odd knob) are few and take math's,
    not NumPy's, whose vectorised logarithm may differ in the last bit from the one the
    shipped models were trained on."""
    mantissa, exponent = np.frexp(values)  # 0 -> (0, 0); a power of two -> (0.5, its exponent + 1)
    out = np.maximum(exponent - 1.0, 0.0)
    others = (mantissa > 0.5).ravel().nonzero()[0]
    if len(others):
        # a handful of distinct values, each repeated over many candidates
        found = values.flat[others].tolist()
        logs = {value: math.log2(value) for value in set(found)}
        out.flat[others] = [logs[value] for value in found]
    return out


def _resident_blocks(threads: np.ndarray, target: Target) -> np.ndarray:
    """Blocks of ``threads`` threads the whole GPU keeps resident at once."""
    return target.sms * np.maximum(1, target.warps_per_sm * 32 // np.maximum(threads, 1))


def _named(names: Sequence[str], columns: np.ndarray) -> dict[str, np.ndarray]:
    return dict(zip(names, columns))


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

_SPMM_SKELETONS = spmm_space.SKELETONS
_SPMM_TASK_NAMES = ["uses_lhs", "uses_rhs", "rhs_scalar", "selects", "with_arg", "divides"]
_SPMM_SCHEDULE_NAMES = [
    *(f"is_{cls.__name__}" for cls in _SPMM_SKELETONS),
    "log2_rows_per_block", "log2_feature_lanes", "log2_edge_lanes", "log2_vector", "log2_outputs",
    "log2_nnz_tile", "index_tile", "degree_sorted", "log2_row_split", "log2_column_tile",
    "log2_column_groups", "threads", "feature_slice", "slices", "lane_use", "waves",
    "slice_over_l2", "staged_bytes_per_edge", "chunks_of_longest_row", "edges_per_lane",
    "out_access_eff", "par_degree", "data_reuse", "block_penalty", "shared_size",
    "estimate_us", "estimate_over_least", "memory_over_least", "latency_over_least", "longest_row_over_least",
]
_OUTPUT_TILED = _SPMM_SKELETONS.index(spmm.OutputTiled)
_SPMM_KNOB = {name: i for i, name in enumerate(spmm_space.KNOB_COLUMNS)}
_SPMM_ONE_HOT = [f"is_{cls.__name__}" for cls in _SPMM_SKELETONS]
_SPMM_SKELETON_IDS = np.arange(len(_SPMM_SKELETONS))[:, None]
# The columns that are a knob's log2, and their knobs' rows of the table.
_SPMM_LOG2 = {"log2_rows_per_block": "rows_per_block", "log2_feature_lanes": "feature_lanes",
              "log2_edge_lanes": "edge_lanes", "log2_vector": "vector_width", "log2_outputs": "outputs_per_thread",
              "log2_nnz_tile": "nnz_tile", "log2_row_split": "row_split", "log2_column_tile": "column_tile",
              "log2_column_groups": "column_groups"}
_SPMM_LOG2_KNOBS = [_SPMM_KNOB[knob] for knob in _SPMM_LOG2.values()]


def _spmm_task(task: spmm.SpmmTask) -> list[float]:
    a = task.algorithm
    return [float(a.lhs_layout is not None), float(a.rhs_layout is not None),
            float(task.rhs_len == 1), float(a.reducer.keeps_arg), float(a.with_arg),
            float(a.reducer.divides_by_degree)]


def _spmm_static(knobs: np.ndarray, task: spmm.SpmmTask, target: Target) -> dict[str, np.ndarray]:
    """The g-SpMM columns that do not read the graph."""
    skeleton, rows, feature_lanes, edge_lanes, vector, outputs, nnz, index_tile, degree_sorted, *_ = knobs
    F = task.num_features
    group = feature_lanes * edge_lanes
    # Groups that do not divide a warp leave its last 32 % group lanes idle.
    threads = np.where(32 % group == 0, rows * group, rows // np.maximum(32 // group, 1) * 32)
    slice_ = feature_lanes * vector * outputs
    slices = np.where(skeleton == _OUTPUT_TILED, 1, -(-F // slice_))
    return {
        **_named(_SPMM_ONE_HOT, skeleton == _SPMM_SKELETON_IDS),
        **_named(_SPMM_LOG2, _log2(knobs[_SPMM_LOG2_KNOBS])),
        "index_tile": index_tile, "degree_sorted": degree_sorted,
        "threads": threads, "feature_slice": slice_, "slices": slices, "lane_use": F / (slices * slice_),
        # G-Sparse's Algorithm 4 (kMTile = rows per block, kNTile = feature lanes,
        # kNRegTile = outputs per thread, kNnzTile = edges fetched ahead)
        "out_access_eff": np.minimum(rows / 8.0, 1.0), "par_degree": 1.0 / outputs, "data_reuse": outputs,
        "block_penalty": np.minimum(128.0 / (rows * feature_lanes), 1.0),  # 1 up to 128 threads' lanes
        "shared_size": nnz * rows,
    }


# Round figures of an H100 for the estimate: DRAM and L2 bandwidth (bytes/s), and the wait
# of a gather that misses the L1 (s). The trees read the estimate's parts over the space's
# least estimate, so only their proportions matter; the same figures serve every target.
_DRAM_BYTES_PER_S, _L2_BYTES_PER_S, _GATHER_WAIT_S = 3.0e12, 8.0e12, 0.5e-6


def _spmm_graph_terms(knobs: np.ndarray, static: dict[str, np.ndarray], task: spmm.SpmmTask,
                      target: Target) -> dict[str, np.ndarray]:
    """The factors of :func:`_spmm_graph` (and of its :func:`_spmm_estimate`) that do not read
    the graph, once per space."""
    skeleton, _, feature_lanes, edge_lanes, _, _, nnz, _, _, split, column_tile, groups = knobs
    slices, elem = static["slices"], task.dtype.itemsize
    slice_bytes = np.minimum(static["feature_slice"], task.num_features) * elem
    sectors = slices * (np.ceil(slice_bytes / 32) * 32)
    rows_per_warp = np.minimum(np.maximum(32 // (feature_lanes * edge_lanes), 1), 32)
    steps = edge_lanes * nnz
    return {
        "output_tiled": skeleton == _OUTPUT_TILED,
        "resident_blocks": _resident_blocks(static["threads"], target),
        "column_tiled": column_tile > 0, "column_tile": column_tile, "tile_or_one": np.maximum(column_tile, 1),
        "blocks_per_group": -(-target.sms // groups), "split": split > 0, "split_or_one": np.maximum(split, 1),
        "lane_group": np.log2(edge_lanes).astype(np.int64),  # edge lanes are powers of two
        "slice_bytes": slice_bytes, "slices": slices,
        "sectors_per_edge": sectors, "l2_bytes_per_edge": sectors + 4 * slices,
        "wait_per_padded_edge": slices * _GATHER_WAIT_S / (steps * rows_per_warp * target.resident_warps),
        "chunk": np.where(split > 0, split, np.inf), "wait_per_edge_of_a_row": slices * _GATHER_WAIT_S / steps,
    }


def _spmm_estimate(terms: dict[str, np.ndarray], task: spmm.SpmmTask, structure: GraphStructure,
                   target: Target) -> dict[str, np.ndarray]:
    """A rough time (seconds) of each schedule from three bounds, and those bounds:

    * memory: 32-byte sectors of the gathered feature rows, one index per edge and slice,
      and the output, through the L2, and through DRAM the share of the gathers that
      misses an L2 too small for the slice's dense input;
    * latency: the dependent gathers (a warp's steps of ``edge_lanes`` edges, ``nnz_tile``
      fetched at once, the lanes padded per row as ``structure.lane_padding`` counts them),
      over the warps the GPU keeps resident;
    * longest row: the steps of the longest row (or of one chunk of it when rows are split),
      walked by one group while the rest of the GPU may be done.

    The estimate is the largest of the three; the trees learn where it is wrong."""
    E = max(structure.num_edges, 1)
    outputs = structure.num_dst * task.num_features * task.dtype.itemsize
    dense = structure.num_src * terms["slice_bytes"]
    miss = np.minimum(np.maximum(1 - target.l2_bytes / np.maximum(dense, 1), 0), 1)
    through_l2 = E * terms["l2_bytes_per_edge"] + outputs
    through_dram = dense * terms["slices"] + E * terms["sectors_per_edge"] * miss + (E * 8 + outputs)
    memory = np.maximum(through_l2 / _L2_BYTES_PER_S, through_dram / _DRAM_BYTES_PER_S)
    padding = np.asarray(structure.lane_padding)[terms["lane_group"]]
    latency = (E * padding) * terms["wait_per_padded_edge"]
    longest_row = np.minimum(structure.row_max, terms["chunk"]) * terms["wait_per_edge_of_a_row"]
    estimate = np.maximum(np.maximum(memory, latency), longest_row)
    least = estimate.min(initial=np.inf)  # inf: an empty space
    return {"estimate_us": estimate * 1e6, "estimate_over_least": estimate / least,
            "memory_over_least": memory / least, "latency_over_least": latency / least,
            "longest_row_over_least": longest_row / least}


def _spmm_graph(knobs: np.ndarray, terms: dict[str, np.ndarray], task: spmm.SpmmTask, structure: GraphStructure,
                target: Target) -> dict[str, np.ndarray]:
    """The g-SpMM columns that read the graph, from the knobs and :func:`_spmm_graph_terms`.
    Products of sizes stay below 2**53 (exact in float64, as in the integers they were
    trained on) for every graph that fits a GPU."""
    rows, edge_lanes, t = knobs[_SPMM_KNOB["rows_per_block"]], knobs[_SPMM_KNOB["edge_lanes"]], terms
    F, elem = task.num_features, task.dtype.itemsize
    # The output-tiled skeleton runs one block per SM (row ranges), times its column groups.
    blocks = np.where(t["output_tiled"], target.sms, -(-structure.num_dst // rows) * t["slices"])
    tiles = -(-structure.num_src // t["tile_or_one"])
    staged = np.where(t["column_tiled"],
                      tiles * t["slices"] * t["column_tile"] * (-(-structure.num_dst // 1024) * F * elem), 0)
    staged = np.where(t["output_tiled"], t["blocks_per_group"] * (structure.num_src * F * elem), staged)
    return {
        "waves": blocks / t["resident_blocks"],
        "slice_over_l2": structure.num_src * t["slice_bytes"] / target.l2_bytes,
        "staged_bytes_per_edge": staged / max(structure.num_edges, 1),
        "chunks_of_longest_row": np.where(t["split"], structure.row_max / t["split_or_one"], 0.0),
        "edges_per_lane": structure.row_mean / edge_lanes,
        **_spmm_estimate(terms, task, structure, target),
    }


# ------------------------------------------------------------------ g-SDDMM

_SDDMM_SKELETONS = sddmm_space.SKELETONS
_SDDMM_TASK_NAMES = ["is_dot", "num_heads", "lhs_on_edge", "rhs_on_edge", "rhs_scalar"]
_SDDMM_SCHEDULE_NAMES = [
    *(f"is_{cls.__name__}" for cls in _SDDMM_SKELETONS),
    "log2_groups", "log2_lanes", "log2_per_thread", "log2_vector", "log2_launch", "log2_batch",
    "threads", "feature_slice", "passes", "lane_use", "launches", "waves", "slice_over_l2",
    "mem_eff", "mem_eff2", "total_threads", "shuffle_factor", "feat_factor",
]
_SDDMM_TABLE = sddmm_space.TABLE_COLUMNS
_SDDMM_ONE_HOT = [f"is_{cls.__name__}" for cls in _SDDMM_SKELETONS]
_SDDMM_SKELETON_IDS = np.arange(len(_SDDMM_SKELETONS))[:, None]


def _sddmm_task(task: sddmm.SddmmTask) -> list[float]:
    return [float(task.is_dot), task.num_heads, float(task.lhs_target == "e"),
            float(task.rhs_target == "e"), float(task.rhs_len == 1)]


def _sddmm_static(knobs: np.ndarray, task: sddmm.SddmmTask, target: Target) -> dict[str, np.ndarray]:
    """The g-SDDMM columns that do not read the graph."""
    skeleton, groups, lanes, _, _, _, _, threads, slice_, span, _ = knobs
    head = task.head_len
    passes = -(-span // slice_)
    return {
        **_named(_SDDMM_ONE_HOT, skeleton == _SDDMM_SKELETON_IDS),
        # the knobs but the skeleton
        **_named(["log2_groups", "log2_lanes", "log2_per_thread", "log2_vector", "log2_launch", "log2_batch"],
                 _log2(knobs[1:len(sddmm_space.KNOB_COLUMNS)])),
        "threads": threads, "feature_slice": slice_, "passes": passes,
        "lane_use": span / (passes * slice_), "launches": -(-head // span),
        # G-Sparse's Algorithm 4 (kMTile = edges or rows per block, kLaneWidth = lanes)
        "mem_eff": np.minimum(groups / 8.0, 1.0), "mem_eff2": np.minimum(lanes / 8.0, 1.0),
        "total_threads": groups * lanes, "shuffle_factor": lanes / max(head, 1),
        "feat_factor": np.full(len(skeleton), 2.0 if head >= 32 else 1.0),
    }


def _sddmm_graph_terms(knobs: np.ndarray, target: Target) -> dict[str, np.ndarray]:
    """The factors of :func:`_sddmm_graph` that do not read the graph, once per space."""
    return {"resident_blocks": _resident_blocks(knobs[_SDDMM_TABLE.index("threads")], target)}


def _sddmm_graph(knobs: np.ndarray, terms: dict[str, np.ndarray], task: sddmm.SddmmTask,
                 structure: GraphStructure, target: Target) -> dict[str, np.ndarray]:
    """The g-SDDMM columns that read the graph, from the knobs and their properties
    (:func:`~gsparse.kernels.sddmm.space.with_properties`) and :func:`_sddmm_graph_terms`."""
    span = knobs[_SDDMM_TABLE.index("launch_len")]
    blocks, chunks = sddmm_space.grids(knobs, task, structure.num_edges, structure.num_dst)
    return {
        "waves": blocks * chunks / terms["resident_blocks"],
        "slice_over_l2": structure.num_src * span * task.dtype.itemsize / target.l2_bytes,
    }


# ------------------------------------------------------------------ both

def feature_names(operator: str) -> list[str]:
    """The column names of :func:`featurize` for ``"spmm"`` or ``"sddmm"``."""
    if operator == "spmm":
        return [*_PROBLEM_NAMES, *_SPMM_TASK_NAMES, *_SPMM_SCHEDULE_NAMES]
    if operator == "sddmm":
        return [*_PROBLEM_NAMES, *_SDDMM_TASK_NAMES, *_SDDMM_SCHEDULE_NAMES]
    raise ValueError(f"operator must be 'spmm' or 'sddmm', got {operator!r}")


class SpaceFeatures:
    """The features of a fixed list of candidates of one task on one target, on any graph.

    The candidates are the rows of a ``table`` of their operator's knobs
    (``knob_table`` of ``gsparse.kernels.spmm.space`` or ``gsparse.kernels.sddmm.space``,
    whose ``knob_row`` reads a schedule's). The columns that do not read the graph (the
    schedules' one-hots and knobs, threads, slices, Algorithm 4's metrics) are computed
    once, here; calling the object with a graph's structure adds the problem's and the few
    that read the graph (the grid in waves, bytes over the L2, staging, chunks of long rows,
    g-SpMM's time estimate from factors also kept per space). What the "model" policy keeps
    per space, so that a new graph pays for the latter alone.
    """

    def __init__(self, task, target: Target, table: np.ndarray) -> None:
        if isinstance(task, spmm.SpmmTask):
            operator, feature_len, task_columns = "spmm", task.num_features, _spmm_task(task)
            knobs = table.T
            static, self._graph_columns = _spmm_static(knobs, task, target), _spmm_graph
            terms = _spmm_graph_terms(knobs, static, task, target)
        elif isinstance(task, sddmm.SddmmTask):
            operator, feature_len, task_columns = "sddmm", task.head_len, _sddmm_task(task)
            knobs = sddmm_space.with_properties(table, task.head_len)
            static, self._graph_columns = _sddmm_static(knobs, task, target), _sddmm_graph
            terms = _sddmm_graph_terms(knobs, target)
        else:
            raise TypeError(f"task must be an SpmmTask or SddmmTask, got {type(task).__name__}")
        self.task, self.target, self.table = task, target, table
        self._feature_len, self._task_columns = feature_len, task_columns
        self._knobs, self._terms = knobs, terms
        self._operator = operator
        static_index, self._static_columns = _layout(operator, tuple(static))
        # NaN until filled: a column no part fills is caught by the models' finite check.
        self._rows = np.full((len(table), len(_columns(operator))), np.nan)
        # All at once: forty column assignments cost more than the arithmetic of the columns.
        self._rows[:, static_index] = np.array(list(static.values()), dtype=np.float64).T

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def static_columns(self) -> np.ndarray:
        """``[d]`` bool, read-only: the columns filled here, which do not read the graph."""
        return self._static_columns

    def subset(self, rows: np.ndarray) -> SpaceFeatures:
        """The features of the candidates at ``rows`` (positions), without computing again."""
        if len(rows) == len(self) and (rows == np.arange(len(self))).all():
            return self  # a task's first space is all of its kept candidates
        part = object.__new__(SpaceFeatures)
        part.__dict__.update(self.__dict__)
        part.table, part._knobs, part._rows = self.table[rows], self._knobs[:, rows], self._rows[rows]
        part._terms = {name: values[rows] for name, values in self._terms.items()}
        return part

    def __call__(self, structure: GraphStructure) -> np.ndarray:
        """``[len(self), d]`` float64 features on a graph of ``structure``."""
        out = self._rows.copy()
        problem = _problem(structure, self.target, self._feature_len, self.task.dtype.itemsize,
                           self._task_columns)
        out[:, :len(problem)] = problem
        graph = self._graph_columns(self._knobs, self._terms, self.task, structure, self.target)
        out[:, _layout(self._operator, tuple(graph))[0]] = np.array(list(graph.values()), dtype=np.float64).T
        return out


@functools.cache
def _columns(operator: str) -> dict[str, int]:
    """Each feature's column in :func:`feature_names` order."""
    return {name: i for i, name in enumerate(feature_names(operator))}


@functools.cache
def _layout(operator: str, names: tuple[str, ...]) -> tuple[list[int], np.ndarray]:
    """The columns of the features ``names`` of ``operator``, as a list and as a read-only
    ``[d]`` bool mask (the same for every space: made once)."""
    index = [_columns(operator)[name] for name in names]
    mask = np.zeros(len(_columns(operator)), dtype=bool)
    mask[index] = True
    mask.flags.writeable = False
    return index, mask


def featurize(task, structure: GraphStructure, target: Target, schedules: Sequence) -> np.ndarray:
    """``[len(schedules), d]`` float64 features of each schedule for ``task`` on a graph of
    ``structure`` on ``target``; ``d = len(feature_names(operator))``."""
    space = spmm_space if isinstance(task, spmm.SpmmTask) else sddmm_space
    return SpaceFeatures(task, target, space.knob_table([space.knob_row(s) for s in schedules]))(structure)
