"""Edge layouts of a graph that the two-pass g-SpMM skeletons walk, built once per graph.

- :func:`column_tiles`: the column-tiled skeleton's edges grouped by (column tile, row).
- :func:`work_list`: the split-rows skeleton's work items (chunks of long rows, whole rows).
- :func:`output_tiles`: the output-tiled skeleton's tiling and edge words
  (:mod:`.output_tiling`).

Each is kept in the graph's ``layouts`` cache, keyed by what it depends on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...graph import Graph
from ...target import Target
from .output_tiling import EdgeLayout, Tiling, build_layout, tiling_for

__all__ = ["ColumnTiles", "WorkList", "column_tiles", "output_tiles", "work_list"]


@dataclass(frozen=True)
class ColumnTiles:
    """The edges grouped by (column tile, row), stable in CSR order within a (tile, row), so
    the first winning edge of a row is still the one at the lowest CSR position.

    Attributes:
        tile_rowptr: ``[tiles * num_dst + 1]``: edges of (tile ``t``, row ``r``) are
            ``tile_rowptr[t * num_dst + r] ..`` of the arrays below.
        local_col: ``[E]`` 16-bit source index within its tile (int16 storage of uint16).
        position: ``[E]`` the edge's CSR position.
        tiles: column tiles, ``ceil(num_src / tile)``.
    """

    tile_rowptr: torch.Tensor
    local_col: torch.Tensor
    position: torch.Tensor
    tiles: int


def column_tiles(g: Graph, tile: int) -> ColumnTiles:
    """The column tiles of ``g`` for tiles of ``tile`` source rows."""

    def build() -> ColumnTiles:
        tiles = max(1, -(-g.num_src // tile))
        col = g.col.long()
        key = (col // tile) * g.num_dst + g.csr_dst.long()
        order = torch.sort(key, stable=True).indices
        local = col[order] % tile
        # 16-bit storage of values < 65536: int16 with the same bit pattern as uint16
        local_col = torch.where(local >= 32768, local - 65536, local).to(torch.int16)
        counts = torch.bincount(key, minlength=tiles * g.num_dst)
        tile_rowptr = torch.zeros(tiles * g.num_dst + 1, dtype=g.index_dtype, device=g.device)
        tile_rowptr[1:] = torch.cumsum(counts, 0)
        return ColumnTiles(tile_rowptr, local_col, order.to(g.index_dtype), tiles)

    return g.layouts.get(("column_tiles", tile), build)


@dataclass(frozen=True)
class WorkList:
    """The work items of the split-rows skeleton for one graph and chunk length ``S``.

    Item ``w`` walks row ``row[w]`` from CSR position ``start[w]``: at most ``S`` edges, up
    to the row's end. Items ``0 .. num_chunks - 1`` are the chunks of the rows longer than
    ``S`` in (row, chunk) order, all but a row's last exactly ``S`` edges long; the other
    items are whole rows (empty ones too), in row order or longest first. Split row ``r``
    is ``split_row[r]`` and its chunks are items ``split_first[r] .. split_first[r + 1] - 1``.
    """

    row: torch.Tensor
    start: torch.Tensor
    split_row: torch.Tensor
    split_first: torch.Tensor
    num_chunks: int

    @property
    def num_items(self) -> int:
        return self.row.numel()


def work_list(g: Graph, row_split: int, degree_sorted: bool) -> WorkList:
    """The work list of ``g`` for chunks of ``row_split`` edges, whole rows in row order
    or (``degree_sorted``) longest first."""

    def build() -> WorkList:
        rowptr = g.rowptr.long()
        degree = g.in_degrees().long()
        split = degree > row_split
        split_row = torch.nonzero(split).flatten()
        chunks = -(-degree[split] // row_split)
        split_first = torch.zeros(split_row.numel() + 1, dtype=torch.int64, device=g.device)
        torch.cumsum(chunks, 0, out=split_first[1:])
        num_chunks = int(split_first[-1])
        chunk_row = torch.repeat_interleave(split_row, chunks, output_size=num_chunks)
        first_of_row = torch.repeat_interleave(split_first[:-1], chunks, output_size=num_chunks)
        chunk = torch.arange(num_chunks, device=g.device) - first_of_row
        order = (g.degree_sorted_rows.long() if degree_sorted
                 else torch.arange(g.num_dst, device=g.device))
        whole = order[~split[order]]
        index = g.index_dtype
        return WorkList(
            row=torch.cat([chunk_row, whole]).to(index),
            start=torch.cat([rowptr[chunk_row] + chunk * row_split, rowptr[whole]]).to(index),
            split_row=split_row.to(index),
            split_first=split_first.to(index),
            num_chunks=num_chunks,
        )

    return g.layouts.get(("work_list", row_split, degree_sorted), build)


def output_tiles(g: Graph, num_features: int, dtype: torch.dtype, warps: int, column_groups: int,
                 target: Target) -> tuple[Tiling, EdgeLayout]:
    """The output-tiled skeleton's tiling and edge layout of ``g`` for ``num_features``
    features of ``dtype``, ``warps`` warps per block and ``column_groups`` groups."""

    def build() -> tuple[Tiling, EdgeLayout]:
        tiling = tiling_for(g, num_features, dtype, target, column_groups)
        return tiling, build_layout(g, tiling, warps)

    key = ("output_tiles", num_features, dtype, warps, column_groups, target.sms,
           target.shared_bytes_per_block)
    return g.layouts.get(key, build)
