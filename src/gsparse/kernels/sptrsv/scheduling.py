"""Multi-hierarchy scheduling (AG-SpTRSV §4.4): row groups -> node groups -> warps -> kernels.

1. Grouping: each level's row groups are cut into *node groups* of up to ``subwarps`` row
   groups (one per subwarp; row groups of one level are independent, so a warp never
   waits on itself), in row order (``rg_sequential``) or by decreasing entries
   (``rg_balance``). Node groups are numbered level by level.
2. Kernel partitioning: a level with more than ``alpha_level x max_warps`` node groups is a
   kernel of its own; consecutive smaller levels share one. Kernels run in order.
3. Warp scheduling: the persistent grid has ``num_blocks`` blocks (one per SM) of
   ``warps_per_block`` warps, warp ``w`` in block ``w // warps_per_block``. In each kernel
   every warp runs the node groups assigned to it in node-group order; loads (entries)
   start from zero in each kernel. "In turn" below means the interleaved order
   block 0 warp 0, block 1 warp 0, ..., block 0 warp 1, ... (consecutive node groups land
   on different SMs).

   - ``ws_rr``: the kernel's ``t``-th node group goes to the ``t mod W``-th warp in turn.
   - ``ws_balance``: node groups are dealt in rounds of ``W``; in each round the ``i``-th
     goes to the ``i``-th least-loaded warp (ties in turn). This is the paper's
     "least-loaded warp" greedy with loads refreshed once per round rather than per node
     group, which vectorises.
   - ``ws_locality``: a node group goes to a warp in the block (SM, hence L1 cache) of one
     of its parents (the node groups it depends on, any kernel): of the parents' blocks,
     the one whose least-loaded warp is least loaded; the level's node groups that chose
     one block are dealt to its warps by increasing load. A node group without parents is
     dealt like ``ws_balance`` within its level. Loads are refreshed once per level.

Sync elimination (§4.2.2) is decided here too: a kernel whose node groups all lie in one
level needs no waiting, and a row needs a ready flag only if a row that waits depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .analysis import RowGraph, ranges
from .schedule import SptrsvSchedule
from .transforms import RowGroups, row_groups

__all__ = ["NodeGroups", "node_groups", "partition", "assign_warps", "SolvePlan", "plan"]


@dataclass(frozen=True, eq=False)
class NodeGroups:
    """Row groups cut into node groups, numbered level by level.

    Attributes:
        ptr: ``[q + 1]`` offsets into ``members``.
        members: ``[m]`` row groups of each node group, in subwarp order.
        level: ``[q]`` level of each node group.
        nnz: ``[q]`` stored entries of each node group (its warp's work).
    """

    ptr: np.ndarray
    members: np.ndarray
    level: np.ndarray
    nnz: np.ndarray

    @property
    def count(self) -> int:
        return len(self.ptr) - 1


def node_groups(groups: RowGroups, subwarps: int, grouping: str) -> NodeGroups:
    """Cut each level's row groups into node groups of up to ``subwarps`` (``rg_sequential``:
    in row order; ``rg_balance``: by decreasing entries, ties in row order)."""
    m = groups.count
    index = np.arange(m, dtype=np.int64)
    if grouping == "rg_sequential":
        order = np.lexsort((index, groups.level))
    elif grouping == "rg_balance":
        order = np.lexsort((index, -groups.nnz, groups.level))
    else:
        raise ValueError(f"grouping must be 'rg_sequential' or 'rg_balance', got {grouping!r}")
    level = groups.level[order]
    rank = index - np.searchsorted(level, level, side="left")
    firsts = np.flatnonzero(rank % subwarps == 0)
    ptr = np.append(firsts, np.int64(m)).astype(np.int64)
    nnz = np.add.reduceat(groups.nnz[order], firsts) if m else np.zeros(0, np.int64)
    return NodeGroups(ptr=ptr, members=order.astype(np.int64), level=level[firsts], nnz=nnz)


def partition(level: np.ndarray, alpha_level: float, max_warps: int) -> np.ndarray:
    """``[K + 1]`` kernel cuts over the node groups (numbered level by level, ``level`` their
    levels): a level with more than ``alpha_level * max_warps`` node groups is a kernel of its
    own, consecutive smaller levels share one."""
    if len(level) == 0:
        return np.zeros(1, dtype=np.int64)
    counts = np.bincount(level)
    large = counts > alpha_level * max_warps
    first = np.ones(len(counts), dtype=bool)
    first[1:] = large[1:] | large[:-1]
    level_ptr = np.searchsorted(level, np.arange(len(counts) + 1), side="left")
    return level_ptr[np.append(np.flatnonzero(first), len(counts))].astype(np.int64)


def _in_turn(num_blocks: int, warps_per_block: int) -> np.ndarray:
    """``[W]`` warps in turn: block 0 warp 0, block 1 warp 0, ..., block 0 warp 1, ..."""
    t = np.arange(num_blocks * warps_per_block, dtype=np.int64)
    return (t % num_blocks) * warps_per_block + t // num_blocks


def _deal(nnz: np.ndarray, load: np.ndarray, turn_rank: np.ndarray, turn: np.ndarray) -> np.ndarray:
    """Warps for node groups of work ``nnz`` dealt in rounds of W to the least-loaded warps
    (ties in turn); ``load`` is updated in place."""
    num_warps = len(load)
    warp = np.empty(len(nnz), dtype=np.int64)
    for first in range(0, len(nnz), num_warps):
        if not load.any():
            by_load = turn
        else:
            by_load = np.lexsort((turn_rank, load))
        count = min(num_warps, len(nnz) - first)
        chosen = by_load[:count]
        warp[first:first + count] = chosen
        load[chosen] += nnz[first:first + count]
    return warp


def assign_warps(nodes: NodeGroups, parents: tuple[np.ndarray, np.ndarray], kernel_ptr: np.ndarray,
                 strategy: str, num_blocks: int, warps_per_block: int) -> np.ndarray:
    """``[q]`` warp of each node group (see the module docstring for the strategies).

    ``parents`` is ``(ptr, ids)``: the node groups each node group depends on.
    """
    num_warps = num_blocks * warps_per_block
    turn = _in_turn(num_blocks, warps_per_block)
    turn_rank = np.empty_like(turn)
    turn_rank[turn] = np.arange(num_warps, dtype=np.int64)
    warp = np.empty(nodes.count, dtype=np.int64)
    for k in range(len(kernel_ptr) - 1):
        a, b = int(kernel_ptr[k]), int(kernel_ptr[k + 1])
        if strategy == "ws_rr" or (strategy == "ws_balance" and b - a <= num_warps):
            # With every load at zero, a single round of ws_balance is the turn order.
            warp[a:b] = turn[np.arange(b - a) % num_warps]
        elif strategy == "ws_balance":
            warp[a:b] = _deal(nodes.nnz[a:b], np.zeros(num_warps, np.int64), turn_rank, turn)
        elif strategy == "ws_locality":
            _locality(nodes, parents, a, b, warp, num_blocks, warps_per_block, turn_rank, turn)
        else:
            raise ValueError(f"warp_schedule must be one of 'ws_rr', 'ws_balance', 'ws_locality', "
                             f"got {strategy!r}")
    return warp


def _locality(nodes: NodeGroups, parents: tuple[np.ndarray, np.ndarray], a: int, b: int,
              warp: np.ndarray, num_blocks: int, warps_per_block: int,
              turn_rank: np.ndarray, turn: np.ndarray) -> None:
    """``ws_locality`` for the kernel of node groups ``[a, b)``, level by level."""
    parent_ptr, parent_ids = parents
    load = np.zeros(num_blocks * warps_per_block, dtype=np.int64)
    level_ptr = a + np.flatnonzero(np.diff(nodes.level[a:b], prepend=-1, append=-1))
    for lo, hi in zip(level_ptr[:-1].tolist(), level_ptr[1:].tolist()):
        block_load = load.reshape(num_blocks, warps_per_block)
        counts = parent_ptr[lo + 1:hi + 1] - parent_ptr[lo:hi]
        blocks = warp[parent_ids[parent_ptr[lo]:parent_ptr[hi]]] // warps_per_block
        chosen = np.full(hi - lo, -1, dtype=np.int64)
        has = counts > 0
        if has.any():
            # Least (block's least load, block) over each node group's parent blocks.
            key = block_load.min(axis=1)[blocks] * num_blocks + blocks
            firsts = (np.cumsum(counts) - counts)[has]
            chosen[has] = np.minimum.reduceat(key, firsts) % num_blocks
        placed = np.empty(hi - lo, dtype=np.int64)
        free = chosen < 0
        if free.any():
            placed[free] = _deal(nodes.nnz[lo:hi][free], load.copy(), turn_rank, turn)
        if has.any():
            by_block = np.argsort(chosen[has], kind="stable")
            block_of = chosen[has][by_block]
            rank = np.arange(len(block_of)) - np.searchsorted(block_of, block_of, side="left")
            warps_by_load = np.argsort(block_load, axis=1, kind="stable")
            local = warps_by_load[block_of, rank % warps_per_block]
            picked = np.empty(len(block_of), dtype=np.int64)
            picked[by_block] = block_of * warps_per_block + local
            placed[has] = picked
        warp[lo:hi] = placed
        np.add.at(load, placed, nodes.nnz[lo:hi])


def _node_parents(groups: RowGroups, nodes: NodeGroups) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr, ids)``: for each node group, the node groups its row groups depend on."""
    node_of_group = np.empty(groups.count, dtype=np.int64)
    node_of_group[nodes.members] = np.repeat(np.arange(nodes.count, dtype=np.int64), np.diff(nodes.ptr))
    per_group = np.diff(groups.ptr)[nodes.members]
    entries = ranges(groups.ptr[nodes.members], per_group)
    per_node = np.add.reduceat(per_group, nodes.ptr[:-1]) if nodes.count else np.zeros(0, np.int64)
    ptr = np.zeros(nodes.count + 1, dtype=np.int64)
    np.cumsum(per_node, out=ptr[1:])
    return ptr, node_of_group[groups.deps[entries]]


@dataclass(frozen=True, eq=False)
class SolvePlan:
    """Everything a persistent-grid SpTRSV kernel needs to know about one scheme on one system.

    Positions are those of the solve order after the scheme's optional reordering; the
    matrix row solved at position ``k`` is ``order[k]``.

    Attributes:
        schedule: the scheme.
        num_blocks: blocks of the persistent grid (one per SM).
        order: ``[n]`` matrix row of each position.
        rows: the row graph over positions (dependencies, entries per row).
        group_starts: ``[m + 1]`` row-group cuts over positions.
        group_level: ``[m]`` level of each row group after merging.
        group_per_thread: ``[m]`` whether the subwarp's threads solve the group's rows one
            each (mean entries per row ``<= sw_rnnz``) rather than sharing each row.
        nodes: the node groups (:class:`NodeGroups`).
        node_warp: ``[q]`` warp of each node group, ``block * warps_per_block + warp``.
        kernel_ptr: ``[K + 1]`` node-group cuts of the kernels, launched in order.
        kernel_waits: ``[K]`` whether the kernel's rows wait for their dependencies' flags.
        row_flag: ``[n]`` whether the row at each position writes its ready flag.
    """

    schedule: SptrsvSchedule
    num_blocks: int
    order: np.ndarray
    rows: RowGraph
    group_starts: np.ndarray
    group_level: np.ndarray
    group_per_thread: np.ndarray
    nodes: NodeGroups
    node_warp: np.ndarray
    kernel_ptr: np.ndarray
    kernel_waits: np.ndarray
    row_flag: np.ndarray

    @property
    def num_warps(self) -> int:
        return self.num_blocks * self.schedule.warps_per_block

    @property
    def num_kernels(self) -> int:
        return len(self.kernel_ptr) - 1


def plan(rows: RowGraph, row_level: np.ndarray, schedule: SptrsvSchedule, num_blocks: int,
         max_warps: int) -> SolvePlan:
    """Transform and schedule one system for one scheme.

    Args:
        rows: the system's row graph (:func:`.analysis.dependency_graph`), ``row_level`` its
            levels (:func:`.analysis.levels`); computed once per system, shared by schemes.
        schedule: the scheme (validated here).
        num_blocks: blocks of the persistent grid: the GPU's SM count.
        max_warps: the GPU's resident warps (SMs x resident threads per SM / 32), the unit
            of ``alpha_level``.
    """
    schedule.validate()
    if num_blocks < 1 or max_warps < 1:
        raise ValueError(f"num_blocks and max_warps must be >= 1, got {num_blocks} and {max_warps}")
    groups = row_groups(rows, row_level, schedule.merge, schedule.merge_rows, schedule.merge_thresh,
                        schedule.reorder)
    nodes = node_groups(groups, schedule.subwarps, schedule.grouping)
    kernel_ptr = partition(nodes.level, schedule.alpha_level, max_warps)
    parents = _node_parents(groups, nodes)
    node_warp = assign_warps(nodes, parents, kernel_ptr, schedule.warp_schedule, num_blocks,
                             schedule.warps_per_block)
    per_thread = groups.nnz <= schedule.sw_rnnz * groups.sizes
    kernel_levels = np.add.reduceat(np.diff(nodes.level, prepend=-1) > 0, kernel_ptr[:-1]) \
        if nodes.count else np.zeros(0, np.int64)
    waits = (kernel_levels > 1) | (not schedule.sync_elimination)
    row_flag = _row_flags(groups, nodes, kernel_ptr, waits, per_thread, schedule.sync_elimination)
    return SolvePlan(schedule=schedule, num_blocks=num_blocks, order=groups.rows.order,
                     rows=groups.rows, group_starts=groups.starts, group_level=groups.level,
                     group_per_thread=per_thread, nodes=nodes, node_warp=node_warp,
                     kernel_ptr=kernel_ptr, kernel_waits=waits, row_flag=row_flag)


def _row_flags(groups: RowGroups, nodes: NodeGroups, kernel_ptr: np.ndarray, waits: np.ndarray,
               per_thread: np.ndarray, sync_elimination: bool) -> np.ndarray:
    """A row writes its flag when a row that waits depends on it: a row of another group in
    a waiting kernel, or a row of its own group whose threads solve rows one each."""
    rows = groups.rows
    if not sync_elimination:
        return np.ones(rows.n, dtype=bool)
    group_of_position = np.repeat(np.arange(groups.count, dtype=np.int64), groups.sizes)
    node_of_group = np.empty(groups.count, dtype=np.int64)
    node_of_group[nodes.members] = np.repeat(np.arange(nodes.count, dtype=np.int64), np.diff(nodes.ptr))
    kernel_of_node = np.repeat(np.arange(len(kernel_ptr) - 1, dtype=np.int64), np.diff(kernel_ptr))
    dependent_group = np.repeat(group_of_position, np.diff(rows.ptr))
    dep_group = group_of_position[rows.deps]
    same = dep_group == dependent_group
    waiting = waits[kernel_of_node[node_of_group[dependent_group]]]
    needed = np.where(same, per_thread[dependent_group], waiting)
    flag = np.zeros(rows.n, dtype=bool)
    flag[rows.deps[needed]] = True
    return flag
