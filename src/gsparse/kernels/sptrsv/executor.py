"""The CPU oracle of a scheduled solve: runs a :class:`.scheduling.SolvePlan` in the order the
persistent-grid kernel would, and proves that no row reads a value before it is final.

The model of the GPU kernel it follows:

- Kernels run one after another; what one kernel wrote is final for the next.
- Inside a kernel every warp runs its node groups in order. A warp of a *waiting* kernel
  starts a node group once every row that the group's rows depend on, outside their own
  row group, has written its ready flag. A kernel without waiting (sync elimination)
  starts everything at once and reads without checking.
- A subwarp solves its row group's rows in order, so a row may read the rows of its own
  group solved before it (when the group's threads solve rows one each, those rows'
  flags must be written: the threads wait on each other through them).
- Rows are solved as ``x_i = (b_i - sum_j A_ij x_j) / A_ii``, the sum in storage order;
  with early division, as a product with the reciprocal ``1 / A_ii``.

The executor advances all warps in rounds: in each round every warp whose next node group
may start runs it. A round in which no warp may start is a deadlock; a read of a row that
is not final yet (possible only where waiting was eliminated) is a premature read. Both
raise :class:`ScheduleError` naming the rows, so a plan that passes here is safe to run
with any interleaving the GPU picks: each check holds at the moment of the read.
"""

from __future__ import annotations

import numpy as np

from .analysis import levels, ranges
from .schedule import NaturalOrderSchedule
from .scheduling import SolvePlan

__all__ = ["ScheduleError", "execute", "execute_natural"]


class ScheduleError(RuntimeError):
    """A plan that would deadlock or read a value before it is final."""


class _System:
    """The matrix solved, in the plan's positions: off-diagonal entries per position and the
    diagonal."""

    def __init__(self, order: np.ndarray, crow: np.ndarray, col: np.ndarray, values: np.ndarray,
                 unit_diagonal: bool) -> None:
        n = len(order)
        position_of_row = np.empty(n, dtype=np.int64)
        position_of_row[order] = np.arange(n, dtype=np.int64)
        counts = np.diff(crow)[order]
        entries = ranges(crow[order], counts)
        owner = np.repeat(np.arange(n, dtype=np.int64), counts)
        on_diagonal = col[entries] == order[owner]
        self.diagonal = np.ones(n, dtype=values.dtype)
        if not unit_diagonal:
            self.diagonal = np.zeros(n, dtype=values.dtype)
            np.add.at(self.diagonal, owner[on_diagonal], values[entries[on_diagonal]])
        off = ~on_diagonal
        self.ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner[off], minlength=n), out=self.ptr[1:])
        self.dep = position_of_row[col[entries[off]]]
        self.value = values[entries[off]]

    def solve(self, positions: np.ndarray, x: np.ndarray, rhs: np.ndarray, early_division: bool) -> None:
        """``x[positions]`` from the current ``x`` (which must hold their dependencies)."""
        counts = self.ptr[positions + 1] - self.ptr[positions]
        entries = ranges(self.ptr[positions], counts)
        total = np.zeros((len(positions), x.shape[1]), dtype=x.dtype)
        owner = np.repeat(np.arange(len(positions)), counts)
        np.add.at(total, owner, self.value[entries, None] * x[self.dep[entries]])
        diagonal = self.diagonal[positions, None]
        residual = rhs[positions] - total
        x[positions] = residual * (1 / diagonal) if early_division else residual / diagonal


def execute(plan: SolvePlan, crow: np.ndarray, col: np.ndarray, values: np.ndarray, b: np.ndarray,
            unit_diagonal: bool = False) -> np.ndarray:
    """Solve the system the plan was made for, in the plan's order.

    Args:
        plan: from :func:`.scheduling.plan` on this system's row graph.
        crow, col, values: the CSR of the matrix solved (``T`` of ``T x = b``), any dtype.
        b: ``[n]`` or ``[n, k]`` right-hand sides, of ``values``' dtype.
        unit_diagonal: take the diagonal as ones (stored diagonal entries are ignored).

    Returns:
        ``x`` of ``b``'s shape, in matrix row order.

    Raises:
        ScheduleError: the plan deadlocks, or a row reads a value before it is final.
    """
    system = _System(plan.order, np.asarray(crow, np.int64), np.asarray(col, np.int64), np.asarray(values),
                     unit_diagonal)
    vector = b.ndim == 1
    rhs = (b[:, None] if vector else b)[plan.order]
    n = len(plan.order)
    x = np.zeros_like(rhs)
    done = np.zeros(n, dtype=bool)
    flagged = np.zeros(n, dtype=bool)
    runner = _Runner(plan, system, x, rhs, done, flagged)
    _check_own_group_flags(plan, runner.group_of_position)
    for k in range(plan.num_kernels):
        first, last = int(plan.kernel_ptr[k]), int(plan.kernel_ptr[k + 1])
        if plan.kernel_waits[k]:
            runner.run_waiting(first, last)
        else:
            runner.run(np.arange(first, last), done.copy())
    out = np.empty_like(x)
    out[plan.order] = x
    return out[:, 0] if vector else out


def _check_own_group_flags(plan: SolvePlan, group_of_position: np.ndarray) -> None:
    rows = plan.rows
    dependent = np.repeat(np.arange(rows.n, dtype=np.int64), np.diff(rows.ptr))
    own = group_of_position[rows.deps] == group_of_position[dependent]
    lane = (np.arange(rows.n, dtype=np.int64) - plan.group_starts[group_of_position]) % plan.schedule.subwarp_width
    other_lane = lane[rows.deps] != lane[dependent]  # a thread reads its own rows in program order
    needs = own & other_lane & plan.group_per_thread[group_of_position[dependent]] & ~plan.row_flag[rows.deps]
    if needs.any():
        i = int(np.flatnonzero(needs)[0])
        raise ScheduleError(
            f"row {plan.order[dependent[i]]} waits, thread by thread, for row "
            f"{plan.order[rows.deps[i]]} of its own row group, which writes no ready flag")


class _Runner:
    """The state of one solve: which rows are final, which flags are up."""

    def __init__(self, plan: SolvePlan, system: _System, x: np.ndarray, rhs: np.ndarray,
                 done: np.ndarray, flagged: np.ndarray) -> None:
        self.plan, self.system, self.x, self.rhs = plan, system, x, rhs
        self.done, self.flagged = done, flagged
        groups = len(plan.group_starts) - 1
        self.group_of_position = np.repeat(np.arange(groups, dtype=np.int64), np.diff(plan.group_starts))
        # Per node group: the dependencies of its rows outside their own row group.
        nodes = plan.nodes
        group_rows = np.diff(plan.group_starts)
        member_rows = ranges(plan.group_starts[nodes.members], group_rows[nodes.members])
        rows_per_node = np.add.reduceat(group_rows[nodes.members], nodes.ptr[:-1]) \
            if nodes.count else np.zeros(0, np.int64)
        self.node_row_ptr = np.append(0, np.cumsum(rows_per_node)).astype(np.int64)
        self.node_rows = member_rows
        dep_counts = np.diff(plan.rows.ptr)[member_rows]
        deps = plan.rows.deps[ranges(plan.rows.ptr[member_rows], dep_counts)]
        row_of_dep = np.repeat(member_rows, dep_counts)
        outside = self.group_of_position[deps] != self.group_of_position[row_of_dep]
        node_of_row = np.repeat(np.arange(nodes.count, dtype=np.int64), rows_per_node)
        node_of_dep = np.repeat(node_of_row, dep_counts)[outside]
        self.wait_ptr = np.zeros(nodes.count + 1, dtype=np.int64)
        np.cumsum(np.bincount(node_of_dep, minlength=nodes.count), out=self.wait_ptr[1:])
        self.waits_for = deps[outside]
        self.waiting_row = row_of_dep[outside]

    def run(self, node_ids: np.ndarray, final: np.ndarray) -> None:
        """Run these node groups together: their row groups in parallel, each group's rows
        in order (one step per rank inside the groups). A row may read the rows that were
        ``final`` when the node groups started, and the rows of its own group before it."""
        plan = self.plan
        rows = self.node_rows[ranges(self.node_row_ptr[node_ids],
                                     self.node_row_ptr[node_ids + 1] - self.node_row_ptr[node_ids])]
        if rows.size == 0:
            return
        rank = rows - plan.group_starts[self.group_of_position[rows]]
        for step in range(int(rank.max()) + 1):
            positions = rows[rank == step]
            self._read_check(positions, final)
            self.system.solve(positions, self.x, self.rhs, plan.schedule.early_division)
            self.done[positions] = True
            self.flagged[positions] = plan.row_flag[positions]

    def _read_check(self, positions: np.ndarray, final: np.ndarray) -> None:
        system = self.system
        counts = system.ptr[positions + 1] - system.ptr[positions]
        reads = system.dep[ranges(system.ptr[positions], counts)]
        readers = np.repeat(positions, counts)
        own_group = self.group_of_position[reads] == self.group_of_position[readers]
        early = ~(final[reads] | (own_group & self.done[reads]))
        if early.any():
            i = int(np.flatnonzero(early)[0])
            reader = positions[np.searchsorted(np.cumsum(counts), i, side="right")]
            raise ScheduleError(f"row {self.plan.order[reader]} reads x[{self.plan.order[reads[i]]}] "
                                f"before it is final")

    def run_waiting(self, first: int, last: int) -> None:
        """Run the node groups ``[first, last)`` of a waiting kernel, warp by warp in rounds."""
        ids = np.arange(first, last, dtype=np.int64)
        by_warp = ids[np.argsort(self.plan.node_warp[first:last], kind="stable")]
        warp_of = self.plan.node_warp[by_warp]
        head_index = np.flatnonzero(np.diff(warp_of, prepend=-1))  # each warp's first entry
        queue_end = np.append(head_index[1:], len(by_warp))
        while head_index.size:
            heads = by_warp[head_index]
            counts = self.wait_ptr[heads + 1] - self.wait_ptr[heads]
            pending = ~self.flagged[self.waits_for[ranges(self.wait_ptr[heads], counts)]]
            blocked = np.bincount(np.repeat(np.arange(len(heads)), counts)[pending], minlength=len(heads)) > 0
            if blocked.all():
                self._deadlock(heads)
            self.run(heads[~blocked], self.done.copy())
            head_index = head_index + ~blocked
            alive = head_index < queue_end
            head_index, queue_end = head_index[alive], queue_end[alive]

    def _deadlock(self, heads: np.ndarray) -> None:
        """Raise for a round where no warp may start: name a wait on a row that is solved but
        never flagged if there is one (the cause), else the first head's first wait."""
        counts = self.wait_ptr[heads + 1] - self.wait_ptr[heads]
        entries = ranges(self.wait_ptr[heads], counts)
        pending = np.flatnonzero(~self.flagged[self.waits_for[entries]])  # indices into entries
        unflagged = pending[self.done[self.waits_for[entries[pending]]]]
        index = int(unflagged[0] if unflagged.size else pending[0])
        entry = int(entries[index])
        head = int(heads[np.searchsorted(np.cumsum(counts), index, side="right")])
        order = self.plan.order
        what = "writes no ready flag" if unflagged.size else "is not solved yet"
        raise ScheduleError(
            f"deadlock: no warp can start its next node group; row {order[self.waiting_row[entry]]} "
            f"(node group {head}) waits for row {order[self.waits_for[entry]]}, which {what}")


def execute_natural(schedule: NaturalOrderSchedule, num_warps: int, crow: np.ndarray, col: np.ndarray,
                    values: np.ndarray, b: np.ndarray, lower: bool, unit_diagonal: bool = False) -> np.ndarray:
    """Solve ``T x = b`` as the fast start's kernel (``natural.cuh``) would, in rounds.

    Positions are rows top down (``lower``) or bottom up, or with ``level_order`` the rows
    by level, a level's rows by index (:func:`.natural.level_order`). Each round, every free
    taker takes the next ticket (in taker order; tickets in increasing order), then every
    row that may run does: each subwarp of a warp that shares its rows runs its next
    position of the warp's ticket, each lane solving rows of its own its next one of its
    subwarp's ticket; a row may run once every dependency is final (its values are polled
    until they are). A round in which nothing runs while rows remain is a deadlock.

    Args:
        schedule: the fast start's scheme (rows per ticket, rows per thread or shared,
            subwarps).
        num_warps: warps of the grid (blocks x ``warps_per_block``); each takes tickets
            (rows shared) or is ``schedule.subwarps`` subwarps that do (rows per thread).
        crow, col, values: the CSR of ``T``; b: ``[n]`` or ``[n, k]``.
        lower: ``T`` is lower triangular (else upper); unit_diagonal: take ones.

    Returns:
        ``x`` of ``b``'s shape, in matrix row order.

    Raises:
        ScheduleError: the solve deadlocks, or a row depends on a later position (``T`` is
            not triangular in the direction given).
    """
    n = len(crow) - 1
    order = np.arange(n, dtype=np.int64) if lower else np.arange(n - 1, -1, -1, dtype=np.int64)
    crow, col, values = np.asarray(crow, np.int64), np.asarray(col, np.int64), np.asarray(values)
    system = _System(order, crow, col, values, unit_diagonal)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(system.ptr))
    if (system.dep >= owner).any():
        i = int(np.flatnonzero(system.dep >= owner)[0])
        raise ScheduleError(f"row {order[owner[i]]} depends on row {order[system.dep[i]]}, which is solved "
                            f"after it in natural order")
    if schedule.level_order:  # as natural.level_order: rows by level, a level's rows by index
        level_of_row = np.empty(n, dtype=np.int64)
        level_of_row[order] = levels(system.ptr, system.dep)
        order = np.argsort(level_of_row, kind="stable")
        system = _System(order, crow, col, values, unit_diagonal)
    vector = b.ndim == 1
    rhs = (b[:, None] if vector else b)[order]
    x = np.zeros_like(rhs)
    done = np.zeros(n, dtype=bool)
    if schedule.rows_per_thread:  # each subwarp takes tickets; its lanes solve the positions
        takers, rows, lanes = num_warps * schedule.subwarps, schedule.rows_per_ticket, 32 // schedule.subwarps
    else:  # the warp takes tickets; its subwarps solve the positions
        takers, rows, lanes = num_warps, schedule.rows_per_ticket * schedule.subwarps, schedule.subwarps
    tickets = -(-n // rows)
    held = np.full(takers, -1, dtype=np.int64)  # each taker's ticket, -1: none
    next_ticket = 0
    while not done.all():
        free = np.flatnonzero(held < 0)[:max(tickets - next_ticket, 0)]
        held[free] = np.arange(next_ticket, next_ticket + len(free))
        next_ticket += len(free)
        # Each runner's next row: a ticket's positions go to its runners round robin (lanes,
        # or the subwarps that share rows), and each runner solves its own in order.
        first = held[held >= 0][:, None] * rows
        position = first + np.arange(rows)[None, :]
        pending = (position < n) & ~done[np.minimum(position, n - 1)]
        earlier_pending = np.zeros_like(pending)
        for r in range(lanes, rows):  # a lane's row waits for the lane's earlier rows
            earlier_pending[:, r] = pending[:, r - lanes] | earlier_pending[:, r - lanes]
        candidates = position[pending & ~earlier_pending]
        counts = system.ptr[candidates + 1] - system.ptr[candidates]
        waiting = ~done[system.dep[ranges(system.ptr[candidates], counts)]]
        blocked = np.bincount(np.repeat(np.arange(len(candidates)), counts)[waiting],
                              minlength=len(candidates)) > 0
        ready = candidates[~blocked]
        if ready.size == 0:
            raise ScheduleError(f"deadlock: tickets up to {next_ticket - 1} are held and no row can run")
        system.solve(ready, x, rhs, early_division=True)
        done[ready] = True
        finished = np.flatnonzero(held >= 0)
        ends = np.minimum((held[finished] + 1) * rows, n)
        complete = np.array([done[h * rows:e].all() for h, e in zip(held[finished], ends)], dtype=bool)
        held[finished[complete]] = -1
    out = np.empty_like(x)
    out[order] = x
    return out[:, 0] if vector else out
