"""Long rows split into partial rows: the system ``T x = b`` rewritten so that no row has
more than :data:`CHUNK` off-diagonal entries, for rows that have more than
:data:`SPLIT_ABOVE`.

One warp solves each row, so a row of 30,000 entries (a hub of a power-law or R-MAT graph:
the rows every later row waits on) is read by 32 lanes while the rest of the GPU waits: at
16 right-hand sides such a factor solved 2-3x slower than cuSPARSE. Splitting it needs no
new kernel: a hub row ``r``,

    T_rr x_r + sum_j T_rj x_j = b_r,

becomes ``P`` partial rows ``y_p + sum_{j in chunk p} T_rj x_j = 0`` (unit diagonal, right
side 0), each a row of at most :data:`CHUNK` entries that any warp solves as soon as its
own chunk's ``x_j`` are final, and the row ``T_rr x_r - sum_p y_p = b_r`` of ``P`` entries.
The rewritten system is still triangular: the partial rows of ``r`` are numbered just before
it in a lower system (their columns are all below ``r``) and just after it in an upper one.
The solver writes ``b`` into the rows of the original rows of a zeroed ``[n', k]`` right side
and reads ``x`` back from them; the partial rows' values are ``T``'s own (no copy per new
values), their diagonal and coupling entries the constants 1 and -1.

Measured on an H100 (docs/performance.md, "long rows split"), power-law factors with rows of
26,000-32,000 entries at 16 right-hand sides: 0.39-0.48x cuSPARSE unsplit, 1.8-2.3x with the
thresholds below, 3.7-3.8x in a probe that split every row over :data:`CHUNK`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["CHUNK", "CONSTANTS", "SPLIT_ABOVE", "RowSplit", "size_bound", "split_long_rows"]

# The most off-diagonal entries of a partial row: at 16 right-hand sides 256 solved the
# power-law factors 2x faster than 1,024 (at one right-hand side 1,024 was up to 19% faster).
CHUNK = 256
# Rows with more off-diagonal entries than this are split: each split adds a step to the row's
# dependency chain, so only hubs are. A probe that split every row over CHUNK solved the two
# hub factors above 1.6-2.1x faster than this threshold does; it was not tried on the other
# families.
SPLIT_ABOVE = 4 * CHUNK
# The values the partial rows add, after T's own in the gathered value array.
CONSTANTS = (1.0, -1.0)


@dataclass(frozen=True, eq=False)
class RowSplit:
    """A system rewritten by :func:`split_long_rows`.

    Attributes:
        crow, col: the new system's CSR (int64, ``[n' + 1]`` and ``[nnz']``, rows' columns
            increasing), on the system's device.
        value_index: ``[nnz']`` int64, each entry's index in ``cat(values, CONSTANTS)``,
            ``values`` being what the caller's ``value_index`` gathered from (``A``'s values).
        position: ``[n]`` int64, the new index of each of the original system's rows.
    """

    crow: torch.Tensor
    col: torch.Tensor
    value_index: torch.Tensor
    position: torch.Tensor

    @property
    def n(self) -> int:
        return self.crow.numel() - 1

    @property
    def nnz(self) -> int:
        return self.col.numel()

    def spread(self, b: torch.Tensor) -> torch.Tensor:
        """The new system's right side: ``b``'s rows at their new places, zeros elsewhere."""
        out = torch.zeros((self.n, *b.shape[1:]), dtype=b.dtype, device=b.device)
        return out.index_copy_(0, self.position, b)

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """The original system's solution: the original rows of the new system's ``x``."""
        return x.index_select(0, self.position)


def size_bound(n: int, nnz: int) -> tuple[int, int]:
    """The most rows and entries the system of ``n`` rows and ``nnz`` entries can have once
    split (what its index type must hold): a split row of ``e > SPLIT_ABOVE`` off-diagonal
    entries gets ``ceil(e / CHUNK) < e / 200`` partial rows, each two more entries."""
    extra = nnz // 200 + 1
    return n + extra, nnz + 2 * extra


def split_long_rows(crow: torch.Tensor, col: torch.Tensor, lower: bool, value_index: torch.Tensor | None = None,
                    *, chunk: int = CHUNK, split_above: int = SPLIT_ABOVE) -> RowSplit | None:
    """The system of the triangular CSR ``(crow, col)`` (int64, rows' columns increasing, a
    stored diagonal optional) with every row of more than ``split_above`` off-diagonal
    entries split into partial rows of at most ``chunk``, evenly; None when no row has that
    many. ``value_index`` (None: the identity) maps the system's entries to the values the
    solver is given. Torch ops on the CSR's device; one read of the host (the number of
    partial rows, which sizes everything)."""
    if chunk < 1 or split_above < chunk:
        raise ValueError(f"need 1 <= chunk <= split_above, got chunk={chunk}, split_above={split_above}")
    device = crow.device
    n, nnz = crow.numel() - 1, col.numel()
    if n == 0 or nnz == 0:
        return None
    row_nnz = crow.diff()
    rows = torch.arange(n, dtype=torch.int64, device=device)
    # A stored diagonal is the last entry of a lower row, the first of an upper one.
    diagonal_at = (crow[1:] - 1) if lower else crow[:-1]
    has_diagonal = (row_nnz > 0) & (col[diagonal_at.clamp(0, nnz - 1)] == rows)
    off = row_nnz - has_diagonal.long()
    parts = torch.where(off > split_above, torch.div(off + chunk - 1, chunk, rounding_mode="floor"), 0)
    total = int(parts.sum())  # sync: sizes the new system
    if total == 0:
        return None
    # Partial rows of r: just before r when lower, just after it when upper.
    before = torch.cumsum(parts, 0)
    position = rows + (before if lower else before - parts)
    first_part = position - parts if lower else position + 1
    m = n + total

    entry_row = torch.repeat_interleave(rows, row_nnz, output_size=nnz)
    entries = torch.arange(nnz, dtype=torch.int64, device=device)
    split_row = parts[entry_row] > 0
    is_diagonal = col == entry_row
    moved = split_row & ~is_diagonal
    # The off-diagonal entry at offset o of a row of `off` of them (counted after a leading
    # diagonal in an upper row) goes to partial row o * parts // off: sizes differ by one at most.
    offset = entries - crow[entry_row] - (has_diagonal[entry_row].long() if not lower else 0)
    part = torch.div(offset * parts[entry_row], off[entry_row].clamp(min=1), rounding_mode="floor")
    new_row = torch.where(moved, first_part[entry_row] + part, position[entry_row])
    new_col = position[col]
    source = value_index if value_index is not None else entries

    # Each partial row: its unit diagonal, and the coupling entry -1 in its row.
    owner = torch.repeat_interleave(rows, parts, output_size=total)
    partial = first_part[owner] + (torch.arange(total, dtype=torch.int64, device=device)
                                   - (before - parts)[owner])
    # The constants follow A's values, as many as the system's entries.
    one = torch.full((total,), nnz, dtype=torch.int64, device=device)
    all_rows = torch.cat([new_row, partial, position[owner]])
    all_cols = torch.cat([new_col, partial, partial])
    all_sources = torch.cat([source, one, one + 1])
    order = torch.sort(all_rows * m + all_cols).indices
    new_crow = torch.zeros(m + 1, dtype=torch.int64, device=device)
    torch.cumsum(torch.bincount(all_rows, minlength=m), 0, out=new_crow[1:])
    return RowSplit(crow=new_crow, col=all_cols[order], value_index=all_sources[order], position=position)

