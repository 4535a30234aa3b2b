"""The g-SpMM hand rule: a schedule from the task, the graph's statistics and the target,
with no measurement. The measurements it was fitted to are in docs/performance.md."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ...graph import GraphStats
from ...target import Target
from ..operands import VECTOR_BYTES, pow2_at_least, widest_vector
from .schedule import OnePass, OutputTiled, SplitRows, SpmmSchedule
from .shapes import (
    OUTPUT_TILED_FEATURES,
    ROW_SPLIT_LADDER,
    edge_lanes_for,
    long_row_splits,
    output_tiled_schedule,
    output_tiled_warps,
    row_splits_for,
)
from .task import SpmmTask

__all__ = ["RowReading", "default_schedule"]

# Up to this many features, the output-tiled skeleton may take over, and the one-pass rule
# reads rows as gathers bound by L2 sector throughput (see _row_groups).
_STAGED_FEATURES = 4
# Edges per resident warp of the target below which the rule cuts long rows into the
# space's shortest chunks (see _row_split; the space offers them below twice as many).
_TAKE_SHORT_CHUNKS_BELOW_EDGES_PER_WARP = 32
# Steps of a row's lanes over the longest row from which the rule splits rows up to 4
# features (see _walks_a_hub): where each step gathers a source row, and where it streams
# edge values alone.
_HUB_STEPS_GATHERED, _HUB_STEPS_STREAMED = 256, 1024


def default_schedule(task: SpmmTask, stats: GraphStats, target: Target) -> SpmmSchedule:
    """The schedule used when none is given.

    Up to 4 features, when every message is a whole ``lhs`` row (copy_lhs, no arg
    indices), the output-tiled skeleton (:func:`_output_tiled`), unless its staging of
    ``lhs`` would outweigh the edges. Everything else takes the one-pass family's rule
    (:func:`_row_groups`).

    The column-tiled skeleton stays out of the rule (the tuner still measures it). On an
    H200 it ran 0.83-1.00x the one-pass pick only on the uniform random reddit- and
    proteins-like graphs; it ran up to 1.7x on a community graph of the same size and
    rows, 2.7x on ppa-like, and 1.01-2.4x on a fresh corpus draw of graphs up to 10 M
    edges. Of the 159 collected cells where it fits, it was the best schedule of none
    (docs/performance.md, "Column tiles").

    Statistics that are not exact (a block built on the device, :class:`~gsparse.graph.RowStats`)
    keep to the one-pass family: the staged skeletons' layouts read the degree distribution
    back to the host.
    """
    schedule = _row_groups(task, RowReading.of(task, stats, target))
    if task.lhs_shape is None or task.num_features > _STAGED_FEATURES or not stats.rows.exact:
        return schedule
    if task.algorithm.message_is_lhs and (tiled := _output_tiled(task, stats, target)):
        return tiled
    return schedule


@dataclass(frozen=True)
class RowReading:
    """All that the one-pass family's rule reads of a graph (with the task and the target).

    :func:`_row_groups` sees nothing else of them, so it is kept per task and reading:
    graphs alike in these few facts (a sampler's blocks, which differ in sizes) share their
    schedule instead of deciding it anew.

    Attributes:
        l2_slice: the widest of 128, 64 and 32 features whose slice of the source-node
            features fits in three quarters of the L2 cache; 128 when none does.
        row_lanes: the edge lanes an average row fills, with up to 32 to spare
            (:func:`~.shapes.edge_lanes_for`).
        long_rows: rows of 128 edges or more on average.
        skewed: the row lengths' COV exceeds 0.5 (never for statistics that are not exact).
        row_split: the chunk length of the rule's split rows beyond 4 features
            (:func:`_row_split`), 0 for none.
        hub_split: the chunk length where the longest row is a hub (:func:`_walks_a_hub`,
            :func:`_hub_split`), at any width the row split leaves whole; else 0.
    """

    l2_slice: int
    row_lanes: int
    long_rows: bool
    skewed: bool
    row_split: int
    hub_split: int

    @classmethod
    def of(cls, task: SpmmTask, stats: GraphStats, target: Target) -> RowReading:
        rows, element_bytes = stats.rows, task.dtype.itemsize
        fits = [w for w in (128, 64, 32) if stats.num_src * w * element_bytes <= target.l2_bytes * 3 // 4]
        return cls(l2_slice=fits[0] if fits else 128, row_lanes=edge_lanes_for(rows.mean, 32),
                   long_rows=rows.mean >= 128, skewed=rows.cov > 0.5,
                   row_split=_row_split(stats, target),
                   hub_split=_hub_split(stats, target) if _walks_a_hub(task, stats, target) else 0)


def _walks_a_hub(task: SpmmTask, stats: GraphStats, target: Target) -> bool:
    """Whether whole rows would leave a row's lanes walking the longest row long enough to
    outlast split rows' overhead, about 50 us of walk: at least 256 steps where each step
    gathers a source row (60-840 ns a step on the collected cells, 186 the median), 1,024
    where it streams edge values alone (under 90 ns: the H200 probe's copy_rhs calls); and 8
    times a lane's share of all the edges (every lane of the target resident). The steps
    are counted with the lanes a row gets at 1 feature, a lower bound at wider features.

    Split rows add a second launch and a buffer of partial sums; their kernels took 11-54
    us of device time on graphs of 0.25-1 M edges, where whole rows with hub walks of
    250-1,000 gathering steps took 40-280 us. Where one call's host time bounds it (the
    smallest graphs, no CUDA graph), the second launch cost 15-25 us more: the H200's calls
    of 0.05 ms with hub walks of 565-1,494 steps. On products-like (765 steps of 16 lanes,
    under 8 lane shares) chunks ran 10-15% slower. (docs/performance.md, "Hub rows up to 4
    features" and "Hub walks by the cost of a step")."""
    steps = stats.rows.max / edge_lanes_for(stats.rows.mean, 32)
    lane_share = stats.num_edges / (32 * target.resident_warps)
    least = _HUB_STEPS_GATHERED if task.lhs_shape is not None else _HUB_STEPS_STREAMED
    return steps >= least and steps >= 8 * lane_share


def _hub_split(stats: GraphStats, target: Target) -> int:
    """The chunk length for a hub's row: :func:`_row_split`'s shortest, else (where no chunk
    of 256 or more cuts the longest row into more than 8) the shortest the space offers
    (:func:`~.shapes.row_splits_for`), else 0. Hubs of 900-1,800 edges qualify for no long
    chunk; whole rows ran 1.6-8.9x slower than chunks of 64 or 256 on the collected cells."""
    split = _row_split(stats, target, shortest=True)
    if split or not stats.rows.exact:
        return split
    offered = row_splits_for(stats, target)
    return offered[0] if offered else 0


def _row_split(stats: GraphStats, target: Target, shortest: bool = False) -> int:
    """The chunk length the rule cuts long rows into (0: none), from exact statistics only
    (the work list of split rows is sized by the data).

    - Fewer than 32 edges per resident warp of the target, where the space offers chunks of
      64 edges (:func:`~.shapes.row_splits_for`): 64. The whole graph is then less than a
      warp's worth of short chunks, so whole rows leave most warps idle while the longest
      row runs: on such H100 graphs (426-38,605 rows, rows of up to 5,549 edges), chunks of
      32-128 edges ran 1.2-2x cuSPARSE where the space's best schedule without them ran
      0.4-1.0x (docs/performance.md, "short row splits").
    - Otherwise the longer of :func:`~.shapes.long_row_splits` (the H100 sweep's winners
      at 8-512 features on reddit-like graphs) where it is within twice a resident warp's
      share of the edges, else the shorter (on graphs of 0.5-6 M edges, where the longer
      chunk is the critical path, the shorter ran 1.03-3.3x faster on the collected cells);
      with ``shortest`` the shorter (the chunk at least the mean row nearest to it, for hub
      rows: see :func:`_row_groups`); none where no length qualifies.
    """
    rows = stats.rows
    if not rows.exact:
        return 0
    short = ROW_SPLIT_LADDER[0]
    if (stats.num_edges < _TAKE_SHORT_CHUNKS_BELOW_EDGES_PER_WARP * target.resident_warps
            and short in row_splits_for(stats, target)):
        return short
    fits = long_row_splits(rows)
    if not fits:
        return 0
    if shortest:
        return fits[0]
    # A chunk longer than twice a resident warp's share of the edges is the critical path
    # (see row_splits_for): the longer length only where a warp's share covers it.
    within = [s for s in fits if s <= 2 * stats.num_edges / target.resident_warps]
    return within[-1] if within else fits[0]


@functools.lru_cache(maxsize=1024)
def _row_groups(task: SpmmTask, rows: RowReading) -> OnePass | SplitRows:
    """The one-pass family's rule.

    - Feature slice: the widest of 128, 64, 32 features whose slice of the dense input
      fits in three quarters of the L2 cache, so the gathers of one slice hit in L2 while
      the grid walks it. When not even 32 fit, 128: there is no reuse to protect, and a
      wide slice reads the column indices fewer times.
    - Vectors as wide as the data allows (16 bytes); at most 8 feature lanes for 4-byte
      types and 4 for 2-byte types, and up to two vectors per thread, cover the slice.
    - A warp owns a row; lanes the slice does not need split the row's edges, which keeps
      all 32 lanes busy for short feature vectors.
    - Each lane fetches edges ahead (``nnz_tile``): 4 on long rows with 8 or more
      features, where gathers are latency bound; 1 when a thread already has two vectors
      in flight per edge, and for the shortest features, whose gathers are bound by L2
      sector throughput and gain nothing from more in flight.
    - Skewed degree distributions (COV > 0.5) walk the rows longest first, except short
      rows (mean below 128) at up to 4 features, whose gathers are bound by L2 sector
      throughput rather than by imbalance.
    - Beyond 4 features, long rows are cut into chunks (:class:`SplitRows`) of the length
      :func:`_row_split` picks. At any width where that leaves them whole, rows are cut
      into the shortest chunks (:func:`_hub_split`), rows longest first, where a row's
      lanes would otherwise walk a hub long enough to outlast the chunks' overhead
      (:func:`_walks_a_hub`): on the collected cells of the families
      where this applies (``docs/results/tuning``) the chunks ran up to 120x faster than
      whole rows; where one call's host time bounds it, on the smallest graphs, their
      second launch lost up to 1.5x (docs/performance.md, "Hub rows up to 4 features",
      "Hub walks by the cost of a step").
    - Statistics that are not exact (an unknown COV, a bound for the longest row) neither
      sort rows nor split them: the work list of split rows is sized by the data.
    """
    feature_len, element_bytes = task.num_features, task.dtype.itemsize
    vector = widest_vector(feature_len, min(task.vector_ok, VECTOR_BYTES // element_bytes))
    slice_ = min(rows.l2_slice, pow2_at_least(feature_len))
    vector = min(vector, slice_)
    feature_lanes = max(1, min(8 if element_bytes >= 4 else 4, slice_ // vector))
    outputs = min(2, max(1, slice_ // (feature_lanes * vector)))
    feature_lanes = max(1, min(32, slice_ // (vector * outputs)))
    # The lanes a row fills, within the warp's share left to edges (a power of two).
    edge_lanes = min(rows.row_lanes, 32 // feature_lanes)
    if feature_len <= _STAGED_FEATURES or outputs > 1:
        nnz = 1
    else:
        nnz = 4 if rows.long_rows else 2
    knobs = dict(
        rows_per_block=max(1, 256 // (feature_lanes * edge_lanes)),
        feature_lanes=feature_lanes,
        edge_lanes=edge_lanes,
        vector_width=vector,
        outputs_per_thread=outputs,
        nnz_tile=nnz,
        index_tile=False,
        degree_sorted=rows.skewed and (feature_len > _STAGED_FEATURES or rows.long_rows),
    )
    if feature_len > _STAGED_FEATURES and rows.row_split:
        return SplitRows(**knobs, row_split=rows.row_split).validate()
    if rows.hub_split:
        knobs["degree_sorted"] = True
        return SplitRows(**knobs, row_split=rows.hub_split).validate()
    return OnePass(**knobs).validate()


def _output_tiled(task: SpmmTask, stats: GraphStats, target: Target) -> OutputTiled | None:
    """The output-tiled schedule for the task, or None where staging would outweigh the edges.

    - Column groups: 4 where ``lhs`` makes 8 or more tiles of half of shared memory, 2 from
      4 tiles, else 1: more groups stage less per block, but a group of few tiles leaves
      its blocks unequal.
    - Warps per block (:func:`~.shapes.output_tiled_warps`): the first for short rows (mean
      below 128), the second for long ones.
    - None when the blocks would stage more than 8 bytes of ``lhs`` per edge: there the
      one-pass gathers move less (graphs with few edges per source row).
    """
    feature_len = task.num_features
    if feature_len > OUTPUT_TILED_FEATURES:
        return None
    lhs_bytes = stats.num_src * feature_len * task.dtype.itemsize
    tiles = lhs_bytes / (target.shared_bytes_per_block / 2)
    groups = 4 if tiles >= 8 else 2 if tiles >= 4 else 1
    if -(-target.sms // groups) * lhs_bytes > 8 * stats.num_edges:
        return None
    short_rows, long_rows = output_tiled_warps(task.dtype)
    warps = short_rows if stats.rows.mean < 128 else long_rows
    return output_tiled_schedule(feature_len, task.dtype, warps, groups, task.vector_ok)
