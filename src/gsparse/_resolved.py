"""The eager path of a resolved call that records autograd.

Plain eager calls whose operands require grad skip the custom ops' dispatch
(:mod:`gsparse._ops`), which costs far more host time than a small graph's kernels: the
front ends hand their resolved call (:mod:`gsparse._calls`) to the functions here, whose
``autograd.Function`` backward runs the custom ops' own formulas, with the graph at hand.
"""

from typing import Optional

import torch
from torch import Tensor

from . import _calls, _ops  # _ops uses this module too: its names are read at call time
from .algebra import REDUCERS

__all__ = ["gat_attention_resolved", "spmm_resolved", "sddmm_resolved", "softmax_resolved"]


class _RunFunction(torch.autograd.Function):
    """A resolved call's run, the operands its backward reads saved (``_ops.save_operands``)."""

    @staticmethod
    def forward(ctx, call: _calls.Call, lhs: Optional[Tensor], rhs: Optional[Tensor]) -> Tensor:
        ctx.call = call
        _ops.save_operands(ctx, call.args[0], lhs, rhs, ctx.needs_input_grad[1], ctx.needs_input_grad[2])
        return call.run(lhs, rhs)


class _SpmmFunction(_RunFunction):
    """g-SpMM sum/mean of a resolved call, differentiable (the eager path)."""

    @staticmethod
    def backward(ctx, grad: Tensor):
        lhs, rhs = ctx.saved_tensors
        op, reduce = ctx.call.args
        d_lhs, d_rhs = _ops._spmm_grads(ctx.call.parts, op, reduce, False, lhs, rhs, ctx.shapes, grad,
                                        ctx.needs_input_grad[1], ctx.needs_input_grad[2])
        return None, d_lhs, d_rhs


class _SpmmArgFunction(torch.autograd.Function):
    """g-SpMM max/min of a resolved call, differentiable through its winners."""

    @staticmethod
    def forward(ctx, call: _calls.Call, lhs: Optional[Tensor], rhs: Optional[Tensor]) -> Tensor:
        out, arg_u, arg_e = call.extra["with_arg"](lhs, rhs)
        ctx.call = call
        _ops.save_operands(ctx, call.args[0], lhs, rhs, ctx.needs_input_grad[1], ctx.needs_input_grad[2],
                           arg_u, arg_e)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        lhs, rhs, arg_u, arg_e = ctx.saved_tensors
        g = ctx.call.graph
        d_lhs, d_rhs = _ops._spmm_arg_grads(ctx.call.args[0], (g.num_dst, g.num_src), g.num_edges, lhs,
                                            rhs, ctx.shapes, arg_u, arg_e, grad, ctx.needs_input_grad[1],
                                            ctx.needs_input_grad[2])
        return None, d_lhs, d_rhs


class _SddmmFunction(_RunFunction):
    """g-SDDMM of a resolved call, differentiable (the eager path)."""

    @staticmethod
    def backward(ctx, grad: Tensor):
        lhs, rhs = ctx.saved_tensors
        op, lhs_target, rhs_target = ctx.call.args
        d_lhs, d_rhs = _ops._sddmm_grads(ctx.call.parts, op, (lhs_target, rhs_target), lhs, rhs, ctx.shapes,
                                         grad, ctx.needs_input_grad[1], ctx.needs_input_grad[2])
        return None, d_lhs, d_rhs


class _SoftmaxFunction(torch.autograd.Function):
    """Edge softmax of a resolved call, differentiable (the eager path)."""

    @staticmethod
    def forward(ctx, call: _calls.Call, logits: Tensor) -> Tensor:
        y = call.run(logits)
        ctx.call = call
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: Tensor):
        (y,) = ctx.saved_tensors
        return None, _ops._edge_softmax_grad(ctx.call.parts, ctx.call.args[0], y, grad)


class _GatAttentionFunction(torch.autograd.Function):
    """GAT's attention of a resolved call, differentiable (the eager path)."""

    @staticmethod
    def forward(ctx, call: _calls.Call, score_src: Tensor, score_dst: Tensor, edge_scores: Optional[Tensor],
                masked: Optional[Tensor], negative_slope: float) -> Tensor:
        y = call.run(score_src, score_dst, edge_scores, masked, negative_slope)
        ctx.call, ctx.negative_slope = call, negative_slope
        ctx.save_for_backward(y, score_src, score_dst, edge_scores, masked)
        return y

    @staticmethod
    def backward(ctx, grad: Tensor):
        y, score_src, score_dst, edge_scores, masked = ctx.saved_tensors
        d_src, d_dst, d_edge = _ops._gat_attention_grads(
            ctx.call.parts, y, grad, score_src, score_dst, edge_scores, masked, ctx.negative_slope,
            *ctx.needs_input_grad[1:4])
        return None, d_src, d_dst, d_edge, None, None


# ``Function.apply`` less its Python preamble (default-argument binding, functorch checks):
# the resolved path runs only where functorch transforms are off (_calls.eager).
_spmm_apply = super(torch.autograd.Function, _SpmmFunction).apply
_spmm_arg_apply = super(torch.autograd.Function, _SpmmArgFunction).apply
_sddmm_apply = super(torch.autograd.Function, _SddmmFunction).apply
_softmax_apply = super(torch.autograd.Function, _SoftmaxFunction).apply
_gat_attention_apply = super(torch.autograd.Function, _GatAttentionFunction).apply
_grad_enabled = torch.is_grad_enabled


def _operands(call: _calls.Call, lhs: Optional[Tensor],
              rhs: Optional[Tensor]) -> tuple[Optional[Tensor], Optional[Tensor], bool]:
    """The operands as ``call`` runs them (see :attr:`~gsparse._calls.Call.shapes`), and
    whether autograd records the call: it is on and an operand requires grad. A run that
    takes its rhs as given (:attr:`~gsparse._calls.Call.flat_rhs`) gets it unshaped unless
    autograd records, whose formulas take the shaped operands."""
    lhs_shape, rhs_shape = call.shapes
    if lhs_shape is not None:
        lhs = None if lhs_shape is False else lhs.reshape(lhs_shape)
    if rhs_shape is False:
        rhs = None
    records = _grad_enabled() and ((lhs is not None and lhs.requires_grad)
                                   or (rhs is not None and rhs.requires_grad))
    if rhs_shape and (records or not call.flat_rhs):
        rhs = rhs.reshape(rhs_shape)
    return lhs, rhs, records


def spmm_resolved(call: _calls.Call, lhs: Optional[Tensor], rhs: Optional[Tensor]) -> Tensor:
    """The g-SpMM of a resolved call on these operands, recording autograd where it is on
    and an operand requires grad."""
    lhs, rhs, records = _operands(call, lhs, rhs)
    if not records:
        return call.run(lhs, rhs)
    op, reduce = call.args
    if not REDUCERS[reduce].keeps_arg:
        return _spmm_apply(call, lhs, rhs)
    if "with_arg" not in call.extra:
        call.extra["with_arg"] = _calls.resolve_spmm(call.graph, op, reduce, lhs, rhs,
                                                     call.out_shape, with_arg=True)
    return _spmm_arg_apply(call, lhs, rhs)


def sddmm_resolved(call: _calls.Call, lhs: Optional[Tensor], rhs: Optional[Tensor]) -> Tensor:
    """The g-SDDMM of a resolved call on these operands (see :func:`spmm_resolved`)."""
    lhs, rhs, records = _operands(call, lhs, rhs)
    return _sddmm_apply(call, lhs, rhs) if records else call.run(lhs, rhs)


def softmax_resolved(call: _calls.Call, logits: Tensor) -> Tensor:
    """The edge softmax of a resolved call (see :func:`spmm_resolved`)."""
    if _grad_enabled() and logits.requires_grad:
        return _softmax_apply(call, logits)
    return call.run(logits)


def gat_attention_resolved(call: _calls.Call, score_src: Tensor, score_dst: Tensor,
                           edge_scores: Optional[Tensor], masked: Optional[Tensor],
                           negative_slope: float) -> Tensor:
    """GAT's attention of a resolved call (see :func:`spmm_resolved`)."""
    if _grad_enabled() and (score_src.requires_grad or score_dst.requires_grad
                            or (edge_scores is not None and edge_scores.requires_grad)):
        return _gat_attention_apply(call, score_src, score_dst, edge_scores, masked, negative_slope)
    return call.run(score_src, score_dst, edge_scores, masked, negative_slope)
