"""What the fast start knows of a triangular pattern without analysing it: its size, its
longest row and how many of its entries lie near the diagonal.

The fast start (:mod:`.natural`) runs before any analysis, so its scheme
(:func:`.default.natural_schedule`) can use only what is cheap to know. The factor checks
measure both statistics in the pass they make anyway (``codegen/factor_checks.cu``), read
back with their report; :func:`pattern_stats` measures them with PyTorch operations where
no report was made (a factor on the CPU, plans built directly).

- The longest row decides who walks a row. A lane walks a row of a few dozen entries alone
  as fast as a warp shares it, and 32 rows go at once; a lane given a hub row of a thousand
  entries holds up every row that waits on it.
- The near entries say whether natural order is a chain. In a mesh or a road network
  numbered along its grid, most rows depend on the row just before them (entries within
  :data:`NEAR` of the diagonal), so the rows in flight, consecutive in natural order, wait
  on each other one by one; solved by level, they do not. In a graph numbered without that
  locality (citation graphs, power-law and R-MAT graphs) consecutive rows rarely depend on
  each other and natural order needs no levels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .natural import entry_rows

__all__ = ["NEAR", "PatternStats", "pattern_stats"]

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
        near_entries: off-diagonal entries at most :data:`NEAR` rows from the diagonal
            (the same for ``A`` and ``A^T``).
    """

    rows: int
    entries: int
    longest_row: int
    near_entries: int

    @property
    def mean_row(self) -> float:
        """Entries per row (0 for an empty pattern)."""
        return self.entries / self.rows if self.rows else 0.0

    @property
    def near_share(self) -> float:
        """The share of the off-diagonal entries that are near (taking one diagonal entry per
        row: a pattern without its diagonal counts a little low)."""
        return min(self.near_entries / max(self.entries - self.rows, 1), 1.0)

    def transposed(self, longest_row: int) -> PatternStats:
        """The statistics of the transposed pattern, whose longest row is ``longest_row``."""
        return PatternStats(self.rows, self.entries, longest_row, self.near_entries)


def pattern_stats(crow: torch.Tensor, col: torch.Tensor) -> PatternStats:
    """The statistics of the valid CSR ``(crow, col)`` (int64), with PyTorch operations on its
    device: one read-back."""
    n, nnz = crow.numel() - 1, col.numel()
    if n == 0 or nnz == 0:
        return PatternStats(n, nnz, 0, 0)
    distance = (entry_rows(crow, nnz) - col).abs()
    near = ((distance > 0) & (distance <= NEAR)).sum()
    longest, near = torch.stack([crow.diff().max(), near]).tolist()
    return PatternStats(n, nnz, longest, near)
