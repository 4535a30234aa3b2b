"""g-SDDMM on CUDA: the task of a call, its schedule (forced or chosen), the plan, the launch.

The package's modules: :mod:`.task` (what a call computes), :mod:`.schedule` (one type
per skeleton), :mod:`.space`, :mod:`.default` (the hand rule), :mod:`.codegen` (the CUDA
source) and :mod:`.plan` (launches).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from ...algebra import BINARY_OPS
from ...graph import Graph
from ...target import Target
from ..memory import allocate, allocator
from ..source import RUNTIME_LOADER, Launch, refuse_capture
from ..operands import operand_facts, vector_limit
from . import codegen
from .default import default_schedule
from .plan import build_plan
from .schedule import SDDMM_SCHEDULES, Edge, EdgeTransposed, Row, RowTransposed, SddmmSchedule
from .space import pruned_space, register_spills, schedule_space
from .task import SddmmAlgorithm, SddmmTask

__all__ = [
    "SDDMM_SCHEDULES",
    "Edge",
    "EdgeTransposed",
    "Row",
    "RowTransposed",
    "SddmmAlgorithm",
    "SddmmSchedule",
    "SddmmTask",
    "bind_sddmm",
    "default_schedule",
    "hand_rule",
    "load_kernels",
    "pruned_space",
    "register_spills",
    "run_sddmm",
    "schedule_space",
    "task_for",
]

_MAX_INT32 = 2**31 - 1


def task_for(g: Graph, op: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None,
             lhs_target: str, rhs_target: str, out_shape: tuple[int, ...]) -> SddmmTask:
    """The task of a g-SDDMM on ``g`` with these operands (of the output's rank)
    and output features ``out_shape`` (ending in 1 for ``dot``). The output's own storage
    is fresh, so aligned: only the operands and the row length can narrow the vectors.

    Calls with the same facts get the same task object (see
    :func:`gsparse.kernels.spmm.task_for`)."""
    dtype = (lhs if lhs is not None else rhs).dtype
    return _task(op, operand_facts(lhs), operand_facts(rhs), lhs_target, rhs_target, tuple(out_shape), dtype,
                 g.index_dtype, g.eid is not None)


@functools.lru_cache(maxsize=1024)
def _task(op: str, lhs: tuple[tuple[int, ...], int] | None, rhs: tuple[tuple[int, ...], int] | None,
          lhs_target: str, rhs_target: str, out_shape: tuple[int, ...], dtype: torch.dtype,
          index_dtype: torch.dtype, has_eid: bool) -> SddmmTask:
    binop = BINARY_OPS[op]
    if binop.reduces_last_dim:
        head_len = (lhs if lhs is not None else rhs)[0][-1]
        num_heads = math.prod(out_shape[:-1])
        full_shape = (*out_shape[:-1], head_len)
    else:
        num_heads, head_len, full_shape = 1, math.prod(out_shape), out_shape
    full = [offset for shape, offset in filter(None, (lhs, rhs)) if shape == full_shape]
    return SddmmTask(
        op=op,
        lhs_target=lhs_target if binop.uses_lhs else None,
        rhs_target=rhs_target if binop.uses_rhs else None,
        lhs_shape=None if lhs is None else lhs[0],
        rhs_shape=None if rhs is None else rhs[0],
        full_shape=full_shape, num_heads=num_heads, dtype=dtype, index_dtype=index_dtype,
        has_eid=has_eid, vector_ok=vector_limit(head_len, full, dtype),
    )


def load_kernels(task: SddmmTask, schedule: SddmmSchedule, device_index: int) -> None:
    """Compile (through the disk cache) and load the kernels ``schedule`` runs ``task`` with,
    without launching anything: what a tuner does ahead of measuring, in threads."""
    program = codegen.program(task.algorithm, schedule)
    for name in program.kernels:
        RUNTIME_LOADER.kernel(program, name, device_index)


def hand_rule(g: Graph, task: SddmmTask, call: Callable | None = None) -> SddmmSchedule:
    """The hand rule's schedule of ``task`` on ``g``'s device: the chooser of calls that pass
    none (the front ends pass the tuner's, :func:`gsparse.tune.select.choose`). ``call`` runs
    the task under a forced schedule; the hand rule measures nothing, so never calls it."""
    refuse_capture(g, task)
    return default_schedule(task, g.stats, Target.of(g.device))


def _plan(g: Graph, task: SddmmTask, schedule: SddmmSchedule):
    """The plan of ``task`` under ``schedule`` on ``g``, built on first use."""

    def build():
        refuse_capture(g, task)
        return build_plan(g, task, schedule)

    return g.plans.get((task, schedule), build)


def _forced(g: Graph, op: str, lhs, rhs, lhs_target: str, rhs_target: str, out_shape):
    """``call(schedule)``: this call under a forced schedule, its output (what a chooser that
    measures runs)."""
    return lambda schedule: run_sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule)


def _checked_task(g: Graph, op: str, lhs, rhs, lhs_target: str, rhs_target: str,
                  out_shape: tuple[int, ...]) -> SddmmTask:
    task = task_for(g, op, lhs, rhs, lhs_target, rhs_target, out_shape)
    if task.num_heads * task.head_len > _MAX_INT32:
        raise ValueError(f"{task.num_heads * task.head_len} features per edge; generated kernels "
                         f"index the features of one row with 32-bit integers (at most {_MAX_INT32})")
    return task


def bind_sddmm(
    g: Graph,
    op: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    lhs_target: str,
    rhs_target: str,
    out_shape: tuple[int, ...],
    choose: Callable[[Graph, SddmmTask, Callable], SddmmSchedule] = hand_rule,
):
    """:func:`run_sddmm` with ``choose``'s schedule for operands like these, resolved once:
    returns ``run(lhs, rhs)`` (see :func:`~gsparse.kernels.spmm.bind_spmm`)."""
    binop = BINARY_OPS[op]
    operand = lhs if lhs is not None else rhs
    dtype, device = operand.dtype, operand.device
    uses_lhs, uses_rhs = binop.uses_lhs, binop.uses_rhs
    lhs = lhs if uses_lhs else None  # as given: the task reads their facts, run() copies
    rhs = rhs if uses_rhs else None
    shape = (g.num_edges, *out_shape)
    launch, zero = None, False
    if math.prod(shape):
        task = _checked_task(g, op, lhs, rhs, lhs_target, rhs_target, out_shape)
        if task.head_len == 0:  # a dot over nothing
            zero = True
        else:
            schedule = choose(g, task, _forced(g, op, lhs, rhs, lhs_target, rhs_target, out_shape))
            plan = _plan(g, task, schedule)
            launch = plan.positional("lhs", "rhs", "out") if isinstance(plan, Launch) else plan

    new_out = allocator(shape, dtype, device)

    def run(lhs, rhs):
        out = new_out()
        if launch is not None:
            launch(lhs.contiguous() if uses_lhs else None, rhs.contiguous() if uses_rhs else None, out)
        elif zero:
            out.zero_()
        return out

    return run


def run_sddmm(
    g: Graph,
    op: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    lhs_target: str,
    rhs_target: str,
    out_shape: tuple[int, ...],
    schedule: SddmmSchedule | None = None,
    choose: Callable[[Graph, SddmmTask, Callable], SddmmSchedule] = hand_rule,
) -> torch.Tensor:
    """g-SDDMM with a generated kernel; operands as the front end hands them to backends.

    ``lhs`` / ``rhs`` are ``[rows, *shape]`` with rows on their target (edge operands in
    user edge order) and the rank of ``out_shape``; for ``dot``, ``out_shape`` ends in 1
    and the operands' last dimension is the one reduced. Returns ``[num_edges, *out_shape]``
    in user edge order.

    Without a forced ``schedule``, ``choose(g, task, call)`` picks one (:func:`hand_rule`
    by default; the front ends pass the tuner's), where ``call(schedule)`` runs this call with a
    forced schedule and returns its output.

    Raises TypeError for a forced ``schedule`` of another operator, ValueError when it is
    invalid or cannot run this task (see :func:`~.plan.check_schedule`).
    """
    binop = BINARY_OPS[op]
    if schedule is not None and not isinstance(schedule, SDDMM_SCHEDULES):
        raise TypeError(f"schedule must be a g-SDDMM schedule ({', '.join(c.__name__ for c in SDDMM_SCHEDULES)}), "
                        f"got {type(schedule).__name__}")
    operand = lhs if lhs is not None else rhs
    lhs = lhs.contiguous() if binop.uses_lhs else None
    rhs = rhs.contiguous() if binop.uses_rhs else None
    out = allocate((g.num_edges, *out_shape), operand.dtype, operand.device)
    if out.numel() == 0:
        return out
    task = _checked_task(g, op, lhs, rhs, lhs_target, rhs_target, out_shape)
    if task.head_len == 0:  # a dot over nothing
        return out.zero_()
    if schedule is None:
        schedule = choose(g, task, _forced(g, op, lhs, rhs, lhs_target, rhs_target, out_shape))
    plan = _plan(g, task, schedule)
    plan(lhs=lhs, rhs=rhs, out=out)
    return out
