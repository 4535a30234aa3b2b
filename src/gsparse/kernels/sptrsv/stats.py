"""What the fast start knows of a triangular pattern without analysing it: its size, its
longest row and how many of its rows have an entry near the diagonal.

The fast start (:mod:`.natural`) runs before any analysis, so its scheme
(:func:`.default.natural_schedule`) can use only what is cheap to know. The factor checks
measure both statistics in the pass they make anyway (``codegen/factor_checks.cu``), read
back with their report; :func:`pattern_stats` measures them with PyTorch operations where
no report was made (a factor on the CPU, plans built directly).

- The longest row decides who walks a row. A lane walks a row of a few dozen entries alone
  as fast as a warp shares it, and 32 rows go at once; a lane given a hub row of a thousand
  entries holds up every row that waits on it.
- The near rows say whether natural order is a chain. In a mesh or a road network
  numbered along its grid, most rows depend on a row just before them (an entry within
  :data:`NEAR` of the diagonal), so the rows in flight, consecutive in natural order, wait
  on each other one by one; solved by level, they do not. In a graph numbered without that
  locality (citation graphs, power-law and R-MAT graphs) consecutive rows rarely depend on
  each other and natural order needs no levels. Rows, not entries: a 27-point stencil's
  rows each have one near entry of 13, and chain as a 7-point Laplacian's (one of 3) do.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .natural import entry_rows

__all__ = ["NEAR", "PatternStats", "near_rows", "pattern_stats"]

# How far from the diagonal an entry is near: a warp's worth of rows, the rows one ticket of
# the fast start hands out together at most (factor_checks.cu's NEAR).
NEAR = 32


@dataclass(frozen=True)
class PatternStats:
    """Statistics of an ``n x n`` triangular pattern (of ``A``, or of a solve's system).

    Attributes:
        rows: ``n``.
        entries: stored entries, the diagonal's included.
        longest_row: the most entries of a row.
        near_rows: rows with an off-diagonal entry at most :data:`NEAR` rows from the
            diagonal.
    """

    rows: int
    entries: int
    longest_row: int
    near_rows: int

    @property
    def mean_row(self) -> float:
        """Entries per row (0 for an empty pattern)."""
        return self.entries / self.rows if self.rows else 0.0

    @property
    def near_row_share(self) -> float:
        """The share of the rows that have a near entry (0 for an empty pattern)."""
        return self.near_rows / self.rows if self.rows else 0.0


def near_rows(crow: torch.Tensor, col: torch.Tensor, transpose: bool = False) -> torch.Tensor:
    """The rows of the valid CSR ``(crow, col)`` (int64) with an off-diagonal entry within
    :data:`NEAR` of the diagonal (with ``transpose``, the rows of its transpose: columns),
    as a 0-d tensor on its device: nothing is read back."""
    n, nnz = crow.numel() - 1, col.numel()
    rows = entry_rows(crow, nnz)
    distance = (rows - col).abs()
    near = (distance > 0) & (distance <= NEAR)
    # Each near entry marks its row (column); the others mark slot n, which is not counted.
    marked = torch.where(near, col if transpose else rows, n)
    return torch.zeros(n + 1, dtype=torch.int8, device=crow.device).scatter_(0, marked, 1)[:n].sum()


def pattern_stats(crow: torch.Tensor, col: torch.Tensor, transpose: bool = False) -> PatternStats:
    """The statistics of the valid CSR ``(crow, col)`` (int64), with ``transpose`` of its
    transpose, with PyTorch operations on its device: one read-back."""
    n, nnz = crow.numel() - 1, col.numel()
    if n == 0 or nnz == 0:
        return PatternStats(n, nnz, 0, 0)
    if transpose:  # the longest column; a scatter, since bincount would read its size back
        lengths = torch.zeros(n, dtype=torch.int64, device=col.device).index_add_(0, col, torch.ones_like(col))
    else:
        lengths = crow.diff()
    longest, near = torch.stack([lengths.max(), near_rows(crow, col, transpose)]).tolist()
    return PatternStats(n, nnz, longest, near)
