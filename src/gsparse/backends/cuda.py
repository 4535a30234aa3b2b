"""The CUDA backend: generated kernels for CUDA tensors (g-SpMM, g-SDDMM, edge softmax).

A call that forces no schedule gets the tuner's choice (:mod:`gsparse.tune.select`: a
tuning record, else the policy's pick).
"""

from __future__ import annotations

from functools import partial

from ..kernels.sddmm import run_sddmm
from ..kernels.softmax import run_edge_softmax
from ..kernels.spmm import run_spmm
from ..tune import select


class _CudaBackend:
    def spmm(self, g, op, reduce, lhs, rhs, out_shape, schedule=None, with_arg=False):
        return run_spmm(g, op, reduce, lhs, rhs, out_shape, schedule, with_arg,
                        choose=partial(select.choose, "spmm"))

    def sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule=None):
        return run_sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule,
                         choose=partial(select.choose, "sddmm"))

    def edge_softmax(self, g, logits, norm_by):
        return run_edge_softmax(g, logits, norm_by)


BACKEND = _CudaBackend()
