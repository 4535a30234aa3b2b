"""g-SpMM on CUDA: the task of a call, its schedule (forced or chosen), the plan, the launch.

The package's modules, each with one job: :mod:`.task` (what a call computes),
:mod:`.schedule` (one type per skeleton), :mod:`.space` (what is worth measuring),
:mod:`.default` (the hand rule), :mod:`.codegen` (the CUDA source), :mod:`.structures`
and :mod:`.output_tiling` (graph layouts the skeletons walk), :mod:`.plan` (launches).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...algebra import BINARY_OPS, REDUCERS
from ...graph import Graph
from ...target import Target
from ..memory import allocate
from ..source import RUNTIME_LOADER
from ..operands import vector_limit
from . import codegen
from .default import default_schedule
from .plan import build_plan
from .schedule import SPMM_SCHEDULES, ColumnTiled, OnePass, OutputTiled, SplitRows, SpmmSchedule
from .space import schedule_space
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
    "chosen_schedule",
    "default_schedule",
    "load_kernels",
    "run_spmm",
    "schedule_space",
    "task_for",
]


def task_for(g: Graph, op: str, reduce: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None,
             out_shape: tuple[int, ...], with_arg: bool = False) -> SpmmTask:
    """The task of a g-SpMM on ``g`` with these operands (contiguous, of the output's rank)
    and output features ``out_shape``. The output's own storage is fresh, so aligned: only
    the operands can narrow the vectors."""
    out_shape = tuple(out_shape)
    dtype = (lhs if lhs is not None else rhs).dtype
    full = [t for t in (lhs, rhs) if t is not None and tuple(t.shape[1:]) == out_shape]
    return SpmmTask(
        op=op, reduce=reduce,
        lhs_shape=None if lhs is None else tuple(lhs.shape[1:]),
        rhs_shape=None if rhs is None else tuple(rhs.shape[1:]),
        out_shape=out_shape, dtype=dtype, index_dtype=g.index_dtype,
        has_eid=g.eid is not None and (BINARY_OPS[op].uses_rhs or with_arg),
        with_arg=with_arg,
        vector_ok=vector_limit(math.prod(out_shape), full, dtype),
    )


def load_kernels(task: SpmmTask, schedule: SpmmSchedule, device_index: int) -> None:
    """Compile (through the disk cache) and load the kernels ``schedule`` runs ``task`` with,
    without launching anything: what a tuner does ahead of measuring, in threads."""
    program = codegen.program(task.algorithm, schedule, task.num_features)
    for name in program.kernels:
        RUNTIME_LOADER.kernel(program, name, device_index)


def chosen_schedule(g: Graph, task: SpmmTask) -> SpmmSchedule:
    """The schedule a call of ``task`` on ``g`` runs when none is forced (the hand rule on
    the graph's device), chosen once per graph and task."""
    return g.schedules.get(task, lambda: default_schedule(task, g.stats, Target.of(g.device)))


def run_spmm(
    g: Graph,
    op: str,
    reduce: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    out_shape: tuple[int, ...],
    schedule: SpmmSchedule | None = None,
    with_arg: bool = False,
    choose: Callable[[Graph, SpmmTask, Callable], SpmmSchedule] | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """g-SpMM with a generated kernel; operands as the front end hands them to backends.

    ``lhs`` ``[num_src, *lhs_shape]`` and ``rhs`` ``[num_edges, *rhs_shape]`` (user edge
    order) have the rank of ``out_shape``. Returns ``[num_dst, *out_shape]``, and with
    ``with_arg`` (max/min) also ``arg_u`` and ``arg_e`` (int64, same shape, -1 in empty rows).

    Without a forced ``schedule``, ``choose(g, task, call)`` picks one (the hand rule by
    default; the tuner passes its own), where ``call(schedule)`` runs this call with a
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
    if schedule is None and choose is None:
        schedule = chosen_schedule(g, task)
    elif schedule is None:
        def call(forced: SpmmSchedule) -> torch.Tensor:
            result = run_spmm(g, op, reduce, lhs, rhs, out_shape, forced, with_arg)
            return result[0] if with_arg else result

        schedule = choose(g, task, call)
    plan = g.plans.get((task, schedule),
                       lambda: build_plan(g, task, schedule, Target.of(g.device)))
    plan(lhs=lhs, rhs=rhs, out=out, arg_u=arg_u, arg_e=arg_e)
    return (out, arg_u, arg_e) if with_arg else out
