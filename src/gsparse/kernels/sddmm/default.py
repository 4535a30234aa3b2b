"""The g-SDDMM hand rule: a schedule from the task, the graph's statistics and the target,
with no measurement. The measurements it was fitted to are in docs/performance.md."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ...graph import GraphStats
from ...target import Target
from ..operands import pow2_at_least, widest_vector
from .schedule import Edge, EdgeTransposed, Row, RowTransposed, SddmmSchedule
from .task import SddmmTask

__all__ = ["RowReading", "default_schedule"]

_WARP = 32
_SCALAR_HEAD = 4  # heads of at most this many elements: scalar loads
_MAX_DEFAULT_LANES = 4
# Element-wise operators (a head written per edge) take up to this many lanes an edge.
_MAX_ELEMENTWISE_LANES = 16
_DEFAULT_THREADS = 128
_DEFAULT_LAUNCH = 128  # features per launch for long heads that overflow the L2 ...
_WIDE_DOT_LANES = 8  # ... but one launch of 8 lanes for fp32 dot heads at least this long
# On graphs whose rows have this many edges on average, fp32 heads in 16-byte vectors
# take these transposed schedules by head length ...
_TRANSPOSED_MEAN_DEGREE = 256
_DOT_TRANSPOSED = {
    16: EdgeTransposed(groups_per_block=4, lanes=4, features_per_thread=1, vector_width=4, edges_per_batch=4),
    32: EdgeTransposed(groups_per_block=4, lanes=4, features_per_thread=2, vector_width=4, edges_per_batch=4),
    64: EdgeTransposed(groups_per_block=4, lanes=8, features_per_thread=2, vector_width=4, edges_per_batch=4),
}
_ELEMENTWISE_TRANSPOSED = {
    16: EdgeTransposed(groups_per_block=4, lanes=4, features_per_thread=1, vector_width=4, edges_per_batch=4),
    32: Row(groups_per_block=4, lanes=8, features_per_thread=1, vector_width=4),
}
# ... and a dot row_transposed over launches of this many features at other lengths beyond.
_TRANSPOSED_LAUNCH = 32


def _lanes_for(span: int, vector: int, max_lanes: int) -> tuple[int, int]:
    """(lanes, vectors per lane) for ``span`` features: a lane takes up to 4 vectors (and
    at most 16 elements, as the schedules demand), and up to ``max_lanes`` lanes share an
    edge (longer spans take several passes)."""
    vectors = -(-max(span, 1) // vector)
    per_lane = min(4, 16 // vector)
    lanes = min(max_lanes, pow2_at_least(-(-vectors // per_lane)))
    return lanes, min(per_lane, pow2_at_least(-(-vectors // lanes)))


def default_schedule(task: SddmmTask, stats: GraphStats, target: Target) -> SddmmSchedule:
    """The schedule used when none is given.

    - Heads of at most 4 elements: one lane per edge and one scalar load per element
      (separate loads are independent requests in flight).
    - Longer heads: vectors as wide as the data allows, up to 4 vectors per lane and up to
      4 lanes per edge for ``dot`` (1 lane up to 16 fp32 features, 2 at 32, 4 from 64;
      several passes beyond): a lane's four 16-byte loads in flight already keep enough
      gathers outstanding, and wider groups lose. Element-wise operators, which write the
      whole head of every edge, take up to 16 lanes an edge, one pass over heads of up to
      256 features: with 4 they ran 2.4-7.4x slower than the best at 100-256 features (on
      the collected cells, ``docs/results/tuning``; up to 16 lanes were faster in all 48 cells
      they change, over seventeen families, 3.4x in geometric mean). 128 threads per block.
    - The row skeleton where it cannot lose to the load imbalance it brings: rows long
      enough to fill the warp's ``32 / lanes`` edge groups, and the longest row at most half
      of one warp's share of the whole grid (edges over resident warps); in 4- and 8-byte
      dtypes only (in bf16 the edge skeleton was the faster in 17 of the 18 collected cells
      where the row skeleton's test holds, 1.5x in geometric mean, over six families).
    - On graphs whose mean row has 256 or more edges, fp32 heads in 16-byte vectors: the
      transposed schedules of the tables above (element-wise operators take the schedules
      fitted before the ``dot`` refit), and a ``dot`` longer than them ``row_transposed``
      over launches of 32 features, whose 128-byte row reads of ``u``'s slice stay in L2.
    - ``dot`` over fp32 heads of 128 features or more whose source-node features overflow
      three quarters of the L2 cache: the edge skeleton with 8 lanes of 4 vectors, in one
      launch.
    - Otherwise, 4- or 8-byte dtypes, heads longer than 128 features whose source-node
      features overflow three quarters of the L2: launches of 128 features.

    Statistics that are not exact (a block built on the device) give the longest row as an
    upper bound, which only makes the row skeleton's test stricter.

    The rule reads the graph and the target only through :class:`RowReading`, and is kept
    per task and reading.
    """
    return _decide(task, RowReading.of(task, stats, target))


@dataclass(frozen=True)
class RowReading:
    """All that the g-SDDMM rule reads of a graph (with the task and the target), so that
    graphs alike in these facts (a sampler's blocks, which differ in sizes) share their
    schedule.

    Attributes:
        mean_reaches: the largest of the mean row lengths the rule tells apart (8, 16 and
            32 edges, the row skeleton's lanes filling a warp, and 256, the transposed
            schedules) that the mean row reaches; 0 below 8.
        short_tail: the longest row (or its bound) is at most half of one warp's share of
            the edges when every resident warp takes an equal share.
        overflows_l2: the source-node features (the task's head length and dtype) overflow
            three quarters of the L2 cache.
    """

    mean_reaches: int
    short_tail: bool
    overflows_l2: bool

    @classmethod
    def of(cls, task: SddmmTask, stats: GraphStats, target: Target) -> RowReading:
        mean = stats.rows.mean
        return cls(
            mean_reaches=max((t for t in _MEAN_THRESHOLDS if mean >= t), default=0),
            short_tail=2 * stats.rows.max <= stats.num_edges / max(target.resident_warps, 1),
            overflows_l2=stats.num_src * task.head_len * task.dtype.itemsize > target.l2_bytes * 3 // 4)


# The mean row lengths default_schedule compares with: a warp's 32 lanes filled by rows
# of 1, 2 or 4 lanes, and the transposed schedules'.
_MEAN_THRESHOLDS = (_WARP // 4, _WARP // 2, _WARP, _TRANSPOSED_MEAN_DEGREE)


@functools.lru_cache(maxsize=1024)
def _decide(task: SddmmTask, rows: RowReading) -> SddmmSchedule:
    feature_len, dtype, dot = task.head_len, task.dtype, task.is_dot
    size = dtype.itemsize
    vector = 1 if feature_len <= _SCALAR_HEAD else widest_vector(feature_len, task.vector_ok)
    max_lanes = _MAX_DEFAULT_LANES if dot else _MAX_ELEMENTWISE_LANES
    lanes, per_thread = _lanes_for(feature_len, vector, max_lanes)
    fp32_vectors = size == 4 and vector == 4
    if fp32_vectors and rows.mean_reaches >= _TRANSPOSED_MEAN_DEGREE:
        transposed = _DOT_TRANSPOSED if dot else _ELEMENTWISE_TRANSPOSED
        if feature_len in transposed:
            return transposed[feature_len]
        if dot and feature_len > _TRANSPOSED_LAUNCH:
            return RowTransposed(groups_per_block=4, lanes=8, features_per_thread=1, vector_width=4,
                                 features_per_launch=_TRANSPOSED_LAUNCH, edges_per_batch=8)
    fills_warp = rows.mean_reaches >= _WARP // lanes  # lanes is 1, 2 or 4
    one_slice = lanes * vector * per_thread >= feature_len
    if fills_warp and rows.short_tail and one_slice and size >= 4:
        return Row(groups_per_block=8, lanes=lanes, features_per_thread=per_thread,
                   vector_width=vector).validate()
    if dot and fp32_vectors and feature_len >= _DEFAULT_LAUNCH and rows.overflows_l2:
        return Edge(groups_per_block=_DEFAULT_THREADS // _WIDE_DOT_LANES, lanes=_WIDE_DOT_LANES,
                    features_per_thread=4, vector_width=vector).validate()
    launch = 0
    if size >= 4 and feature_len > _DEFAULT_LAUNCH and rows.overflows_l2:
        launch = _DEFAULT_LAUNCH
    lanes, per_thread = _lanes_for(launch or feature_len, vector, max_lanes)
    return Edge(groups_per_block=_DEFAULT_THREADS // lanes, lanes=lanes, features_per_thread=per_thread,
                vector_width=vector, features_per_launch=launch).validate()
