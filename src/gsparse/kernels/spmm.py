"""g-SpMM on CUDA: picks or checks a schedule, generates, compiles (cached) and launches.

Public entry points: :class:`SpmmSchedule`, :func:`schedule_space` (the pruned grid the
sweep explores), :func:`default_schedule` (the rule used before any measurement) and
:func:`run_spmm` (what the CUDA backend calls).
"""

from __future__ import annotations

import functools
import math

import torch

from .. import runtime
from ..algebra import BINARY_OPS, REDUCERS
from ..graph import Graph
from .common import Layout, broadcast_offsets, element_size, operand_layout
from .spmm_codegen import KERNEL_NAME, SpmmAlgorithm, generate, launch_geometry
from .spmm_schedule import SpmmSchedule, default_schedule_for, schedule_grid

__all__ = ["SpmmSchedule", "default_schedule", "run_spmm", "schedule_space"]

_FALLBACK_L2_BYTES = 40 << 20


def _l2_bytes(device: torch.device) -> int:
    if device.type != "cuda":
        return _FALLBACK_L2_BYTES
    return torch.cuda.get_device_properties(device).L2_cache_size or _FALLBACK_L2_BYTES


def _vector_limit(num_features: int, tensors: list[torch.Tensor], dtype: torch.dtype) -> int:
    """The widest vector (at most 16 bytes) every full-width operand allows.

    A vector access needs the row length to be a multiple of it and the base pointer aligned
    to its size (row starts then are too).
    """
    size = element_size(dtype)
    for width in (8, 4, 2):
        if width * size > 16:
            continue
        if num_features % width == 0 and all(t.data_ptr() % (width * size) == 0 for t in tensors):
            return width
    return 1


def schedule_space(g: Graph, feature_len: int, dtype: torch.dtype = torch.float32) -> list[SpmmSchedule]:
    """The pruned grid of schedules for ``g`` and ``feature_len`` features (all valid)."""
    del g  # the grid depends on the feature length and dtype only; kept for a uniform API
    return schedule_grid(feature_len, vector_ok=16 // element_size(dtype))


def default_schedule(
    g: Graph, feature_len: int, dtype: torch.dtype = torch.float32, vector_ok: int = 8
) -> SpmmSchedule:
    """The schedule used when none is given, from the graph's statistics (no measurement)."""
    return _default_schedule_for(
        mean_degree=g.row_stats.mean,
        cov=g.row_stats.cov,
        feature_len=feature_len,
        vector_ok=vector_ok,
        l2_bytes=_l2_bytes(g.device),
        source_rows=g.num_src,
        element_bytes=element_size(dtype),
    )


def _allocate(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Output storage; the kernel writes every element. Tests poison it through this hook."""
    return torch.empty(shape, dtype=dtype, device=device)


_default_schedule_for = functools.lru_cache(maxsize=4096)(default_schedule_for)


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


@functools.lru_cache(maxsize=256)
def _offsets(shape: tuple[int, ...], out_shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    return broadcast_offsets(shape, out_shape).to(device)


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

    layouts = {
        name: None if t is None else operand_layout(tuple(t.shape[1:]), out_shape)
        for name, t in (("lhs", lhs), ("rhs", rhs))
    }
    full = [t for name, t in (("lhs", lhs), ("rhs", rhs)) if layouts[name] is Layout.FULL]
    vector_ok = _vector_limit(num_features, [*full, out], dtype)
    if schedule is None:
        schedule = default_schedule(g, num_features, dtype, vector_ok)
    else:
        if not isinstance(schedule, SpmmSchedule):
            raise TypeError(f"schedule must be an SpmmSchedule, got {type(schedule).__name__}")
        schedule.validate()
        if schedule.vector_width > vector_ok:
            raise ValueError(
                f"schedule {schedule} loads {schedule.vector_width} features at a time, but "
                f"these operands allow at most {vector_ok} ({num_features} features per row; "
                f"vector loads need the row length to be a multiple of the width and "
                f"aligned data pointers)"
            )
    has_eid = g.eid is not None and (binop.uses_rhs or with_arg)
    algorithm = SpmmAlgorithm(
        op=op,
        reduce=reduce,
        lhs_layout=layouts["lhs"],
        rhs_layout=layouts["rhs"],
        dtype=dtype,
        index_dtype=g.index_dtype,
        has_eid=has_eid,
        with_arg=with_arg,
    )
    kernel, context = _kernel(algorithm, schedule, device.index if device.index is not None
                              else torch.cuda.current_device())
    geometry = launch_geometry(schedule, g.num_dst, num_features)

    def offsets(t: torch.Tensor | None, layout: Layout | None) -> torch.Tensor | None:
        if layout is not Layout.INDEXED:
            return None
        return _offsets(tuple(t.shape[1:]), tuple(out_shape), device)

    kernel.launch(
        geometry.grid,
        geometry.block,
        [
            g.rowptr,
            g.col,
            g.eid if has_eid else None,
            g.degree_sorted_rows if schedule.degree_sorted else None,
            lhs,
            rhs,
            offsets(lhs, layouts["lhs"]),
            offsets(rhs, layouts["rhs"]),
            out,
            arg_u,
            arg_e,
            runtime.i64(g.num_dst),
            runtime.i32(num_features),
            runtime.i64(0 if lhs is None else math.prod(lhs.shape[1:])),
            runtime.i64(0 if rhs is None else math.prod(rhs.shape[1:])),
        ],
        context=context,
    )
    return (out, arg_u, arg_e) if with_arg else out
