"""The SpTRSV preparation in PyTorch ops, for the factor's own device: the analysis
(:func:`.plan.analyse` less the levels) and the plan of schemes but ``ws_locality``
(:func:`.scheduling.plan` and :func:`.plan._schedule_arrays`), array for array equal to the
NumPy ones.

:class:`~gsparse.kernels.sptrsv.FactorPlans` prepares its analysed solves with these
(:mod:`.device_analysis`, :class:`.plan.SptrsvPlan`): on a GPU about two hundred small
kernels where the NumPy preparation took tens of milliseconds at 500K rows, plus the
copies; ``scripts/sptrsv_device_prep.py`` measures both. Every step is data-parallel over
rows, entries or node groups: sorts (stable, so that the orders are NumPy's), prefix sums,
gathers, scatters of one value and searches. The levels are not here: the caller passes
them (on a GPU the levels kernel, :func:`.natural.dag_levels`, through
:class:`.device_analysis.DagLevels`). The host is read only where a size decides an
allocation (the dependencies, the levels, the node groups, the segments) or a check
raises; each such read is marked ``sync``.

Scope (else ``NotImplementedError``): ``ws_rr`` and ``ws_balance`` warps, with every
transform, grouping, kernel partition and sync elimination. Merged row groups need the
levels of the contracted DAG, which the caller passes (``group_levels``). ``ws_balance``
deals a kernel of more node groups than warps in rounds of ``W``, one after another (a few
kernels each: 60 rounds at 500K rows on an H100). ``ws_locality`` places each level's node
groups by their parents' blocks and the loads so far, level after level: on the host.

The features' integer moments are NumPy's to the bit; ``dep_dist``, a float sum, to
rounding (the device adds its terms in another order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .schedule import SptrsvSchedule

__all__ = ["TorchRowGraph", "TorchSolvePlan", "dag_longest_chain", "dependency_graph", "longest_chain",
           "matrix_features",
           "reorder_by_level", "solve_plan"]


@dataclass(frozen=True, eq=False)
class TorchRowGraph:
    """:class:`.analysis.RowGraph` as int64 tensors: ``order``, ``ptr``, ``deps``, ``row_nnz``."""

    order: torch.Tensor
    ptr: torch.Tensor
    deps: torch.Tensor
    row_nnz: torch.Tensor

    @property
    def n(self) -> int:
        return self.order.numel()


def _exclusive_cumsum(x: torch.Tensor) -> torch.Tensor:
    """``[len(x) + 1]``: 0, then the running sums of ``x`` (int64)."""
    out = torch.zeros(x.numel() + 1, dtype=torch.int64, device=x.device)
    torch.cumsum(x, 0, out=out[1:])
    return out


def _ranges(starts: torch.Tensor, counts: torch.Tensor, total: int) -> torch.Tensor:
    """:func:`.analysis.ranges` for a known ``total = counts.sum()``."""
    device = counts.device
    if total == 0:
        return torch.zeros(0, dtype=torch.int64, device=device)
    ends = torch.cumsum(counts, 0)
    out = torch.repeat_interleave(starts - (ends - counts), counts, output_size=total)
    return out + torch.arange(total, dtype=torch.int64, device=device)


def _repeat_index(counts: torch.Tensor, total: int) -> torch.Tensor:
    """``repeat(arange(len(counts)), counts)`` for a known ``total``."""
    index = torch.arange(counts.numel(), dtype=torch.int64, device=counts.device)
    return torch.repeat_interleave(index, counts, output_size=total)


def _segment_sum(x: torch.Tensor, ptr: torch.Tensor) -> torch.Tensor:
    """Sums of ``x[ptr[i]:ptr[i + 1]]`` (integers: exact, whatever the order)."""
    running = _exclusive_cumsum(x)
    return running[ptr[1:]] - running[ptr[:-1]]


def _compress(x: torch.Tensor, keep: torch.Tensor, count: int) -> torch.Tensor:
    """``x[keep]`` for a known ``count = keep.sum()``, without a read of the host: each kept
    value is scattered to its rank among the kept, the others to one spare slot."""
    if count == x.numel():
        return x
    rank = torch.cumsum(keep, 0) - 1
    out = torch.empty(count + 1, dtype=x.dtype, device=x.device)
    out.scatter_(0, torch.where(keep, rank, count), x)
    return out[:count]


def dependency_graph(crow: torch.Tensor, col: torch.Tensor, lower: bool) -> TorchRowGraph:
    """:func:`.analysis.dependency_graph` of the int64 CSR ``(crow, col)``. One ``sync``:
    the check that no entry lies on the wrong side (it also sizes ``deps``)."""
    device = crow.device
    n = crow.numel() - 1
    nnz = col.numel()
    counts = crow.diff()
    positions = torch.arange(n, dtype=torch.int64, device=device)
    if lower:
        order, row_nnz, entry_ptr, position_of_col = positions, counts, crow, col
    else:
        order = positions.flip(0)
        row_nnz = counts.flip(0)
        entry_ptr = _exclusive_cumsum(row_nnz)
        position_of_col = (n - 1) - col[_ranges(crow[order], row_nnz, nnz)]
    position_of_entry = torch.repeat_interleave(positions, row_nnz, output_size=nnz)
    wrong = position_of_col > position_of_entry
    diagonal = position_of_col == position_of_entry
    # sync: a single read decides both the error and the size of deps.
    wrong_count, diagonal_count = torch.stack([wrong.sum(), diagonal.sum()]).tolist()
    if wrong_count:
        side = "upper" if lower else "lower"
        raise ValueError(f"the pattern has entries on the {side} side of the diagonal: "
                         f"it is not {'lower' if lower else 'upper'} triangular")
    # A row's entries are contiguous: the diagonal entries before its first are a running
    # count over the entries, read at the rows' starts.
    diagonal_before = _exclusive_cumsum(diagonal)[entry_ptr]
    deps = _compress(position_of_col, ~diagonal, nnz - diagonal_count)
    return TorchRowGraph(order=order, ptr=entry_ptr - diagonal_before, deps=deps, row_nnz=row_nnz)


def _nearest_dependencies(rows: TorchRowGraph) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`.analysis.nearest_dependencies`."""
    ptr, deps = rows.ptr, rows.deps
    has = ptr[1:] != ptr[:-1]
    if deps.numel() == 0:
        return has, torch.zeros(rows.n, dtype=torch.int64, device=ptr.device)
    # Upper when solved bottom up; decided on the device, so that nothing is read back.
    index = torch.where(rows.order[0] > rows.order[-1], ptr[:-1], ptr[1:] - 1)
    return has, deps[index.clamp(0, deps.numel() - 1)]


def longest_chain(rows: TorchRowGraph) -> int:
    """:func:`.analysis.longest_chain`. One ``sync``: the answer."""
    has, nearest = _nearest_dependencies(rows)
    if rows.n == 0:
        return 0
    return _longest_run(has & (nearest == torch.arange(-1, rows.n - 1, dtype=torch.int64, device=has.device)))


def dag_longest_chain(ptr: torch.Tensor, deps: torch.Tensor) -> int:
    """The most consecutive nodes of which each but the first depends on the one before, in a
    DAG whose node ``k`` depends on ``deps[ptr[k]:ptr[k + 1]]`` in any order (a merging
    scheme's row groups list theirs by member): :func:`longest_chain` without its sorted
    lists. One ``sync``: the answer."""
    n = ptr.numel() - 1
    if n == 0:
        return 0
    dependent = _repeat_index(ptr.diff(), deps.numel())
    return _longest_run(_segment_sum(deps == dependent - 1, ptr) > 0)


def _longest_run(chained: torch.Tensor) -> int:
    """One more than the longest run of ``chained`` nodes (each chained to the one before).
    One ``sync``."""
    n = chained.numel()
    # The chained nodes after the same number of unchained ones form one run: count each
    # run's nodes by that number (a prefix sum and a scatter-add, where a running maximum
    # of the last unchained node took 1-2 ms at 500K nodes on an H100).
    run = torch.cumsum(~chained, 0)
    length = torch.zeros(n + 1, dtype=torch.int64, device=chained.device).index_add_(0, run, chained.long())
    return min(n, int(length.max()) + 1)  # sync


def matrix_features(rows: TorchRowGraph, row_level: torch.Tensor) -> np.ndarray:
    """:func:`.features.matrix_features`: ``[10]`` float64 on the host; one ``sync``, 8 values.

    The counts' sums are integers, exact in any order: NumPy's to the bit. ``dep_dist`` is
    a float64 sum on the device, NumPy's to rounding (its order of additions differs): reading
    the ``n`` distances back for NumPy's sum took 2-3 ms of a 500K-row preparation."""
    m = rows.n
    if m == 0:
        return np.zeros(10, dtype=np.float64)
    row_nnz = rows.row_nnz
    device = row_nnz.device
    # Sized by the rows (levels <= m): the unused levels add nothing to the sums and maxima.
    per_level = torch.zeros(m, dtype=torch.int64, device=device).index_add_(0, row_level, row_nnz)
    has, nearest = _nearest_dependencies(rows)
    distance = torch.arange(m, dtype=torch.int64, device=device) - nearest
    inverse_sum = torch.where(has, 1.0 / distance.clamp(min=1).double(), 0.0).sum()
    # The float's bits travel with the integers, in one read.
    sums = torch.stack([row_nnz.sum(), (row_nnz * row_nnz).sum(), row_nnz.max(), per_level.sum(),
                        (per_level * per_level).sum(), per_level.max(), row_level.max() + 1,
                        inverse_sum.view(torch.int64)])
    read = sums.cpu().numpy()  # sync: the only one
    nnz_sum, nnz_square, nnz_max, level_sum, level_square, level_max, levels = read[:7].tolist()
    nnz = float(nnz_sum)
    rnnz = nnz / m
    variance = max(float(nnz_square) / m - rnnz * rnnz, 0.0)
    rnnz_cov = variance ** 0.5 / rnnz if rnnz > 0 else 0.0
    # per_level's values and sums are integers below 2**53: as float64, NumPy's exactly.
    lnnz = float(level_sum) / levels
    level_variance = max(float(level_square) / levels - lnnz * lnnz, 0.0)
    lnnz_cov = level_variance ** 0.5 / lnnz if lnnz > 0 else 0.0
    dep_dist = float(read[7:].view(np.float64)[0]) / m
    return np.array([m, nnz, rnnz, float(nnz_max), rnnz_cov, lnnz, float(level_max), lnnz_cov, levels, dep_dist],
                    dtype=np.float64)


def reorder_by_level(rows: TorchRowGraph, level: torch.Tensor) -> tuple[TorchRowGraph, torch.Tensor]:
    """:func:`.analysis.reorder_by_level`."""
    device = level.device
    perm = torch.sort(level, stable=True).indices
    new_position = torch.empty_like(perm)
    new_position[perm] = torch.arange(rows.n, dtype=torch.int64, device=device)
    counts = rows.ptr.diff()[perm]
    entries = _ranges(rows.ptr[perm], counts, rows.deps.numel())
    reordered = TorchRowGraph(order=rows.order[perm], ptr=_exclusive_cumsum(counts),
                              deps=new_position[rows.deps[entries]], row_nnz=rows.row_nnz[perm])
    return reordered, level[perm]


def _merge_starts(row_nnz: torch.Tensor, merge: str, rb: int, thresh: int) -> torch.Tensor:
    """The row-group cuts of :mod:`.transforms`' merges (``merge_fixed``, ``merge_avg``,
    ``merge_thresh``). One ``sync`` but for ``merge_fixed``: the number of groups."""
    device = row_nnz.device
    n = row_nnz.numel()
    # Writes of one element take a scalar from the host: on a GPU a blocking copy (a sync).
    # Scalars as kernel arguments instead: a clamp, fills, index_fill_.
    blocks = torch.arange(0, n + rb, rb, dtype=torch.int64, device=device).clamp_(max=n)
    if merge == "merge_fixed":
        return blocks
    cut = torch.zeros(n + 1, dtype=torch.bool, device=device)
    if merge == "merge_avg":
        sizes = blocks.diff()
        mean = _segment_sum(row_nnz, blocks).double() / sizes.double()
        cut.index_fill_(0, blocks, True)
        cut[:n] |= torch.repeat_interleave(mean > thresh, sizes, output_size=n)
    elif merge == "merge_thresh":
        long = row_nnz > thresh
        cut[::max(n, 1)].fill_(True)  # the first and the last
        cut[:n] |= long
        cut[1:] |= long
        index = torch.arange(n, dtype=torch.int64, device=device)
        # Within a run of short rows (started by a cut), cut again every rb rows.
        run_start = torch.cummax(torch.where(cut[:n], index, 0), 0).values if n else index
        cut[:n] |= (index - run_start) % rb == 0
    else:
        raise ValueError(f"merge must be 'merge_fixed', 'merge_avg' or 'merge_thresh', got {merge!r}")
    return cut.nonzero().squeeze(1)  # sync


@dataclass(frozen=True, eq=False)
class _RowGroups:
    """:class:`.transforms.RowGroups` as tensors (``ptr`` and ``deps`` only where merged)."""

    rows: TorchRowGraph
    starts: torch.Tensor
    level: torch.Tensor
    nnz: torch.Tensor
    inner: torch.Tensor

    @property
    def count(self) -> int:
        return self.starts.numel() - 1


def _row_groups(rows: TorchRowGraph, row_level: torch.Tensor, schedule: SptrsvSchedule,
                group_levels: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None) -> _RowGroups:
    """:func:`.transforms.row_groups`; merged groups contracted (:func:`.analysis.contract`)
    and their levels from ``group_levels(ptr, deps)``. One ``sync`` where merged: the count
    of the dependencies inside groups."""
    if schedule.reorder:
        rows, row_level = reorder_by_level(rows, row_level)
    starts = _merge_starts(rows.row_nnz, schedule.merge, schedule.merge_rows, schedule.merge_thresh)
    device = starts.device
    n, e = rows.n, rows.deps.numel()
    if starts.numel() == n + 1:
        return _RowGroups(rows, starts, row_level, rows.row_nnz, torch.zeros(0, dtype=torch.int64, device=device))
    if group_levels is None:
        raise NotImplementedError(f"merged row groups ({schedule.merge}({schedule.merge_rows})) need the levels "
                                  "of the contracted DAG: pass group_levels")
    sizes = starts.diff()
    entry_starts = rows.ptr[starts]
    # A group's entries are contiguous, and a dependency lies inside its dependent's group
    # exactly when it is not before the group's first position.
    inside = rows.deps >= torch.repeat_interleave(starts[:-1], entry_starts.diff(), output_size=e)
    inside_before = _exclusive_cumsum(inside)
    inner_count = int(inside_before[-1])  # sync
    index = torch.arange(e, dtype=torch.int64, device=device)
    inner = _compress(index, inside, inner_count)
    ptr = entry_starts - inside_before[entry_starts]
    deps = _repeat_index(sizes, n)[_compress(rows.deps, ~inside, e - inner_count)]
    return _RowGroups(rows, starts, group_levels(ptr, deps), _segment_sum(rows.row_nnz, starts), inner)


@dataclass(frozen=True, eq=False)
class TorchSolvePlan:
    """The arrays of :class:`.scheduling.SolvePlan` (``rows`` after the optional reordering;
    the node groups' ``node_ptr``, ``node_members``, ``node_level``, ``node_nnz``) and of
    :func:`.plan._schedule_arrays` (``arrays``), as tensors on the factor's device; its
    ``schedule``, ``num_blocks``, ``order``, ``num_warps`` and ``num_kernels`` as
    :class:`~.scheduling.SolvePlan`'s."""

    schedule: SptrsvSchedule
    num_blocks: int
    rows: TorchRowGraph
    group_starts: torch.Tensor
    group_level: torch.Tensor
    group_per_thread: torch.Tensor
    node_ptr: torch.Tensor
    node_members: torch.Tensor
    node_level: torch.Tensor
    node_nnz: torch.Tensor
    node_warp: torch.Tensor
    kernel_ptr: torch.Tensor
    kernel_waits: torch.Tensor
    row_flag: torch.Tensor
    arrays: dict[str, torch.Tensor]

    @property
    def order(self) -> torch.Tensor:
        """``[n]`` the matrix row of each position."""
        return self.rows.order

    @property
    def num_warps(self) -> int:
        return self.num_blocks * self.schedule.warps_per_block

    @property
    def num_kernels(self) -> int:
        return self.kernel_ptr.numel() - 1


def _node_groups(level: torch.Tensor, nnz: torch.Tensor, levels: int, subwarps: int,
                 grouping: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ptr, members, level)`` of :func:`.scheduling.node_groups`, and the node groups of
    each level. One ``sync``: the count."""
    device = level.device
    m = level.numel()
    if grouping == "rg_sequential":
        order = torch.sort(level, stable=True).indices
    elif grouping == "rg_balance":
        # NumPy's lexsort((arange, -nnz, level)): by level, then decreasing entries, then index.
        order = torch.sort(-nnz, stable=True).indices
        order = order[torch.sort(level[order], stable=True).indices]
    else:
        raise ValueError(f"grouping must be 'rg_sequential' or 'rg_balance', got {grouping!r}")
    per_level = torch.zeros(levels, dtype=torch.int64, device=device).index_add_(0, level, torch.ones_like(level))
    nodes_per_level = -torch.div(-per_level, subwarps, rounding_mode="floor")
    first_node = _exclusive_cumsum(nodes_per_level)
    q = int(first_node[-1])  # sync
    node_level = _repeat_index(nodes_per_level, q)
    first_member = _exclusive_cumsum(per_level)[:-1]
    firsts = first_member[node_level] + subwarps * (torch.arange(q, dtype=torch.int64, device=device)
                                                    - first_node[node_level])
    ptr = torch.cat([firsts, torch.full((1,), m, dtype=torch.int64, device=device)])
    return ptr, order, node_level, nodes_per_level


def _partition(node_level: torch.Tensor, counts: torch.Tensor, alpha_level: float, max_warps: int) -> torch.Tensor:
    """:func:`.scheduling.partition` of node groups of levels ``node_level``, ``counts`` of
    each level (every level has some). One ``sync``: the number of kernels."""
    device = node_level.device
    levels = counts.numel()
    if node_level.numel() == 0:
        return torch.zeros(1, dtype=torch.int64, device=device)
    large = counts.double() > alpha_level * max_warps
    first = torch.ones(levels, dtype=torch.bool, device=device)
    first[1:] = large[1:] | large[:-1]
    level_ptr = torch.searchsorted(node_level, torch.arange(levels + 1, dtype=torch.int64, device=device))
    cuts = torch.cat([first.nonzero().squeeze(1), torch.full((1,), levels, dtype=torch.int64, device=device)])
    return level_ptr[cuts]


def _turn(num_blocks: int, warps_per_block: int, device: torch.device) -> torch.Tensor:
    """The warps in turn (``warps._Grid.turn``)."""
    t = torch.arange(num_blocks * warps_per_block, dtype=torch.int64, device=device)
    return (t % num_blocks) * warps_per_block + torch.div(t, num_blocks, rounding_mode="floor")


def _deal(nnz: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
    """``warps._Grid.deal`` from zero loads: rounds of ``W`` node groups, each round's
    largest to the least-loaded warp (ties in turn). Sequential over the rounds (the loads
    carry over), data-parallel within one: a handful of kernels per round."""
    warps = turn.numel()
    turn_rank = torch.empty_like(turn)
    turn_rank[turn] = torch.arange(warps, dtype=torch.int64, device=turn.device)
    load = torch.zeros(warps, dtype=torch.int64, device=turn.device)
    warp = torch.empty_like(nnz)
    for first in range(0, nnz.numel(), warps):
        size = nnz[first:first + warps]
        # NumPy's lexsort((turn_rank, load)): the key is unique, so any sort gives its order
        # (zero loads give the turn itself).
        by_load = torch.sort(load * warps + turn_rank).indices
        largest_first = torch.sort(-size, stable=True).indices
        chosen = torch.empty_like(size)
        chosen[largest_first] = by_load[:size.numel()]
        warp[first:first + warps] = chosen
        load.index_add_(0, chosen, size)
    return warp


def _assign_warps(node_nnz: torch.Tensor, kernel_ptr: torch.Tensor, strategy: str, num_blocks: int,
                  warps_per_block: int) -> torch.Tensor:
    """:func:`.warps.assign_warps` for ``ws_rr`` and ``ws_balance``. ``ws_balance`` reads the
    kernel cuts (``sync``) when a kernel has more node groups than warps."""
    device = node_nnz.device
    q = node_nnz.numel()
    turn = _turn(num_blocks, warps_per_block, device)
    warps = turn.numel()
    kernel_of_node = _repeat_index(kernel_ptr.diff(), q)
    in_kernel = torch.arange(q, dtype=torch.int64, device=device) - kernel_ptr[kernel_of_node]
    if strategy == "ws_rr":
        return turn[in_kernel % warps]
    # A kernel of at most W node groups is one round with zero loads: largest first, in turn.
    # NumPy's lexsort((arange, -nnz, kernel)): by kernel, then decreasing entries, then index.
    by_size = torch.sort(-node_nnz, stable=True).indices
    by_size = by_size[torch.sort(kernel_of_node[by_size], stable=True).indices]
    rank = torch.empty_like(in_kernel)
    rank[by_size] = in_kernel
    warp = turn[rank % warps]
    cuts = kernel_ptr.tolist()  # sync
    for a, b in zip(cuts[:-1], cuts[1:]):
        if b - a > warps:
            warp[a:b] = _deal(node_nnz[a:b], turn)
    return warp


def _row_flags(groups: _RowGroups, node_level: torch.Tensor, kernel_ptr: torch.Tensor, waits: torch.Tensor,
               per_thread: torch.Tensor, sync_elimination: bool, width: int) -> torch.Tensor:
    """``scheduling._row_flags``."""
    rows = groups.rows
    device = rows.ptr.device
    if not sync_elimination:
        return torch.ones(rows.n, dtype=torch.bool, device=device)
    e = rows.deps.numel()
    if waits.numel() == 1:  # one kernel: a wait of every dependency or of none
        needed = waits.expand(e).clone()
    else:
        # A group waits when the kernel of its level does, the last one starting at or below it.
        kernel_first_level = node_level[kernel_ptr[:-1]]
        group_waits = waits[torch.searchsorted(kernel_first_level, groups.level, right=True) - 1]
        needed = torch.repeat_interleave(group_waits, rows.ptr[groups.starts].diff(), output_size=e)
    inner = groups.inner
    if inner.numel():  # a dependency inside its dependent's group is waited on by the group's
        # threads only, when they solve rows one each and another lane solved it.
        if width > 1:
            dependent = _repeat_index(rows.ptr.diff(), e)[inner]
            group = _repeat_index(groups.starts.diff(), rows.n)[dependent]
            lanes_differ = ((dependent - rows.deps[inner]) & (width - 1)) != 0
            needed[inner] = per_thread[group] & lanes_differ
        else:  # one thread per group: no other lane (a fill: an assigned scalar is a host copy)
            needed.index_fill_(0, inner, False)
    # A row's flag is the largest of its dependents' needs: every write of a row agrees.
    flag = torch.zeros(rows.n, dtype=torch.int32, device=device)
    flag.scatter_reduce_(0, rows.deps, needed.int(), "amax")
    return flag.bool()


def _schedule_arrays(node_ptr: torch.Tensor, node_members: torch.Tensor, node_warp: torch.Tensor,
                     kernel_ptr: torch.Tensor, waits: torch.Tensor, num_warps: int) -> dict[str, torch.Tensor]:
    """:func:`.plan._schedule_arrays`. One ``sync``: the number of segments."""
    device = node_ptr.device
    q = node_ptr.numel() - 1
    kernels = kernel_ptr.numel() - 1
    kernel_of_node = _repeat_index(kernel_ptr.diff(), q)
    key = kernel_of_node * num_warps + node_warp
    key, perm = torch.sort(key, stable=True)
    counts = node_ptr.diff()[perm]
    new_ptr = _exclusive_cumsum(counts)
    seg_first = torch.ones(q, dtype=torch.bool, device=device)
    seg_first[1:] = key[1:] != key[:-1]
    seg_first = seg_first.nonzero().squeeze(1)  # sync
    bounds = torch.searchsorted(torch.div(key[seg_first], num_warps, rounding_mode="floor"),
                                torch.arange(kernels + 1, dtype=torch.int64, device=device))
    parts = torch.stack([bounds[:-1], bounds[1:], waits.long()], dim=1)
    return {
        "seg_warp": node_warp[perm][seg_first],
        "seg_start": torch.cat([seg_first, torch.full((1,), q, dtype=torch.int64, device=device)]),
        "node_ptr": new_ptr,
        "slot_group": node_members[_ranges(node_ptr[perm], counts, node_members.numel())],
        "parts": parts,
    }


def solve_plan(rows: TorchRowGraph, row_level: torch.Tensor, schedule: SptrsvSchedule, num_blocks: int,
               max_warps: int, levels: int | None = None,
               group_levels: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None) -> TorchSolvePlan:
    """:func:`.scheduling.plan` then :func:`.plan._schedule_arrays`, for a scheme of the
    module's scope (not ``ws_locality``).

    Args:
        levels: the number of levels where known (the features' ``layer_num``), else read.
        group_levels: ``(ptr, deps) -> [m]`` int64 levels of a DAG of row groups
            (:func:`.analysis.levels`' contract); needed by merging schemes only.

    Four to six ``sync`` reads, each a size."""
    schedule.validate()
    if schedule.warp_schedule == "ws_locality":
        raise NotImplementedError("ws_locality places node groups level by level after their parents: "
                                  "on the host")
    device = row_level.device
    groups = _row_groups(rows, row_level, schedule, group_levels)
    rows = groups.rows
    m = groups.count
    if levels is None or m != rows.n:  # contracted groups have levels of their own
        levels = int(groups.level.max()) + 1 if m else 0  # sync
    node_ptr, members, node_level, per_level = _node_groups(groups.level, groups.nnz, levels, schedule.subwarps,
                                                            schedule.grouping)
    q = node_level.numel()
    node_nnz = groups.nnz[members]
    if q < m:
        node_nnz = _segment_sum(node_nnz, node_ptr)
    kernel_ptr = _partition(node_level, per_level, schedule.alpha_level, max_warps)
    node_warp = _assign_warps(node_nnz, kernel_ptr, schedule.warp_schedule, num_blocks, schedule.warps_per_block)
    per_thread = groups.nnz.double() <= float(schedule.sw_rnnz) * groups.starts.diff().double()
    if q:
        new_level = torch.ones(q, dtype=torch.int64, device=device)
        new_level[1:] = (node_level[1:] > node_level[:-1]).long()
        kernel_levels = _segment_sum(new_level, kernel_ptr)
    else:
        kernel_levels = torch.zeros(0, dtype=torch.int64, device=device)
    waits = (kernel_levels > 1) | (not schedule.sync_elimination)
    row_flag = _row_flags(groups, node_level, kernel_ptr, waits, per_thread, schedule.sync_elimination,
                          schedule.subwarp_width)
    arrays = _schedule_arrays(node_ptr, members, node_warp, kernel_ptr, waits,
                              num_blocks * schedule.warps_per_block)
    return TorchSolvePlan(schedule=schedule, num_blocks=num_blocks, rows=rows, group_starts=groups.starts, group_level=groups.level,
                          group_per_thread=per_thread, node_ptr=node_ptr, node_members=members, node_level=node_level,
                          node_nnz=node_nnz, node_warp=node_warp, kernel_ptr=kernel_ptr, kernel_waits=waits,
                          row_flag=row_flag, arrays=arrays)
