"""Work over a graph's edges in passes of bounded size.

Element-wise steps over every edge of a graph of billions of edges would hold several
temporaries as large as its CSR (17 GB each in int64 at 2**31 edges); in passes of
:data:`PASS_EDGES` positions they stay within a few hundred MB. A pass reads the row of
each of its positions from ``rowptr`` (:func:`rows_at`) rather than a kept ``[E]`` array
of rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

__all__ = ["PASS_EDGES", "edge_passes", "rows_at"]

# Positions per pass.
PASS_EDGES = 1 << 26


def edge_passes(count: int) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` bounds of consecutive passes of at most :data:`PASS_EDGES` positions
    covering ``0 .. count - 1`` (read when called, so a test may shorten the passes)."""
    size = PASS_EDGES
    return ((lo, min(lo + size, count)) for lo in range(0, count, size))


def rows_at(rowptr: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The row (int64) of each CSR position: the last row starting at or before it, which
    is never an empty one. ``rowptr`` int64, like ``positions``."""
    return torch.searchsorted(rowptr, positions, right=True) - 1
