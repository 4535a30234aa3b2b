"""Sizes the g-SpMM hand rule and space share: edge lanes for a row length, chunk lengths
for long rows, column tiles and their index, the output-tiled schedules."""

from __future__ import annotations

import math

import numpy as np
import torch

from ...graph import GraphStats, RowStats
from ...target import Target
from ..operands import VECTOR_BYTES, pow2_at_least
from .schedule import OnePass, OutputTiled, SplitRows

__all__ = ["MAX_TILE_ROWS", "OUTPUT_TILED_FEATURES", "ROW_SPLIT_LADDER", "TILE_ROWS_PER_EDGE",
           "column_tile_for", "column_tiled_block_rows", "edge_lanes_for", "long_row_splits",
           "output_tiled_schedule", "output_tiled_warps", "row_grid", "row_splits_for",
           "split_items_at_least", "tile_rows"]

# The most features the space and the default rule offer the output-tiled skeleton (wider
# ones stage too much of lhs per edge; any count runs when forced).
OUTPUT_TILED_FEATURES = 4
# A column-tiled plan indexes its edges by (tile, row): beyond this many entries the index
# outweighs the edges it indexes, and past 2**31 it is more than one allocation can count.
TILE_ROWS_PER_EDGE = 16
MAX_TILE_ROWS = 2**31 - 1
# Output rows one block of the column-tiled skeleton may cover, widest first, and the
# blocks per SM its grid keeps at least (see column_tiled_block_rows).
_TILED_BLOCK_ROWS = (4096, 2048, 1024)
_TILED_BLOCKS_PER_SM = 3
# Chunk lengths the space offers the split-rows skeleton (see row_splits_for), and the edges
# per resident warp of the target below which it offers the shortest (the hand rule takes
# them below half as many, default._TAKE_SHORT_CHUNKS_BELOW_EDGES_PER_WARP).
ROW_SPLIT_LADDER = (64, 256, 1024, 4096, 16384)
_OFFER_SHORT_CHUNKS_BELOW_EDGES_PER_WARP = 64


def edge_lanes_for(mean_degree: float, budget: int) -> int:
    """Enough edge lanes (at most ``budget``) that each walks a handful of edges of an
    average row."""
    lanes = 1
    while lanes < budget and lanes * 4 < mean_degree:
        lanes *= 2
    return lanes


def row_splits_for(stats: GraphStats, target: Target) -> list[int]:
    """Chunk lengths of split rows worth measuring on a graph of ``stats`` on ``target``
    (often none).

    On a graph of fewer than 64 edges per resident warp of the target, the two shortest of
    :data:`ROW_SPLIT_LADDER` (64 to 16,384 edges, a factor of 4 apart) that cut the longest
    row into more than 4 chunks; on larger graphs, the two shortest from 256 that are at
    least the mean row and cut the longest into more than 8, and :func:`share_split`. Where
    whole rows leave most warps idle (few rows) or wait on one long row, chunks give the idle
    warps work: a chunk much longer than a warp's share of the edges leaves the longest row
    the critical path, one shorter than the share only adds partial results to merge.
    """
    rows = stats.rows
    if stats.num_edges >= _OFFER_SHORT_CHUNKS_BELOW_EDGES_PER_WARP * target.resident_warps:
        # Enough edges to fill the GPU. (Shorter or more chunks, offered on reddit-like graphs,
        # made the model policy's full-batch GCN and GraphSAGE epochs 1.06-1.27x slower on an
        # H100.)
        return sorted({*long_row_splits(rows), *share_split(stats, target)})
    return [s for s in ROW_SPLIT_LADDER if 4 * s < rows.max][:2]


def share_split(stats: GraphStats, target: Target) -> list[int]:
    """``[chunk]``: the longest chunk of :data:`ROW_SPLIT_LADDER` within twice a resident
    warp's share of the edges, where the longest row holds more than 4 of them and either
    the chunk is at least the mean row or the graph has fewer rows than the target has
    resident warps (whole rows would leave warps idle); else [].

    The fastest chunks of the short-split probe ran 1 to 5 shares long (docs/performance.md):
    a banded graph of 2.2 M edges (rows of 31, the longest 1,830) went from 0.98x cuSPARSE
    with whole rows to 1.87x with chunks of 256, and a lognormal one of 1.0 M edges in 2,741
    rows of 380 on average from 0.55x to 2.4x with chunks of 64, neither offered by the
    rule above. On the benchmark's large graphs the share is over 8,000 edges, longer than
    a quarter of their longest row, and their rows outnumber the resident warps."""
    share = stats.num_edges / target.resident_warps
    chunks = [s for s in ROW_SPLIT_LADDER if s <= 2 * share]
    if not chunks or 4 * chunks[-1] >= stats.rows.max:
        return []
    few_rows = stats.num_dst < target.resident_warps
    return chunks[-1:] if few_rows or chunks[-1] >= stats.rows.mean else []


def long_row_splits(rows: RowStats) -> list[int]:
    """The two shortest chunk lengths of :data:`ROW_SPLIT_LADDER` from 256 edges that are at
    least the mean row and cut the longest row into more than 8 chunks, so that only the
    rare long rows pay for partial results and a merge."""
    return [s for s in ROW_SPLIT_LADDER[1:] if rows.mean <= s and 8 * s < rows.max][:2]


def split_items_at_least(num_rows: int, num_edges: int, row_split: int | np.ndarray) -> int | np.ndarray:
    """Work items the split-rows skeleton walks, at least, on a graph of ``num_rows`` rows
    and ``num_edges`` edges: every row makes one or more, and none holds more than
    ``row_split`` edges (:func:`~.structures.work_list` counts them exactly). Each of
    ``row_split`` where it is an array of chunk lengths."""
    return np.maximum(num_rows, -(-num_edges // row_split))


def tile_rows(num_src: int, num_dst: int, tile: int) -> int:
    """Entries of the column-tiled skeleton's (tile, row) index for tiles of ``tile`` rows."""
    return -(-num_src // tile) * num_dst + 1


def row_grid(schedule: OnePass | SplitRows, num_rows: int, num_features: int) -> tuple[int, int]:
    """Blocks of the row-walking skeletons over (row groups, feature slices)."""
    return (-(-num_rows // schedule.rows_per_block), -(-num_features // schedule.feature_slice))


def column_tiled_block_rows(num_rows: int, tile_blocks: int, sms: int) -> int:
    """Output rows per block of the column-tiled skeleton, chosen at launch.

    The widest of 4,096, 2,048 and 1,024 whose grid (``tile_blocks`` blocks per row range:
    tiles times feature slices) still has 3 blocks per SM; else 1,024. Every block stages a
    whole tile, so fewer, wider blocks stage less, but with fewer than about 3 blocks per
    SM the unequal tiles and the last partial wave leave SMs idle.
    """
    for rows in _TILED_BLOCK_ROWS:
        if tile_blocks * -(-num_rows // rows) >= _TILED_BLOCKS_PER_SM * sms:
            return rows
    return _TILED_BLOCK_ROWS[-1]


def column_tile_for(lhs_len: int, dtype: torch.dtype, target: Target) -> int:
    """The widest column tile (a multiple of 1024 rows of ``lhs``) a block's shared memory
    holds for rows of ``lhs_len`` elements, or 0."""
    rows = target.shared_bytes_per_block // max(1, lhs_len * dtype.itemsize)
    return min(65536, rows // 1024 * 1024)


def output_tiled_warps(dtype: torch.dtype) -> tuple[int, int]:
    """Warps per block worth running for ``dtype``: 16 and 32 (8 and 16 for float64, whose
    wider registers would spill at 1,024 threads). The default takes the first for short
    rows, the second for long ones."""
    return (8, 16) if dtype == torch.float64 else (16, 32)


def output_tiled_schedule(num_features: int, dtype: torch.dtype, warps: int, column_groups: int,
                          vector_ok: int = 8) -> OutputTiled:
    """The output-tiled schedule of ``warps`` warps and ``column_groups`` groups for
    ``num_features`` features: vectors as wide as 16 bytes, ``vector_ok`` and the
    feature count allow, and enough of them (a power of two) to cover every feature."""
    widest = min(vector_ok, VECTOR_BYTES // dtype.itemsize)
    vector = max(v for v in (1, 2, 4) if v <= widest and num_features % v == 0)
    return OutputTiled(warps_per_block=warps, vector_width=vector,
                       outputs_per_thread=pow2_at_least(math.ceil(num_features / vector)),
                       column_groups=column_groups)
