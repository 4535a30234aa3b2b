"""The g-SDDMM schedules: one frozen dataclass per skeleton.

All four skeletons walk CSR positions ``p`` (so ``u = col[p]``) and write ``out[eid[p]]``.
A group of ``lanes`` threads shares an edge's features: a lane owns
``features_per_thread`` vectors of ``vector_width`` consecutive features at a stride of
``lanes * vector_width`` (coalesced across the group); the group's *slice* is
``lanes * vector_width * features_per_thread`` features. For ``dot`` the lanes' partial
products meet in a ``__shfl_xor_sync`` butterfly inside the group (G-Sparse's adaptive
warp shuffle: the group, not the warp, is the shuffle width).

``features_per_launch`` splits each head into slices of that many features, one launch per
slice, so that the live slice of the gathered node features stays in L2 while the grid
sweeps the edges; ``dot`` adds each launch's partial products to the previous launches'
sum in ``out``.

- :class:`Edge`: a group per edge, ``groups_per_block`` edges per block; longer heads take
  several passes. Balanced whatever the degree distribution.
- :class:`Row`: a warp per destination row, ``groups_per_block`` rows per block; the warp
  keeps ``v``'s features of one chunk in registers and walks the row ``32 / lanes`` edges
  at a time.
- :class:`RowTransposed`: the row skeleton whose ``dot`` takes ``edges_per_batch`` edges at
  a time per group and reduces them together with a transposed butterfly, about one
  shuffle per edge instead of ``log2(lanes)``. A ``dot`` only: other operators have no
  reduction to transpose.
- :class:`EdgeTransposed`: those batches over a fixed range of CSR positions per warp
  instead of a row (balanced like :class:`Edge`); element-wise operators walk the same
  batches without the reduction.

The row and transposed skeletons cover a ``dot`` head (or the part of it one launch covers)
in one slice, and element-wise features in chunks over ``blockIdx.y``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schedule import Schedule, one_of

__all__ = ["Edge", "EdgeTransposed", "Row", "RowTransposed", "SddmmSchedule", "SDDMM_SCHEDULES",
           "RANGE_BATCHES"]

_LANES = (1, 2, 4, 8, 16, 32)
_VECTORS = (1, 2, 4, 8)
_LAUNCH_SLICES = (0, 32, 64, 128, 256)
_BATCHES = (2, 4, 8, 16, 32)
_WARP = 32
_MAX_THREADS = 1024
# Batches a warp of the edge_transposed skeleton walks: its first index loads wait
# unhidden once per range, so 8 batches amortise them while the grid stays ~10^5 blocks
# on graphs of 10^8 edges.
RANGE_BATCHES = 8


@dataclass(frozen=True, kw_only=True)
class _Lanes(Schedule):
    """The knobs every g-SDDMM skeleton has (see the module docstring).

    Attributes:
        groups_per_block: edges (Edge) or warps (the others) per block.
        lanes: threads per edge, 1 to 32: the width of the ``dot`` shuffle reduction.
        features_per_thread: vectors each lane handles per pass (loads in flight).
        vector_width: consecutive features moved per access (1, 2, 4, or 8 for 2-byte
            dtypes: a vector is at most 16 bytes).
        features_per_launch: 0 for one launch over all features; else the features of a
            head each launch covers.
    """

    groups_per_block: int = 8
    lanes: int = 32
    features_per_thread: int = 1
    vector_width: int = 1
    features_per_launch: int = 0

    @property
    def threads(self) -> int:
        """Threads per block, a warp per group."""
        return self.groups_per_block * _WARP

    @property
    def feature_slice(self) -> int:
        """Features one group covers per pass."""
        return self.lanes * self.vector_width * self.features_per_thread

    def launch_len(self, head_len: int) -> int:
        """Features of a head that one launch covers."""
        return min(head_len, self.features_per_launch or head_len)

    def problems(self) -> list[str]:
        found = [
            *one_of("lanes", self.lanes, _LANES),
            *one_of("vector_width", self.vector_width, _VECTORS),
            *one_of("features_per_thread", self.features_per_thread, (1, 2, 4, 8)),
            *one_of("features_per_launch", self.features_per_launch, _LAUNCH_SLICES),
        ]
        if isinstance(self.groups_per_block, bool) or not isinstance(self.groups_per_block, int) \
                or self.groups_per_block < 1:
            found.append(f"groups_per_block must be an int >= 1, got {self.groups_per_block!r}")
        if found:
            return found
        if self.threads > _MAX_THREADS:
            found.append(f"{self.threads} threads per block, more than {_MAX_THREADS}")
        elif self.threads % _WARP:
            found.append(f"{self.threads} threads per block is not a multiple of {_WARP}")
        if self.features_per_launch and self.features_per_launch < self.feature_slice:
            found.append(f"features_per_launch = {self.features_per_launch} is narrower than the "
                         f"{self.feature_slice} features a group covers per pass")
        if self.features_per_thread * self.vector_width > 16:
            found.append(f"features_per_thread * vector_width = "
                         f"{self.features_per_thread * self.vector_width} elements per lane and "
                         f"pass; more than 16 spills registers")
        return found

    def _label(self, name: str, batch: int = 0) -> str:
        launch = f".s{self.features_per_launch}" if self.features_per_launch else ""
        batches = f".b{batch}" if batch else ""
        return (f"{name}.g{self.groups_per_block}.l{self.lanes}.f{self.features_per_thread}"
                f".v{self.vector_width}{launch}{batches}")


@dataclass(frozen=True, kw_only=True)
class Edge(_Lanes):
    """A group of ``lanes`` threads per edge."""

    skeleton = "sddmm.edge"

    @property
    def threads(self) -> int:
        """Threads per block, ``lanes`` per edge."""
        return self.groups_per_block * self.lanes

    def __str__(self) -> str:
        return self._label("edge")


@dataclass(frozen=True, kw_only=True)
class Row(_Lanes):
    """A warp per destination row, ``v``'s features in registers."""

    skeleton = "sddmm.row"

    def __str__(self) -> str:
        return self._label("row")


@dataclass(frozen=True, kw_only=True)
class _Batches(_Lanes):
    """``edges_per_batch`` edges a group of lanes takes at a time: a power of two from 2 up
    to ``lanes``."""

    edges_per_batch: int

    def problems(self) -> list[str]:
        found = super().problems()
        if isinstance(self.edges_per_batch, bool) or self.edges_per_batch not in _BATCHES \
                or self.edges_per_batch > self.lanes:
            found.append(f"edges_per_batch must be one of {_BATCHES} and at most lanes = "
                         f"{self.lanes}, got {self.edges_per_batch!r}")
        return found


@dataclass(frozen=True, kw_only=True)
class RowTransposed(_Batches):
    """The row skeleton whose ``dot`` reduces a batch of edges at once."""

    skeleton = "sddmm.row_transposed"

    def __str__(self) -> str:
        return self._label("row_transposed", self.edges_per_batch)


@dataclass(frozen=True, kw_only=True)
class EdgeTransposed(_Batches):
    """Batches of edges over a fixed range of CSR positions per warp."""

    skeleton = "sddmm.edge_transposed"

    @property
    def edges_per_warp(self) -> int:
        """Edges a warp walks."""
        return _WARP // self.lanes * self.edges_per_batch * RANGE_BATCHES

    def __str__(self) -> str:
        return self._label("edge_transposed", self.edges_per_batch)


SddmmSchedule = Edge | Row | RowTransposed | EdgeTransposed
"""Any g-SDDMM schedule (the type :func:`gsparse.gsddmm`'s ``schedule`` takes)."""
SDDMM_SCHEDULES: tuple[type, ...] = (Edge, Row, RowTransposed, EdgeTransposed)
