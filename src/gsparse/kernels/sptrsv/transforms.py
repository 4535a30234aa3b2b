"""Computation-graph transforms (AG-SpTRSV §4.3): merging rows into row groups.

A *row group* is a run of consecutive positions of the solve order (the paper's nodes
joined along data edges); one subwarp solves it, its rows in order. The merges below cut
the positions ``0..n-1`` into row groups and return the cuts as ``starts`` (``[m + 1]``
int64, ``starts[0] = 0``, ``starts[-1] = n``): group ``g`` is ``[starts[g], starts[g + 1])``.
A row's size is its stored entries, diagonal included (``RowGraph.row_nnz``).

After merging, the groups' levels are those of the contracted DAG
(:func:`.analysis.contract`): rows of different levels may share a group, so levels are
recomputed rather than inherited.
"""

from __future__ import annotations

import numpy as np

from .analysis import RowGraph, contract, levels, reorder_by_level

__all__ = ["merge_fixed", "merge_avg", "merge_thresh", "MERGES", "RowGroups", "row_groups"]


def merge_fixed(row_nnz: np.ndarray, rb: int) -> np.ndarray:
    """``merge_fixed(rb)``: every ``rb`` consecutive rows form a group (the last may be shorter)."""
    n = len(row_nnz)
    starts = np.arange(0, n + rb, rb, dtype=np.int64)  # the last one at or past n: made n
    starts[-1] = n
    return starts


def merge_avg(row_nnz: np.ndarray, rb: int, thresh: int) -> np.ndarray:
    """``merge_avg(rb, thresh)``: each block of ``rb`` consecutive rows becomes one group when
    its rows average at most ``thresh`` entries, else each of its rows is a group of its own."""
    n = len(row_nnz)
    blocks = merge_fixed(row_nnz, rb)
    sizes = np.diff(blocks)
    mean = np.add.reduceat(row_nnz, blocks[:-1]) / sizes if n else np.zeros(0)
    split = mean > thresh
    cut = np.zeros(n + 1, dtype=bool)
    cut[blocks] = True
    cut[np.flatnonzero(np.repeat(split, sizes))] = True
    return np.flatnonzero(cut).astype(np.int64)


def merge_thresh(row_nnz: np.ndarray, rb: int, thresh: int) -> np.ndarray:
    """``merge_thresh(rb, thresh)``: consecutive rows of at most ``thresh`` entries are merged,
    at most ``rb`` to a group; a row with more than ``thresh`` entries is a group of its own."""
    n = len(row_nnz)
    long = np.asarray(row_nnz) > thresh
    cut = np.zeros(n + 1, dtype=bool)
    cut[0] = cut[n] = True
    cut[:n][long] = True
    cut[1:][long] = True
    # Within a run of short rows (started by a cut), cut again every rb rows.
    run_start = np.maximum.accumulate(np.where(cut[:n], np.arange(n), 0)) if n else np.zeros(0, np.int64)
    cut[:n] |= (np.arange(n) - run_start) % rb == 0
    return np.flatnonzero(cut).astype(np.int64)


MERGES = {"merge_fixed": merge_fixed, "merge_avg": merge_avg, "merge_thresh": merge_thresh}


class RowGroups:
    """A transformed computation graph: the (optionally reordered) rows cut into row groups.

    Attributes:
        rows: the :class:`RowGraph` after the optional reordering by level.
        row_level: ``[n]`` level of each position in ``rows`` (before merging).
        starts: ``[m + 1]`` row-group cuts over positions.
        ptr, deps: the contracted DAG over row groups (:func:`.analysis.contract`).
        inner: the indices into ``rows.deps`` of the dependencies inside their dependent's
            row group, increasing (none for single-row groups).
        level: ``[m]`` level of each row group in that DAG.
        nnz: ``[m]`` stored entries of each row group.
    """

    def __init__(self, rows: RowGraph, row_level: np.ndarray, starts: np.ndarray) -> None:
        self.rows = rows
        self.row_level = row_level
        self.starts = starts
        # Single-row groups are the rows' DAG itself and keep their levels and entries;
        # merged ones are contracted and need their levels recomputed.
        if len(starts) == rows.n + 1:
            self.ptr, self.deps, self.level, self.nnz = rows.ptr, rows.deps, row_level, rows.row_nnz
            self.inner = np.zeros(0, dtype=np.int64)
        else:
            self.ptr, self.deps, self.inner = contract(rows.ptr, rows.deps, starts)
            self.level = levels(self.ptr, self.deps)
            self.nnz = np.add.reduceat(rows.row_nnz, starts[:-1])

    @property
    def count(self) -> int:
        return len(self.starts) - 1

    @property
    def sizes(self) -> np.ndarray:
        """``[m]`` rows of each row group."""
        return np.diff(self.starts)


def row_groups(rows: RowGraph, row_level: np.ndarray, merge: str, rb: int, thresh: int,
               reorder: bool) -> RowGroups:
    """The candidate graph of one transform: reorder by level (optional), then merge.

    Args:
        rows: the system's row graph, ``row_level`` its levels (:func:`.analysis.levels`).
        merge: ``"merge_fixed"``, ``"merge_avg"`` or ``"merge_thresh"``.
        rb, thresh: the merge's parameters (``thresh`` unused by ``merge_fixed``).
        reorder: renumber the rows by level first, so that rows solved at about the same
            time are neighbours and can be merged.
    """
    if reorder:
        rows, row_level = reorder_by_level(rows, row_level)
    if merge == "merge_fixed":
        starts = merge_fixed(rows.row_nnz, rb)
    else:
        starts = MERGES[merge](rows.row_nnz, rb, thresh)
    return RowGroups(rows, row_level, starts)
