"""Validation of operator inputs, shared by the front ends. Errors name the argument."""

from __future__ import annotations

import functools
import numbers
from typing import Any

import torch

from .algebra import FLOAT_DTYPES
from .graph import Graph


def graph_override(g: Any) -> Any:
    """The ``__gsparse_function__`` of a graph-like object that is not a :class:`Graph`
    (a ``gsparse.distributed.DistGraph``), else None. The operators and ``gsparse.nn``
    hand such a graph their call, as ``override(func, args, kwargs)``."""
    return None if isinstance(g, Graph) else getattr(g, "__gsparse_function__", None)


def check_graph(g: Any) -> Graph:
    if not isinstance(g, Graph):
        raise TypeError(f"g must be a gsparse.Graph, got {type(g).__name__}")
    return g


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_features(name: str, t: Any, g: Graph, rows: int, rows_name: str) -> torch.Tensor:
    """A feature tensor ``[rows, *shape]`` of a floating dtype on the graph's device."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must have a floating dtype {FLOAT_DTYPES}, got {t.dtype}")
    if t.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension ([{rows_name}, ...]), got a scalar")
    if t.shape[0] != rows:
        raise ValueError(f"{name} has {t.shape[0]} rows but the graph has {rows} {rows_name}")
    if t.device != g.device:
        raise ValueError(f"{name} is on {t.device} but the graph is on {g.device}")
    return t


def check_same_dtype(lhs: torch.Tensor | None, rhs: torch.Tensor | None) -> None:
    if lhs is not None and rhs is not None and lhs.dtype != rhs.dtype:
        raise TypeError(f"lhs and rhs must have the same dtype, got {lhs.dtype} and {rhs.dtype}")


def broadcast_feature_shape(
    lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...], what: str = "lhs and rhs"
) -> tuple[int, ...]:
    """Feature shapes broadcast as in NumPy (DGL pads the shorter one with leading 1s)."""
    # Under torch.compile the shapes are traced once anyway; the cache is for eager calls.
    broadcast = _broadcast.__wrapped__ if torch.compiler.is_compiling() else _broadcast
    shape = broadcast(tuple(lhs_shape), tuple(rhs_shape))
    if shape is None:
        raise ValueError(
            f"the feature shapes of {what} do not broadcast: {list(lhs_shape)} and {list(rhs_shape)}")
    return shape


@functools.lru_cache(maxsize=1024)
def _broadcast(lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...]) -> tuple[int, ...] | None:
    # Cached: broadcasting costs microseconds per call, a fair part of a small graph's call.
    try:
        return broadcast_shapes(lhs_shape, rhs_shape)
    except ValueError:
        return None


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast of ``shapes``; ValueError where they do not broadcast. In plain
    Python: ``torch.broadcast_shapes`` imports PyTorch's reference operators (and SymPy) on
    its first call, over a second and a half of a process's first gsparse call."""
    ndim = max([len(shape) for shape in shapes] + [0])  # (torch.compile traces this too)
    out = [1] * ndim
    for shape in shapes:
        for axis, size in enumerate(shape, ndim - len(shape)):
            if size != 1:
                if out[axis] not in (1, size):
                    raise ValueError(f"shapes {[list(s) for s in shapes]} do not broadcast")
                out[axis] = size
    return tuple(out)


def pad_feature_dims(t: torch.Tensor, ndim: int) -> torch.Tensor:
    """View ``[n, *shape]`` as ``[n, 1, ..., 1, *shape]`` with ``ndim`` feature dimensions."""
    missing = ndim - (t.dim() - 1)
    return t.reshape(t.shape[0], *([1] * missing), *t.shape[1:]) if missing > 0 else t


def check_schedule(schedule: Any, op: str) -> None:
    """``schedule`` must be one of ``op``'s (``"spmm"`` or ``"sddmm"``) schedule types, on
    every device (the PyTorch-ops backend has no use for one but still refuses a wrong one)."""
    from .kernels.sddmm import SDDMM_SCHEDULES
    from .kernels.spmm import SPMM_SCHEDULES

    kinds, name, prefix = ((SPMM_SCHEDULES, "g-SpMM", "Spmm") if op == "spmm"
                           else (SDDMM_SCHEDULES, "g-SDDMM", "Sddmm"))
    if not isinstance(schedule, kinds):
        public = ", ".join(f"gsparse.{prefix}{c.__name__}" for c in kinds)
        raise TypeError(f"schedule must be a {name} schedule ({public}) or None, got {schedule!r}")


def check_gat_operands(g: Any, score_src: Any, score_dst: Any, negative_slope: Any, edge_scores: Any,
                       masked: Any) -> None:
    """``gat_attention``'s operands on ``g`` (a Graph, or a DistGraph's share): node scores of
    one floating dtype and feature shape, edge scores alike, a real slope, and a contiguous
    ``[num_edges]`` bool mask on the graph's device."""
    check_features("score_src", score_src, g, g.num_src, "source nodes")
    check_features("score_dst", score_dst, g, g.num_dst, "destination nodes")
    _like_score_src("score_dst", score_dst, score_src)
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, numbers.Real):
        raise TypeError(f"negative_slope must be a real number, got {type(negative_slope).__name__}")
    if edge_scores is not None:
        check_features("edge_scores", edge_scores, g, g.num_edges, "edges")
        _like_score_src("edge_scores", edge_scores, score_src)
    if masked is not None:
        if not isinstance(masked, torch.Tensor) or masked.dtype != torch.bool:
            raise TypeError(f"masked must be a bool tensor, got {getattr(masked, 'dtype', type(masked).__name__)}")
        if masked.shape != (g.num_edges,):
            raise ValueError(f"masked must have shape [{g.num_edges}] (one flag per edge), got "
                             f"{list(masked.shape)}")
        if masked.device != g.device:
            raise ValueError(f"masked is on {masked.device} but the graph is on {g.device}")
        if not masked.is_contiguous():
            raise ValueError(f"masked must be contiguous, got strides {masked.stride()}")


def _like_score_src(name: str, t: torch.Tensor, score_src: torch.Tensor) -> None:
    if t.dtype != score_src.dtype or t.shape[1:] != score_src.shape[1:]:
        raise ValueError(f"{name} must have score_src's dtype and feature shape, {score_src.dtype} "
                         f"{list(score_src.shape[1:])}; got {t.dtype} {list(t.shape[1:])}")
