"""Launch plans of g-SpMM: for one graph, task and schedule, the kernels compiled and
loaded, their geometry and every argument but the operands fixed.

A plan is built once per (task, schedule) and kept in the graph's ``plans`` cache, so a
repeated call only fills in the operands' pointers: on a small graph the host time is the
whole cost of a call. Call a plan with ``lhs``, ``rhs``, ``out``, ``arg_u`` and ``arg_e``
(None where unused).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType

import torch

from ...graph import Graph
from ...target import Target
from ..memory import allocate
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
from .codegen import column_tiled, one_pass, output_tiled, split_rows
from .schedule import ColumnTiled, OnePass, OutputTiled, SplitRows, SpmmSchedule
from .shapes import MAX_TILE_ROWS, column_tiled_block_rows, row_grid, tile_rows
from .structures import column_tiles, output_tiles, work_list
from .task import SpmmAlgorithm, SpmmTask

__all__ = ["Plan", "build_plan", "check_schedule"]

Plan = Callable[..., None]

def check_schedule(task: SpmmTask, schedule: SpmmSchedule) -> None:
    """ValueError unless ``schedule`` is valid and can run ``task`` (a forced schedule is
    checked here once, when its plan is built)."""
    schedule.validate()
    if schedule.vector_width > task.vector_ok:
        raise ValueError(
            f"schedule {schedule} loads {schedule.vector_width} features at a time, but these "
            f"operands allow at most {task.vector_ok} ({task.num_features} features per row; "
            f"vector loads need the row length to be a multiple of the width and aligned data "
            f"pointers)")
    if isinstance(schedule, ColumnTiled) and task.lhs_shape is None:
        raise ValueError(f"schedule {schedule} stages lhs in shared memory, but {task.op} reads "
                         f"no lhs; use a OnePass or SplitRows schedule")
    if isinstance(schedule, OutputTiled):
        if not task.algorithm.message_is_lhs:
            raise ValueError(f"schedule {schedule} is output-tiled, which runs copy_lhs of "
                             f"full-shape features without arg indices, not {task.algorithm}")
        if task.num_features > schedule.features_covered:
            raise ValueError(f"schedule {schedule} carries {schedule.features_covered} features "
                             f"per edge (vector_width * outputs_per_thread); these operands have "
                             f"{task.num_features}")


@functools.lru_cache(maxsize=1024)
def _fixed(task: SpmmTask, schedule: SpmmSchedule, device: torch.device) -> tuple[Program, Mapping]:
    """What a plan takes from neither its graph nor its calls, kept per task, schedule and
    device (the same for every block of a sampler): the schedule checked against the task,
    the program, and the operands' arguments (broadcast offsets, lengths)."""
    check_schedule(task, schedule)
    program = codegen.program(task.algorithm, schedule, task.num_features)
    operands = dict(
        lhs_offset=indexed_offsets(task.lhs_shape, task.out_shape, device),
        rhs_offset=indexed_offsets(task.rhs_shape, task.out_shape, device),
        num_features=task.num_features, lhs_len=task.lhs_len, rhs_len=task.rhs_len,
    )
    return program, MappingProxyType(operands)


# What the one-pass kernel takes from a graph; the rest is its task's and schedule's.
_ONE_PASS_GRAPH = ("rowptr", "col", "row_order", "eid", "num_rows")


@functools.lru_cache(maxsize=1024)
def _one_pass(task: SpmmTask, schedule: OnePass, device: torch.device) -> LaunchTemplate:
    """The one-pass launch of ``task`` under ``schedule`` on ``device`` but for a graph's
    arguments (:data:`_ONE_PASS_GRAPH`)."""
    program, fixed = _fixed(task, schedule, device)
    return LaunchTemplate(program, one_pass.KERNEL, _ONE_PASS_GRAPH, lhs=OPERAND, rhs=OPERAND,
                          out=OPERAND, arg_u=OPERAND, arg_e=OPERAND, **fixed)


def build_plan(g: Graph, task: SpmmTask, schedule: SpmmSchedule, target: Target,
               loader: KernelLoader = RUNTIME_LOADER) -> Plan:
    """The plan of ``task`` under ``schedule`` on ``g`` (see the module docstring)."""
    device = device_index(g.device)
    eid = g.eid if task.algorithm.has_eid else None
    if isinstance(schedule, OnePass):
        return _one_pass(task, schedule, g.device).prepare(
            device, row_grid(schedule, g.num_dst, task.num_features), schedule.threads, g.rowptr,
            g.col, g.degree_sorted_rows if schedule.degree_sorted else None, eid, g.num_dst,
            loader=loader, late=g.sync_free)
    program, fixed = _fixed(task, schedule, g.device)
    if isinstance(schedule, OutputTiled):
        return _output_tiled(g, task, schedule, target, program, device, loader)
    operands = dict(fixed, eid=eid)
    if isinstance(schedule, ColumnTiled):
        return _column_tiled(g, task, schedule, target, program, device, loader, operands)
    return _split_rows(g, task, schedule, program, device, loader, operands)


def _partials(count: int, algorithm: SpmmAlgorithm,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Storage for ``count`` unfinished results of the accumulator type (and their arg
    positions when the merge must name the winning edges)."""
    accumulator = torch.float64 if algorithm.dtype == torch.float64 else torch.float32
    partial = allocate((count,), accumulator, device)
    partial_arg = allocate((count,), torch.int64, device) if algorithm.with_arg else None
    return partial, partial_arg


def _tile_merge(program, device: int, loader: KernelLoader, g: Graph, eid: torch.Tensor | None,
                num_features: int, tiles: int, name: str):
    """The launch of a tile merge (:func:`~.codegen.walk.tile_merge_kernel`) over ``tiles``
    partial results per output element."""
    total = g.num_dst * num_features
    return program.prepare(name, device, (-(-total // 256),), 256, loader=loader,
                           rowptr=g.rowptr, col=g.col, eid=eid, partial=OPERAND,
                           partial_arg=OPERAND, out=OPERAND, arg_u=OPERAND, arg_e=OPERAND,
                           num_rows=g.num_dst, num_features=num_features, num_tiles=tiles)


def _column_tiled(g: Graph, task: SpmmTask, schedule: ColumnTiled, target: Target, program,
                  device: int, loader: KernelLoader, operands: dict) -> Plan:
    """Per-tile partial rows, then a merge in tile order."""
    shared_bytes = schedule.column_tile * task.lhs_len * task.dtype.itemsize
    limit = target.shared_bytes_per_block
    if shared_bytes > limit:
        raise ValueError(
            f"schedule {schedule} stages {schedule.column_tile} rows of {task.lhs_len} "
            f"{task.dtype} features ({shared_bytes} bytes); a block may use {limit}")
    index = tile_rows(g.num_src, g.num_dst, schedule.column_tile)
    if index > MAX_TILE_ROWS:
        raise ValueError(
            f"schedule {schedule} indexes the edges by (tile, row): {index} entries for "
            f"{g.num_src} sources in tiles of {schedule.column_tile} and {g.num_dst} rows, more "
            f"than {MAX_TILE_ROWS}; use a wider column_tile or another skeleton")
    tiles = column_tiles(g, schedule.column_tile)
    slices = -(-task.num_features // schedule.feature_slice)
    block_rows = column_tiled_block_rows(g.num_dst, tiles.tiles * slices, target.sms)
    first = program.prepare(
        column_tiled.KERNEL, device, (-(-g.num_dst // block_rows), tiles.tiles * slices),
        schedule.threads, shared_bytes=shared_bytes, loader=loader,
        tile_rowptr=tiles.tile_rowptr, local_col=tiles.local_col, position=tiles.position,
        row_order=g.degree_sorted_rows if schedule.degree_sorted else None,
        lhs_global=OPERAND, rhs=OPERAND, partial=OPERAND, partial_arg=OPERAND,
        num_rows=g.num_dst, num_src=g.num_src, num_tiles=tiles.tiles, block_rows=block_rows,
        **operands)
    merge = _tile_merge(program, device, loader, g, operands["eid"], task.num_features,
                        tiles.tiles, column_tiled.MERGE)
    count = tiles.tiles * g.num_dst * task.num_features

    def run(lhs, rhs, out, arg_u, arg_e) -> None:
        partial, partial_arg = _partials(count, task.algorithm, g.device)
        first(lhs_global=lhs, rhs=rhs, partial=partial, partial_arg=partial_arg)
        merge(partial=partial, partial_arg=partial_arg, out=out, arg_u=arg_u, arg_e=arg_e)

    return run


def _split_rows(g: Graph, task: SpmmTask, schedule: SplitRows, program, device: int,
                loader: KernelLoader, operands: dict) -> Plan:
    """Whole rows and chunks of long rows in one launch, then the merge of each split
    row's chunks in chunk order."""
    work = work_list(g, schedule.row_split, schedule.degree_sorted)
    first = program.prepare(
        split_rows.KERNEL, device, row_grid(schedule, work.num_items, task.num_features),
        schedule.threads, loader=loader, rowptr=g.rowptr, col=g.col, work_row=work.row,
        work_start=work.start, lhs=OPERAND, rhs=OPERAND, out=OPERAND, arg_u=OPERAND,
        arg_e=OPERAND, partial=OPERAND, partial_arg=OPERAND, num_items=work.num_items,
        num_chunks=work.num_chunks, **operands)
    merge = None
    if work.num_chunks:
        num_split = work.split_row.numel()
        merge = program.prepare(
            split_rows.MERGE, device, (-(-num_split * task.num_features // 256),), 256,
            loader=loader, rowptr=g.rowptr, col=g.col, eid=operands["eid"], partial=OPERAND,
            partial_arg=OPERAND, out=OPERAND, arg_u=OPERAND, arg_e=OPERAND,
            split_row=work.split_row, split_first=work.split_first, num_split=num_split,
            num_features=task.num_features)
    count = work.num_chunks * task.num_features

    def run(lhs, rhs, out, arg_u, arg_e) -> None:
        partial, partial_arg = _partials(count, task.algorithm, g.device)
        first(lhs=lhs, rhs=rhs, out=out, arg_u=arg_u, arg_e=arg_e, partial=partial,
              partial_arg=partial_arg)
        if merge is not None:
            merge(partial=partial, partial_arg=partial_arg, out=out, arg_u=arg_u, arg_e=arg_e)

    return run


def _output_tiled(g: Graph, task: SpmmTask, schedule: OutputTiled, target: Target, program,
                  device: int, loader: KernelLoader) -> Plan:
    """A block per (row range, column group); with several groups, their partial rows
    are folded in group order by a second kernel."""
    tiling, layout = output_tiles(g, task.num_features, task.dtype, schedule.warps_per_block,
                                  schedule.column_groups, target)
    first = program.prepare(
        output_tiled.KERNEL, device, (tiling.blocks,), schedule.threads,
        shared_bytes=tiling.shared_bytes, loader=loader, words=layout.words,
        chunk_ptr=layout.chunk_ptr, block_rows=layout.block_rows, rowptr=g.rowptr,
        lhs=OPERAND, out=OPERAND, partial=OPERAND, num_rows=g.num_dst, num_src=g.num_src,
        num_tiles=tiling.tiles, group_tiles=tiling.group_tiles, tile_cols=tiling.tile_cols,
        rows_bytes=tiling.rows_bytes)
    if schedule.column_groups == 1:
        def run(lhs, rhs, out, arg_u, arg_e) -> None:
            first(lhs=lhs, out=out, partial=None)

        return run
    merge = _tile_merge(program, device, loader, g, None, task.num_features,
                        tiling.column_groups, output_tiled.MERGE)
    count = tiling.column_groups * g.num_dst * task.num_features

    def run_groups(lhs, rhs, out, arg_u, arg_e) -> None:
        partial, _ = _partials(count, task.algorithm, g.device)
        first(lhs=lhs, out=out, partial=partial)
        merge(partial=partial, partial_arg=None, out=out, arg_u=None, arg_e=None)

    return run_groups
