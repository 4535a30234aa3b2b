"""The CUDA backend: generated kernels for CUDA tensors.

g-SpMM runs :mod:`gsparse.kernels.spmm`; g-SDDMM and edge softmax run their generated
kernels once those modules provide them, and the PyTorch-ops path until then.
"""

from __future__ import annotations

from ..kernels.spmm import run_spmm
from . import cpu


class _CudaBackend:
    def spmm(self, g, op, reduce, lhs, rhs, out_shape, schedule=None, with_arg=False):
        return run_spmm(g, op, reduce, lhs, rhs, out_shape, schedule, with_arg)

    def sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule=None):
        return cpu.BACKEND.sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule)

    def edge_softmax(self, g, logits, norm_by):
        return cpu.BACKEND.edge_softmax(g, logits, norm_by)


BACKEND = _CudaBackend()
