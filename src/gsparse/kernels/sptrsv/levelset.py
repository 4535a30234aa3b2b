"""The level-set baseline: a triangular solve written with PyTorch ops, one step per level.

Rows are renumbered by level (:func:`.analysis.levels`), so that each level is a contiguous
slice; level ``l`` is then one gather of the solved ``x``, one product with the entries,
one ``index_add`` into the level's right-hand sides and one division. Runs on any device
PyTorch supports: it is the CUDA path until generated kernels exist, and the
"level-set with torch ops" baseline of the benchmark. Each level costs a few kernel
launches, so deep factors (a banded matrix has about ``n`` levels) are slow by design.
The plan is built once per pattern and direction; the loop over levels reads only host
integers, so a solve never synchronises with the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .analysis import dependency_graph, levels, ranges, stable_order

__all__ = ["LevelSetPlan", "transposed_pattern", "levelset_plan", "levelset_solve"]


@dataclass(frozen=True, eq=False)
class LevelSetPlan:
    """A level-set solve of ``T x = b`` where ``T`` is a factor ``A`` or its transpose.

    Attributes:
        n: rows of the system.
        perm: ``[n]`` int64, the matrix rows in level order (on the solve's device).
        level_ptr: ``L + 1`` host offsets: level ``l`` is ``perm[level_ptr[l]:level_ptr[l+1]]``.
        entry_ptr: ``L + 1`` host offsets into the off-diagonal entries, grouped by level.
        local_row: ``[E]`` the entry's row, counted from its level's first row.
        source: ``[E]`` the entry's column, as a level-order index.
        value_index: ``[E]`` the entry's index into ``A``'s values.
        diagonal_index: ``[n]`` index into ``A``'s values of each level-order row's diagonal
            (0 where there is none; a unit-diagonal solve does not read it).
    """

    n: int
    perm: torch.Tensor
    level_ptr: tuple[int, ...]
    entry_ptr: tuple[int, ...]
    local_row: torch.Tensor
    source: torch.Tensor
    value_index: torch.Tensor
    diagonal_index: torch.Tensor

    @property
    def num_levels(self) -> int:
        return len(self.level_ptr) - 1


def transposed_pattern(crow: np.ndarray, col: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(crow_t, col_t, value_index)``: the CSR of ``A^T`` (columns increasing) and, for each
    of its entries, the index of that entry among ``A``'s. SciPy's CSR-to-CSC conversion is
    a counting sort that keeps each column's entries in ``A``'s order (a stable sort by
    column), converting the entries' indices along: several times faster than ``argsort``."""
    import scipy.sparse as sp  # here: `import gsparse` does not load SciPy

    n = len(crow) - 1
    entries = np.arange(len(col), dtype=np.int64)
    csc = sp.csr_array((entries, col, crow), shape=(n, n)).tocsc()
    return (csc.indptr.astype(np.int64, copy=False), csc.indices.astype(np.int64, copy=False),
            csc.data)


def levelset_plan(crow: np.ndarray, col: np.ndarray, lower: bool, transpose: bool,
                  device: torch.device) -> LevelSetPlan:
    """The plan for ``A x = b`` (or ``A^T x = b``) with ``A`` the ``n x n`` triangular CSR
    ``(crow, col)`` (``lower`` or upper, no duplicate entries)."""
    crow = np.asarray(crow, dtype=np.int64)
    col = np.asarray(col, dtype=np.int64)
    n = len(crow) - 1
    value_index = np.arange(len(col), dtype=np.int64)
    if transpose:
        crow, col, value_index = transposed_pattern(crow, col)
        lower = not lower
    graph = dependency_graph(crow, col, lower)
    level_of_row = np.empty(n, dtype=np.int64)
    level_of_row[graph.order] = levels(graph.ptr, graph.deps)
    perm = stable_order(level_of_row)
    new_index = np.empty(n, dtype=np.int64)
    new_index[perm] = np.arange(n, dtype=np.int64)
    counts = np.bincount(level_of_row, minlength=1) if n else np.zeros(0, np.int64)
    level_ptr = np.concatenate(([0], np.cumsum(counts)))

    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(crow))
    diagonal = col == rows
    diagonal_index = np.zeros(n, dtype=np.int64)
    diagonal_index[new_index[rows[diagonal]]] = value_index[diagonal]
    by_level = ranges(crow[perm], np.diff(crow)[perm])  # the rows' entries, rows in level order
    off = by_level[~diagonal[by_level]]
    entry_level = level_of_row[rows[off]]
    entry_ptr = np.searchsorted(entry_level, np.arange(len(level_ptr)), side="left")
    local_row = new_index[rows[off]] - level_ptr[entry_level]

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(device)

    return LevelSetPlan(n=n, perm=tensor(perm), level_ptr=tuple(level_ptr.tolist()),
                        entry_ptr=tuple(entry_ptr.tolist()), local_row=tensor(local_row),
                        source=tensor(new_index[col[off]]), value_index=tensor(value_index[off]),
                        diagonal_index=tensor(diagonal_index))


def levelset_solve(plan: LevelSetPlan, values: torch.Tensor, b: torch.Tensor,
                   unit_diagonal: bool) -> torch.Tensor:
    """``x`` of ``b``'s shape (``[n]`` or ``[n, k]``) solving the plan's system over ``values``
    (``A``'s values, ``[nnz]``, ``b``'s dtype and device)."""
    rhs = (b.unsqueeze(1) if b.dim() == 1 else b)[plan.perm]
    off = values[plan.value_index].unsqueeze(1)
    diagonal = None if unit_diagonal else values[plan.diagonal_index].unsqueeze(1)
    x = torch.empty_like(rhs)
    for level in range(plan.num_levels):
        lo, hi = plan.level_ptr[level], plan.level_ptr[level + 1]
        first, last = plan.entry_ptr[level], plan.entry_ptr[level + 1]
        acc = rhs[lo:hi]
        if last > first:
            products = off[first:last] * x[plan.source[first:last]]
            acc = acc.index_add(0, plan.local_row[first:last], products, alpha=-1)
        x[lo:hi] = acc if diagonal is None else acc / diagonal[lo:hi]
    out = torch.empty_like(x)
    out[plan.perm] = x
    return out.reshape(b.shape)
