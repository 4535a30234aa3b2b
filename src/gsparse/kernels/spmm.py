"""g-SpMM on CUDA: picks or checks a schedule, generates, compiles (cached) and launches.

Public entry points: :class:`SpmmSchedule`, :func:`schedule_space` (the pruned grid the
sweep explores), :func:`default_schedule` (the rule used before any measurement) and
:func:`run_spmm` (what the CUDA backend calls).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import torch

from .. import runtime
from ..algebra import BINARY_OPS, REDUCERS
from ..graph import Graph
from . import spmm_output_tiled as output_tiled
from .common import (
    VECTOR_BYTES,
    element_size,
    indexed_offsets,
    l2_bytes,
    operand_layout,
    sm_count,
    vector_limit,
)
from .spmm_codegen import (
    KERNEL_NAME,
    MERGE_KERNEL_NAME,
    SPLIT_KERNEL_NAME,
    SPLIT_MERGE_KERNEL_NAME,
    TILED_KERNEL_NAME,
    SpmmAlgorithm,
    generate,
    generate_split,
    generate_tiled,
    launch_geometry,
)
from .spmm_schedule import SpmmSchedule, default_schedule_for, row_splits_for, schedule_grid

__all__ = ["SpmmSchedule", "default_schedule", "run_spmm", "schedule_space"]

_IN = runtime.OPERAND  # an argument each call of a prepared launch fills in


@functools.lru_cache(maxsize=64)
def _shared_bytes_limit(device: torch.device) -> int:
    """Shared memory one block may opt in to (227 KB on H100s; 99 KB assumed elsewhere)."""
    if device.type != "cuda":
        return 99 * 1024
    return torch.cuda.get_device_properties(device).shared_memory_per_block_optin


# Output rows one block of the column-tiled skeleton may cover, widest first, and the
# blocks per SM its grid keeps at least (see _tiled_block_rows).
_TILED_BLOCK_ROWS = (4096, 2048, 1024)
_TILED_BLOCKS_PER_SM = 3


def _tiled_block_rows(num_rows: int, tile_blocks: int, sms: int) -> int:
    """Output rows per block of the column-tiled skeleton, chosen at launch.

    The widest of 4,096, 2,048 and 1,024 whose grid (``tile_blocks`` blocks per row range:
    tiles times feature slices) still has 3 blocks per SM; else 1,024. Every block stages a
    whole tile, so fewer, wider blocks stage less, but with fewer than about 3 blocks per
    SM the unequal tiles and the last partial wave leave SMs idle. On the H100 (reddit-
    and proteins-like at 1, 2 and 4 features) the rule's choice was within 1.05x of the
    best of the three in every cell; the choice mattered up to 1.26x (reddit-like, 4
    features, 17 tiles: 4,096 rows against 1,024) and 1.21x the other way (proteins-like,
    1 feature, 3 tiles: 1,024 rows, 390 blocks, against 4,096, 99 blocks).
    """
    for rows in _TILED_BLOCK_ROWS:
        if tile_blocks * -(-num_rows // rows) >= _TILED_BLOCKS_PER_SM * sms:
            return rows
    return _TILED_BLOCK_ROWS[-1]


def _column_tile_for(g: Graph, lhs_len: int, dtype: torch.dtype) -> int:
    """The widest column tile (multiple of 1024 rows of ``lhs``) shared memory holds, or 0."""
    rows = _shared_bytes_limit(g.device) // max(1, lhs_len * element_size(dtype))
    return min(65536, rows // 1024 * 1024)


def schedule_space(
    g: Graph, feature_len: int, dtype: torch.dtype = torch.float32
) -> list[SpmmSchedule]:
    """The pruned grid of schedules for ``g`` and ``feature_len`` features (all valid).

    For up to 8 features it includes the column-tiled skeleton (tiles as wide as shared
    memory allows), with a warp or half a warp per row. On graphs whose longest row is
    far longer than the mean, each degree-sorted schedule of the grid is also tried with
    its long rows split into chunks (:func:`row_splits_for` picks the chunk lengths).
    """
    grid = schedule_grid(feature_len, vector_ok=VECTOR_BYTES // element_size(dtype))
    space = list(grid)
    tile = _column_tile_for(g, feature_len, dtype)
    if feature_len <= 8 and tile:
        for schedule in [s for s in grid if s.nnz_tile == 1 and not s.index_tile]:
            if schedule.group >= 16:
                space.append(dataclasses.replace(
                    schedule, column_tile=tile, rows_per_block=1024 // schedule.group))
    for split in row_splits_for(g.row_stats.mean, g.row_stats.max):
        space += [dataclasses.replace(s, row_split=split) for s in grid if s.degree_sorted]
    space += output_tiled.schedules_for(feature_len, dtype)
    return space


def default_schedule(
    g: Graph, feature_len: int, dtype: torch.dtype = torch.float32, vector_ok: int = 8,
    *, lhs_len: int | None = None, lhs_only: bool = False,
) -> SpmmSchedule:
    """The schedule used when none is given, from the graph's statistics (no measurement).

    Up to 4 features, when the message is ``lhs`` itself (``lhs_only``: copy_lhs with no
    arg indices), the output-tiled skeleton (:func:`_output_tiled_default`), unless its
    staging of ``lhs`` would outweigh the edges. Otherwise, up to 4 features, when ``lhs``
    is read (``lhs_len`` its row length), the column-tiled skeleton is used if its
    per-tile row pointers stay small next to the edges (at most one per 8 edges): there,
    gathers from shared memory beat L2's sector rate. It runs half a warp per row, 1,024
    threads per block, rows in natural order (measured best on the H100 sweep).
    """
    schedule = _default_schedule_for(
        mean_degree=g.row_stats.mean,
        cov=g.row_stats.cov,
        feature_len=feature_len,
        vector_ok=vector_ok,
        l2_bytes=l2_bytes(g.device),
        source_rows=g.num_src,
        element_bytes=element_size(dtype),
        max_degree=g.row_stats.max,
    )
    if lhs_len is None or feature_len > 4:
        return schedule
    if lhs_only and (tiled := _output_tiled_default(g, feature_len, dtype, vector_ok)):
        return tiled
    tile = _column_tile_for(g, lhs_len, dtype)
    tiles = -(-g.num_src // tile) if tile else 0
    if tile and tiles * (g.num_dst + 1) * 8 <= g.num_edges:
        edge_lanes = 16 // schedule.feature_lanes
        schedule = dataclasses.replace(
            schedule, column_tile=tile, nnz_tile=1, index_tile=False, degree_sorted=False,
            edge_lanes=edge_lanes, rows_per_block=1024 // (schedule.feature_lanes * edge_lanes))
    return schedule


def _output_tiled_default(
    g: Graph, feature_len: int, dtype: torch.dtype, vector_ok: int
) -> SpmmSchedule | None:
    """The output-tiled schedule for ``g``, or None where staging would outweigh the edges.

    - Column groups: 4 where ``lhs`` makes 8 or more tiles of half of shared memory, 2 from
      4 tiles, else 1: more groups stage less per block, but a group of few tiles leaves
      its blocks unequal.
    - Warps per block (:func:`~.spmm_output_tiled.warps_for`): 16 for short rows (mean
      below 128), 32 for long ones (8 / 16 for float64).
    - None when the blocks would stage more than 8 bytes of ``lhs`` per edge: there the
      one-pass gathers move less (products-like at 4 features, 1.7 against ~3.3 ms; graphs
      with few edges per source row).

    Measured on the H100 (the bench sweep of 2026-11-24, copy_lhs + sum, fp32;
    docs/performance.md, "Output-tiled g-SpMM"): the rule's pick is the best schedule of
    the space at 1 and 2 features on products-, reddit- and proteins-like (within 1.02x),
    and at 4 features the space's best is output-tiled on reddit- and proteins-like.
    """
    if feature_len > output_tiled.MAX_FEATURES:
        return None
    lhs_bytes = g.num_src * feature_len * element_size(dtype)
    tiles = lhs_bytes / (_shared_bytes_limit(g.device) / 2)
    groups = 4 if tiles >= 8 else 2 if tiles >= 4 else 1
    if -(-sm_count(g.device) // groups) * lhs_bytes > 8 * g.num_edges:
        return None
    short_rows, long_rows = output_tiled.warps_for(dtype)
    warps = short_rows if g.row_stats.mean < 128 else long_rows
    return output_tiled.schedule_for(feature_len, dtype, warps, groups, vector_ok)


_default_schedule_for = functools.lru_cache(maxsize=4096)(default_schedule_for)


def _allocate(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Storage for outputs and partial results, every element of which a kernel writes
    before anything reads it. Tests poison it through this hook."""
    return torch.empty(shape, dtype=dtype, device=device)


@functools.lru_cache(maxsize=1024)
def _kernel(
    algorithm: SpmmAlgorithm, schedule: SpmmSchedule, device_index: int
) -> tuple[runtime.Kernel, str]:
    """The loaded kernel and its description for errors, found without hashing the source
    again on every call."""
    context = f"{algorithm} | schedule {schedule}"
    kernel = runtime.get_kernel(generate(algorithm, schedule), KERNEL_NAME, context=context,
                                device=device_index)
    return kernel, context


def run_spmm(
    g: Graph,
    op: str,
    reduce: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    out_shape: tuple[int, ...],
    schedule: SpmmSchedule | None = None,
    with_arg: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """g-SpMM with a generated kernel; operands as the front end hands them to backends.

    ``lhs`` ``[num_src, *lhs_shape]`` and ``rhs`` ``[num_edges, *rhs_shape]`` (user edge
    order) have the rank of ``out_shape``. Returns ``[num_dst, *out_shape]``, and with
    ``with_arg`` (max/min) also ``arg_u`` and ``arg_e`` (int64, same shape, -1 in empty rows).

    Raises ValueError when a forced ``schedule`` is invalid or needs wider vectors than the
    operands' alignment allows.
    """
    binop = BINARY_OPS[op]
    if with_arg and not REDUCERS[reduce].keeps_arg:
        raise ValueError(f"with_arg needs reduce max or min, got {reduce!r}")
    operand = lhs if lhs is not None else rhs
    dtype, device = operand.dtype, operand.device
    num_features = math.prod(out_shape)
    lhs = lhs.contiguous() if binop.uses_lhs else None
    rhs = rhs.contiguous() if binop.uses_rhs else None
    out = _allocate((g.num_dst, *out_shape), dtype, device)
    arg_u = arg_e = None
    if with_arg:
        arg_u = _allocate(out.shape, torch.int64, device)
        arg_e = _allocate(out.shape, torch.int64, device)
    if g.num_dst == 0 or num_features == 0:
        return (out, arg_u, arg_e) if with_arg else out
    if schedule is not None and not isinstance(schedule, SpmmSchedule):
        raise TypeError(f"schedule must be an SpmmSchedule, got {type(schedule).__name__}")

    full = [t for t in (lhs, rhs) if t is not None and tuple(t.shape[1:]) == tuple(out_shape)]
    vector_ok = vector_limit(num_features, [*full, out], dtype)
    key = _PlanKey(op, reduce, None if lhs is None else tuple(lhs.shape[1:]),
                   None if rhs is None else tuple(rhs.shape[1:]), tuple(out_shape), dtype,
                   with_arg, vector_ok, schedule, device)
    plan = g.derived(("gsparse.kernels.spmm.plan", key), lambda g: _plan(g, key))
    plan(lhs, rhs, out, arg_u, arg_e)
    return (out, arg_u, arg_e) if with_arg else out


@dataclasses.dataclass(frozen=True)
class _PlanKey:
    """Everything a g-SpMM launch depends on besides the operands' data."""

    op: str
    reduce: str
    lhs_shape: tuple[int, ...] | None
    rhs_shape: tuple[int, ...] | None
    out_shape: tuple[int, ...]
    dtype: torch.dtype
    with_arg: bool
    vector_ok: int
    schedule: SpmmSchedule | None
    device: torch.device


_Launch = Callable[..., None]


def _plan(g: Graph, key: _PlanKey) -> _Launch:
    """The launches of one g-SpMM on ``g``: schedule chosen (or checked), kernels compiled
    and loaded, geometry and scalar arguments computed. Kept with the graph, so that a
    repeated call only fills in the operands' pointers: on a small graph the host time is
    the whole cost of a call."""
    binop = BINARY_OPS[key.op]
    num_features = math.prod(key.out_shape)
    lhs_len = 0 if key.lhs_shape is None else math.prod(key.lhs_shape)
    algorithm = SpmmAlgorithm(
        op=key.op,
        reduce=key.reduce,
        lhs_layout=None if key.lhs_shape is None else operand_layout(key.lhs_shape, key.out_shape),
        rhs_layout=None if key.rhs_shape is None else operand_layout(key.rhs_shape, key.out_shape),
        dtype=key.dtype,
        index_dtype=g.index_dtype,
        has_eid=g.eid is not None and (binop.uses_rhs or key.with_arg),
        with_arg=key.with_arg,
    )
    schedule = key.schedule
    if schedule is None:
        schedule = default_schedule(g, num_features, key.dtype, key.vector_ok,
                                    lhs_len=lhs_len if binop.uses_lhs else None,
                                    lhs_only=output_tiled.supports(algorithm))
    else:
        schedule.validate()
        if schedule.vector_width > key.vector_ok:
            raise ValueError(
                f"schedule {schedule} loads {schedule.vector_width} features at a time, but "
                f"these operands allow at most {key.vector_ok} ({num_features} features per "
                f"row; vector loads need the row length to be a multiple of the width and "
                f"aligned data pointers)"
            )
    device_index = key.device.index if key.device.index is not None else torch.cuda.current_device()
    if schedule.column_tile and key.lhs_shape is None:
        # Nothing to stage (copy_rhs): the schedule's other knobs run the one-pass skeleton.
        schedule = dataclasses.replace(schedule, column_tile=0)
    if schedule.output_tile and not output_tiled.supports(algorithm):
        # The output-tiled skeleton keeps no edge positions (for rhs or arg indices): the
        # schedule's other knobs (a warp of edge lanes per row) run the one-pass skeleton.
        schedule = dataclasses.replace(schedule, output_tile=False, column_groups=1)
    if schedule.output_tile:
        return _output_tiled_plan(g, algorithm, schedule, num_features, device_index)
    offsets = (indexed_offsets(key.lhs_shape, key.out_shape, key.device),
               indexed_offsets(key.rhs_shape, key.out_shape, key.device))
    rhs_len = 0 if key.rhs_shape is None else math.prod(key.rhs_shape)
    if schedule.column_tile:
        return _tiled_plan(g, algorithm, schedule, lhs_len, rhs_len, num_features, offsets, device_index)
    if schedule.row_split:
        return _split_plan(g, algorithm, schedule, lhs_len, rhs_len, num_features, offsets, device_index)
    kernel, context = _kernel(algorithm, schedule, device_index)
    geometry = launch_geometry(schedule, g.num_dst, num_features)
    graph_args = [g.rowptr, g.col, g.eid if algorithm.has_eid else None,
                  g.degree_sorted_rows if schedule.degree_sorted else None]
    scalars = [runtime.i64(g.num_dst), runtime.i32(num_features), runtime.i64(lhs_len),
               runtime.i64(rhs_len)]
    # called with (lhs, rhs, out, arg_u, arg_e)
    return kernel.prepare(geometry.grid, geometry.block,
                          [*graph_args, _IN, _IN, *offsets, _IN, _IN, _IN, *scalars],
                          context=context)


def _column_tiles(g: Graph, tile: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(tile_rowptr [tiles * num_dst + 1], local_col [E] 16-bit, position [E], tiles).

    The edges grouped by (column tile, row), built once per graph and tile width and kept
    with the graph. Stable in CSR order within a (tile, row), so the first winning edge of a
    row is still the one at the lowest CSR position.
    """

    def build(g: Graph) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
        tiles = max(1, -(-g.num_src // tile))
        col = g.col.long()
        key = (col // tile) * g.num_dst + g.csr_dst.long()
        order = torch.sort(key, stable=True).indices
        local = col[order] % tile
        # 16-bit storage of values < 65536: int16 with the same bit pattern as uint16
        local_col = torch.where(local >= 32768, local - 65536, local).to(torch.int16)
        counts = torch.bincount(key, minlength=tiles * g.num_dst)
        tile_rowptr = torch.zeros(tiles * g.num_dst + 1, dtype=g.index_dtype, device=g.device)
        tile_rowptr[1:] = torch.cumsum(counts, 0)
        return tile_rowptr, local_col, order.to(g.index_dtype), tiles

    return g.derived(("gsparse.kernels.spmm.column_tiles", tile), build)


@functools.lru_cache(maxsize=256)
def _two_pass_kernels(
    algorithm: SpmmAlgorithm, schedule: SpmmSchedule, device_index: int
) -> tuple[runtime.Kernel, runtime.Kernel, str]:
    """The first pass and the merge of the column-tiled or the split-row skeleton."""
    context = f"{algorithm} | schedule {schedule}"
    if schedule.column_tile:
        source = generate_tiled(algorithm, schedule)
        names = TILED_KERNEL_NAME, MERGE_KERNEL_NAME
    else:
        source = generate_split(algorithm, schedule)
        names = SPLIT_KERNEL_NAME, SPLIT_MERGE_KERNEL_NAME
    first, merge = (runtime.get_kernel(source, name, context=context, device=device_index)
                    for name in names)
    return first, merge, context


def _partials(
    count: int, algorithm: SpmmAlgorithm, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Storage for ``count`` unfinished results of the accumulator type (and their arg
    positions when the merge must name the winning edges)."""
    accumulator = torch.float64 if algorithm.dtype == torch.float64 else torch.float32
    partial = _allocate((count,), accumulator, device)
    partial_arg = _allocate((count,), torch.int64, device) if algorithm.with_arg else None
    return partial, partial_arg


def _tile_merge_launch(merge: runtime.Kernel, g: Graph, eid: torch.Tensor | None,
                       num_features: int, tiles: int, context: str):
    """The prepared launch of :func:`~.spmm_codegen.tile_merge_kernel` over ``tiles``
    partial results per output element; call it with ``(partial, partial_arg, out, arg_u,
    arg_e)``."""
    total = g.num_dst * num_features
    return merge.prepare((-(-total // 256),), 256,
                         [g.rowptr, g.col, eid, _IN, _IN, _IN, _IN, _IN, runtime.i64(g.num_dst),
                          runtime.i32(num_features), runtime.i64(tiles)],
                         context=context)


def _tiled_plan(g, algorithm, schedule, lhs_len, rhs_len, num_features, offsets, device_index):
    """The column-tiled skeleton: per-tile partial rows, then a merge in tile order."""
    shared_bytes = schedule.column_tile * lhs_len * element_size(algorithm.dtype)
    device = g.device
    limit = _shared_bytes_limit(device)
    if shared_bytes > limit:
        raise ValueError(
            f"schedule {schedule} stages {schedule.column_tile} rows of {lhs_len} "
            f"{algorithm.dtype} features ({shared_bytes} bytes); a block may use {limit}")
    tile_rowptr, local_col, position, tiles = _column_tiles(g, schedule.column_tile)
    tiled, merge, context = _two_pass_kernels(algorithm, schedule, device_index)
    eid = g.eid if algorithm.has_eid else None
    slices = -(-num_features // schedule.feature_slice)
    block_rows = _tiled_block_rows(g.num_dst, tiles * slices, sm_count(device))
    grid = (-(-g.num_dst // block_rows), tiles * slices)
    total = g.num_dst * num_features
    head = [tile_rowptr, local_col, position, eid,
            g.degree_sorted_rows if schedule.degree_sorted else None]
    scalars = [runtime.i64(g.num_dst), runtime.i64(g.num_src), runtime.i32(num_features),
               runtime.i64(lhs_len), runtime.i64(rhs_len), runtime.i64(tiles),
               runtime.i64(block_rows)]
    tiled_launch = tiled.prepare(grid, schedule.threads,
                                 [*head, _IN, _IN, *offsets, _IN, _IN, *scalars],
                                 shared_bytes=shared_bytes, context=context)
    merge_launch = _tile_merge_launch(merge, g, eid, num_features, tiles, context)

    def launch(lhs, rhs, out, arg_u, arg_e) -> None:
        partial, partial_arg = _partials(tiles * total, algorithm, device)
        tiled_launch(lhs, rhs, partial, partial_arg)
        merge_launch(partial, partial_arg, out, arg_u, arg_e)

    return launch


@dataclasses.dataclass(frozen=True)
class _WorkList:
    """The work items of the split-row skeleton for one graph and chunk length ``S``.

    Item ``w`` walks row ``row[w]`` from CSR position ``start[w]``: at most ``S`` edges, up
    to the row's end. Items ``0 .. num_chunks - 1`` are the chunks of the rows longer than
    ``S`` in (row, chunk) order, all but a row's last exactly ``S`` edges long; the other
    items are whole rows (empty ones too), in row order or longest first. Split row ``r``
    is ``split_row[r]`` and its chunks are items ``split_first[r] .. split_first[r + 1] - 1``.
    """

    row: torch.Tensor
    start: torch.Tensor
    split_row: torch.Tensor
    split_first: torch.Tensor
    num_chunks: int

    @property
    def num_items(self) -> int:
        return self.row.numel()


def _work_list(g: Graph, row_split: int, degree_sorted: bool) -> _WorkList:
    """The work list of ``g`` for chunks of ``row_split`` edges, built once per graph,
    chunk length and row order, and kept with the graph."""

    def build(g: Graph) -> _WorkList:
        rowptr = g.rowptr.long()
        degree = g.in_degrees().long()
        split = degree > row_split
        split_row = torch.nonzero(split).flatten()
        chunks = -(-degree[split] // row_split)
        split_first = torch.zeros(split_row.numel() + 1, dtype=torch.int64, device=g.device)
        torch.cumsum(chunks, 0, out=split_first[1:])
        num_chunks = int(split_first[-1])
        chunk_row = torch.repeat_interleave(split_row, chunks, output_size=num_chunks)
        first_of_row = torch.repeat_interleave(split_first[:-1], chunks, output_size=num_chunks)
        chunk = torch.arange(num_chunks, device=g.device) - first_of_row
        order = (g.degree_sorted_rows.long() if degree_sorted
                 else torch.arange(g.num_dst, device=g.device))
        whole = order[~split[order]]
        index = g.index_dtype
        return _WorkList(
            row=torch.cat([chunk_row, whole]).to(index),
            start=torch.cat([rowptr[chunk_row] + chunk * row_split, rowptr[whole]]).to(index),
            split_row=split_row.to(index),
            split_first=split_first.to(index),
            num_chunks=num_chunks,
        )

    return g.derived(("gsparse.kernels.spmm.work_list", row_split, degree_sorted), build)


def _split_plan(g, algorithm, schedule, lhs_len, rhs_len, num_features, offsets, device_index):
    """The split-row skeleton: whole rows and chunks of long rows in one launch, then the
    merge of each split row's chunks in chunk order."""
    work = _work_list(g, schedule.row_split, schedule.degree_sorted)
    first, merge, context = _two_pass_kernels(algorithm, schedule, device_index)
    eid = g.eid if algorithm.has_eid else None
    geometry = launch_geometry(schedule, work.num_items, num_features)
    num_split = work.split_row.numel()
    scalars = [runtime.i64(work.num_items), runtime.i64(work.num_chunks), runtime.i32(num_features),
               runtime.i64(lhs_len), runtime.i64(rhs_len)]
    merge_scalars = [runtime.i64(num_split), runtime.i32(num_features)]
    first_launch = first.prepare(geometry.grid, geometry.block,
                                 [g.rowptr, g.col, eid, work.row, work.start, _IN, _IN, *offsets,
                                  _IN, _IN, _IN, _IN, _IN, *scalars],
                                 context=context)
    merge_launch = None
    if work.num_chunks:
        merge_launch = merge.prepare((-(-num_split * num_features // 256),), 256,
                                     [g.rowptr, g.col, eid, _IN, _IN, _IN, _IN, _IN,
                                      work.split_row, work.split_first, *merge_scalars],
                                     context=context)
    device = g.device

    def launch(lhs, rhs, out, arg_u, arg_e) -> None:
        partial, partial_arg = _partials(work.num_chunks * num_features, algorithm, device)
        first_launch(lhs, rhs, out, arg_u, arg_e, partial, partial_arg)
        if merge_launch is not None:
            merge_launch(partial, partial_arg, out, arg_u, arg_e)

    return launch


def _output_tiles(
    g: Graph, num_features: int, dtype: torch.dtype, warps: int, column_groups: int = 1
) -> tuple[output_tiled.Tiling, output_tiled.EdgeLayout]:
    """The output-tiled skeleton's tiling and edge layout of ``g``, built once per feature
    length, dtype, warps per block and column groups, and kept with the graph."""
    device = g.device
    sms, limit = sm_count(device), _shared_bytes_limit(device)

    def build(g: Graph) -> tuple[output_tiled.Tiling, output_tiled.EdgeLayout]:
        tiling = output_tiled.tiling_for(g, num_features, dtype, sms, limit, column_groups)
        return tiling, output_tiled.build_layout(g, tiling, warps)

    key = ("gsparse.kernels.spmm.output_tiles", num_features, dtype, warps, column_groups, sms, limit)
    return g.derived(key, build)


@functools.lru_cache(maxsize=256)
def _output_tiled_kernels(
    algorithm: SpmmAlgorithm, schedule: SpmmSchedule, num_features: int, device_index: int
) -> tuple[runtime.Kernel, runtime.Kernel | None, str]:
    """The output-tiled kernel for ``num_features`` features and, with column groups, its
    merge."""
    context = f"{algorithm} | schedule {schedule} | {num_features} features"
    source = output_tiled.generate(algorithm, schedule, num_features)
    kernel = runtime.get_kernel(source, output_tiled.KERNEL_NAME, context=context, device=device_index)
    merge = None
    if schedule.column_groups > 1:
        merge = runtime.get_kernel(source, output_tiled.MERGE_KERNEL_NAME, context=context,
                                   device=device_index)
    return kernel, merge, context


def _output_tiled_plan(g, algorithm, schedule, num_features, device_index):
    """The output-tiled skeleton: a block per (row range, column group); with several
    groups, their partial rows are folded in group order by a second kernel."""
    covered = output_tiled.features_covered(schedule)
    if num_features > covered:
        raise ValueError(f"schedule {schedule} carries {covered} features per edge (vector_width "
                         f"* outputs_per_thread); these operands have {num_features}")
    tiling, layout = _output_tiles(g, num_features, algorithm.dtype, schedule.rows_per_block,
                                   schedule.column_groups)
    kernel, merge, context = _output_tiled_kernels(algorithm, schedule, num_features, device_index)
    scalars = [runtime.i64(g.num_dst), runtime.i64(g.num_src), runtime.i64(tiling.tiles),
               runtime.i64(tiling.group_tiles), runtime.i32(tiling.tile_cols),
               runtime.i32(tiling.rows_bytes)]
    launch = kernel.prepare((tiling.blocks,), schedule.threads,
                            [layout.words, layout.chunk_ptr, layout.block_rows, g.rowptr, _IN, _IN,
                             _IN, *scalars],
                            shared_bytes=tiling.shared_bytes, context=context)
    merge_launch = None
    if merge is not None:
        merge_launch = _tile_merge_launch(merge, g, None, num_features, tiling.column_groups,
                                          context)
    device = g.device

    def run(lhs, rhs, out, arg_u, arg_e) -> None:
        if merge_launch is None:
            launch(lhs, out, None)
            return
        partial, _ = _partials(tiling.column_groups * g.num_dst * num_features, algorithm, device)
        launch(lhs, out, partial)
        merge_launch(partial, None, out, None, None)

    return run
