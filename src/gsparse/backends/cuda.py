"""The CUDA backend: generated kernels for CUDA tensors (g-SpMM, g-SDDMM, edge softmax)."""

from __future__ import annotations

from ..kernels.sddmm import run_sddmm
from ..kernels.softmax import run_edge_softmax
from ..kernels.spmm import run_spmm


class _CudaBackend:
    def spmm(self, g, op, reduce, lhs, rhs, out_shape, schedule=None, with_arg=False):
        return run_spmm(g, op, reduce, lhs, rhs, out_shape, schedule, with_arg)

    def sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule=None):
        return run_sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule)

    def edge_softmax(self, g, logits, norm_by):
        return run_edge_softmax(g, logits, norm_by)


BACKEND = _CudaBackend()
