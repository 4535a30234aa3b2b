"""Warp scheduling (AG-SpTRSV §4.4, second hierarchy): which warp runs each node group.

The persistent grid has ``num_blocks`` blocks (one per SM) of ``warps_per_block`` warps;
warp ``w`` lies in block ``w // warps_per_block``. Within each kernel, every warp runs its
node groups in node-group order (level by level), and warp loads (entries) start from
zero. *In turn* means the interleaved order block 0 warp 0, block 1 warp 0, ..., block 0
warp 1, ..., so that consecutive node groups land on different SMs.

- ``ws_rr``: a kernel's ``t``-th node group goes to the ``t mod W``-th warp in turn.
- ``ws_balance``: a kernel's node groups are dealt in rounds of ``W``; in each round the
  ``i``-th largest goes to the ``i``-th least-loaded warp (ties: in order, in turn). This
  is the paper's "least-loaded warp" greedy with loads refreshed once per round rather
  than after each node group, which vectorises; each warp takes one node group per round,
  so its node groups stay in order. (A kernel of at most ``W`` node groups is one round
  with all loads zero: the largest first, in turn.)
- ``ws_locality``: a node group goes to a warp in the block (SM, hence L1 cache) of one of
  its parents (the node groups it depends on, in any kernel): of the parents' blocks, the
  one whose least-loaded warp is least loaded (ties: the lower block); the level's node
  groups that chose one block are dealt to its warps by increasing load (ties: lower
  warp). A node group without parents (level 0) is dealt like ``ws_balance`` among its
  level's. Loads are refreshed once per level. On a DAG with a single source, every node
  group descends from the source's block: the strategy then uses one SM, by definition,
  and the tuner will not pick it there.

Wide levels are scheduled with NumPy, runs of narrow levels (deep DAGs have millions of
one-node levels) by a plain loop following the same rule; both give the same warps.
"""

from __future__ import annotations

import numpy as np

from .schedule import WARP_SCHEDULES

__all__ = ["assign_warps"]

# Levels with fewer node groups than this are scheduled by the loop: a dozen NumPy calls
# per level would cost more.
_WIDE_LEVEL = 32


class _Grid:
    def __init__(self, num_blocks: int, warps_per_block: int) -> None:
        self.blocks, self.per_block = num_blocks, warps_per_block
        self.warps = num_blocks * warps_per_block
        t = np.arange(self.warps, dtype=np.int64)
        self.turn = (t % num_blocks) * warps_per_block + t // num_blocks
        self.turn_rank = np.empty_like(self.turn)
        self.turn_rank[self.turn] = t

    def deal(self, nnz: np.ndarray, load: np.ndarray) -> np.ndarray:
        """Warps for node groups of work ``nnz``, dealt in rounds of W: in each round the
        largest node group goes to the least-loaded warp, the next largest to the next one,
        and so on (ties: in order, in turn). ``load`` is updated in place."""
        warp = np.empty(len(nnz), dtype=np.int64)
        for first in range(0, len(nnz), self.warps):
            count = min(self.warps, len(nnz) - first)
            by_load = self.turn if not load.any() else np.lexsort((self.turn_rank, load))
            largest_first = np.argsort(-nnz[first:first + count], kind="stable")
            chosen = np.empty(count, dtype=np.int64)
            chosen[largest_first] = by_load[:count]
            warp[first:first + count] = chosen
            load[chosen] += nnz[first:first + count]
        return warp


def assign_warps(level: np.ndarray, nnz: np.ndarray | None, parents: tuple[np.ndarray, np.ndarray] | None,
                 kernel_ptr: np.ndarray, strategy: str, num_blocks: int, warps_per_block: int) -> np.ndarray:
    """``[q]`` warp of each node group.

    Args:
        level: ``[q]`` level of each node group (numbered level by level).
        nnz: ``[q]`` entries of each node group; read by ``ws_balance`` and ``ws_locality``
            only (None for ``ws_rr``).
        parents: ``(ptr, ids)``, the node groups each node group depends on; read by
            ``ws_locality`` only (None for the others).
        kernel_ptr: ``[K + 1]`` node-group cuts of the kernels (at level boundaries).
        strategy: ``ws_rr``, ``ws_balance`` or ``ws_locality``.
        num_blocks, warps_per_block: the persistent grid.
    """
    if strategy not in WARP_SCHEDULES:
        raise ValueError(f"warp_schedule must be one of {WARP_SCHEDULES}, got {strategy!r}")
    grid = _Grid(num_blocks, warps_per_block)
    q = len(level)
    kernel_of_node = np.repeat(np.arange(len(kernel_ptr) - 1, dtype=np.int64), np.diff(kernel_ptr))
    in_kernel = np.arange(q, dtype=np.int64) - kernel_ptr[kernel_of_node]
    warp = grid.turn[in_kernel % grid.warps]
    if strategy == "ws_balance":
        # A kernel of at most W node groups is one round with zero loads: largest first, in turn.
        by_size = np.lexsort((np.arange(q), -nnz, kernel_of_node))
        rank = np.empty(q, dtype=np.int64)
        rank[by_size] = in_kernel
        warp = grid.turn[rank % grid.warps]
        for k in np.flatnonzero(np.diff(kernel_ptr) > grid.warps).tolist():
            a, b = int(kernel_ptr[k]), int(kernel_ptr[k + 1])
            warp[a:b] = grid.deal(nnz[a:b], np.zeros(grid.warps, np.int64))
    elif strategy == "ws_locality":
        _Locality(grid, level, nnz, parents, kernel_ptr, warp).run()
    return warp


class _Locality:
    """``ws_locality`` over all node groups, level by level, loads reset at each kernel."""

    def __init__(self, grid: _Grid, level: np.ndarray, nnz: np.ndarray,
                 parents: tuple[np.ndarray, np.ndarray], kernel_ptr: np.ndarray, warp: np.ndarray) -> None:
        self.grid, self.nnz, self.warp = grid, nnz, warp
        self.parent_ptr, self.parent_ids = parents
        self.level_ptr = np.flatnonzero(np.diff(level, prepend=-1, append=-1))
        starts = np.isin(self.level_ptr[:-1], kernel_ptr[:-1])
        # A level opening a kernel starts from zero loads; when it is the kernel's only level,
        # its loads are never read again.
        self.fresh = starts
        self.alone = starts & np.append(starts[1:], True)
        self.load = np.zeros(grid.warps, dtype=np.int64)

    def run(self) -> None:
        wide = np.diff(self.level_ptr) >= _WIDE_LEVEL
        # Runs of narrow levels go to the loop together; each wide level is a run of its own.
        cut = np.union1d(np.flatnonzero(np.diff(wide.astype(np.int8), prepend=2)), np.flatnonzero(wide))
        bounds = np.append(cut, len(wide)).tolist()
        for first, last in zip(bounds[:-1], bounds[1:]):
            if wide[first]:
                self._wide(first)
            else:
                self._narrow(first, last)

    def _wide(self, index: int) -> None:
        """One wide level, vectorised."""
        grid, nw = self.grid, self.grid.per_block
        lo, hi = int(self.level_ptr[index]), int(self.level_ptr[index + 1])
        if self.fresh[index]:
            self.load[:] = 0
        block_load = self.load.reshape(grid.blocks, nw)
        counts = self.parent_ptr[lo + 1:hi + 1] - self.parent_ptr[lo:hi]
        blocks = self.warp[self.parent_ids[self.parent_ptr[lo]:self.parent_ptr[hi]]] // nw
        has = counts > 0
        placed = np.empty(hi - lo, dtype=np.int64)
        if (~has).any():
            placed[~has] = grid.deal(self.nnz[lo:hi][~has], self.load.copy())
        if has.any():
            # Least (block's least load, block) over each node group's parent blocks.
            key = block_load.min(axis=1)[blocks] * grid.blocks + blocks
            chosen = np.minimum.reduceat(key, (np.cumsum(counts) - counts)[has]) % grid.blocks
            by_block = np.argsort(chosen, kind="stable")
            block_of = chosen[by_block]
            rank = np.arange(len(block_of)) - np.searchsorted(block_of, block_of, side="left")
            warps_by_load = np.argsort(block_load, axis=1, kind="stable")
            picked = np.empty(len(block_of), dtype=np.int64)
            picked[by_block] = block_of * nw + warps_by_load[block_of, rank % nw]
            placed[has] = picked
        self.warp[lo:hi] = placed
        np.add.at(self.load, placed, self.nnz[lo:hi])

    def _narrow(self, first: int, last: int) -> None:
        """Levels ``first .. last - 1`` (all narrow), by a loop with the same rule as
        :meth:`_wide`; each block's least load and least-loaded warp are kept up to date."""
        grid, nw = self.grid, self.grid.per_block
        lo, hi = int(self.level_ptr[first]), int(self.level_ptr[last])
        loads = self.load.tolist()
        block_load = self.load.reshape(grid.blocks, nw)
        block_min = block_load.min(axis=1).tolist()
        block_best = (np.argmin(block_load, axis=1) + np.arange(grid.blocks) * nw).tolist()
        ptr = (self.parent_ptr[lo:hi + 1] - self.parent_ptr[lo]).tolist()
        ids = self.parent_ids[self.parent_ptr[lo]:self.parent_ptr[hi]]
        # `placed` holds the warps of the parents placed before this run (one per parent
        # entry, read now), then those of the run's node groups (written as they are placed);
        # `ref` points each parent entry at its slot.
        offset = len(ids) - lo
        placed = (self.warp[np.minimum(ids, lo - 1)] if lo else np.zeros_like(ids)).tolist()
        placed += [0] * (hi - lo)
        ref = np.where(ids < lo, np.arange(len(ids)), ids + offset).tolist()
        nnz = self.nnz[lo:hi].tolist()
        level_ptr = self.level_ptr[first:last + 1].tolist()
        for index, level_lo, level_hi in zip(range(first, last), level_ptr[:-1], level_ptr[1:]):
            fresh, alone = bool(self.fresh[index]), bool(self.alone[index])
            if fresh and not alone:
                loads, block_min = [0] * grid.warps, [0] * grid.blocks
                block_best = list(range(0, grid.warps, nw))
            by_block: dict[int, list[int]] = {}
            free = []
            for q in range(level_lo, level_hi):
                s, e = ptr[q - lo], ptr[q - lo + 1]
                if s == e:
                    free.append(q)
                    continue
                best = placed[ref[s]] // nw
                for i in range(s + 1, e):
                    c = placed[ref[i]] // nw
                    if fresh:
                        best = min(best, c)
                    elif block_min[c] < block_min[best] or (block_min[c] == block_min[best] and c < best):
                        best = c
                if level_hi - level_lo == 1:  # the common case of deep DAGs, without the bookkeeping
                    w = best * nw if fresh else block_best[best]
                    placed[offset + q] = w
                    if not alone:
                        loads[w] += nnz[q - lo]
                        least = min(loads[best * nw:best * nw + nw])
                        block_min[best] = least
                        block_best[best] = loads.index(least, best * nw, best * nw + nw)
                    break
                by_block.setdefault(best, []).append(q)
            else:
                self._place_level(by_block, free, level_lo, level_hi, lo, offset, placed, nnz, loads,
                                  block_min, block_best, fresh, alone)
        self.warp[lo:hi] = placed[offset + lo:]
        self.load[:] = loads

    def _place_level(self, by_block: dict[int, list[int]], free: list[int], level_lo: int, level_hi: int,
                     lo: int, offset: int, placed: list[int], nnz: list[int], loads: list[int],
                     block_min: list[int], block_best: list[int], fresh: bool, alone: bool) -> None:
        """Place one narrow level's node groups, given the block each chose (``by_block``) and
        those without parents (``free``); then update the loads (lists, in place)."""
        grid, nw = self.grid, self.grid.per_block
        for c, members in by_block.items():
            if fresh:
                ordered = range(c * nw, c * nw + nw)
            elif len(members) == 1:
                ordered = (block_best[c],)
            else:
                ordered = sorted(range(c * nw, c * nw + nw), key=loads.__getitem__)
            for k, q in enumerate(members):
                placed[offset + q] = ordered[k % nw]
        if free:
            start = np.zeros(grid.warps, np.int64) if fresh else np.array(loads, dtype=np.int64)
            chosen = grid.deal(np.array([nnz[q - lo] for q in free], np.int64), start)
            for q, w in zip(free, chosen.tolist()):
                placed[offset + q] = w
        if alone:
            return
        touched = set()
        for q in range(level_lo, level_hi):
            w = placed[offset + q]
            loads[w] += nnz[q - lo]
            touched.add(w // nw)
        for c in touched:
            least = min(loads[c * nw:(c + 1) * nw])
            block_min[c] = least
            block_best[c] = loads.index(least, c * nw, (c + 1) * nw)
