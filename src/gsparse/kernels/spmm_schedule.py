"""The g-SpMM schedule: how rows, edges and features map onto threads.

A destination row is owned by a *group* of ``edge_lanes * feature_lanes`` threads inside
one warp. The group's threads split the row's edges ``edge_lanes`` ways (each walks every
``edge_lanes``-th edge and the partial results meet through warp shuffles at the end) and
the features ``feature_lanes`` ways; each thread owns ``outputs_per_thread`` vectors of
``vector_width`` consecutive features at a stride of ``feature_lanes * vector_width``
(G-Sparse's 1-D stride register tiling). Features wider than one group's slice are
covered by ``blockIdx.y``; blocks of the first slice are scheduled before those of the
next, so only one slice of the dense input is live at a time and can stay in L2.

``nnz_tile`` is how many edges each lane fetches ahead (G-Sparse's kNnzTile): their
indices are loaded together, then their features, so several independent loads are in
flight per lane. ``rows_per_block`` groups share a block. ``index_tile`` loads the next ``group`` column
indices (and edge scalars) with one coalesced load per thread and broadcasts them with
``__shfl_sync``, instead of every lane loading every index. ``degree_sorted`` walks the
rows longest first (G-Sparse's row swizzle), so the longest rows start first and the tail
of the grid is made of short rows.

``row_split`` caps the edges one group walks for one row. Rows longer than that are cut
into chunks of ``row_split`` edges, each walked by its own group as if it were a row; the
chunks' partial results are folded in chunk order by a second kernel, so results do not
depend on timing. Without it a 100,000-edge hub row of a power-law graph is one group's
work while the rest of the GPU idles at the tail of the grid. The chunks are walked first;
with ``degree_sorted`` the whole rows after them are walked longest first.

``output_tile`` runs the output-tiled skeleton (:mod:`.spmm_output_tiled`): a block keeps
the sums of its own range of output rows in shared memory while it stages every column
tile of ``lhs`` in turn, for very short features on graphs with many short rows, where
the column-tiled skeleton's per-(tile, row) structures outweigh the edges. There a group
is a whole warp that walks a chunk of edges (``rows_per_block`` is the warps per block)
and each lane carries all ``vector_width * outputs_per_thread`` features of an edge.
"""

from __future__ import annotations

from dataclasses import dataclass

from .common import VECTOR_BYTES, pow2_at_least, schedule_from_json, schedule_to_json, widest_vector

_POWERS_OF_TWO = (1, 2, 4, 8, 16, 32)
_WARP = 32
_MAX_THREADS = 1024
# Chunk lengths of row_split: below a warp's worth of edges a chunk leaves lanes idle; the
# upper bound only keeps the knob in a range where cutting rows can matter.
_ROW_SPLITS = tuple(2 ** k for k in range(5, 17))
# Warps per block of the output-tiled skeleton (one block per SM: its shared memory is full).
_OUTPUT_TILE_WARPS = (8, 16, 32)


@dataclass(frozen=True)
class SpmmSchedule:
    """One point of the g-SpMM search space (a plain value: hashable, JSON round trip).

    Attributes:
        rows_per_block: groups (rows) per thread block.
        feature_lanes: threads of a group that split the features.
        edge_lanes: threads of a group that split the edges of its row.
        vector_width: consecutive features moved per load/store (1, 2, 4, or 8 for 2-byte
            dtypes: one 16-byte access either way).
        outputs_per_thread: feature vectors per thread, at a stride of one group slice.
        nnz_tile: edges each lane fetches ahead before gathering their features.
        index_tile: broadcast column indices through warp shuffles (needs edge_lanes 1).
        degree_sorted: visit rows in decreasing-degree order.
        column_tile: 0, or the rows of ``lhs`` staged per block in shared memory by the
            column-tiled skeleton (a multiple of 1024, at most 65536 so that local source
            indices fit 16 bits): for short features, where gathers from L2 are bound by
            its sector rate.
        row_split: 0, or the most edges one group walks for one row (a power of two from
            32 to 65536): longer rows are cut into chunks of that many edges whose partial
            results a second kernel folds in chunk order (deterministic). Not with
            ``column_tile``.
        output_tile: the output-tiled skeleton (a warp per group, one feature lane, 32
            edge lanes, one edge at a time, rows in their natural order).
        column_groups: the output-tiled skeleton's column groups (1, 2 or 4): a block
            walks the tiles of one group for its rows (so ``column_groups`` times as many
            rows per block and as few blocks per row range: each block stages
            ``1 / column_groups`` of ``lhs``), and a second kernel folds the groups'
            partial rows in order.
    """

    rows_per_block: int = 8
    feature_lanes: int = 32
    edge_lanes: int = 1
    vector_width: int = 1
    outputs_per_thread: int = 1
    nnz_tile: int = 1
    index_tile: bool = False
    degree_sorted: bool = False
    column_tile: int = 0
    row_split: int = 0
    output_tile: bool = False
    column_groups: int = 1

    @property
    def group(self) -> int:
        """Threads that own one row."""
        return self.feature_lanes * self.edge_lanes

    @property
    def threads(self) -> int:
        return self.rows_per_block * self.group

    @property
    def feature_slice(self) -> int:
        """Features one group covers; wider features take several slices (blockIdx.y)."""
        return self.feature_lanes * self.vector_width * self.outputs_per_thread

    def problems(self) -> list[str]:
        """Why this schedule can never run (empty when it is valid)."""
        found = []
        for name in ("feature_lanes", "edge_lanes"):
            if getattr(self, name) not in _POWERS_OF_TWO:
                found.append(f"{name} must be one of {_POWERS_OF_TWO}, got {getattr(self, name)}")
        if self.vector_width not in (1, 2, 4, 8):
            found.append(f"vector_width must be 1, 2, 4 or 8, got {self.vector_width}")
        if self.outputs_per_thread not in (1, 2, 4, 8):
            found.append(f"outputs_per_thread must be 1, 2, 4 or 8, got {self.outputs_per_thread}")
        if self.nnz_tile not in (1, 2, 4, 8):
            found.append(f"nnz_tile must be 1, 2, 4 or 8, got {self.nnz_tile}")
        if self.rows_per_block < 1:
            found.append(f"rows_per_block must be >= 1, got {self.rows_per_block}")
        if found:
            return found
        if self.group > _WARP:
            found.append(
                f"a row's group has feature_lanes * edge_lanes = {self.group} threads; "
                f"it must fit in one warp ({_WARP})"
            )
        if self.threads > _MAX_THREADS:
            found.append(f"{self.threads} threads per block, more than {_MAX_THREADS}")
        elif self.threads % _WARP:
            found.append(f"{self.threads} threads per block is not a multiple of {_WARP}")
        if self.column_tile and (self.column_tile % 1024 or not 0 < self.column_tile <= 65536):
            found.append(f"column_tile must be 0 or a multiple of 1024 up to 65536, "
                         f"got {self.column_tile}")
        if self.column_tile and (self.index_tile or self.nnz_tile != 1):
            found.append("the column-tiled skeleton walks one edge at a time: needs "
                         "index_tile off and nnz_tile 1")
        if self.index_tile and self.edge_lanes != 1:
            found.append("index_tile broadcasts one edge to the whole group: needs edge_lanes 1")
        if self.row_split and self.row_split not in _ROW_SPLITS:
            found.append(f"row_split must be 0 or a power of two from {_ROW_SPLITS[0]} to "
                         f"{_ROW_SPLITS[-1]}, got {self.row_split}")
        if self.row_split and self.column_tile:
            found.append("row_split cuts the rows of the one-pass skeleton; the column-tiled "
                         "skeleton has partial rows of its own: set at most one of them")
        if self.output_tile:
            found += self._output_tile_problems()
        if self.column_groups not in (1, 2, 4):
            found.append(f"column_groups must be 1, 2 or 4, got {self.column_groups}")
        elif self.column_groups != 1 and not self.output_tile:
            found.append("column_groups splits the tiles of the output-tiled skeleton: needs output_tile")
        return found

    def _output_tile_problems(self) -> list[str]:
        found = []
        if (self.feature_lanes, self.edge_lanes) != (1, _WARP):
            found.append("the output-tiled skeleton runs a warp per group over edges: needs "
                         f"feature_lanes 1 and edge_lanes {_WARP}")
        if self.rows_per_block not in _OUTPUT_TILE_WARPS:
            found.append(f"the output-tiled skeleton takes {_OUTPUT_TILE_WARPS} warps per block "
                         f"(rows_per_block), got {self.rows_per_block}")
        if self.nnz_tile != 1 or self.index_tile or self.degree_sorted:
            found.append("the output-tiled skeleton walks edges in its own order: needs nnz_tile 1, "
                         "index_tile off and degree_sorted off")
        if self.column_tile or self.row_split:
            found.append("output_tile is a skeleton of its own: set no column_tile or row_split")
        return found

    def validate(self) -> SpmmSchedule:
        """``self``, or ValueError listing every problem."""
        if problems := self.problems():
            raise ValueError(f"invalid SpmmSchedule {self}: " + "; ".join(problems))
        return self

    def __str__(self) -> str:
        flags = ("+tile" if self.index_tile else "") + ("+sorted" if self.degree_sorted else "")
        flags += f"+ct{self.column_tile}" if self.column_tile else ""
        flags += f"+split{self.row_split}" if self.row_split else ""
        flags += "+ot" if self.output_tile else ""
        flags += f"x{self.column_groups}" if self.column_groups != 1 else ""
        return (
            f"r{self.rows_per_block}.f{self.feature_lanes}.e{self.edge_lanes}"
            f".v{self.vector_width}.o{self.outputs_per_thread}.n{self.nnz_tile}{flags}"
        )

    def to_json(self) -> str:
        return schedule_to_json(self)

    @classmethod
    def from_json(cls, text: str) -> SpmmSchedule:
        """The schedule written by :meth:`to_json` (see :func:`schedule_from_json`)."""
        return schedule_from_json(cls, text)


def row_splits_for(mean_degree: float, max_degree: int) -> list[int]:
    """Chunk lengths worth sweeping on a graph with these row statistics (often none).

    Of 256, 1024, 4096 and 16384 edges, the two shortest that cut the longest row into more
    than 8 chunks and are at least the mean row, so that only the rare long rows pay for
    partial results and a merge.
    """
    fits = [s for s in (256, 1024, 4096, 16384) if mean_degree <= s and 8 * s < max_degree]
    return fits[:2]


def _edge_lanes_for(mean_degree: float, budget: int) -> int:
    """Enough edge lanes that each walks a handful of edges of an average row."""
    lanes = 1
    while lanes < budget and lanes * 4 < mean_degree:
        lanes *= 2
    return lanes


def default_schedule_for(
    mean_degree: float,
    cov: float,
    feature_len: int,
    vector_ok: int,
    l2_bytes: int,
    source_rows: int,
    element_bytes: int,
    max_degree: int = 0,
) -> SpmmSchedule:
    """The rule used before any measurement, from graph statistics and the feature length.

    - Feature slice: the widest of 128, 64, 32 features whose slice of the dense input
      (``source_rows * slice * element_bytes``) fits in three quarters of the L2 cache, so the gathers
      of one slice hit in L2 while the grid walks it. When not even 32 fit, 128: there is
      no reuse to protect, and a wide slice reads the column indices fewer times.
    - Vectors as wide as the data allows (16 bytes); at most 8 feature lanes for 4-byte
      types and 4 for 2-byte types, and up to two vectors per thread, cover the slice.
    - A warp owns a row; lanes the slice does not need split the row's edges, which keeps
      all 32 lanes busy for short feature vectors.
    - Each lane fetches edges ahead (``nnz_tile``): 4 on long rows with 8 or more
      features, where gathers are latency bound; 1 when a thread already has two vectors
      in flight per edge, and for the shortest features, whose gathers are bound by L2
      sector throughput and gain nothing from more in flight.
    - Skewed degree distributions (COV > 0.5) walk the rows longest first, except short
      rows (mean below 128) at up to 4 features: there the gathers are bound by L2 sector
      throughput, not by imbalance, and the natural order was 1.11-1.24x faster on
      products-like.
    - Beyond 4 features, rows far longer than the mean (``max_degree``) are cut into
      chunks of the longest length :func:`row_splits_for` offers: on reddit- and
      proteins-like at 8-64 features the unsplit rule was 1.2-1.9x off the best schedule,
      which always split the long rows.

    Refitted to the H100 sweep of 2026-11-23 (docs/performance.md): predicted from its
    recorded times, within 1.07x of the best schedule on reddit- and proteins-like beyond
    4 features (up to 4 features the column-tiled default of
    :func:`gsparse.kernels.spmm.default_schedule` takes over).
    """
    vector = widest_vector(feature_len, min(vector_ok, VECTOR_BYTES // element_bytes))
    fits = [w for w in (128, 64, 32) if source_rows * w * element_bytes <= l2_bytes * 3 // 4]
    slice_ = min(fits[0] if fits else 128, pow2_at_least(feature_len))
    vector = min(vector, slice_)
    feature_lanes = max(1, min(8 if element_bytes >= 4 else 4, slice_ // vector))
    outputs = min(2, max(1, slice_ // (feature_lanes * vector)))
    feature_lanes = max(1, min(32, slice_ // (vector * outputs)))
    edge_lanes = _edge_lanes_for(mean_degree, 32 // feature_lanes)
    group = feature_lanes * edge_lanes
    if feature_len <= 4 or outputs > 1:
        nnz = 1
    else:
        nnz = 4 if mean_degree >= 128 else 2
    splits = row_splits_for(mean_degree, max_degree) if feature_len > 4 else []
    return SpmmSchedule(
        rows_per_block=max(1, 256 // group),
        feature_lanes=feature_lanes,
        edge_lanes=edge_lanes,
        vector_width=vector,
        outputs_per_thread=outputs,
        nnz_tile=nnz,
        index_tile=False,
        degree_sorted=cov > 0.5 and (feature_len > 4 or mean_degree >= 128),
        row_split=splits[-1] if splits else 0,
    ).validate()


def schedule_grid(feature_len: int, vector_ok: int) -> list[SpmmSchedule]:
    """The pruned grid the sweep and the tests explore for one feature length.

    Pruned by construction, to the shapes that can win: the feature slice is 32, 64 or 128
    features (or the whole feature vector when shorter); vectors are scalar or as wide as
    the data allows; a group fills its warp with edge lanes, or half of it; blocks have 256
    threads; an index tile only where a group owns one edge at a time.
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
                for edge_lanes in sorted(fills):
                    tiles = (False, True) if edge_lanes == 1 and feature_lanes >= 8 else (False,)
                    for tile in tiles:
                        for nnz in (1,) if tile else (1, 2, 4):
                            for degree_sorted in (False, True):
                                group = feature_lanes * edge_lanes
                                grid.append(SpmmSchedule(
                                    rows_per_block=256 // group,
                                    feature_lanes=feature_lanes,
                                    edge_lanes=edge_lanes,
                                    vector_width=vector,
                                    outputs_per_thread=outputs,
                                    nnz_tile=nnz,
                                    index_tile=tile,
                                    degree_sorted=degree_sorted,
                                ))
    return [s for s in dict.fromkeys(grid) if not s.problems()]
