"""The CUDA backend: generated kernels for CUDA tensors (g-SpMM, g-SDDMM, edge softmax, GAT's
attention).

A call that forces no schedule gets the tuner's choice (:mod:`gsparse.tune.select`: a
tuning record, else the policy's pick).
"""

from __future__ import annotations

from functools import partial

from ..kernels.sddmm import bind_sddmm, run_sddmm
from ..kernels.softmax import (
    bind_edge_softmax,
    bind_gat_attention,
    run_edge_softmax,
    run_edge_softmax_backward,
    run_gat_attention,
    run_gat_attention_backward,
)
from ..kernels.spmm import bind_spmm, run_spmm
from ..tune import select

_CHOOSE_SPMM = partial(select.choose, "spmm")
_CHOOSE_SDDMM = partial(select.choose, "sddmm")


class _CudaBackend:
    def spmm(self, g, op, reduce, lhs, rhs, out_shape, schedule=None, with_arg=False):
        return run_spmm(g, op, reduce, lhs, rhs, out_shape, schedule, with_arg, choose=_CHOOSE_SPMM)

    def sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule=None):
        return run_sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule,
                         choose=_CHOOSE_SDDMM)

    def edge_softmax(self, g, logits, norm_by):
        return run_edge_softmax(g, logits, norm_by)

    def edge_softmax_grad(self, g, y, grad, norm_by):
        return run_edge_softmax_backward(g, y, grad, norm_by)

    def gat_attention(self, g, score_src, score_dst, edge_scores, masked, negative_slope):
        return run_gat_attention(g, score_src, score_dst, edge_scores, masked, negative_slope)

    def gat_attention_grad(self, g, y, grad, score_src, score_dst, edge_scores, masked, negative_slope):
        return run_gat_attention_backward(g, y, grad, score_src, score_dst, edge_scores, masked, negative_slope)

    # The calls above resolved once for operands like these (gsparse._calls keeps them).
    def bind_spmm(self, g, op, reduce, lhs, rhs, out_shape, with_arg=False):
        return bind_spmm(g, op, reduce, lhs, rhs, tuple(out_shape), with_arg, choose=_CHOOSE_SPMM)

    def bind_sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape):
        return bind_sddmm(g, op, lhs, rhs, lhs_target, rhs_target, tuple(out_shape), choose=_CHOOSE_SDDMM)

    def bind_edge_softmax(self, g, logits, norm_by):
        return bind_edge_softmax(g, logits, norm_by)

    def bind_gat_attention(self, g, score_src, score_dst, edge_scores, masked):
        return bind_gat_attention(g, score_src, score_dst, edge_scores, masked)


BACKEND = _CudaBackend()
