"""The g-SpMM schedules: one frozen dataclass per skeleton.

Three skeletons walk rows with *groups* of ``edge_lanes * feature_lanes`` threads inside
one warp. A group's threads split its row's edges ``edge_lanes`` ways (each walks every
``edge_lanes``-th edge; the partial results meet through warp shuffles at the end) and the
features ``feature_lanes`` ways; each thread owns ``outputs_per_thread`` vectors of
``vector_width`` consecutive features at a stride of ``feature_lanes * vector_width``
(G-Sparse's 1-D stride register tiling). A group whose size does not divide 32 (five
lanes of five vectors cover 100 features exactly) sits inside one warp with the warp's
last ``32 % group`` lanes idle; its edge lanes meet through shuffles from named lanes
rather than the butterfly, and it has no index tile. Features wider than one group's
slice are covered by ``blockIdx.y``; blocks of the first slice are scheduled before those of the
next, so only one slice of the dense input is live at a time and can stay in L2.
``rows_per_block`` groups share a block; ``degree_sorted`` walks the rows longest first
(G-Sparse's row swizzle), so the longest rows start first and the tail of the grid is made
of short rows.

- :class:`OnePass`: a group walks a whole row and writes its result. ``nnz_tile`` is how
  many edges each lane fetches ahead (G-Sparse's kNnzTile): their indices are loaded
  together, then their features. ``index_tile`` loads the next ``group`` column indices
  (and edge scalars) with one coalesced load per thread and broadcasts them with
  ``__shfl_sync``, instead of every lane loading every index.
- :class:`SplitRows`: the one-pass walk over a work list where rows longer than
  ``row_split`` edges are cut into chunks of that many edges, each walked by its own group;
  a second kernel folds the chunks' partial results in chunk order (deterministic). A
  100,000-edge hub row is then no longer one group's work while the GPU idles.
- :class:`ColumnTiled`: a block stages ``column_tile`` rows of ``lhs`` in shared memory
  and folds, for a range of output rows, the edges whose source falls in that tile; a
  second kernel folds the per-tile partial rows in tile order. For short features, where
  gathers from L2 are bound by its sector rate.

The fourth skeleton, :class:`OutputTiled`, keeps a block's output rows in shared memory
while it stages every column tile of ``lhs`` in turn (see
``gsparse.kernels.spmm.codegen.output_tiled``): a warp walks a chunk of edges and each
lane carries all ``vector_width * outputs_per_thread`` features of an edge.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schedule import Schedule, one_of

__all__ = ["ColumnTiled", "OnePass", "OutputTiled", "SplitRows", "SpmmSchedule", "SPMM_SCHEDULES"]

_POWERS_OF_TWO = (1, 2, 4, 8, 16, 32)
_WIDTHS = (1, 2, 4, 8)
# Most vectors a thread of a group sized to an odd width's vectors keeps (see above).
_MAX_OUTPUTS = 8
_WARP = 32
_MAX_THREADS = 1024
# Chunk lengths of SplitRows: below a warp's worth of edges a chunk leaves lanes idle; the
# upper bound only keeps the knob in a range where cutting rows can matter.
ROW_SPLITS = tuple(2 ** k for k in range(5, 17))
# Warps per block of the output-tiled skeleton (one block per SM: its shared memory is full).
OUTPUT_TILED_WARPS = (8, 16, 32)
COLUMN_GROUPS = (1, 2, 4)


def _int_in(name: str, value, low: int, high: int) -> list[str]:
    """``[problem]`` when ``value`` is not an int from ``low`` to ``high``, else []."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return [f"{name} must be an int from {low} to {high}, got {value!r}"]
    return []


@dataclass(frozen=True, kw_only=True)
class _RowGroups(Schedule):
    """The knobs of the skeletons that give each row a group of threads (see the module
    docstring)."""

    rows_per_block: int = 8
    feature_lanes: int = 32
    edge_lanes: int = 1
    vector_width: int = 1
    outputs_per_thread: int = 1
    degree_sorted: bool = False

    @property
    def group(self) -> int:
        """Threads that own one row."""
        return self.feature_lanes * self.edge_lanes

    @property
    def packs_warp(self) -> bool:
        """Whether groups tile a warp exactly (a power-of-two group)."""
        return _WARP % self.group == 0

    @property
    def groups_per_warp(self) -> int:
        """Rows one warp walks at a time."""
        return _WARP // self.group

    @property
    def threads(self) -> int:
        """Threads per block: ``rows_per_block * group``, or whole warps of
        :attr:`groups_per_warp` groups where a group does not divide a warp."""
        if self.packs_warp:
            return self.rows_per_block * self.group
        return self.rows_per_block // self.groups_per_warp * _WARP

    @property
    def feature_slice(self) -> int:
        """Features one group covers; wider features take several slices (blockIdx.y)."""
        return self.feature_lanes * self.vector_width * self.outputs_per_thread

    def problems(self) -> list[str]:
        found = [
            *_int_in("feature_lanes", self.feature_lanes, 1, _WARP),
            *one_of("edge_lanes", self.edge_lanes, _POWERS_OF_TWO),
            *one_of("vector_width", self.vector_width, _WIDTHS),
            *_int_in("outputs_per_thread", self.outputs_per_thread, 1, _MAX_OUTPUTS),
            *one_of("degree_sorted", self.degree_sorted, (False, True)),
        ]
        if isinstance(self.rows_per_block, bool) or not isinstance(self.rows_per_block, int) \
                or self.rows_per_block < 1:
            found.append(f"rows_per_block must be an int >= 1, got {self.rows_per_block!r}")
        if found:
            return found
        if self.group > _WARP:
            found.append(f"a row's group has feature_lanes * edge_lanes = {self.group} threads; "
                         f"it must fit in one warp ({_WARP})")
            return found
        if self.feature_lanes in _POWERS_OF_TWO:
            if self.outputs_per_thread not in _WIDTHS:
                found.append(f"outputs_per_thread must be one of {_WIDTHS} with {self.feature_lanes} "
                             f"feature lanes (other counts serve groups of another size), "
                             f"got {self.outputs_per_thread!r}")
        elif self.rows_per_block % self.groups_per_warp:
            found.append(f"rows_per_block must be a multiple of the {self.groups_per_warp} groups of "
                         f"{self.group} lanes a warp holds, got {self.rows_per_block}")
        if found:
            return found
        if self.threads > _MAX_THREADS:
            found.append(f"{self.threads} threads per block, more than {_MAX_THREADS}")
        elif self.threads % _WARP:
            found.append(f"{self.threads} threads per block is not a multiple of {_WARP}")
        return found

    def _label(self, nnz_tile: int, flags: str) -> str:
        return (f"r{self.rows_per_block}.f{self.feature_lanes}.e{self.edge_lanes}"
                f".v{self.vector_width}.o{self.outputs_per_thread}.n{nnz_tile}{flags}")


@dataclass(frozen=True, kw_only=True)
class _EdgeWalk(_RowGroups):
    """The one-pass walk of a row's edges: fetched ahead, or broadcast from an index tile."""

    nnz_tile: int = 1
    index_tile: bool = False

    def problems(self) -> list[str]:
        found = super().problems()
        shape_ok = not found
        found += one_of("nnz_tile", self.nnz_tile, _WIDTHS)
        found += one_of("index_tile", self.index_tile, (False, True))
        if self.index_tile is True and self.edge_lanes != 1:
            found.append("index_tile broadcasts one edge to the whole group: needs edge_lanes 1")
        if self.index_tile is True and shape_ok and not self.packs_warp:
            found.append(f"index_tile broadcasts through warp shuffles: needs a power-of-two group, "
                         f"got {self.group} lanes")
        return found

    def _flags(self) -> str:
        return ("+tile" if self.index_tile else "") + ("+sorted" if self.degree_sorted else "")


@dataclass(frozen=True, kw_only=True)
class OnePass(_EdgeWalk):
    """A group per row walks the whole row and writes its result (see the module docstring)."""

    skeleton = "spmm.one_pass"

    def __str__(self) -> str:
        return self._label(self.nnz_tile, self._flags())


@dataclass(frozen=True, kw_only=True)
class SplitRows(_EdgeWalk):
    """The one-pass walk with rows longer than ``row_split`` edges cut into chunks of that
    many edges (a power of two from 32 to 65536), merged in chunk order."""

    skeleton = "spmm.split_rows"
    row_split: int

    def problems(self) -> list[str]:
        found = super().problems()
        if isinstance(self.row_split, bool) or self.row_split not in ROW_SPLITS:
            found.append(f"row_split must be a power of two from {ROW_SPLITS[0]} to "
                         f"{ROW_SPLITS[-1]}, got {self.row_split!r}")
        return found

    def __str__(self) -> str:
        return self._label(self.nnz_tile, self._flags() + f"+split{self.row_split}")


@dataclass(frozen=True, kw_only=True)
class ColumnTiled(_RowGroups):
    """Blocks stage ``column_tile`` rows of ``lhs`` (a multiple of 1024, at most 65536 so
    that local source indices fit 16 bits) and walk one edge at a time per lane."""

    skeleton = "spmm.column_tiled"
    column_tile: int

    def problems(self) -> list[str]:
        found = super().problems()
        if not found and not self.packs_warp:
            found.append(f"the column-tiled skeleton needs a power-of-two group, got {self.group} lanes")
        if isinstance(self.column_tile, bool) or not isinstance(self.column_tile, int) \
                or self.column_tile % 1024 or not 0 < self.column_tile <= 65536:
            found.append(f"column_tile must be a multiple of 1024 up to 65536, got {self.column_tile!r}")
        return found

    def __str__(self) -> str:
        return self._label(1, ("+sorted" if self.degree_sorted else "") + f"+ct{self.column_tile}")


@dataclass(frozen=True, kw_only=True)
class OutputTiled(Schedule):
    """A block keeps its row range's results in shared memory while it stages the column
    tiles of ``lhs`` (see ``gsparse.kernels.spmm.codegen.output_tiled``).

    Attributes:
        warps_per_block: 8, 16 or 32; a warp walks one chunk of edges of each tile.
        vector_width, outputs_per_thread: each lane carries ``vector_width *
            outputs_per_thread`` features of an edge (at least the feature count).
        column_groups: 1, 2 or 4: a block walks the tiles of one group for its rows (each
            block stages ``1 / column_groups`` of ``lhs``), and a second kernel folds the
            groups' partial rows in order.
    """

    skeleton = "spmm.output_tiled"
    warps_per_block: int = 16
    vector_width: int = 1
    outputs_per_thread: int = 1
    column_groups: int = 1

    @property
    def threads(self) -> int:
        """Threads per block, ``32 * warps_per_block``."""
        return self.warps_per_block * _WARP

    @property
    def features_covered(self) -> int:
        """Features one lane carries per edge."""
        return self.vector_width * self.outputs_per_thread

    def problems(self) -> list[str]:
        return [
            *one_of("warps_per_block", self.warps_per_block, OUTPUT_TILED_WARPS),
            *one_of("vector_width", self.vector_width, _WIDTHS),
            *one_of("outputs_per_thread", self.outputs_per_thread, _WIDTHS),
            *one_of("column_groups", self.column_groups, COLUMN_GROUPS),
        ]

    def __str__(self) -> str:
        groups = f"x{self.column_groups}" if self.column_groups != 1 else ""
        return (f"r{self.warps_per_block}.f1.e{_WARP}.v{self.vector_width}"
                f".o{self.outputs_per_thread}.n1+ot{groups}")


SpmmSchedule = OnePass | SplitRows | ColumnTiled | OutputTiled
"""Any g-SpMM schedule (the type :func:`gsparse.gspmm`'s ``schedule`` takes)."""
SPMM_SCHEDULES: tuple[type, ...] = (OnePass, SplitRows, ColumnTiled, OutputTiled)
