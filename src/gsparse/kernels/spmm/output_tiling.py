"""The output-tiled skeleton's view of a graph: row ranges and column tiles (:class:`Tiling`)
and the edges as lane-interleaved 32-bit words (:class:`EdgeLayout`).

A block owns a contiguous range of output rows (about equal edges) and keeps their results
in shared memory while it stages the column tiles of ``lhs`` in turn. Within (row range,
tile) the edges are sorted by row (CSR order within a row) and cut into one chunk per warp
at row boundaries near equal edge counts; a warp's chunk of ``n`` edges is cut exactly
into 32 lane segments and stored lane-interleaved, so every step is one coalesced load (see
:mod:`gsparse.kernels.spmm.codegen.output_tiled` for how the kernel walks them). Built in
PyTorch on the graph's device, once per graph and tiling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch

from ..._edge_passes import edge_passes, rows_at
from ..._sorting import stable_order
from ...graph import Graph
from ...target import Target
from .codegen.output_tiled import BARRIER_BYTES

__all__ = ["EdgeLayout", "Tiling", "build_layout", "tiling_for"]

_WARP = 32
# Output rows and tile columns are 16-bit fields of an edge word.
_FIELD = 1 << 16
# Tile widths are multiples of this many rows of lhs, so every tile starts 16-byte
# aligned when lhs does.
_TILE_ALIGN = 256
# Output rows take at most this share of shared memory; the two tile buffers the rest.
_ROWS_SHARE = 0.75


@dataclass(frozen=True)
class Tiling:
    """How a graph's rows and source columns are cut for one feature length and dtype.

    Attributes:
        block_rows: ``[row_ranges + 1]`` int64 on the CPU: row range ``r`` is output rows
            ``block_rows[r] .. block_rows[r + 1] - 1``.
        row_capacity: the most rows a range holds (a block's shared-memory result rows).
        tile_cols: rows of ``lhs`` per staged tile (a multiple of 256, at most 65536).
        tiles: staged tiles, ``ceil(num_src / tile_cols)``.
        column_groups: groups the tiles are cut into (the grid's blocks per row range).
        shared_bytes: dynamic shared memory per block: the tile buffers' barriers, the
            result rows, then two tile buffers.
        rows_bytes: the result rows' bytes, rounded up to 16.
    """

    block_rows: torch.Tensor
    row_capacity: int
    tile_cols: int
    tiles: int
    column_groups: int
    shared_bytes: int
    rows_bytes: int

    @property
    def row_ranges(self) -> int:
        return self.block_rows.numel() - 1

    @property
    def blocks(self) -> int:
        """The grid: every row range with every column group."""
        return self.row_ranges * self.column_groups

    @property
    def group_tiles(self) -> int:
        """Tiles of a column group (the last group may hold fewer, or none)."""
        return -(-self.tiles // self.column_groups)


def tiling_for(g: Graph, num_features: int, dtype: torch.dtype, target: Target,
               column_groups: int = 1) -> Tiling:
    """The tiling of ``g`` for ``num_features`` features of ``dtype`` on ``target``.

    Row ranges: ``ceil(sms / column_groups)`` of them, so that the grid has a block per
    SM, cut at equal edge counts; a range with more rows than 3/4 of shared memory holds
    is cut further into equal row ranges (then the grid takes more than one wave). Tiles:
    as wide as the shared memory the rows leave allows, for two buffers. ValueError when
    not even one row and two tiles of 256 rows fit.
    """
    acc_bytes = 8 if dtype == torch.float64 else 4
    row_bytes = num_features * acc_bytes
    tile_row_bytes = num_features * dtype.itemsize
    sms, shared_limit = target.sms, target.shared_bytes_per_block
    room = shared_limit - BARRIER_BYTES
    least_tiles = 2 * _TILE_ALIGN * tile_row_bytes + 16  # and rows rounded up to 16 bytes
    capacity = min(_FIELD - 1, int(room * _ROWS_SHARE) // row_bytes, (room - least_tiles) // row_bytes)
    if capacity < 1:
        raise ValueError(f"the output-tiled skeleton cannot hold a row of {num_features} "
                         f"{dtype} features and two tiles in {shared_limit} bytes of shared memory")
    rowptr = g.rowptr.long().cpu()
    bounds = _capped(_equal_edge_bounds(rowptr, max(1, -(-sms // column_groups))), capacity)
    row_capacity = max(1, int((bounds[1:] - bounds[:-1]).max()))
    rows_bytes = -(-row_capacity * row_bytes // 16) * 16
    fit = (room - rows_bytes) // (2 * tile_row_bytes) // _TILE_ALIGN * _TILE_ALIGN
    padded_src = -(-max(1, g.num_src) // _TILE_ALIGN) * _TILE_ALIGN
    tile_cols = min(fit, _FIELD, padded_src)
    return Tiling(block_rows=bounds, row_capacity=row_capacity, tile_cols=tile_cols,
                  tiles=-(-max(1, g.num_src) // tile_cols), column_groups=column_groups,
                  shared_bytes=BARRIER_BYTES + rows_bytes + 2 * tile_cols * tile_row_bytes,
                  rows_bytes=rows_bytes)


def _equal_edge_bounds(rowptr: torch.Tensor, blocks: int) -> torch.Tensor:
    """``[blocks + 1]`` row bounds that cut the CSR into ranges of about equal edges
    (rows with no edges, too, when there are no edges at all)."""
    num_rows, num_edges = rowptr.numel() - 1, int(rowptr[-1])
    blocks = min(blocks, max(1, num_rows))
    if num_edges == 0:
        return torch.arange(blocks + 1, dtype=torch.int64) * num_rows // blocks
    targets = torch.arange(blocks + 1, dtype=torch.int64) * num_edges // blocks
    bounds = torch.searchsorted(rowptr, targets)
    bounds[0], bounds[-1] = 0, num_rows
    return bounds


def _capped(bounds: torch.Tensor, capacity: int) -> torch.Tensor:
    """``bounds`` with every range of more than ``capacity`` rows cut into equal parts."""
    rows = bounds[1:] - bounds[:-1]
    parts = torch.clamp(-(-rows // capacity), min=1)
    if int(parts.max()) == 1:
        return bounds
    pieces = [bounds[:1]]
    for start, count, k in zip(bounds[:-1].tolist(), rows.tolist(), parts.tolist()):
        pieces.append(start + (torch.arange(1, k + 1, dtype=torch.int64) * count) // k)
    return torch.cat(pieces)


@dataclass(frozen=True)
class EdgeLayout:
    """The edges of a graph in the order the output-tiled kernel walks them.

    Attributes:
        words: ``[num_edges]`` int32 (read as uint32): ``(local row << 16) | local column``,
            lane-interleaved within each chunk.
        chunk_ptr: ``[row_ranges * tiles * warps + 1]`` (the graph's index dtype): chunk
            ``(r * tiles + t) * warps + w`` is ``words[chunk_ptr[i] : chunk_ptr[i + 1]]``.
        block_rows: the tiling's row bounds on the graph's device (index dtype).
    """

    words: torch.Tensor
    chunk_ptr: torch.Tensor
    block_rows: torch.Tensor


def build_layout(g: Graph, tiling: Tiling, warps: int) -> EdgeLayout:
    """Group the edges of ``g`` by (row range, tile, warp chunk) and interleave each
    chunk's lane segments (see the module docstring). Pure PyTorch on the graph's device;
    the same for any number of column groups.

    Besides the layout itself, it holds an edge's segment (int32) and its sorted order
    (int64), sorted in pieces past 2**28 edges (:func:`gsparse._sorting.stable_order`).
    Everything else is computed in passes (:mod:`gsparse._edge_passes`), so a graph of
    2**31 edges, whose int64 temporaries are 17 GB each, builds its layout where its CSR
    fits with room to spare.
    """
    device, index = g.device, g.index_dtype
    bounds = tiling.block_rows.to(device)
    num_segments = tiling.row_ranges * tiling.tiles
    if num_segments >= 2 ** 31:
        raise ValueError(f"the output-tiled layout has {num_segments} segments, past int32")
    rowptr = g.rowptr.long()
    segment = torch.empty(g.num_edges, dtype=torch.int32, device=device)
    for lo, hi in edge_passes(g.num_edges):
        positions = torch.arange(lo, hi, device=device)
        block = torch.searchsorted(bounds, rows_at(rowptr, positions), right=True) - 1
        segment[lo:hi] = block * tiling.tiles + g.col[lo:hi].long() // tiling.tile_cols
    # Stable, over CSR order, which is row order: each segment's edges end up by row, and
    # each row's in CSR order, the order each run folds them in.
    order = stable_order(segment, num_segments)
    seg_start = torch.zeros(num_segments + 1, dtype=torch.int64, device=device)
    torch.cumsum(torch.bincount(segment, minlength=num_segments), 0, out=seg_start[1:])

    def sorted_edges(lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Segment, local row and source of sorted positions ``lo .. hi - 1``."""
        edges = order[lo:hi]
        seg = segment[edges].long()
        local_row = rows_at(rowptr, edges) - bounds[torch.div(seg, tiling.tiles, rounding_mode="floor")]
        return seg, local_row, g.col[edges].long()

    chunk_start = _warp_chunks(seg_start, warps, _row_starts(sorted_edges, g.num_edges))
    chunk_ptr = torch.cat([chunk_start.flatten(), seg_start[-1:]])
    sizes = chunk_ptr[1:] - chunk_ptr[:-1]
    if g.num_edges and int(sizes.max()) >= 2 ** 31:
        raise ValueError("a warp's chunk of the output-tiled layout holds 2**31 edges or more")
    words = torch.empty(g.num_edges, dtype=torch.int32, device=device)
    for lo, hi in edge_passes(g.num_edges):
        _, local_row, col = sorted_edges(lo, hi)
        word = (local_row << 16) | (col % tiling.tile_cols)
        # the uint32 bit pattern in int32 storage
        words[_interleaved_positions(chunk_ptr, sizes, lo, hi)] = \
            torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)
    return EdgeLayout(words=words, chunk_ptr=chunk_ptr.to(index), block_rows=bounds.to(index))


def _row_starts(sorted_edges: Callable, num_edges: int) -> Iterator[torch.Tensor]:
    """The sorted positions where a (segment, row) run begins, ascending, pass by pass."""
    for lo, hi in edge_passes(num_edges):
        first = max(lo - 1, 0)  # the position before the pass decides whether lo begins a run
        seg, row, _ = sorted_edges(first, hi)
        begins = (seg[1:] != seg[:-1]) | (row[1:] != row[:-1])
        if lo == 0:
            begins = torch.cat([torch.ones(1, dtype=torch.bool, device=seg.device), begins])
        yield torch.nonzero(begins).flatten() + lo


def _warp_chunks(seg_start: torch.Tensor, warps: int, row_starts: Iterable[torch.Tensor]) -> torch.Tensor:
    """``[segments, warps]`` first sorted positions of each segment's warp chunks: the
    first row start at or after each ``w / warps`` share of the segment's edges (the
    segment's end where none is left in it). ``row_starts``: the run starts, ascending,
    in pieces."""
    device = seg_start.device
    starts = seg_start[:-1]
    counts = seg_start[1:] - starts
    shares = torch.arange(warps, device=device)
    targets = (starts[:, None] + counts[:, None] * shares[None, :] // warps).flatten()
    ends = seg_start[1:, None].expand(-1, warps).flatten()
    # The first run start at or after each target: the first piece that holds one has it.
    found = ends.clone()
    unresolved = torch.ones_like(targets, dtype=torch.bool)
    for piece in row_starts:
        if piece.numel() == 0:
            continue
        at = torch.searchsorted(piece, targets)
        hit = unresolved & (at < piece.numel())
        found = torch.where(hit, piece[at.clamp(max=piece.numel() - 1)], found)
        unresolved &= ~hit
    chunk = torch.minimum(found, ends).view(-1, warps)
    chunk[:, 0] = starts
    return chunk


def _interleaved_positions(chunk_ptr: torch.Tensor, sizes: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """Where sorted positions ``lo .. hi - 1`` go: in a chunk of ``n`` edges the first ``r
    = n - 32(s - 1)`` lanes take ``s = ceil(n / 32)`` consecutive edges and the rest ``s -
    1``, and lane ``l``'s ``k``-th edge is stored at ``k * 32 + l``."""
    q = torch.arange(lo, hi, device=chunk_ptr.device)
    # the chunk holding each position: the last one starting at or before it (never empty)
    chunk = torch.searchsorted(chunk_ptr, q, right=True) - 1
    first = chunk_ptr[chunk]
    q -= first
    n = sizes[chunk]
    steps = (n + _WARP - 1) // _WARP
    full = n - _WARP * (steps - 1)  # lanes that walk `steps` edges
    long_part = q < full * steps
    rest = q - full * steps
    shorter = torch.clamp(steps - 1, min=1)
    lane = torch.where(long_part, q // steps, full + rest // shorter)
    k = torch.where(long_part, q % steps, rest % shorter)
    return first + k * _WARP + lane
