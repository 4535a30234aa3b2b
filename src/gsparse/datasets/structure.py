"""Cheap structure statistics of a graph: inputs a cost model can afford at call time.

Everything is computed with a few reductions over the edges and one transfer of the
results, so it costs milliseconds on a 10M-edge graph on a GPU. A small graph on a GPU is
described on the host instead (see ``graph.HOST_STATISTICS_SIZE``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from .._edge_passes import edge_passes, rows_at
from ..graph import HOST_STATISTICS_SIZE, Graph, GraphStats, RowStats
from ._edges import check_int

__all__ = ["GraphStructure", "describe_structure"]


@dataclass(frozen=True)
class GraphStructure:
    """Size, row and column lengths, and column locality of a graph.

    Row lengths are in-degrees (CSR rows), column lengths out-degrees (how many rows read
    each source). The locality measures look at *row blocks*, ``rows_per_block``
    consecutive rows as a thread block of a row-parallel kernel would take them:

    * ``block_spread``: the median over non-empty row blocks of the standard deviation of
      the block's source ids, divided by ``num_src / sqrt(12)`` (the standard deviation of
      uniform ids): about 1 for uniform random sources, 0 when a block reads one source.
    * ``block_range``: the median over non-empty row blocks of
      ``(max source - min source + 1) / num_src``: the share of the sources a block's
      reads span. One far source is enough to make it large.
    * ``window_fraction``: the share of edges whose source lies within ``window`` ids of
      the destination's position scaled to the source range, ``(v + 1/2) num_src / num_dst
      - 1/2`` (``v`` itself on a square graph): the edges a diagonal sliding window of
      cached features would serve.

    ``lane_padding[k]`` (``k = 0 .. 5``) is ``sum(ceil(len / 2^k) 2^k) / E``: the edge
    slots a kernel that walks every row in whole steps of ``2^k`` lanes covers, over the real
    edges (1 for one lane; large where most rows are shorter than the group). It is exact
    where the row mean and CoV would only estimate it, and the cost models read it at each
    schedule's edge lanes.
    """

    num_src: int
    num_dst: int
    num_edges: int
    row_mean: float
    row_max: int
    row_cov: float
    empty_rows: float  # share of rows with no edge
    col_max: int
    col_cov: float
    block_spread: float
    block_range: float
    window_fraction: float
    rows_per_block: int
    window: int
    lane_padding: tuple[float, ...]

    def as_dict(self) -> dict[str, int | float | tuple[float, ...]]:
        """The fields by name, a flat record."""
        return asdict(self)

    def stats(self) -> GraphStats:
        """The sizes and row statistics the schedule rules and spaces read
        (:attr:`gsparse.Graph.stats` of the graph described)."""
        return GraphStats(self.num_src, self.num_dst, self.num_edges,
                          RowStats(self.row_mean, self.row_max, self.row_cov))


def _cov(lengths: torch.Tensor) -> torch.Tensor:
    mean = lengths.mean()
    return torch.where(mean > 0, lengths.std(unbiased=False) / mean, torch.zeros_like(mean))


# Lane groups of 1 to 32: a warp's lanes.
_LANE_GROUPS = 6


def _lane_padding(lengths: torch.Tensor, num_edges: int) -> list[torch.Tensor]:
    return [((lengths + (1 << k) - 1) >> k).sum().double() * (1 << k) / num_edges for k in range(_LANE_GROUPS)]


def describe_structure(graph: Graph, *, rows_per_block: int = 32, window: int = 4096) -> GraphStructure:
    """The :class:`GraphStructure` of ``graph``: vectorised, with one device synchronisation.

    Args:
        graph: any graph (square or bipartite, on any device).
        rows_per_block: rows per block for ``block_spread`` and ``block_range``, ``>= 1``.
        window: half-width in source ids for ``window_fraction``, ``>= 0``.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a gsparse.Graph, got {type(graph).__name__}")
    rows_per_block = check_int("rows_per_block", rows_per_block, 1)
    window = check_int("window", window, 0)
    num_src, num_dst, num_edges = graph.num_src, graph.num_dst, graph.num_edges
    if num_edges == 0:
        return GraphStructure(num_src, num_dst, 0, 0.0, 0, 0.0, 1.0 if num_dst else 0.0, 0, 0.0,
                              0.0, 0.0, 0.0, rows_per_block, window, (1.0,) * _LANE_GROUPS)
    if graph.device.type != "cpu" and num_edges <= HOST_STATISTICS_SIZE:
        graph = graph.to("cpu")
    device = graph.device
    lengths = graph.in_degrees().long()
    rows = lengths.double()
    num_blocks = -(-num_dst // rows_per_block)
    scale = num_src / num_dst
    rowptr = graph.rowptr.long()
    bounds = rowptr[torch.clamp(torch.arange(num_blocks + 1, device=device) * rows_per_block, max=num_dst)]
    count = (bounds[1:] - bounds[:-1]).double()
    # Ids relative to a point near each block keep the sums of squares small, so the
    # variance of a local block does not drown in the rounding of two large terms.
    origin = torch.arange(num_blocks, device=device, dtype=torch.float64) * (rows_per_block * scale)
    cols = torch.zeros(num_src, dtype=torch.float64, device=device)
    total, squares = torch.zeros_like(count), torch.zeros_like(count)
    high = torch.full((num_blocks,), -1, dtype=torch.int64, device=device)
    low = torch.full((num_blocks,), num_src, dtype=torch.int64, device=device)
    near = torch.zeros((), dtype=torch.int64, device=device)
    # In passes over the edges, in CSR order (the sums fold in the same order): a pass's
    # temporaries, eight arrays of its edges, stay small on a graph of billions of edges.
    for lo, hi in edge_passes(num_edges):
        col = graph.col[lo:hi].long()
        row = rows_at(rowptr, torch.arange(lo, hi, device=device))
        block = torch.div(row, rows_per_block, rounding_mode="floor")
        cols.index_add_(0, col, torch.ones(hi - lo, dtype=torch.float64, device=device))
        source = col.double()
        x = source - origin[block]
        total.index_add_(0, block, x)
        squares.index_add_(0, block, x * x)
        high.scatter_reduce_(0, block, col, "amax")
        low.scatter_reduce_(0, block, col, "amin")
        # Row v sits at source position (v + 1/2) scale - 1/2.
        offset = source.sub_(row.double().mul_(scale).add_((scale - 1) / 2)).abs_()
        near += (offset <= window).sum()
    empty = count == 0
    mean = total / count.clamp(min=1)
    std = torch.sqrt(torch.clamp(squares / count.clamp(min=1) - mean * mean, min=0))
    nan = torch.full_like(count, math.nan)
    spread = torch.where(empty, nan, std / (num_src / math.sqrt(12)))
    span = torch.where(empty, nan, (high - low + 1).double() / num_src)

    values = torch.stack([
        rows.mean(), rows.max(), _cov(rows), (rows == 0).double().mean(),
        cols.max(), _cov(cols), spread.nanmedian(), span.nanmedian(), near.double() / num_edges,
        *_lane_padding(lengths, num_edges),
    ]).tolist()
    row_mean, row_max, row_cov, empty_rows, col_max, col_cov, block_spread, block_range, window_fraction = values[:9]
    return GraphStructure(num_src, num_dst, num_edges, row_mean, int(row_max), row_cov, empty_rows,
                          int(col_max), col_cov, block_spread, block_range, window_fraction,
                          rows_per_block, window, tuple(values[9:]))
