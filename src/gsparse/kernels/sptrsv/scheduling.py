"""Multi-hierarchy scheduling (AG-SpTRSV §4.4): row groups -> node groups -> kernels -> warps.

1. Grouping: each level's row groups are cut into *node groups* of up to ``subwarps`` row
   groups (one per subwarp; row groups of one level are independent, so a warp never
   waits on itself), in row order (``rg_sequential``) or by decreasing entries
   (``rg_balance``). Node groups are numbered level by level.
2. Kernel partitioning: a level with more than ``alpha_level x max_warps`` node groups is a
   kernel of its own; consecutive smaller levels share one. Kernels run in order.
3. Warp scheduling onto the persistent grid: :mod:`.warps`.

Sync elimination (§4.2.2) is decided here too: a kernel whose node groups all lie in one
level needs no waiting, and a row needs a ready flag only if a row that waits depends on it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .analysis import RowGraph, counting_order, ranges
from .schedule import SptrsvSchedule
from .transforms import RowGroups, row_groups
from .warps import assign_warps

__all__ = ["NodeGroups", "node_groups", "partition", "SolvePlan", "TransformCache", "plan"]


@dataclass(frozen=True, eq=False)
class NodeGroups:
    """Row groups cut into node groups, numbered level by level.

    Attributes:
        ptr: ``[q + 1]`` offsets into ``members``.
        members: ``[m]`` row groups of each node group, in subwarp order.
        level: ``[q]`` level of each node group.
        group_nnz: ``[m]`` stored entries of each row group (:attr:`RowGroups.nnz`).
    """

    ptr: np.ndarray
    members: np.ndarray
    level: np.ndarray
    group_nnz: np.ndarray

    @property
    def count(self) -> int:
        return len(self.ptr) - 1

    @functools.cached_property
    def nnz(self) -> np.ndarray:
        """``[q]`` stored entries of each node group (its warp's work), summed when first read:
        round robin never reads them, and a gather in level order costs milliseconds."""
        nnz = self.group_nnz[self.members]
        return np.add.reduceat(nnz, self.ptr[:-1]) if self.count < len(self.members) else nnz


def node_groups(groups: RowGroups, subwarps: int, grouping: str) -> NodeGroups:
    """Cut each level's row groups into node groups of up to ``subwarps`` (``rg_sequential``:
    in row order; ``rg_balance``: by decreasing entries, ties in row order)."""
    m = groups.count
    if grouping == "rg_sequential":
        order, per_level = counting_order(groups.level)
    elif grouping == "rg_balance":
        order = np.lexsort((np.arange(m, dtype=np.int64), -groups.nnz, groups.level))
        per_level = np.bincount(groups.level) if m else np.zeros(0, np.int64)
    else:
        raise ValueError(f"grouping must be 'rg_sequential' or 'rg_balance', got {grouping!r}")
    # The cuts follow from the levels' sizes alone: level l's row groups, from its first
    # member on, are cut every `subwarps` (arrays over levels and node groups, not members).
    nodes_per_level = -(-per_level // subwarps)
    level = np.repeat(np.arange(len(per_level), dtype=np.int64), nodes_per_level)
    first_node = np.cumsum(nodes_per_level) - nodes_per_level
    first_member = np.cumsum(per_level) - per_level
    firsts = first_member[level] + subwarps * (np.arange(len(level), dtype=np.int64) - first_node[level])
    return NodeGroups(ptr=np.append(firsts, np.int64(m)), members=order.astype(np.int64, copy=False), level=level,
                      group_nnz=groups.nnz)


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
        rows: the row graph over positions (dependencies, entries per row; ``rows.order``
            is the matrix row of each position).
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
    def order(self) -> np.ndarray:
        """``[n]`` the matrix row of each position."""
        return self.rows.order

    @property
    def num_warps(self) -> int:
        return self.num_blocks * self.schedule.warps_per_block

    @property
    def num_kernels(self) -> int:
        return len(self.kernel_ptr) - 1


class TransformCache:
    """The parts of a plan that schemes of one system share, each computed once: the row
    groups of each transform (merge, its parameters, reordering) and the node groups of each
    transform, subwarp count and grouping. For measuring many schemes of one system (the
    scheme sweep): the transforms are most of a plan's host time, and 54 schemes share 3.

    Args:
        rows, row_level: the system's row graph and its levels.
    """

    def __init__(self, rows: RowGraph, row_level: np.ndarray) -> None:
        self.rows, self.row_level = rows, row_level
        self._groups: dict[tuple, RowGroups] = {}
        self._nodes: dict[tuple, NodeGroups] = {}

    def row_groups(self, schedule: SptrsvSchedule) -> RowGroups:
        key = (schedule.merge, schedule.merge_rows, schedule.merge_thresh, schedule.reorder)
        if key not in self._groups:
            self._groups[key] = row_groups(self.rows, self.row_level, *key)
        return self._groups[key]

    def node_groups(self, schedule: SptrsvSchedule) -> NodeGroups:
        key = (schedule.merge, schedule.merge_rows, schedule.merge_thresh, schedule.reorder, schedule.subwarps,
               schedule.grouping)
        if key not in self._nodes:
            self._nodes[key] = node_groups(self.row_groups(schedule), schedule.subwarps, schedule.grouping)
        return self._nodes[key]


def plan(rows: RowGraph, row_level: np.ndarray, schedule: SptrsvSchedule, num_blocks: int,
         max_warps: int, cache: TransformCache | None = None) -> SolvePlan:
    """Transform and schedule one system for one scheme.

    Args:
        rows: the system's row graph (:func:`.analysis.dependency_graph`), ``row_level`` its
            levels (:func:`.analysis.levels`); computed once per system, shared by schemes.
        schedule: the scheme (validated here).
        num_blocks: blocks of the persistent grid: the GPU's SM count.
        max_warps: the GPU's resident warps (SMs x resident threads per SM / 32), the unit
            of ``alpha_level``.
        cache: the transforms of this system's earlier schemes (its ``rows`` and
            ``row_level`` must be these).
    """
    schedule.validate()
    if num_blocks < 1 or max_warps < 1:
        raise ValueError(f"num_blocks and max_warps must be >= 1, got {num_blocks} and {max_warps}")
    if cache is None:
        cache = TransformCache(rows, row_level)
    elif cache.rows is not rows or cache.row_level is not row_level:
        raise ValueError("cache holds the transforms of another system")
    groups = cache.row_groups(schedule)
    nodes = cache.node_groups(schedule)
    kernel_ptr = partition(nodes.level, schedule.alpha_level, max_warps)
    parents = _node_parents(groups, nodes) if schedule.warp_schedule == "ws_locality" else None
    nnz = None if schedule.warp_schedule == "ws_rr" else nodes.nnz
    node_warp = assign_warps(nodes.level, nnz, parents, kernel_ptr, schedule.warp_schedule,
                             num_blocks, schedule.warps_per_block)
    per_thread = groups.nnz <= schedule.sw_rnnz * groups.sizes
    kernel_levels = np.add.reduceat(np.diff(nodes.level, prepend=-1) > 0, kernel_ptr[:-1]) \
        if nodes.count else np.zeros(0, np.int64)
    waits = (kernel_levels > 1) | (not schedule.sync_elimination)
    row_flag = _row_flags(groups, nodes, kernel_ptr, waits, per_thread, schedule.sync_elimination,
                          schedule.subwarp_width)
    return SolvePlan(schedule=schedule, num_blocks=num_blocks, rows=groups.rows, group_starts=groups.starts,
                     group_level=groups.level, group_per_thread=per_thread, nodes=nodes, node_warp=node_warp,
                     kernel_ptr=kernel_ptr, kernel_waits=waits, row_flag=row_flag)


def _row_flags(groups: RowGroups, nodes: NodeGroups, kernel_ptr: np.ndarray, waits: np.ndarray,
               per_thread: np.ndarray, sync_elimination: bool, width: int) -> np.ndarray:
    """A row writes its flag when a row that waits depends on it: a row of another group in
    a waiting kernel, or a row of its own group whose threads solve rows one each, solved by
    another of the subwarp's ``width`` threads (a thread reads its own rows in program order)."""
    rows = groups.rows
    if not sync_elimination:
        return np.ones(rows.n, dtype=bool)
    flag = np.zeros(rows.n, dtype=bool)
    if not groups.inner.size and waits.all():  # (one kernel, say) every dependency is waited on
        flag[rows.deps] = True
        return flag
    if waits.all():
        needed = np.ones(len(rows.deps), dtype=bool)
    else:
        # Kernels are runs of whole levels: a group waits when the kernel of its level does,
        # the last one starting at or below it.
        group_waits = waits[np.searchsorted(nodes.level[kernel_ptr[:-1]], groups.level, side="right") - 1]
        needed = np.repeat(group_waits, np.diff(rows.ptr[groups.starts]))
    inner = groups.inner
    if inner.size:  # merged groups: a dependency inside its dependent's group is waited on
        needed[inner] = False  # by the group's threads only, when they solve rows one each
        if width > 1 and per_thread.any():  # else none is needed: already so
            dependent = np.repeat(np.arange(rows.n, dtype=np.int64), np.diff(rows.ptr))[inner]
            group = np.repeat(np.arange(groups.count, dtype=np.int64), groups.sizes)[dependent]
            # Lanes are positions modulo the width (a power of two), counted from the group's
            # first position.
            needed[inner] = per_thread[group] & ((dependent - rows.deps[inner]) & (width - 1) != 0)
    flag[np.compress(needed, rows.deps)] = True
    return flag
