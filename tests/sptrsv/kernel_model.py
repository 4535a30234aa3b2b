"""A model of ``solve.cuh`` on the CPU, run on the arguments a plan's launches were recorded
with: which warps find work, which node groups and row groups they run, which rows they
solve, where they wait and which flags they write. It is the GPU kernel's logic, read off
the same arrays, so a layout the plan gets wrong (a segment no warp finds, a slot no
subwarp takes, a missing flag, an entry range the collaborative read misses) shows here
without a GPU.

Concurrency is modelled as the scheduling executor does: launches run in order; within a
launch, in rounds, every warp whose next node group may start runs all of it. A node group
may start when every dependency its rows wait on, outside their own row group, is flagged;
a dependency read without waiting must have been final when the launch started (or, for a
subwarp sharing its group's rows, be an earlier row of the group). Reads are checked
against the state when the node group started, so two row groups of one node group that
depended on each other would be caught.
"""

from __future__ import annotations

import numpy as np

from gsparse.kernels.sptrsv.codegen import KERNEL, STAGE_MIN, CodeVariant
from gsparse.kernels.sptrsv.task import SptrsvAlgorithm


class KernelFault(AssertionError):
    """The kernel would deadlock, read a value that is not final, or leave a row unsolved."""


def _numpy(t):
    return None if t is None else t.detach().cpu().numpy()


class _Kernel:
    def __init__(self, algorithm: SptrsvAlgorithm, variant: CodeVariant, args: dict) -> None:
        self.alg, self.var = algorithm, variant
        self.crow = _numpy(args["crow"]).astype(np.int64)
        self.col = _numpy(args["col"]).astype(np.int64)
        self.val = _numpy(args["val"])
        self.order = _numpy(args["order"])
        self.position = _numpy(args["position"])
        # Under ready_by_value every row's values are its signal: as if every row flagged.
        self.row_flag = None if variant.ready_by_value else _numpy(args["row_flag"])
        self.per_thread = _numpy(args["group_per_thread"])
        self.group_start = _numpy(args["group_start"]).astype(np.int64)
        self.slot_group = _numpy(args["slot_group"]).astype(np.int64)
        self.node_ptr = _numpy(args["node_ptr"]).astype(np.int64)
        self.seg_warp = _numpy(args["seg_warp"]).astype(np.int64)
        self.seg_start = _numpy(args["seg_start"]).astype(np.int64)
        self.capacity = args["stage_capacity"].value
        self.n = args["n"].value
        k = algorithm.num_rhs
        self.b = _numpy(args["b"]).reshape(self.n, k)
        self.x = args["x"].detach().numpy().reshape(self.n, k)  # written in place
        self.done = np.zeros(self.n, dtype=bool)
        self.flagged = np.zeros(self.n, dtype=bool)

    def row_at(self, k: int) -> int:
        if self.var.reorder:
            return int(self.order[k])
        return k if self.alg.lower else self.n - 1 - k

    def position_of(self, row: int) -> int:
        if self.var.reorder:
            return int(self.position[row])
        return row if self.alg.lower else self.n - 1 - row

    def rows_per_thread(self, g: int) -> bool:
        if not self.var.shared_rows:
            return True
        if not self.var.per_thread_rows:
            return False
        return bool(self.per_thread[g])

    def bounds(self, r: int) -> tuple[int, int, float]:
        s, e = int(self.crow[r]), int(self.crow[r + 1])
        if self.alg.unit_diagonal:
            if self.alg.lower and e > s and self.col[e - 1] == r:
                e -= 1
            elif not self.alg.lower and e > s and self.col[s] == r:
                s += 1
            return s, e, 1.0
        p = e - 1 if self.alg.lower else s
        if self.col[p] != r:
            raise KernelFault(f"row {r}: the entry taken as its diagonal is in column {self.col[p]}")
        return (s, e - 1, self.val[p]) if self.alg.lower else (s + 1, e, self.val[p])

    # ------------------------------------------------------------------ one launch

    def launch(self, grid: int, part: np.ndarray) -> None:
        seg_lo, seg_hi, waits = (int(v) for v in part)
        queues = {}
        for w in range(grid * self.var.warps_per_block):
            found = np.searchsorted(self.seg_warp[seg_lo:seg_hi], w) + seg_lo
            if found < seg_hi and self.seg_warp[found] == w:
                queues[w] = list(range(int(self.seg_start[found]), int(self.seg_start[found + 1])))
        listed = set(self.seg_warp[seg_lo:seg_hi].tolist())
        if listed - set(queues):
            raise KernelFault(f"warps {sorted(listed - set(queues))[:5]} have work but are not in the grid")
        final = self.done.copy()
        while queues:
            ran = False
            for w in list(queues):
                q = queues[w][0]
                if self.may_start(q, bool(waits)):
                    self.run_node(q, bool(waits), final)
                    ran = True
                    queues[w].pop(0)
                    if not queues[w]:
                        del queues[w]
            if not ran:
                raise KernelFault(f"deadlock: no warp can start its next node group ({len(queues)} waiting)")

    def slots(self, q: int) -> list[tuple[int, int, int]]:
        s0, count = int(self.node_ptr[q]), int(self.node_ptr[q + 1] - self.node_ptr[q])
        if not 1 <= count <= self.var.subwarps:
            raise KernelFault(f"node group {q} has {count} row groups for {self.var.subwarps} subwarps")
        groups = self.slot_group[s0:s0 + count]
        return [(int(g), int(self.group_start[g]), int(self.group_start[g + 1])) for g in groups]

    def waited(self, g: int, first: int, j: int, waits: bool, k: int | None = None) -> bool:
        """Whether the row at position ``k`` of group ``g`` waits for row ``j`` (``k`` matters
        only for ``j`` inside the group: a thread does not wait for the rows it solved itself)."""
        pj = self.position_of(j)
        if pj < first:
            return waits
        width = self.var.subwarp_width
        return self.rows_per_thread(g) and (pj - first) % width != (k - first) % width

    def may_start(self, q: int, waits: bool) -> bool:
        for g, first, last in self.slots(q):
            for k in range(first, last):
                s, e, _ = self.bounds(self.row_at(k))
                for j in self.col[s:e].tolist():
                    if self.position_of(j) < first and self.waited(g, first, j, waits) and not self.flagged[j]:
                        return False
        return True

    def run_node(self, q: int, waits: bool, final: np.ndarray) -> None:
        start_flagged, start_done = self.flagged.copy(), self.done.copy()
        slots = self.slots(q)
        staged = self.stage(slots)
        for sub, (g, first, last) in enumerate(slots):
            for k in range(first, last):
                r = self.row_at(k)
                s, e, diag = self.bounds(r)
                if staged is not None:
                    begin, size, offset = staged[sub]
                    if not (begin <= s and e <= begin + size and offset + size <= self.capacity):
                        raise KernelFault(f"row {r}: entries [{s}, {e}) outside the staged [{begin}, {begin + size})")
                total = np.zeros(self.x.shape[1], dtype=self.x.dtype)
                for p in range(s, e):
                    j = int(self.col[p])
                    inside = self.position_of(j) >= first
                    if self.waited(g, first, j, waits, k):
                        ready = self.flagged[j] if inside else start_flagged[j]
                        if not ready:
                            raise KernelFault(f"row {r} waits for row {j}, which writes no flag"
                                              if inside else f"row {r} started before row {j} was flagged")
                    elif inside:
                        if not (self.position_of(j) < k and self.done[j]):
                            raise KernelFault(f"row {r} reads row {j} of its group before it is solved")
                    elif not final[j]:
                        raise KernelFault(f"row {r} reads x[{j}] without waiting before it is final")
                    if not (self.done[j] and (inside or start_done[j])):
                        raise KernelFault(f"row {r} reads x[{j}] before it is solved")
                    total += self.val[p] * self.x[j]
                self.x[r] = (self.b[r] - total) / diag
                self.done[r] = True
                if self.row_flag is None or self.row_flag[k]:
                    self.flagged[r] = True

    def stage(self, slots: list[tuple[int, int, int]]) -> list[tuple[int, int, int]] | None:
        """The collaborative read's ranges (CSR begin, size, buffer offset) per slot, or None."""
        if not self.var.stage:
            return None
        ranges, offset = [], 0
        for _, first, last in slots:
            lo, hi = (first, last - 1) if self.alg.lower else (self.n - last, self.n - 1 - first)
            begin, size = int(self.crow[lo]), int(self.crow[hi + 1] - self.crow[lo])
            ranges.append((begin, size, offset))
            offset += size
        return ranges if STAGE_MIN <= offset <= self.capacity else None


def run(algorithm: SptrsvAlgorithm, variant: CodeVariant, program, launches: list) -> np.ndarray:
    """Run recorded launches ``(grid, block, shared_bytes, args)`` of one solve (writing
    their ``x``); returns the model's done
    mask. Raises KernelFault as the kernel would misbehave."""
    names = [name for _, name in program.kernels[KERNEL].params]
    kernel = None
    for grid, block, _, args in launches:
        named = dict(zip(names, args))
        assert block == variant.threads
        if kernel is None:
            kernel = _Kernel(algorithm, variant, named)
        kernel.launch(grid if isinstance(grid, int) else grid[0], _numpy(named["part"]))
    if kernel is not None and not kernel.done.all():
        raise KernelFault(f"rows {np.flatnonzero(~kernel.done)[:5].tolist()} were never solved")
    return kernel.done if kernel is not None else np.zeros(0, dtype=bool)
