"""Sparse triangular solve (AG-SpTRSV) on CUDA: the analysis, transforms, scheduling, scheme
space and selector, the generated kernel and its plans, the CPU oracle of a scheduled solve,
and the level-set baseline.

The package's modules, each with one job: :mod:`.analysis` (row graph, levels),
:mod:`.transforms` (row groups), :mod:`.scheduling` and :mod:`.warps` (node groups, kernel
partitions, warps: a :class:`~.scheduling.SolvePlan`), :mod:`.executor` (the oracle),
:mod:`.device_prep` (the analysis, transforms and scheduling in PyTorch ops),
:mod:`.device_analysis` (a factor's analysis on its device),
:mod:`.task` (what a solve computes), :mod:`.schedule` (the scheme), :mod:`.space` (what is
worth measuring), :mod:`.default` (the hand rule), :mod:`.features` and :mod:`.selector`
(the MLP), :mod:`.codegen` (the CUDA source), :mod:`.plan` (launches), :mod:`.natural` (the
fast start: natural order, no analysis), :mod:`.levelset` (the solve in PyTorch ops, the
benchmark's baseline).

:class:`FactorPlans` is what one factor keeps of all this: a
:class:`~gsparse.TriangularSolver` holds one, and its CUDA solves go through it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...target import Target
from ..memory import allocate
from ..source import RUNTIME_LOADER, KernelLoader
from .default import (
    analysed_schedule,
    default_schedule,
    natural_schedule,
    natural_serves,
)
from .device_analysis import DagLevels, DeviceAnalysis, analyse_on_device
from .device_prep import TorchSolvePlan
from .natural import DeviceSystem, NaturalPlan
from .plan import SptrsvPlan
from .schedule import NaturalOrderSchedule, SptrsvSchedule
from .scheduling import SolvePlan
from .selector import SelectorSet, default_selectors
from .split import size_bound
from .stats import PatternStats, pattern_stats
from .task import SptrsvTask, index_dtype_for

__all__ = ["FactorPlans", "NaturalOrderSchedule", "SptrsvPlan", "SptrsvSchedule", "SptrsvTask", "analysed_schedule",
           "default_schedule"]

Scheme = SptrsvSchedule | NaturalOrderSchedule


class FactorPlans:
    """The device-side state of one triangular factor, built on demand and kept:

    - per direction (``transpose``), the system on the device (:class:`.natural.DeviceSystem`)
      and, for the analysed schemes, its analysis there
      (:func:`.device_analysis.analyse_on_device`);
    - per task, the scheme a solve runs when none is forced: with an analysis,
      :func:`.default.analysed_schedule` on the system's features and the device's
      :class:`~gsparse.target.Target` (the MLP selector's pick where one answers, else the
      hand rule's); without, :func:`.default.natural_schedule`;
    - per (task, scheme), the plan (:class:`.plan.SptrsvPlan`, :class:`.natural.NaturalPlan`).

    The whole preparation runs as PyTorch ops on the factor's device, reading back only the
    sizes that decide allocations, the features and the longest chains (on a CUDA factor
    about ten reads in all, :mod:`.device_prep`); the levels come from the levels kernel
    (:func:`.natural.dag_levels`). On the host: the scheme choice, the levels of a DAG
    with a chain too long for the kernel and of every DAG of a factor on the CPU
    (:class:`.device_analysis.DagLevels`), and the scheduling of ``ws_locality`` warps. A
    factor on the CPU runs the same torch preparation (its plans serve loaders that never
    launch: tests); :func:`.plan.analyse` and :func:`.scheduling.plan` are the NumPy
    reference it equals, array for array.

    Which scheme runs when none is forced: the analysed one when :attr:`analyse` is True or
    the direction has been analysed already (the benchmark or the sweep did it); the fast
    start, which needs no analysis at all (its preparation is a few device ops and one
    kernel), when it is False; and when it is None, the
    fast start wherever it solved as fast as the analysed scheme on the H100 and the H200
    (:func:`.default.natural_serves`: all but short rows near the diagonal with several
    right-hand sides).
    :class:`~gsparse.TriangularSolver` takes it as its ``analysis`` argument.

    New values for the same pattern reuse all of it: values are an operand of each solve.

    Args:
        crow, col: the canonical CSR of ``A`` (int64, on the solver's device).
        lower: ``A`` is lower triangular.
        stats: ``A``'s pattern statistics where the factor checks measured them (else they
            are measured when the fast start's rule first needs them: :mod:`.stats`).

    Attributes:
        schedule: a scheme every solve runs instead of the chosen one (None: choose).
        analyse: without a forced scheme, True: analyse each direction and run
            the analysed default's scheme; False: the fast start; None: the fast start where
            it serves (:func:`.default.natural_serves`), else the analysis.
        selectors: the MLP selectors of the analysed default (None: the hand rule alone);
            :func:`.selector.default_selectors` until set, read at the first analysed choice.
        recorded: ``(plans, task, target) -> scheme or None``, a tuned scheme of this
            factor (the front end passes :func:`gsparse.tune.sptrsv.recorded_scheme`, the
            tuning database's); asked before the selector and the hand rule, and a scheme
            it records makes the solve an analysed one. None: none asked.
        signature: the factor's tuning signature once computed (:mod:`gsparse.tune.sptrsv`).
        loader: what compiles and loads the kernels (a recorder in tests).
        target: the GPU plans are made for (None: that of ``b``'s device, at each solve).
        index_dtype: the plans' index type (None: int32 unless the factor's size needs int64).
    """

    def __init__(self, crow: torch.Tensor, col: torch.Tensor, lower: bool, stats: PatternStats | None = None) -> None:
        # The plan each (dtype, unit diagonal, transpose, right-hand sides, device) solved with
        # last: a small factor's solve takes tens of microseconds on the GPU, about what
        # resolving its task, scheme and plan again takes on the host. Emptied whenever what
        # decides them changes (:meth:`__setattr__`, :meth:`analysis`, :meth:`forget_choices`).
        self._resolved: dict[tuple[torch.dtype, bool, bool, int, int], SptrsvPlan | NaturalPlan] = {}
        self._crow, self._col, self._lower = crow, col, lower
        # By direction (True: A^T's): A's from the checks where they ran, else measured once.
        self._stats: dict[bool, PatternStats] = {} if stats is None else {False: stats}
        self.schedule: Scheme | None = None
        self.analyse: bool | None = None
        self.loader: KernelLoader = RUNTIME_LOADER
        self.target: Target | None = None
        self.index_dtype: torch.dtype | None = None
        self._analyses: dict[bool, DeviceAnalysis] = {}
        self._systems: dict[bool, DeviceSystem] = {}
        self._chosen: dict[SptrsvTask, SptrsvSchedule] = {}
        self._natural: dict[SptrsvTask, NaturalOrderSchedule] = {}
        self._plans: dict[tuple[SptrsvTask, Scheme], SptrsvPlan | NaturalPlan] = {}
        self._selectors: SelectorSet | None | bool = False  # False: not read yet
        self.recorded: Callable[[FactorPlans, SptrsvTask, Target], SptrsvSchedule | None] | None = None
        self._records: dict[tuple[SptrsvTask, Target], SptrsvSchedule | None] = {}
        self.signature: str | None = None

    def __setattr__(self, name: str, value: object) -> None:
        # Every public attribute (schedule, analyse, loader, target, index_dtype, selectors,
        # recorded) takes part in choosing a solve's plan.
        if not name.startswith("_"):
            self._resolved.clear()
        object.__setattr__(self, name, value)

    @property
    def selectors(self) -> SelectorSet | None:
        if self._selectors is False:
            self._selectors = default_selectors()
        return self._selectors

    @selectors.setter
    def selectors(self, value: SelectorSet | None) -> None:
        self._selectors = value

    @property
    def crow(self) -> torch.Tensor:
        """``A``'s canonical row pointers (int64)."""
        return self._crow

    @property
    def col(self) -> torch.Tensor:
        """``A``'s canonical column indices (int64)."""
        return self._col

    @property
    def lower(self) -> bool:
        return self._lower

    @property
    def n(self) -> int:
        return self._crow.numel() - 1

    @property
    def nnz(self) -> int:
        return self._col.numel()

    def analysis(self, transpose: bool) -> DeviceAnalysis:
        """The system of ``A x = b`` (``A^T x = b`` with ``transpose``), analysed once on the
        factor's device (:func:`.device_analysis.analyse_on_device`), with the levels of
        :meth:`dag_levels`."""
        if transpose not in self._analyses:
            self._analyses[transpose] = analyse_on_device(self.device_system(transpose), self.dag_levels())
            self._resolved.clear()  # an analysed direction solves with its analysed scheme
        return self._analyses[transpose]

    def dag_levels(self) -> DagLevels:
        """The levels of the factor's DAGs (row graphs, row groups): the levels kernel's on a
        GPU, in the factor's index type, on :attr:`target`; the host's on a CPU."""
        if not self._crow.is_cuda:
            return DagLevels(torch.int64, None, self.loader)
        index_dtype = self.index_dtype or self._index_dtype()
        return DagLevels(index_dtype, self.target or Target.of(self._crow.device), self.loader)

    def device_system(self, transpose: bool) -> DeviceSystem:
        """The system of ``A x = b`` (``A^T x = b`` with ``transpose``) on the factor's device,
        built once, with no host analysis."""
        if transpose not in self._systems:
            self._systems[transpose] = DeviceSystem(self._crow, self._col, self._lower, transpose,
                                                    self.stats(transpose).longest_row)
        return self._systems[transpose]

    def stats(self, transpose: bool) -> PatternStats:
        """The pattern statistics of the system of ``A x = b`` (``A^T x = b`` with
        ``transpose``), its longest row before any split: the checks' where they measured
        ``A``'s, else measured once per direction, in one read-back
        (:func:`.stats.pattern_stats`)."""
        if transpose not in self._stats:
            self._stats[transpose] = pattern_stats(self._crow, self._col, transpose)
        return self._stats[transpose]

    def _index_dtype(self) -> torch.dtype:
        """int32 unless the factor's systems, their long rows split (:mod:`.split`), need int64."""
        return index_dtype_for(*size_bound(self.n, self.nnz))

    def task(self, dtype: torch.dtype, unit_diagonal: bool, transpose: bool, num_rhs: int,
             index_dtype: torch.dtype | None = None) -> SptrsvTask:
        """The task of a solve; indices ``index_dtype``, else :attr:`index_dtype`, else int32
        unless the factor's size needs int64."""
        index_dtype = index_dtype or self.index_dtype or self._index_dtype()
        return SptrsvTask(dtype=dtype, index_dtype=index_dtype,
                          lower=self._lower, unit_diagonal=unit_diagonal, transpose=transpose,
                          num_rhs=num_rhs)

    def chosen_schedule(self, task: SptrsvTask, target: Target) -> Scheme:
        """The forced scheme, else the analysed default's for ``task`` on ``target`` (kept per
        task), on the analysis of the task's direction."""
        if self.schedule is not None:
            return self.schedule
        if task not in self._chosen:
            recorded = self._recorded(task, target)
            self._chosen[task] = recorded or analysed_schedule(self.analysis(task.transpose).features, task, target,
                                                               self.selectors)
        return self._chosen[task]

    def forget_choices(self) -> None:
        """Choose every task's scheme afresh at its next solve (after a tuning run recorded
        a new best); plans already built are kept."""
        self._chosen.clear()
        self._records.clear()
        self._resolved.clear()

    def _recorded(self, task: SptrsvTask, target: Target) -> SptrsvSchedule | None:
        """:attr:`recorded`'s answer, asked once per task and target (a solve asks at every
        call, and a database lookup is a query)."""
        if self.recorded is None:
            return None
        if (task, target) not in self._records:
            self._records[(task, target)] = self.recorded(self, task, target)
        return self._records[(task, target)]

    def solve_schedule(self, task: SptrsvTask, target: Target) -> Scheme:
        """What a solve of ``task`` runs when it is given no scheme: the forced one, else the
        analysed default's when :attr:`analyse` asks for it (see the class), the direction
        is analysed already or the task's scheme was chosen already; else, with
        :attr:`analyse` None, a recorded (tuned) scheme where :attr:`recorded` has one; else
        the fast start's (:func:`.default.natural_schedule`, no analysis)."""
        analysed = self.analyse if self.analyse is not None else not natural_serves(self.stats(task.transpose), task)
        if self.schedule is not None or analysed or task.transpose in self._analyses or task in self._chosen:
            return self.chosen_schedule(task, target)
        if self.analyse is None and (recorded := self._recorded(task, target)) is not None:
            self._chosen[task] = recorded  # a tuned scheme beats the fast start
            return recorded
        if task not in self._natural:
            self._natural[task] = self.natural_schedule(task, target)
        return self._natural[task]

    def natural_schedule(self, task: SptrsvTask, target: Target) -> NaturalOrderSchedule:
        """The fast start's scheme for ``task`` on ``target`` (:func:`.default.natural_schedule`),
        from the statistics of the task's system and, where the rule asks, its level count
        (the levels kernel's, with the level order the plan then reuses)."""
        system = self.device_system(task.transpose)
        index_dtype = task.index_dtype
        return natural_schedule(self.stats(task.transpose), task, target,
                                lambda: system.level_count(index_dtype, target, self.loader))

    def build_plan(self, task: SptrsvTask, schedule: Scheme, target: Target,
                   solve_plan: TorchSolvePlan | SolvePlan | None = None) -> SptrsvPlan | NaturalPlan:
        """A new plan of ``task`` under ``schedule`` (not kept: :meth:`solve` keeps its own),
        on ``solve_plan`` where given (the scheme's transform and scheduling, made by
        :meth:`.device_analysis.DeviceAnalysis.solve_plan` of this direction's analysis, or
        on the host by :meth:`.plan.SystemAnalysis.solve_plan` of its
        :attr:`~.device_analysis.DeviceAnalysis.host`)."""
        if isinstance(schedule, NaturalOrderSchedule):
            return NaturalPlan(self.device_system(task.transpose), task, schedule, target, self.loader)
        return SptrsvPlan(self.analysis(task.transpose), task, schedule, target, self.loader, solve_plan)

    def solve(self, values: torch.Tensor, b: torch.Tensor, unit_diagonal: bool, transpose: bool,
              schedule: Scheme | None = None) -> torch.Tensor:
        """``x`` with ``op(A) x = b`` on ``b``'s CUDA device, with the generated kernel.

        Args:
            values: ``[nnz]`` ``A``'s values in canonical order.
            b: ``[n]`` or ``[n, k]``, ``values``' dtype.
            unit_diagonal, transpose: as :func:`gsparse.sptrsv`.
            schedule: the scheme to run (default: :meth:`solve_schedule`).
        """
        if b.numel() == 0:
            return allocate(tuple(b.shape), b.dtype, b.device)
        b = b.contiguous()
        num_rhs = 1 if b.dim() == 1 else b.shape[1]
        resolved_key = (values.dtype, unit_diagonal, transpose, num_rhs, b.get_device())
        plan = self._resolved.get(resolved_key) if schedule is None else None
        if plan is None:
            task = self.task(values.dtype, unit_diagonal, transpose, num_rhs)
            target = self.target or Target.of(b.device)
            chosen = self.solve_schedule(task, target) if schedule is None else schedule
            key = (task, chosen)
            if key not in self._plans:
                self._plans[key] = self.build_plan(task, chosen, target)
            plan = self._plans[key]
            if schedule is None:
                self._resolved[resolved_key] = plan
        return plan(values.contiguous(), b)
