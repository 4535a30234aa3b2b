"""g-SpMM on CUDA: the task of a call, its schedule (forced or chosen), the plan, the launch.

The package's modules, each with one job: :mod:`.task` (what a call computes),
:mod:`.schedule` (one type per skeleton), :mod:`.space` (what is worth measuring),
:mod:`.default` (the hand rule), :mod:`.codegen` (the CUDA source), :mod:`.structures`
and :mod:`.output_tiling` (graph layouts the skeletons walk), :mod:`.plan` (launches).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from ...algebra import BINARY_OPS, REDUCERS
from ...graph import Graph
from ...target import Target
from ..memory import allocate, allocator
from ..source import RUNTIME_LOADER, Launch, refuse_capture
from ..operands import operand_facts, vector_limit
from . import codegen
from .default import default_schedule
from .plan import build_plan
from .schedule import SPMM_SCHEDULES, ColumnTiled, OnePass, OutputTiled, SplitRows, SpmmSchedule
from .space import pruned_space, register_spills, schedule_space
from .task import SpmmAlgorithm, SpmmTask

__all__ = [
    "SPMM_SCHEDULES",
    "ColumnTiled",
    "OnePass",
    "OutputTiled",
    "SplitRows",
    "SpmmAlgorithm",
    "SpmmSchedule",
    "SpmmTask",
    "bind_spmm",
    "default_schedule",
    "hand_rule",
    "load_kernels",
    "pruned_space",
    "register_spills",
    "run_spmm",
    "schedule_space",
    "task_for",
]


def task_for(g: Graph, op: str, reduce: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None,
             out_shape: tuple[int, ...], with_arg: bool = False) -> SpmmTask:
    """The task of a g-SpMM on ``g`` with these operands (of the output's rank)
    and output features ``out_shape``. The output's own storage is fresh, so aligned: only
    the operands can narrow the vectors.

    Calls with the same facts get the same task object (:func:`_task`), so that every cache
    keyed by tasks finds it without comparing its fields, and its ``algorithm`` is derived
    once."""
    dtype = (lhs if lhs is not None else rhs).dtype
    return _task(op, reduce, operand_facts(lhs), operand_facts(rhs), tuple(out_shape), dtype, g.index_dtype,
                 g.eid is not None and (BINARY_OPS[op].uses_rhs or with_arg), with_arg)


@functools.lru_cache(maxsize=1024)
def _task(op: str, reduce: str, lhs: tuple[tuple[int, ...], int] | None,
          rhs: tuple[tuple[int, ...], int] | None, out_shape: tuple[int, ...], dtype: torch.dtype,
          index_dtype: torch.dtype, has_eid: bool, with_arg: bool) -> SpmmTask:
    full = [offset for shape, offset in filter(None, (lhs, rhs)) if shape == out_shape]
    return SpmmTask(
        op=op, reduce=reduce, lhs_shape=None if lhs is None else lhs[0],
        rhs_shape=None if rhs is None else rhs[0], out_shape=out_shape, dtype=dtype,
        index_dtype=index_dtype, has_eid=has_eid, with_arg=with_arg,
        vector_ok=vector_limit(math.prod(out_shape), full, dtype),
    )


def load_kernels(task: SpmmTask, schedule: SpmmSchedule, device_index: int) -> None:
    """Compile (through the disk cache) and load the kernels ``schedule`` runs ``task`` with,
    without launching anything: what a tuner does ahead of measuring, in threads."""
    program = codegen.program(task.algorithm, schedule, task.num_features)
    for name in program.kernels:
        RUNTIME_LOADER.kernel(program, name, device_index)


def hand_rule(g: Graph, task: SpmmTask, call: Callable | None = None) -> SpmmSchedule:
    """The hand rule's schedule of ``task`` on ``g``'s device: the chooser of calls that pass
    none (the front ends pass the tuner's, :func:`gsparse.tune.select.choose`). ``call`` runs
    the task under a forced schedule; the hand rule measures nothing, so never calls it."""
    refuse_capture(g, task)
    return default_schedule(task, g.stats, Target.of(g.device))


def _plan(g: Graph, task: SpmmTask, schedule: SpmmSchedule):
    """The plan of ``task`` under ``schedule`` on ``g``, built on first use."""

    def build():
        refuse_capture(g, task)
        return build_plan(g, task, schedule, Target.of(g.device))

    return g.plans.get((task, schedule), build)


_OPERANDS = ("lhs", "rhs", "out", "arg_u", "arg_e")


def _forced(g: Graph, op: str, reduce: str, lhs, rhs, out_shape, with_arg: bool):
    """``call(schedule)``: this call under a forced schedule, its output (what a chooser that
    measures runs)."""

    def call(schedule: SpmmSchedule) -> torch.Tensor:
        result = run_spmm(g, op, reduce, lhs, rhs, out_shape, schedule, with_arg)
        return result[0] if with_arg else result

    return call


def bind_spmm(
    g: Graph,
    op: str,
    reduce: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    out_shape: tuple[int, ...],
    with_arg: bool = False,
    choose: Callable[[Graph, SpmmTask, Callable], SpmmSchedule] = hand_rule,
):
    """:func:`run_spmm` with ``choose``'s schedule for operands like these, resolved once.

    Returns ``run(lhs, rhs)``: for operands of the same shapes, dtype, device and alignment
    class as these, it allocates the outputs and launches the plan, and returns what
    :func:`run_spmm` returns. The task, the schedule and the plan are looked up here, not
    per call; a caller that keeps ``run`` must bind again when the graph's ``schedules`` or
    ``plans`` change (their ``generation``).
    """
    binop = BINARY_OPS[op]
    if with_arg and not REDUCERS[reduce].keeps_arg:
        raise ValueError(f"with_arg needs reduce max or min, got {reduce!r}")
    operand = lhs if lhs is not None else rhs
    dtype, device = operand.dtype, operand.device
    uses_lhs, uses_rhs = binop.uses_lhs, binop.uses_rhs
    lhs = lhs if uses_lhs else None  # as given: the task reads their facts, run() copies
    rhs = rhs if uses_rhs else None
    shape = (g.num_dst, *out_shape)
    launch = None
    if g.num_dst and math.prod(shape):
        task = task_for(g, op, reduce, lhs, rhs, out_shape, with_arg)
        plan = _plan(g, task, choose(g, task, _forced(g, op, reduce, lhs, rhs, out_shape, with_arg)))
        launch = plan.positional(*_OPERANDS) if isinstance(plan, Launch) else plan

    new_out = allocator(shape, dtype, device)
    if with_arg:
        new_arg = allocator(shape, torch.int64, device)

        def run_arg(lhs, rhs):
            out, arg_u, arg_e = new_out(), new_arg(), new_arg()
            if launch is not None:
                launch(lhs.contiguous() if uses_lhs else None, rhs.contiguous() if uses_rhs else None,
                       out, arg_u, arg_e)
            return out, arg_u, arg_e

        return run_arg

    def run(lhs, rhs):
        out = new_out()
        if launch is not None:
            launch(lhs.contiguous() if uses_lhs else None, rhs.contiguous() if uses_rhs else None,
                   out, None, None)
        return out

    return run


def run_spmm(
    g: Graph,
    op: str,
    reduce: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    out_shape: tuple[int, ...],
    schedule: SpmmSchedule | None = None,
    with_arg: bool = False,
    choose: Callable[[Graph, SpmmTask, Callable], SpmmSchedule] = hand_rule,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """g-SpMM with a generated kernel; operands as the front end hands them to backends.

    ``lhs`` ``[num_src, *lhs_shape]`` and ``rhs`` ``[num_edges, *rhs_shape]`` (user edge
    order) have the rank of ``out_shape``. Returns ``[num_dst, *out_shape]``, and with
    ``with_arg`` (max/min) also ``arg_u`` and ``arg_e`` (int64, same shape, -1 in empty rows).

    Without a forced ``schedule``, ``choose(g, task, call)`` picks one (:func:`hand_rule`
    by default; the front ends pass the tuner's), where ``call(schedule)`` runs this call with a
    forced schedule and returns its output.

    Raises TypeError for a forced ``schedule`` of another operator, ValueError when it is
    invalid, cannot run this task, or needs wider vectors than the operands' alignment
    allows.
    """
    binop = BINARY_OPS[op]
    if with_arg and not REDUCERS[reduce].keeps_arg:
        raise ValueError(f"with_arg needs reduce max or min, got {reduce!r}")
    if schedule is not None and not isinstance(schedule, SPMM_SCHEDULES):
        raise TypeError(f"schedule must be a g-SpMM schedule ({', '.join(c.__name__ for c in SPMM_SCHEDULES)}), "
                        f"got {type(schedule).__name__}")
    operand = lhs if lhs is not None else rhs
    dtype, device = operand.dtype, operand.device
    lhs = lhs.contiguous() if binop.uses_lhs else None
    rhs = rhs.contiguous() if binop.uses_rhs else None
    out = allocate((g.num_dst, *out_shape), dtype, device)
    arg_u = arg_e = None
    if with_arg:
        arg_u = allocate(out.shape, torch.int64, device)
        arg_e = allocate(out.shape, torch.int64, device)
    if g.num_dst == 0 or out.numel() == 0:
        return (out, arg_u, arg_e) if with_arg else out
    task = task_for(g, op, reduce, lhs, rhs, out_shape, with_arg)
    if schedule is None:
        schedule = choose(g, task, _forced(g, op, reduce, lhs, rhs, out_shape, with_arg))
    plan = _plan(g, task, schedule)
    plan(lhs=lhs, rhs=rhs, out=out, arg_u=arg_u, arg_e=arg_e)
    return (out, arg_u, arg_e) if with_arg else out
