"""The computation graph of a triangular system: row dependencies in solve order, level sets.

A triangular system ``T x = b`` (``T`` lower or upper, as stored in CSR) is solved row by
row in *solve order*: increasing row index for a lower ``T``, decreasing for an upper one.
Position ``k`` of that order is row ``order[k]``; it depends on the positions ``j < k`` of
the rows its off-diagonal entries name. Every structure below is indexed by position, so
lower and upper systems (and a system renumbered by level) are handled alike.

The *level* of a position is the length of the longest dependency chain that ends there:
0 for a row with no off-diagonal entry, else ``1 + max(level of its dependencies)``. Rows of
one level are independent and can be solved together.

Everything is NumPy on the CPU, vectorised: a 500K-row factor analyses in a few tenths of a
second (figures in docs/sptrsv.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RowGraph", "ranges", "stable_order", "counting_order", "dependency_graph", "nearest_dependencies",
           "longest_chain", "transpose", "levels", "reorder_by_level", "contract"]

# The wavefront of `levels` costs a dozen NumPy calls per round (tens of microseconds); the
# in-order pass about a microsecond per node. The wavefront goes on while its rounds have
# averaged at least this many nodes (or while it has run fewer than _FREE_ROUNDS rounds:
# a DAG with one source starts narrow).
_MIN_MEAN_FRONTIER = 32
_FREE_ROUNDS = 256
# Beyond this many dependencies, a node's maximum is cheaper as one NumPy gather.
_LONG_DEPENDENCY_LIST = 64
# Chain runs at least this long are solved with one running maximum (see _finish_in_order).
_CHAIN_RUN = 32


@dataclass(frozen=True, eq=False)
class RowGraph:
    """The rows of a triangular system in solve order and their dependencies.

    Attributes:
        order: ``[n]`` int64, the matrix row solved at each position.
        ptr: ``[n + 1]`` int64 offsets into ``deps``.
        deps: ``[E]`` int64, the positions that position ``k`` depends on,
            ``deps[ptr[k]:ptr[k + 1]]``, each ``< k`` (one per off-diagonal entry).
        row_nnz: ``[n]`` int64, stored entries of each position's row, diagonal included:
            the work of solving it.
    """

    order: np.ndarray
    ptr: np.ndarray
    deps: np.ndarray
    row_nnz: np.ndarray

    @property
    def n(self) -> int:
        return len(self.order)


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])``, vectorised."""
    counts = np.asarray(counts, dtype=np.int64)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    out = np.repeat(np.asarray(starts, dtype=np.int64) - (ends - counts), counts)
    out += np.arange(total)
    return out


def stable_order(key: np.ndarray) -> np.ndarray:
    """``argsort(key, kind="stable")`` of non-negative integers. Keys below 2**16 are sorted
    as uint16, which NumPy radix-sorts (a byte per pass): 500K keys in a tenth of the time
    of int64's merge sort; below 2**8 as uint8, in one pass, half of that again."""
    if len(key):
        high = int(key.max())
        if high < 1 << 8:
            key = key.astype(np.uint8)
        elif high < 1 << 16:
            key = key.astype(np.uint16)
    return np.argsort(key, kind="stable")


def counting_order(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(stable_order(key), bincount(key))`` of non-negative integers below ``len(key)``
    (levels, say), by one counting sort: SciPy's CSR-to-CSC conversion of the pattern with
    entry ``i`` in row ``i``, column ``key[i]`` lists each column's rows in increasing order,
    and its column offsets are the counts. At 500K keys, four fifths of the radix sort's
    time, with the counts it takes besides."""
    import scipy.sparse as sp  # here: `import gsparse` does not load SciPy

    n = len(key)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    index = np.int32 if n < np.iinfo(np.int32).max else np.int64
    pattern = sp.csr_array((np.ones(n, dtype=np.int8), key.astype(index), np.arange(n + 1, dtype=index)),
                           shape=(n, int(key.max()) + 1)).tocsc()
    return pattern.indices.astype(np.int64), np.diff(pattern.indptr).astype(np.int64)


def dependency_graph(crow: np.ndarray, col: np.ndarray, lower: bool) -> RowGraph:
    """The row graph of the ``n x n`` triangular CSR ``(crow, col)`` solved in its own direction.

    Args:
        crow: ``[n + 1]`` row offsets.
        col: ``[nnz]`` column of each entry; every entry lies on the diagonal or on the
            ``lower`` (else upper) side of it. Duplicates count as separate dependencies.
        lower: whether the matrix is lower triangular (solved top down) or upper (bottom up).
    """
    crow = np.asarray(crow, dtype=np.int64)
    col = np.asarray(col, dtype=np.int64)
    n = len(crow) - 1
    counts = np.diff(crow)
    positions = np.arange(n, dtype=np.int64)
    if lower:  # positions are rows: the CSR as it is
        order, row_nnz, entry_ptr, position_of_col = positions, counts, crow, col
    else:
        order = positions[::-1].copy()
        row_nnz = counts[::-1].copy()
        entry_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(row_nnz, out=entry_ptr[1:])
        position_of_col = (n - 1) - col[ranges(crow[order], row_nnz)]
    position_of_entry = np.repeat(positions, row_nnz)
    # One mask over the entries, reused: wrong side, then diagonal, then off-diagonal.
    mask = np.greater(position_of_col, position_of_entry)
    if mask.any():
        side = "upper" if lower else "lower"
        raise ValueError(f"the pattern has entries on the {side} side of the diagonal: "
                         f"it is not {'lower' if lower else 'upper'} triangular")
    diagonal = np.flatnonzero(np.equal(position_of_col, position_of_entry, out=mask))
    # The off-diagonal entries before each position's first are its entries before it less
    # the diagonal ones: a running count over the positions (about one diagonal entry
    # each), not over the entries. np.compress is faster than a boolean index.
    diagonal_before = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(position_of_col[diagonal], minlength=n), out=diagonal_before[1:])
    deps = np.compress(np.logical_not(mask, out=mask), position_of_col)
    return RowGraph(order=order, ptr=entry_ptr - diagonal_before, deps=deps, row_nnz=row_nnz)


def nearest_dependencies(rows: RowGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(has, nearest)``, per position: whether it has a dependency, and the position of its
    nearest one (where it has none, a neighbour's entry: read it through ``has`` only). The
    nearest is a position's last dependency in a lower system and its first in an upper one
    (solved bottom up, ``rows.order`` decreasing): exact when the CSR's rows have their
    columns sorted, as a row graph lists each position's dependencies in its CSR's column
    order. Every position at once, without listing those with a dependency first."""
    ptr, deps = rows.ptr, rows.deps
    has = ptr[1:] != ptr[:-1]
    if deps.size == 0:
        return has, np.zeros(rows.n, dtype=np.int64)
    upper = rows.order[0] > rows.order[-1]
    return has, deps.take(ptr[:-1] if upper else ptr[1:] - 1, mode="clip")


def longest_chain(rows: RowGraph) -> int:
    """The most consecutive positions of which each but the first depends on the one before:
    a lower bound on the levels (a banded factor's is its size). A position depends on the
    one before when its nearest dependency (:func:`nearest_dependencies`) is that one."""
    has, nearest = nearest_dependencies(rows)
    chained = has & (nearest == np.arange(-1, rows.n - 1, dtype=np.int64))
    edges = np.flatnonzero(np.diff(chained, prepend=False, append=False))
    return min(rows.n, int((edges[1::2] - edges[::2]).max(initial=0)) + 1)


def transpose(ptr: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr_t, idx_t)``: the adjacency ``k -> idx[ptr[k]:ptr[k+1]]`` of ``n`` nodes reversed
    (for each node, the nodes that list it, increasing), int32 when the sizes allow. SciPy's
    CSR-to-CSC conversion is a counting sort: three times faster than NumPy's stable argsort
    at 10M entries; its scattered writes dominate, and int32 indices take a fifth off them."""
    import scipy.sparse as sp  # here: `import gsparse` does not load SciPy

    n = len(ptr) - 1
    index = np.int32 if max(n, len(idx)) < np.iinfo(np.int32).max else np.int64
    pattern = sp.csr_array((np.ones(len(idx), dtype=np.int8), idx.astype(index, copy=False),
                            ptr.astype(index, copy=False)), shape=(n, n)).tocsc()
    return pattern.indptr, pattern.indices


def levels(ptr: np.ndarray, deps: np.ndarray) -> np.ndarray:
    """``[n]`` int64 level of each node of a DAG whose node ``k`` depends on ``deps[ptr[k]:ptr[k+1]]``
    (all ``< k``; repeats allowed): 0 without dependencies, else ``1 + max(their levels)``.

    Wide DAGs run as a vectorised wavefront (Kahn's algorithm, one level per round). Once
    the rounds have averaged fewer than ``_MIN_MEAN_FRONTIER`` nodes (after
    ``_FREE_ROUNDS`` rounds), the remaining nodes are finished in index order (a
    topological order) by :func:`_finish_in_order`: chains of rows each depending on the
    one before take one NumPy pass, other rows about a microsecond each. At 4M rows a 2-D
    Laplacian (4,000 levels) and a banded factor (4M levels) both take about a second.
    """
    ptr = np.asarray(ptr, dtype=np.int64)
    deps = np.asarray(deps, dtype=np.int64)
    n = len(ptr) - 1
    level = np.full(n, -1, dtype=np.int64)
    waiting = np.diff(ptr)
    dependents_ptr, dependents = transpose(ptr, deps)
    frontier = np.flatnonzero(waiting == 0)
    current = done = 0
    while frontier.size and (current < _FREE_ROUNDS or done >= _MIN_MEAN_FRONTIER * current):
        level[frontier] = current
        done += frontier.size
        current += 1
        starts = dependents_ptr[frontier]
        reached = dependents[ranges(starts, dependents_ptr[frontier + 1] - starts)]
        if reached.size == 0:
            break
        np.subtract.at(waiting, reached, 1)
        # A node reached through several of its dependencies is listed once per dependency.
        ready = reached[waiting[reached] == 0]
        ready.sort()
        first = np.empty(ready.size, dtype=bool)
        first[:1] = True
        np.not_equal(ready[1:], ready[:-1], out=first[1:])
        frontier = ready[first]
    rest = np.flatnonzero(level < 0)
    if rest.size:
        _finish_in_order(ptr, deps, level, rest)
    return level


def _finish_in_order(ptr: np.ndarray, deps: np.ndarray, level: np.ndarray, rest: np.ndarray) -> None:
    """Fill ``level[rest]`` (``rest`` increasing; every other level is final) in index order.

    A *chain run* is a run of consecutive nodes each depending on the one before it (a
    banded factor is one). Along it levels increase, so a node's dependencies inside the
    run never beat its predecessor, and ``level(k) = max(level(k-1) + 1, e(k))`` with
    ``e(k)`` from the dependencies before the run: a running maximum, one NumPy pass per
    run. Runs of at least ``_CHAIN_RUN`` nodes go that way, the other nodes one at a time.
    """
    values = level.tolist()
    counts = ptr[rest + 1] - ptr[rest]
    owner = np.repeat(np.arange(len(rest), dtype=np.int64), counts)
    on_predecessor = deps[ranges(ptr[rest], counts)] == rest[owner] - 1
    chained = np.zeros(len(rest), dtype=bool)
    chained[owner[on_predecessor]] = True
    chained[1:] &= np.diff(rest) == 1
    chained[0] = False
    starts = np.flatnonzero(~chained)
    lengths = np.diff(np.append(starts, len(rest)))
    long_runs = np.flatnonzero(lengths >= _CHAIN_RUN)
    done = 0
    for run in long_runs.tolist():
        a, b = int(starts[run]), int(starts[run] + lengths[run])
        _one_by_one(ptr, deps, level, values, rest[done:a])
        _chain_run(ptr, deps, level, values, int(rest[a]), int(rest[b - 1]) + 1)
        done = b
    _one_by_one(ptr, deps, level, values, rest[done:])


def _chain_run(ptr: np.ndarray, deps: np.ndarray, level: np.ndarray, values: list[int], s: int, e: int) -> None:
    """Levels of the chain run ``s .. e - 1`` (see :func:`_finish_in_order`)."""
    index = np.arange(e - s, dtype=np.int64)
    owner = np.repeat(index, np.diff(ptr[s:e + 1]))
    dep = deps[ptr[s]:ptr[e]]
    before = dep < s
    outside = np.full(e - s, np.iinfo(np.int64).min // 2, dtype=np.int64)
    outside[0] = 0
    np.maximum.at(outside, owner[before], level[dep[before]] + 1)
    level[s:e] = np.maximum.accumulate(outside - index) + index
    values[s:e] = level[s:e].tolist()


def _one_by_one(ptr: np.ndarray, deps: np.ndarray, level: np.ndarray, values: list[int],
                rest: np.ndarray) -> None:
    """Levels of ``rest`` one node at a time, in chunks so that the Python lists stay small.
    Nodes with many dependencies (contracted row groups have hundreds) take their maximum
    with NumPy from ``level``, which then follows each node."""
    get = values.__getitem__
    chunk = 1 << 20
    for first in range(0, len(rest), chunk):
        nodes = rest[first:first + chunk]
        counts = ptr[nodes + 1] - ptr[nodes]
        short = counts <= _LONG_DEPENDENCY_LIST
        # Only the short lists become Python lists, laid end to end.
        local = deps[ranges(ptr[nodes[short]], counts[short])].tolist()
        offset = 0
        if short.all():
            for node, count in zip(nodes.tolist(), counts.tolist()):
                values[node] = 1 + max(map(get, local[offset:offset + count])) if count else 0
                offset += count
            level[nodes] = np.asarray([values[node] for node in nodes.tolist()], dtype=np.int64)
            continue
        for node, count, is_short in zip(nodes.tolist(), counts.tolist(), short.tolist()):
            if is_short:
                value = 1 + max(map(get, local[offset:offset + count])) if count else 0
                offset += count
            else:
                value = 1 + int(level[deps[ptr[node]:ptr[node + 1]]].max())
            values[node] = value
            level[node] = value


def reorder_by_level(graph: RowGraph, level: np.ndarray) -> tuple[RowGraph, np.ndarray]:
    """The same system renumbered by level (stable: rows of a level keep their order), and
    the levels in the new order. Dependencies stay earlier, since they have lower levels."""
    perm = stable_order(level)
    new_position = np.empty_like(perm)
    new_position[perm] = np.arange(graph.n, dtype=np.int64)
    counts = np.diff(graph.ptr)[perm]
    entries = ranges(graph.ptr[perm], counts)
    ptr = np.zeros(graph.n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    reordered = RowGraph(order=graph.order[perm], ptr=ptr, deps=new_position[graph.deps[entries]],
                         row_nnz=graph.row_nnz[perm])
    return reordered, level[perm]


def contract(ptr: np.ndarray, deps: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The DAG of contiguous node groups ``[starts[g], starts[g + 1])``: group ``g`` depends on
    every other group one of its nodes depends on (dependencies inside a group vanish;
    repeated ones are kept, they change no level). Returns ``(ptr, deps)`` over groups and
    ``inner``: the indices into ``deps`` of the dependencies inside their dependent's group,
    increasing."""
    starts = np.asarray(starts, dtype=np.int64)
    groups = len(starts) - 1
    group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(starts))
    # A group's entries are contiguous, and a dependency lies inside its dependent's group
    # exactly when it is not before the group's first position.
    entry_starts = ptr[starts]
    inside = deps >= np.repeat(starts[:-1], np.diff(entry_starts))
    inner = np.flatnonzero(inside)
    # The kept entries before a group's are its entries before it less the inner ones: a
    # search per group, not a running count over the entries.
    return entry_starts - np.searchsorted(inner, entry_starts), group_of[np.compress(~inside, deps)], inner
