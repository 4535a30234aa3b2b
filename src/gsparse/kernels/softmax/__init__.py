"""Fused edge softmax on CUDA, forward and backward, one warp per row; and GAT's attention,
the same softmax over logits it computes from node scores where it reads them.

The package's modules: :mod:`.task`, :mod:`.schedule`, :mod:`.space`, :mod:`.default`,
:mod:`.codegen` (with the passes as fixed device code) and :mod:`.plan`. ``norm_by="src"``
runs the same kernels over the reverse graph, whose CSR positions map to the same edge ids.
"""

from __future__ import annotations

import functools
import math

import torch

from ...graph import Graph
from ...target import Target
from ..memory import allocate, allocator
from ..source import refuse_capture
from .default import default_schedule
from .plan import build_plan
from .schedule import SOFTMAX_SCHEDULES, WarpPerRow
from .space import schedule_space
from .task import DIRECTIONS, LOGITS, SoftmaxTask, head_lanes

__all__ = [
    "DIRECTIONS",
    "LOGITS",
    "SOFTMAX_SCHEDULES",
    "SoftmaxTask",
    "WarpPerRow",
    "bind_edge_softmax",
    "bind_gat_attention",
    "default_schedule",
    "head_lanes",
    "run_edge_softmax",
    "run_edge_softmax_backward",
    "run_gat_attention",
    "run_gat_attention_backward",
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


def _gat_task(direction: str, g: Graph, dtype: torch.dtype, num_heads: int,
              edge_scores: torch.Tensor | None, masked: torch.Tensor | None) -> SoftmaxTask:
    return _task(direction, dtype, g.index_dtype, g.eid is not None, num_heads, "gat",
                 edge_scores is not None, masked is not None)


def bind_gat_attention(g: Graph, score_src: torch.Tensor, score_dst: torch.Tensor,
                       edge_scores: torch.Tensor | None, masked: torch.Tensor | None):
    """:func:`run_gat_attention` for operands like these, resolved once: returns
    ``run(score_src, score_dst, edge_scores, masked, negative_slope)`` (see
    :func:`~gsparse.kernels.spmm.bind_spmm`)."""
    shape, dtype, device = (g.num_edges, *score_src.shape[1:]), score_src.dtype, score_src.device
    heads = math.prod(shape[1:])
    launch = None
    if g.num_edges and heads:
        task = _gat_task("forward", g, dtype, heads, edge_scores, masked)
        launch = _plan(g, task).positional("score_src", "score_dst", "edge_scores", "masked", "y",
                                           "negative_slope")

    new_out = allocator(shape, dtype, device)

    def run(score_src, score_dst, edge_scores, masked, negative_slope):
        out = new_out()
        if launch is not None:
            launch(score_src.contiguous(), score_dst.contiguous(),
                   None if edge_scores is None else edge_scores.contiguous(), masked, out,
                   float(negative_slope))
        return out

    return run


def run_gat_attention(g: Graph, score_src: torch.Tensor, score_dst: torch.Tensor,
                      edge_scores: torch.Tensor | None, masked: torch.Tensor | None,
                      negative_slope: float) -> torch.Tensor:
    """GAT's attention: the edge softmax over each destination's edges of
    ``leaky_relu(score_src[u] + score_dst[v] (+ edge_scores[e]), negative_slope)``, ``-inf``
    where ``masked`` (``[E]`` bool, edge order) is set. Scores ``[N, *shape]`` of one dtype
    (``edge_scores`` ``[E, *shape]``); returns ``[E, *shape]`` in edge order."""
    return bind_gat_attention(g, score_src, score_dst, edge_scores, masked)(
        score_src, score_dst, edge_scores, masked, negative_slope)


def run_gat_attention_backward(g: Graph, y: torch.Tensor, dy: torch.Tensor, score_src: torch.Tensor,
                               score_dst: torch.Tensor, edge_scores: torch.Tensor | None,
                               masked: torch.Tensor | None, negative_slope: float
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradient of :func:`run_gat_attention`'s logits before the LeakyReLU, ``dz``
    ``[E, *shape]`` (0 where masked: the gradient of ``edge_scores``), and its sum over each
    destination's edges, ``d_dst`` ``[num_dst, *shape]`` (the gradient of ``score_dst``), from
    its output ``y`` and the gradient ``dy`` of ``y``."""
    if y.shape != dy.shape or y.dtype != dy.dtype:
        raise ValueError(f"y and dy must have the same shape and dtype, got {tuple(y.shape)} "
                         f"{y.dtype} and {tuple(dy.shape)} {dy.dtype}")
    dz = allocate(tuple(y.shape), y.dtype, y.device)
    d_dst = allocate((g.num_dst, *y.shape[1:]), y.dtype, y.device)
    heads = math.prod(y.shape[1:])
    if not heads:
        return dz, d_dst
    if not g.num_edges:
        return dz, d_dst.zero_()
    task = _gat_task("backward", g, y.dtype, heads, edge_scores, masked)
    _plan(g, task)(y=y.contiguous(), dy=dy.contiguous(), score_src=score_src.contiguous(),
                   score_dst=score_dst.contiguous(),
                   edge_scores=None if edge_scores is None else edge_scores.contiguous(),
                   masked=masked, dz=dz, d_dst=d_dst, negative_slope=float(negative_slope))
    return dz, d_dst
