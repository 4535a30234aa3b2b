r"""The triangular solve as a ``torch.library`` custom op: differentiable and traceable.

``gsparse::sptrsv(crow, col, values, b, lower, unit_diagonal, transpose)`` returns ``x``
with ``op(A) x = b``, ``op(A) = A`` or ``A^T``, for the canonical pattern ``(crow, col)``
of a validated factor (see :mod:`gsparse._triangular`; the op finds its
:class:`~gsparse._triangular.Pattern` and caches through the index tensors). To
``torch.compile`` it is one opaque node whose fake implementation only gives the shape.

Gradients, for a loss :math:`\ell` and :math:`x = \mathrm{op}(A)^{-1} b`:

* :math:`\partial b = \mathrm{op}(A)^{-T} \partial x`: the same op with ``transpose``
  flipped.
* :math:`\partial\,\mathrm{op}(A) = -\partial b\, x^T`, of which only the stored entries
  count: for the entry :math:`A_{ij}`, :math:`\partial A_{ij} = -\sum_c \partial b_{ic}\,
  x_{jc}` (without transpose) or :math:`-\sum_c \partial b_{jc}\, x_{ic}` (with it), the
  sum over the ``k`` right-hand sides. With ``unit_diagonal`` the stored diagonal is not
  read, and its gradient is 0.

The backward is written with this op and PyTorch ops, so it runs on any device, traces,
and can be differentiated again.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._triangular import Pattern
from .backends import cpu_triangular
from .kernels.sptrsv.levelset import levelset_solve
from .kernels.sptrsv.natural import entry_rows

__all__ = ["sptrsv", "solve_now"]


def solve_now(pattern: Pattern, values: Tensor, b: Tensor, unit_diagonal: bool, transpose: bool) -> Tensor:
    """The op's implementation on ``pattern``, callable without the dispatcher (a new tensor)."""
    if b.is_cuda:
        return pattern.device_plans.solve(values, b, unit_diagonal, transpose)
    if b.device.type == "cpu":
        return cpu_triangular.solve(pattern.crow, pattern.col, values.contiguous(), b.contiguous(), pattern.lower,
                                    unit_diagonal, transpose)
    # Devices without generated kernels: the level-set solve in PyTorch ops.
    plan = pattern.levelset_plan(transpose)
    return levelset_solve(plan, values, b.contiguous(), unit_diagonal)


@torch.library.custom_op("gsparse::sptrsv", mutates_args=())
def sptrsv(crow: Tensor, col: Tensor, values: Tensor, b: Tensor, lower: bool, unit_diagonal: bool,
           transpose: bool) -> Tensor:
    """``x`` of ``b``'s shape (``[n]`` or ``[n, k]``) with ``op(A) x = b``."""
    return solve_now(Pattern.find(crow, col, lower), values, b, unit_diagonal, transpose)


@sptrsv.register_fake
def _sptrsv_fake(crow, col, values, b, lower, unit_diagonal, transpose):
    return torch.empty_like(b, memory_format=torch.contiguous_format)


def _setup(ctx, inputs, output) -> None:
    crow, col, values, b, lower, unit_diagonal, transpose = inputs
    ctx.pattern = (crow, col)
    ctx.flags = (lower, unit_diagonal, transpose)
    ctx.save_for_backward(values, output)


def _backward(ctx, grad: Tensor):
    values, x = ctx.saved_tensors
    crow, col = ctx.pattern
    lower, unit_diagonal, transpose = ctx.flags
    grad_b = sptrsv(crow, col, values, grad.contiguous(), lower, unit_diagonal, not transpose)
    grad_values = None
    if ctx.needs_input_grad[2]:
        rows = entry_rows(crow, col.shape[0])
        i, j = (col, rows) if transpose else (rows, col)
        products = grad_b[i] * x[j]
        grad_values = -(products.sum(dim=1) if products.dim() == 2 else products)
        if unit_diagonal:
            grad_values = grad_values.masked_fill(rows == col, 0)
    return None, None, grad_values, grad_b if ctx.needs_input_grad[3] else None, None, None, None


sptrsv.register_autograd(_backward, setup_context=_setup)
