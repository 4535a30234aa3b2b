"""The SpTRSV schedule: one AG-SpTRSV *scheme* (code variant, transform, scheduling).

The paper's names, for reference: ``nw`` = :attr:`SptrsvSchedule.warps_per_block`, ``ng`` =
:attr:`~SptrsvSchedule.subwarps`, ``sw_rnnz``, ``rb`` = :attr:`~SptrsvSchedule.merge_rows`,
``thresh`` = :attr:`~SptrsvSchedule.merge_thresh`, ``α_level`` =
:attr:`~SptrsvSchedule.alpha_level`; strategies keep the paper's names (``merge_avg``,
``rg_balance``, ``ws_locality``, ...). Unbounded thresholds (``sw_rnnz`` and ``α_level``
= ∞) are ``math.inf``, written ``Infinity`` in JSON (Python's ``json`` reads it back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..schedule import Schedule

__all__ = ["SptrsvSchedule", "NaturalOrderSchedule", "POWERS_OF_TWO", "ALPHA_LEVELS", "MERGE_STRATEGIES", "GROUPINGS",
           "WARP_SCHEDULES", "sw_rnnz_choices"]

POWERS_OF_TWO = (1, 2, 4, 8, 16, 32)
ALPHA_LEVELS = (0, 2, 4, 8, math.inf)
MERGE_STRATEGIES = ("merge_fixed", "merge_avg", "merge_thresh")
GROUPINGS = ("rg_sequential", "rg_balance")
WARP_SCHEDULES = ("ws_rr", "ws_balance", "ws_locality")
_WARP = 32


def sw_rnnz_choices(subwarps: int) -> tuple[float, ...]:
    """The paper's ``sw_rnnz`` values for ``subwarps``: 0, ∞ and the powers of two up to the
    subwarp's width ``32 / subwarps`` (so that a shared row gives each thread an entry)."""
    width = _WARP // subwarps
    return (0, *(p for p in POWERS_OF_TWO if p <= width), math.inf)


@dataclass(frozen=True, kw_only=True)
class SptrsvSchedule(Schedule):
    """One point of the SpTRSV scheme space (a plain value: hashable, JSON round trip).

    The knobs of the code variant (§4.2) are ``warps_per_block`` to ``early_division``, those
    of the transform (§4.3) ``merge`` to ``reorder``, those of the scheduling (§4.4)
    ``grouping``, ``warp_schedule`` and ``alpha_level``.

    Attributes:
        warps_per_block: warps of a block that solve (``nw``); a block is pinned to one SM
            and the rest of its 1024 threads idle, which caps how many warps run at once.
        subwarps: subwarps per warp (``ng``, a power of two 1..32); each solves one row group.
        sw_rnnz: a subwarp's threads share each row of its group (one row at a time, a
            reduction across the threads) when the group's rows average more than this many
            entries, else each thread solves rows of its own. 0: always shared; ∞: never.
        collaborative_read: the warp first copies its row groups' entries into shared memory
            with coalesced loads (where they fit), then the subwarps solve from there.
        sync_elimination: kernels whose rows all lie in one level do not wait on
            dependencies, and rows nobody waits for write no ready flag.
        early_division: the reciprocal of the diagonal is taken before the wait, and the
            result is a multiplication by it.
        ready_by_value: a row's values are its ready signal, instead of a flag: ``x`` starts
            filled with a sentinel (a signalling NaN, which arithmetic never produces) and a
            waiting row polls the values it reads until they are not the sentinel. No flag,
            no fence, no acquire load: one trip through L2 per dependency instead of three.
            Not one of the paper's knobs (not searched yet).
        merge: ``merge_fixed``, ``merge_avg`` or ``merge_thresh``.
        merge_rows: ``rb``, rows per block of the merge (a power of two 1..32).
        merge_thresh: ``thresh`` of ``merge_avg`` / ``merge_thresh`` (a power of two 1..32);
            0 for ``merge_fixed``, which has none.
        reorder: renumber rows by level before merging.
        grouping: ``rg_sequential`` (a level's row groups in row order) or ``rg_balance``
            (by decreasing entries) when cutting a level into node groups of ``subwarps``.
        warp_schedule: ``ws_rr``, ``ws_balance`` or ``ws_locality``: which warp of the
            persistent grid runs each node group.
        alpha_level: a level with more than ``alpha_level x`` (the GPU's resident warps)
            node groups runs as a kernel of its own; runs of smaller levels share one. 0:
            one kernel per level (level-set); ∞: one kernel (fine-grained synchronisation).
    """

    skeleton = "sptrsv.scheme"
    warps_per_block: int = 32
    subwarps: int = 1
    sw_rnnz: float = 0
    collaborative_read: bool = True
    sync_elimination: bool = True
    early_division: bool = True
    ready_by_value: bool = False
    merge: str = "merge_fixed"
    merge_rows: int = 1
    merge_thresh: int = 0
    reorder: bool = False
    grouping: str = "rg_sequential"
    warp_schedule: str = "ws_rr"
    alpha_level: float = math.inf

    @property
    def subwarp_width(self) -> int:
        """Threads per subwarp."""
        return _WARP // self.subwarps

    def problems(self) -> list[str]:
        """Why this schedule can never run (empty when it is valid)."""
        found = []
        for name in ("warps_per_block", "subwarps", "merge_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or value not in POWERS_OF_TWO:
                found.append(f"{name} must be one of {POWERS_OF_TWO}, got {value!r}")
        for name in ("collaborative_read", "sync_elimination", "early_division", "ready_by_value", "reorder"):
            if not isinstance(getattr(self, name), bool):
                found.append(f"{name} must be a bool, got {getattr(self, name)!r}")
        for name, choices in (("merge", MERGE_STRATEGIES), ("grouping", GROUPINGS),
                              ("warp_schedule", WARP_SCHEDULES)):
            if getattr(self, name) not in choices:
                found.append(f"{name} must be one of {choices}, got {getattr(self, name)!r}")
        for name in ("sw_rnnz", "alpha_level", "merge_thresh"):
            if isinstance(getattr(self, name), bool):
                found.append(f"{name} must be a number, got {getattr(self, name)!r}")
        if self.alpha_level not in ALPHA_LEVELS:
            found.append(f"alpha_level must be one of {ALPHA_LEVELS}, got {self.alpha_level!r}")
        if self.merge == "merge_fixed" and self.merge_thresh != 0:
            found.append(f"merge_fixed has no threshold: merge_thresh must be 0, got {self.merge_thresh!r}")
        elif self.merge in ("merge_avg", "merge_thresh") and self.merge_thresh not in POWERS_OF_TWO:
            found.append(f"{self.merge} needs merge_thresh in {POWERS_OF_TWO}, got {self.merge_thresh!r}")
        if self.subwarps in POWERS_OF_TWO and self.sw_rnnz not in sw_rnnz_choices(self.subwarps):
            found.append(f"sw_rnnz must be one of {sw_rnnz_choices(self.subwarps)} with "
                         f"{self.subwarps} subwarps, got {self.sw_rnnz!r}")
        return found

    def __str__(self) -> str:
        merge = f"{self.merge}({self.merge_rows}" + (f",{self.merge_thresh})" if self.merge_thresh else ")")
        flags = "".join(f"+{name}" for name, on in (("cr", self.collaborative_read),
                                                     ("se", self.sync_elimination),
                                                     ("ed", self.early_division),
                                                     ("rv", self.ready_by_value),
                                                     ("reorder", self.reorder)) if on)
        return (f"nw{self.warps_per_block}.ng{self.subwarps}.sw{_number(self.sw_rnnz)}{flags}."
                f"{merge}.{self.grouping}.{self.warp_schedule}.a{_number(self.alpha_level)}")


@dataclass(frozen=True, kw_only=True)
class NaturalOrderSchedule(Schedule):
    """The fast start's scheme: rows solved in the system's natural dependency order, with no
    analysis (no levels, no row groups, no node groups; see ``gsparse.kernels.sptrsv.natural``).

    The warps of a persistent grid (or their subwarps, where a lane solves rows on its own)
    take *tickets* from one counter, in order; a ticket is consecutive positions (positions
    are rows top down for a lower system, bottom up for an upper one). Every row waits on
    its dependencies by value (as ``ready_by_value``: ``x`` starts as the sentinel).

    Attributes:
        warps_per_block: warps per block of the grid (one block per SM); the grid's tickets
            in flight times their positions is how far ahead of the slowest unsolved row the
            solve may run.
        rows_per_ticket: positions a ticket holds per subwarp (a power of two 1..32); more
            rows per ticket take fewer atomics on the one counter.
        rows_per_thread: each subwarp takes tickets of its own and each of its lanes solves
            rows of the ticket on its own (lane ``i`` the ``i``-th, ``i + w``-th, ... of a
            ``w``-lane subwarp), waiting on its neighbours' values; else the warp takes the
            tickets and its subwarps share rows (a subwarp's lanes split a row's entries and
            right-hand sides): subwarp ``i`` solves the ticket's ``i``-th, ``(i + subwarps)``-th,
            ... positions, one after another.
        subwarps: each warp is this many subwarps of ``32 / subwarps`` lanes (a power of two
            1..32). With several right-hand sides a row the whole warp shares keeps half its
            lanes or more on the columns, one entry at a time; a narrower subwarp walks its
            row with fewer lanes and the warp has that many rows in flight.
        level_order: tickets hand out rows by level instead of by index: the levels are
            computed first on the device, by a kernel that walks the rows in natural order
            as the solve does (``levels.cuh``), and sorted there. Rows of one level are then
            consecutive, so the rows in flight span whole levels, not a few grid lines of a
            mesh; the levels cost about one solve of a single right-hand side, once per
            factor and direction.
        one_block: the grid is one block, not one per SM, which keeps a copy of ``x`` in
            its shared memory (and the ticket counter): rows poll their dependencies there,
            a shared-memory load rather than a trip through L2, and ``x`` in global memory
            needs no sentinel fill. Only for systems whose ``x`` fits in a block's shared
            memory; a lane then solves ``n / (32 warps_per_block)`` rows one after another
            (small factors).
    """

    skeleton = "sptrsv.natural"
    warps_per_block: int = 8
    rows_per_ticket: int = 32
    rows_per_thread: bool = True
    level_order: bool = False
    one_block: bool = False
    subwarps: int = 1

    def problems(self) -> list[str]:
        """Why this schedule can never run (empty when it is valid)."""
        found = []
        for name in ("warps_per_block", "rows_per_ticket", "subwarps"):
            value = getattr(self, name)
            if isinstance(value, bool) or value not in POWERS_OF_TWO:
                found.append(f"{name} must be one of {POWERS_OF_TWO}, got {value!r}")
        for name in ("rows_per_thread", "level_order", "one_block"):
            if not isinstance(getattr(self, name), bool):
                found.append(f"{name} must be a bool, got {getattr(self, name)!r}")
        return found

    def __str__(self) -> str:
        rows = "thread" if self.rows_per_thread else "warp"
        subwarps = f".ng{self.subwarps}" if self.subwarps > 1 else ""
        return (f"natural.nw{self.warps_per_block}{subwarps}.t{self.rows_per_ticket}.{rows}"
                f"{'.levels' if self.level_order else ''}{'.block' if self.one_block else ''}")


def _number(value: float) -> str:
    return "inf" if value == math.inf else str(int(value))
