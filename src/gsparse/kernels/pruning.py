"""LO-SpMM's pruning of a search space before anything is measured.

An operator's space (``kernels/<op>/space.py``) holds the schedules that can run its task;
many of them cannot win on a given graph, feature length and GPU. Four constraints remove
those, in this fixed order (the cheapest first):

1. ``utilisation``: the candidate's grid has at least ``min_blocks_per_sm`` blocks per SM
   of the target (LO-SpMM: half as many blocks as SMs). Threads per block a multiple of
   32, LO-SpMM's other utilisation rule, is a validity rule of every schedule already.
2. ``row_balance`` (COV_row): the coefficient of variation of the edges per row tile, the
   rows one block walks, is at most ``max_row_cov``. Each operator estimates it from the
   graph's row statistics (:func:`row_tile_cov`).
3. ``column_waste`` (WASTE_col): the share of the feature columns a candidate's slices
   cover that lie past the feature vector (padding) is at most ``max_column_waste``.
4. ``registers``: every kernel of the candidate's program keeps its registers within the
   SM's register file at the blocks per SM its ``__launch_bounds__`` asks for, and spills
   at most ``max_spill_bytes`` bytes per thread, as ptxas reports for the target's
   architecture (:func:`program_spills`: a compile-only NVRTC build, through the disk
   kernel cache and an in-memory cache keyed by source and architecture). The only
   constraint that compiles anything, so it is asked for separately.

Rules every pruning keeps:

- The arithmetic constraints (1-3) never remove a candidate that is as good on their
  measure as the best candidate of the space: where no candidate meets a threshold, the
  bar is the best value the space reaches. LO-SpMM removes a tile size because a better one
  exists; a property of the graph or the feature length that no candidate escapes (100
  features padded to 128 by every slice) removes nothing. The register constraint is
  absolute: a spill is a defect of one kernel, not of the problem.
- ``protected`` candidates (the hand rule's pick, which the tuner measures first) are never
  removed, and never counted as removed.
- A space is never pruned to nothing: if the constraints together leave no candidate, the
  candidates that fail the fewest constraints stay (all of them, in the space's order).

Two counts per constraint (:class:`Pruning`): ``alone``, the candidates it would remove on
its own from the whole space, and ``in_order``, what it removes from what the constraints
before it left (these add up to the candidates removed, fallback aside).
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np

from .. import runtime
from ..target import Target
from .source import Program

__all__ = ["CONSTRAINTS", "FactTable", "Facts", "Pruning", "RegisterBudgetError", "THRESHOLDS", "Thresholds",
           "column_waste", "kept_positions", "program_spills", "prune", "row_tile_cov"]

CONSTRAINTS = ("utilisation", "row_balance", "column_waste", "registers")
_ARITHMETIC = CONSTRAINTS[:3]


@dataclass(frozen=True)
class Thresholds:
    """The bars of the four constraints (see the module docstring).

    The defaults are LO-SpMM's, but for ``max_row_cov``: with this estimate of the row-tile
    COV, its 0.25 left the fastest kept schedule up to 17% behind the fastest measured on
    recorded H100 spaces, 0.5 at most 11% (``docs/performance.md``, "Pruning the spaces
    before measuring").

    Attributes:
        min_blocks_per_sm: least blocks of a candidate's main launch per SM (LO-SpMM: 0.5).
        max_row_cov: most COV_row, the coefficient of variation of edges per row tile.
        max_column_waste: most WASTE_col, the padded share of the feature columns covered
            (LO-SpMM: 0.25).
        max_spill_bytes: most bytes of register spill stores and loads per thread, summed
            over a program's kernels.
    """

    min_blocks_per_sm: float = 0.5
    max_row_cov: float = 0.5
    max_column_waste: float = 0.25
    max_spill_bytes: int = 0

    def __post_init__(self) -> None:
        for name in ("min_blocks_per_sm", "max_row_cov", "max_column_waste"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"Thresholds.{name} must be a number >= 0, got {value!r}")
        if isinstance(self.max_spill_bytes, bool) or not isinstance(self.max_spill_bytes, int) \
                or self.max_spill_bytes < 0:
            raise ValueError(f"Thresholds.max_spill_bytes must be an int >= 0, got {self.max_spill_bytes!r}")

    def to_json(self) -> dict[str, float]:
        return asdict(self)


# The defaults every policy prunes with.
THRESHOLDS = Thresholds()


@dataclass(frozen=True, slots=True)
class Facts:
    """What the arithmetic constraints read of one candidate on one graph and target.

    Attributes:
        blocks: blocks of its main launch (a lower bound where the graph's layout decides,
            such as the work list of split rows).
        row_cov: COV_row, the coefficient of variation of the edges per row tile; NaN where
            the row statistics do not say (never removed then).
        column_waste: WASTE_col, ``(covered - features) / covered`` for the feature columns
            its slices cover.
    """

    blocks: int
    row_cov: float
    column_waste: float


@dataclass(frozen=True)
class FactTable:
    """The :class:`Facts` of a space's candidates as three arrays (``[n]`` each, in the
    space's order); a sequence of :class:`Facts` too."""

    blocks: np.ndarray
    row_cov: np.ndarray
    column_waste: np.ndarray

    @classmethod
    def of(cls, facts: Sequence[Facts]) -> FactTable:
        if isinstance(facts, FactTable):
            return facts
        return cls(np.array([f.blocks for f in facts], dtype=np.int64),
                   np.array([f.row_cov for f in facts], dtype=np.float64),
                   np.array([f.column_waste for f in facts], dtype=np.float64))

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, i: int) -> Facts:
        return Facts(int(self.blocks[i]), float(self.row_cov[i]), float(self.column_waste[i]))

    def __iter__(self) -> Iterator[Facts]:
        return (self[i] for i in range(len(self)))


def row_tile_cov(row_cov: float, rows_per_tile: int | np.ndarray,
                 ordered: bool | np.ndarray = False) -> float | np.ndarray:
    """COV_row of row tiles of ``rows_per_tile`` rows on a graph whose row lengths have the
    coefficient of variation ``row_cov`` (``rows_per_tile`` and ``ordered`` may be arrays:
    one value each).

    Row lengths are taken as independent of their position, so a tile's edges are a sum of
    ``rows_per_tile`` draws: ``row_cov / sqrt(rows_per_tile)``. An ``ordered`` walk (rows
    longest first, or tiles cut at equal edge counts) counts as balanced, 0: tiles handed
    out longest first leave no SM idle at the end of the grid for their inequality, and the
    tiles that run side by side are of about one length.
    """
    cov = np.where(ordered, 0.0, row_cov / np.sqrt(np.maximum(1, rows_per_tile)))
    return float(cov) if cov.ndim == 0 else cov


def column_waste(features: int, slice_: int | np.ndarray, launch: int | np.ndarray = 0) -> float | np.ndarray:
    """WASTE_col of covering ``features`` features, in launches of ``launch`` features each
    (0: one launch), with slices of ``slice_`` features: the padded share of the columns
    the slices cover (``slice_`` and ``launch`` may be arrays: one value each)."""
    if features <= 0:
        return 0.0 if np.ndim(slice_) == 0 else np.zeros(np.shape(slice_))
    slice_ = np.asarray(slice_, dtype=np.int64)
    if np.ndim(launch) == 0:  # one launch length for all: divided in Python, not as 0-d arrays
        launch = int(launch) if launch > 0 else features
        full, rest = divmod(features, launch)
    else:
        launch = np.where(np.asarray(launch) > 0, launch, features).astype(np.int64)
        full, rest = np.divmod(features, launch)
    covered = full * -(-launch // slice_) * slice_ + -(-rest // slice_) * slice_
    waste = np.where(covered > 0, (covered - features) / np.maximum(covered, 1), 0.0)
    return float(waste) if waste.ndim == 0 else waste


# --- the register constraint ------------------------------------------------------------------

_BOUNDS = re.compile(r"__launch_bounds__\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)\s*(\w+)\(")
# ptxas's assumption for a kernel without launch bounds: blocks of up to 1024 threads, one
# of which must fit.
_UNBOUNDED = (1024, 1)
# Registers are allocated per warp in units of 256 (8 per thread).
_REGISTER_UNIT = 256
_MAX_REGISTERS_PER_THREAD = 255


@functools.lru_cache(maxsize=4096)
def _resources(source: str, arch: str) -> Mapping[str, runtime.Resources]:
    """ptxas's resource report of every kernel of ``source`` for ``arch``: a compile-only
    build through the disk kernel cache, kept here per (source, arch) so that a space is
    never built twice in a process."""
    return runtime.compile_cuda(source, arch=arch, context="register report").resources


def program_spills(program: Program, target: Target) -> float:
    """The register measure of ``program`` on ``target``: bytes of spill stores and loads
    per thread over its kernels, or infinity where a kernel's registers times its threads
    per block, times the blocks per SM its ``__launch_bounds__`` asks for, exceed the SM's
    register file (the launch would fail, or run below the occupancy the schedule needs).

    Compiles the program for ``target.arch`` once per process (and once per machine, through
    the disk kernel cache); needs NVRTC, no GPU.
    """
    report = _resources(program.source, target.arch)
    bounds = {name: (int(threads), int(blocks or 1))
              for threads, blocks, name in _BOUNDS.findall(program.source)}
    spills = 0.0
    for name in program.kernels:
        resources = report[name]
        threads, blocks = bounds.get(name, _UNBOUNDED)
        warp_registers = -(-resources.registers * 32 // _REGISTER_UNIT) * _REGISTER_UNIT
        if (resources.registers > _MAX_REGISTERS_PER_THREAD
                or warp_registers * -(-threads // 32) * blocks > target.registers_per_sm):
            return math.inf
        spills += resources.spill_stores + resources.spill_loads
    return spills


class RegisterBudgetError(ValueError):
    """A schedule the register constraint removes, found when it was built (the tuner's
    lazy check): its kernels spill, or do not fit the SM at the occupancy they ask for."""

    def __init__(self, schedule: object, spills: float, max_spill_bytes: int) -> None:
        why = ("a kernel's registers do not fit the SM's register file at the blocks per SM its "
               "launch bounds ask for" if math.isinf(spills)
               else f"its kernels spill {spills:g} bytes per thread, more than max_spill_bytes = "
                    f"{max_spill_bytes}")
        super().__init__(f"schedule {schedule} is pruned by the register constraint: {why}")


# --- pruning ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pruning:
    """The outcome of pruning one space.

    Attributes:
        candidates: every candidate, in the space's order.
        kept: the candidates left, in the same order.
        failed: per candidate, the constraints it fails (protected ones included).
        protected: the candidates never removed.
        thresholds: the bars used.
        registers: where the register constraint was evaluated: ``"off"``, ``"kept"`` (on
            the candidates the arithmetic constraints left) or ``"all"``.
        fallback: True when the constraints together left nothing and the fewest-failures
            rule chose what stays.
    """

    candidates: tuple
    kept: tuple
    failed: tuple[frozenset[str], ...]
    protected: frozenset
    thresholds: Thresholds
    registers: str
    fallback: bool

    def _evaluated(self) -> tuple[str, ...]:
        return CONSTRAINTS if self.registers != "off" else _ARITHMETIC

    def alone(self) -> dict[str, int | None]:
        """Per constraint, the candidates it would remove on its own (None for the register
        constraint unless it was evaluated on every candidate)."""
        counts: dict[str, int | None] = {}
        for constraint in CONSTRAINTS:
            if constraint == "registers" and self.registers != "all":
                counts[constraint] = None
                continue
            counts[constraint] = sum(constraint in f and s not in self.protected
                                     for s, f in zip(self.candidates, self.failed))
        return counts

    def in_order(self) -> dict[str, int | None]:
        """Per constraint, the candidates it removes after the constraints before it in
        :data:`CONSTRAINTS` (None for the register constraint when it was off)."""
        counts: dict[str, int | None] = {c: 0 for c in self._evaluated()}
        for s, f in zip(self.candidates, self.failed):
            if s in self.protected:
                continue
            first = next((c for c in CONSTRAINTS if c in f), None)
            if first is not None:
                counts[first] += 1
        if self.registers == "off":
            counts["registers"] = None
        return counts

    def to_json(self) -> dict[str, object]:
        """The counts, JSON-ready (what a benchmark sweep records)."""
        return {"candidates": len(self.candidates), "kept": len(self.kept),
                "alone": self.alone(), "in_order": self.in_order(), "registers": self.registers,
                "fallback": self.fallback, "thresholds": self.thresholds.to_json()}


def prune(candidates: Sequence, facts: Sequence[Facts], target: Target,
          thresholds: Thresholds = THRESHOLDS, *, protected: Sequence = (),
          registers: Callable[[object], float] | None = None, registers_on: str = "kept") -> Pruning:
    """Prune ``candidates`` (with their ``facts``) for ``target`` (see the module docstring).

    Args:
        registers: the register measure of a candidate (:func:`program_spills` of its
            program); None leaves the register constraint off, and nothing is compiled.
        registers_on: ``"kept"`` measures only the candidates the arithmetic constraints
            leave (what a search needs), ``"all"`` every candidate (what a report of each
            constraint's count alone needs), ``"off"`` none (as ``registers=None``).
    """
    if len(facts) != len(candidates):
        raise ValueError(f"facts has {len(facts)} entries for {len(candidates)} candidates")
    if registers_on not in ("off", "kept", "all"):
        raise ValueError(f"registers_on must be 'off', 'kept' or 'all', got {registers_on!r}")
    protected = frozenset(protected)
    failures = np.stack(_arithmetic_failures(FactTable.of(facts), target, thresholds), axis=1)
    fails: list[set[str]] = [{c for c, failed in zip(_ARITHMETIC, row) if failed} for row in failures.tolist()]
    state = "off"
    if registers is not None and registers_on != "off":
        state = registers_on
        measured = [i for i, fail in enumerate(fails) if registers_on == "all" or not fail]
        # Each measure may compile; NVRTC releases the GIL, so threads compile in parallel.
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            spills = list(pool.map(lambda i: registers(candidates[i]), measured))
        for i, spill in zip(measured, spills):
            if spill > thresholds.max_spill_bytes:
                fails[i].add("registers")
    counts = np.array([len(fail) for fail in fails], dtype=np.int64)
    positions = _kept(counts, [i for i, s in enumerate(candidates) if s in protected])
    kept = [candidates[i] for i in positions]
    fallback = bool(candidates) and not (counts == 0).any() and not any(s in protected for s in candidates)
    return Pruning(candidates=tuple(candidates), kept=tuple(kept),
                   failed=tuple(frozenset(f) for f in fails), protected=protected,
                   thresholds=thresholds, registers=state, fallback=fallback)


def kept_positions(facts: FactTable, target: Target, protected: Sequence[int] = ()) -> np.ndarray:
    """The positions of the candidates :func:`prune` keeps at the default thresholds, the
    register constraint off (``protected`` positions always among them): what the "model"
    policy ranks, without a candidate object or a set per candidate."""
    blocks, row_cov, waste = (failed.view(np.uint8) for failed in _arithmetic_failures(facts, target, THRESHOLDS))
    return _kept(blocks + row_cov + waste, protected)  # counts: bytes of 0 and 1 added


def _arithmetic_failures(facts: FactTable, target: Target,
                         thresholds: Thresholds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[n]`` bool each: the candidates that fail each arithmetic constraint (in
    :data:`CONSTRAINTS` order); each bar no stricter than the best value the space reaches."""
    if len(facts) == 0:
        return tuple(np.zeros(0, dtype=bool) for _ in _ARITHMETIC)
    blocks_bar = min(thresholds.min_blocks_per_sm * target.sms, int(facts.blocks.max()))
    least_cov = float(np.fmin.reduce(facts.row_cov))  # NaN where every COV_row is
    cov_bar = max(thresholds.max_row_cov, 0.0 if np.isnan(least_cov) else least_cov)
    waste_bar = max(thresholds.max_column_waste, float(facts.column_waste.min()))
    with np.errstate(invalid="ignore"):  # NaN COV_row: never removed
        return facts.blocks < blocks_bar, facts.row_cov > cov_bar, facts.column_waste > waste_bar


def _kept(failed_counts: np.ndarray, protected: Sequence[int]) -> np.ndarray:
    """Positions of the candidates that fail nothing, the ``protected`` ones among them;
    where that leaves none, those that fail the fewest constraints."""
    keep = failed_counts == 0
    keep[list(protected)] = True
    if not keep.any() and len(keep):
        keep = failed_counts == failed_counts.min()
    return keep.nonzero()[0]
