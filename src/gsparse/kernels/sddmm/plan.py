"""Launch plans of g-SDDMM: for one graph, task and schedule, the kernel compiled and
loaded, one launch per slice of ``features_per_launch`` features, every argument but the
operands fixed. Kept in the graph's ``plans`` cache; call a plan with ``lhs``, ``rhs``
and ``out``."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType

import torch

from ...graph import Graph
from ..operands import indexed_offsets
from ..source import (
    OPERAND,
    RUNTIME_LOADER,
    KernelLoader,
    LaunchTemplate,
    Program,
    device_index,
)
from . import codegen
from .schedule import Edge, EdgeTransposed, Row, RowTransposed, SddmmSchedule
from .task import SddmmTask

__all__ = ["MAX_GRID_X", "MAX_GRID_Y", "Plan", "build_plan", "check_schedule", "grid"]

Plan = Callable[..., None]

# CUDA's limits on a grid's x and y.
MAX_GRID_X = 2**31 - 1
MAX_GRID_Y = 65535


def check_schedule(task: SddmmTask, schedule: SddmmSchedule) -> None:
    """ValueError unless ``schedule`` is valid and can run ``task``."""
    schedule.validate()
    head_len = task.head_len
    if schedule.vector_width > task.vector_ok:
        raise ValueError(
            f"schedule {schedule} moves {schedule.vector_width} features at a time, but these "
            f"operands allow at most {task.vector_ok} ({head_len} features per head; vector "
            f"accesses need the head length to be a multiple of the width and aligned data "
            f"pointers)")
    if schedule.features_per_launch and task.is_dot and task.dtype.itemsize < 4:
        raise ValueError(
            f"schedule {schedule} splits a {task.dtype} dot across launches, which would round "
            f"its partial sums to {task.dtype} in between; use features_per_launch=0")
    if isinstance(schedule, RowTransposed) and not task.is_dot:
        raise ValueError(f"schedule {schedule} transposes a dot's reduction; {task.op} has none "
                         f"(use a Row schedule)")
    launch_len = schedule.launch_len(head_len)
    if not isinstance(schedule, Edge) and task.is_dot and schedule.feature_slice < launch_len:
        raise ValueError(
            f"schedule {schedule} is a {type(schedule).__name__} schedule whose slice of "
            f"{schedule.feature_slice} features cannot hold the {launch_len} features of a dot "
            f"head that one launch covers; widen lanes, features_per_thread or vector_width, "
            f"set features_per_launch to the slice, or use an Edge schedule")


def grid(schedule: SddmmSchedule, task: SddmmTask, num_edges: int, num_rows: int) -> tuple[int, int]:
    """Blocks over edges (Edge), over ranges of edges and chunks (EdgeTransposed) or over
    rows and chunks (the row skeletons). A chunk is a head for ``dot``, a feature slice
    otherwise. The edge kernels stride over what the grid does not cover, so the limits on
    the grid's size never leave work undone. The cost model's features compute the same
    for a whole space at once (``gsparse.tune.features``; tests/tune/test_features.py
    compares them)."""
    if isinstance(schedule, Edge):
        groups, chunks = num_edges, 1
    else:
        span = schedule.launch_len(task.head_len)
        chunks = task.num_heads if task.is_dot else -(-span // schedule.feature_slice)
        groups = (-(-num_edges // schedule.edges_per_warp) if isinstance(schedule, EdgeTransposed)
                  else num_rows)
    blocks = min(-(-groups // schedule.groups_per_block), MAX_GRID_X)
    return blocks, min(chunks, MAX_GRID_Y)


@functools.lru_cache(maxsize=1024)
def _fixed(task: SddmmTask, schedule: SddmmSchedule, device: torch.device) -> tuple[Program, Mapping]:
    """What a plan takes from neither its graph nor its calls, kept per task, schedule and
    device (the same for every block of a sampler): the schedule checked against the task,
    the program, and the operands' arguments (broadcast offsets, lengths, slots)."""
    check_schedule(task, schedule)
    program = codegen.program(task.algorithm, schedule)
    operands = dict(
        lhs_offset=indexed_offsets(task.lhs_shape, task.full_shape, device),
        rhs_offset=indexed_offsets(task.rhs_shape, task.full_shape, device),
        num_heads=task.num_heads, head_len=task.head_len, lhs_len=task.lhs_len, rhs_len=task.rhs_len,
        lhs=OPERAND, rhs=OPERAND, out=OPERAND,
    )
    return program, MappingProxyType(operands)


# What the kernel takes from a graph; the rest is its task's and schedule's.
_GRAPH = ("rowptr", "col", "dst", "eid", "num_rows", "num_edges")


@functools.lru_cache(maxsize=1024)
def _launches(task: SddmmTask, schedule: SddmmSchedule, device: torch.device) -> tuple[LaunchTemplate, ...]:
    """The launches of ``task`` under ``schedule`` on ``device``, one per slice of the head
    (first feature, end, add to out's partial sums), but for a graph's arguments (:data:`_GRAPH`)."""
    program, operands = _fixed(task, schedule, device)
    head_len = task.head_len
    step = schedule.launch_len(head_len)
    return tuple(LaunchTemplate(program, codegen.KERNEL, _GRAPH, d_begin=begin,
                                d_end=min(head_len, begin + step), accumulate=int(begin > 0), **operands)
                 for begin in range(0, head_len, step))


def build_plan(g: Graph, task: SddmmTask, schedule: SddmmSchedule,
               loader: KernelLoader = RUNTIME_LOADER) -> Plan:
    """The plan of ``task`` under ``schedule`` on ``g``: one launch, or a function of
    ``lhs``, ``rhs`` and ``out`` that makes one per slice of the head."""
    templates = _launches(task, schedule, g.device)
    walks_rows = isinstance(schedule, (Row, RowTransposed))
    targets = task.algorithm.targets()
    values = (g.rowptr if walks_rows else None, g.col if "u" in targets else None,
              g.csr_dst if not walks_rows and "v" in targets else None, g.eid, g.num_dst, g.num_edges)
    device = device_index(g.device)
    geometry = grid(schedule, task, g.num_edges, g.num_dst)
    launches = [template.prepare(device, geometry, schedule.threads, *values, loader=loader, late=g.sync_free)
                for template in templates]
    if len(launches) == 1:
        return launches[0]

    def run(lhs, rhs, out) -> None:
        for launch in launches:
            launch(lhs=lhs, rhs=rhs, out=out)

    return run
