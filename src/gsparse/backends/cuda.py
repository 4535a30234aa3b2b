"""The CUDA backend: generated kernels for CUDA tensors (g-SpMM, g-SDDMM, edge softmax)."""

from __future__ import annotations

from ..kernels.sddmm import bind_sddmm, run_sddmm
from ..kernels.softmax import bind_edge_softmax, run_edge_softmax
from ..kernels.spmm import bind_spmm, run_spmm


class _CudaBackend:
    def spmm(self, g, op, reduce, lhs, rhs, out_shape, schedule=None, with_arg=False):
        return run_spmm(g, op, reduce, lhs, rhs, out_shape, schedule, with_arg)

    def sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule=None):
        return run_sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule)

    def edge_softmax(self, g, logits, norm_by):
        return run_edge_softmax(g, logits, norm_by)

    # The calls above resolved once for operands like these (gsparse._calls keeps them).
    def bind_spmm(self, g, op, reduce, lhs, rhs, out_shape, with_arg=False):
        return bind_spmm(g, op, reduce, lhs, rhs, tuple(out_shape), with_arg)

    def bind_sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape):
        return bind_sddmm(g, op, lhs, rhs, lhs_target, rhs_target, tuple(out_shape))

    def bind_edge_softmax(self, g, logits, norm_by):
        return bind_edge_softmax(g, logits, norm_by)


BACKEND = _CudaBackend()
