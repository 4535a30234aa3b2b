"""Fused edge softmax on CUDA, forward and backward, one warp per row.

The package's modules: :mod:`.task`, :mod:`.schedule`, :mod:`.space`, :mod:`.default`,
:mod:`.codegen` (with the passes as fixed device code) and :mod:`.plan`. ``norm_by="src"``
runs the same kernels over the reverse graph, whose CSR positions map to the same edge ids.
"""

from __future__ import annotations

import functools

import torch

from ...graph import Graph
from ...target import Target
from ..memory import allocate, allocator
from ..source import refuse_capture
from .default import default_schedule
from .plan import build_plan
from .schedule import SOFTMAX_SCHEDULES, WarpPerRow
from .space import schedule_space
from .task import DIRECTIONS, SoftmaxTask, head_lanes

__all__ = [
    "DIRECTIONS",
    "SOFTMAX_SCHEDULES",
    "SoftmaxTask",
    "WarpPerRow",
    "bind_edge_softmax",
    "default_schedule",
    "head_lanes",
    "run_edge_softmax",
    "run_edge_softmax_backward",
    "schedule_space",
]


def _rows(g: Graph, norm_by: str) -> Graph:
    if norm_by not in ("dst", "src"):
        raise ValueError(f"norm_by must be 'dst' or 'src', got {norm_by!r}")
    return g if norm_by == "dst" else g.reverse()


# The task of a call, the same object for the same facts (see gsparse.kernels.spmm.task_for).
_task = functools.lru_cache(maxsize=256)(SoftmaxTask)


def _plan(rows: Graph, task: SoftmaxTask):
    """The rows' plan of ``task``, under the hand rule's schedule, built on first use."""

    def build():
        refuse_capture(rows, task)
        return build_plan(rows, task, default_schedule(task, rows.stats, Target.of(rows.device)))

    return rows.plans.get(task, build)


def _launch(direction: str, g: Graph, values: dict[str, torch.Tensor], out_name: str,
            out: torch.Tensor, norm_by: str) -> torch.Tensor:
    rows = _rows(g, norm_by)
    if out.numel() == 0:
        return out
    task = _task(direction, out.dtype, rows.index_dtype, rows.eid is not None,
                 out.numel() // g.num_edges)
    _plan(rows, task)(**values, **{out_name: out})
    return out


def bind_edge_softmax(g: Graph, logits: torch.Tensor, norm_by: str = "dst"):
    """:func:`run_edge_softmax` for logits like these (shape, dtype, device), resolved once:
    returns ``run(logits)`` (see :func:`~gsparse.kernels.spmm.bind_spmm`)."""
    rows = _rows(g, norm_by)
    shape, dtype, device = tuple(logits.shape), logits.dtype, logits.device
    launch = None
    if logits.numel():
        task = _task("forward", dtype, rows.index_dtype, rows.eid is not None,
                     logits.numel() // g.num_edges)
        launch = _plan(rows, task).positional("x", "y")

    new_out = allocator(shape, dtype, device)

    def run(logits):
        out = new_out()
        if launch is not None:
            launch(logits.contiguous(), out)
        return out

    return run


def run_edge_softmax(g: Graph, logits: torch.Tensor, norm_by: str = "dst") -> torch.Tensor:
    """Edge softmax of ``logits`` ``[E, *shape]`` (user edge order) over each destination's
    (``"dst"``) or source's (``"src"``) edges; returns ``[E, *shape]``, same dtype."""
    logits = logits.contiguous()
    out = allocate(tuple(logits.shape), logits.dtype, logits.device)
    return _launch("forward", g, {"x": logits}, "y", out, norm_by)


def run_edge_softmax_backward(g: Graph, y: torch.Tensor, dy: torch.Tensor,
                              norm_by: str = "dst") -> torch.Tensor:
    """Gradient of the edge softmax with respect to its logits: ``y * (dy - sum_row(dy * y))``.

    ``y`` is the forward's output and ``dy`` the gradient of ``y``, both ``[E, *shape]``.
    """
    if y.shape != dy.shape or y.dtype != dy.dtype:
        raise ValueError(f"y and dy must have the same shape and dtype, got {tuple(y.shape)} "
                         f"{y.dtype} and {tuple(dy.shape)} {dy.dtype}")
    y, dy = y.contiguous(), dy.contiguous()
    out = allocate(tuple(y.shape), y.dtype, y.device)
    return _launch("backward", g, {"y": y, "dy": dy}, "dz", out, norm_by)
