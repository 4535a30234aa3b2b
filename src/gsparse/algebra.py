"""The algebra of the generalized sparse operations: binary operators, reducers, targets.

Every backend, the autograd formulas and the code generators read these tables, and
nothing else decides what an operator or a reducer means: adding one is one entry here.
A *message* on edge ``e = (u, v)`` is ``lhs ⊕ rhs``; g-SpMM reduces the messages of each
destination row with a reducer Φ, g-SDDMM writes them per edge.

The CUDA expressions are written over two operands named ``a`` and ``b`` (already
converted to the accumulation type ``A``) and are spliced into generated kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

__all__ = [
    "BinaryOp",
    "Reducer",
    "BINARY_OPS",
    "SPMM_OPS",
    "SDDMM_OPS",
    "REDUCERS",
    "TARGETS",
    "FLOAT_DTYPES",
]


@dataclass(frozen=True)
class BinaryOp:
    """A message function ``lhs ⊕ rhs``.

    Attributes:
        uses_lhs, uses_rhs: which operands it reads.
        torch_fn: the message in PyTorch ops (the CPU backend).
        cuda_expr: the message as a C expression over ``a`` and ``b``.
        reduces_last_dim: ``dot``, which sums over the last feature dimension and keeps it
            as size 1.
        copies: ``"lhs"`` or ``"rhs"`` for an op whose message is that operand itself.
        scales: the message is ``lhs * rhs`` (``mul``; ``dot`` before its sum).
        lhs_grad_factor: what the output gradient is multiplied by to give the gradient of
            ``lhs``: None (by 1), ``"rhs"`` or ``"1/rhs"``.
        rhs_grad_factor: likewise for ``rhs``: None (by 1) or ``"lhs"``.
        rhs_grad_sign: -1 where the gradient of ``rhs`` is negated (``a - b``, ``a / b``).
        rhs_grad_over_rhs_squared: the gradient of ``rhs`` is also divided by ``rhs²``
            (``d(a / b)/db = -a / b²``).
    """

    name: str
    uses_lhs: bool
    uses_rhs: bool
    torch_fn: Callable[[torch.Tensor | None, torch.Tensor | None], torch.Tensor]
    cuda_expr: str
    reduces_last_dim: bool = False
    copies: str | None = None
    scales: bool = False
    lhs_grad_factor: str | None = None
    rhs_grad_factor: str | None = None
    rhs_grad_sign: int = 1
    rhs_grad_over_rhs_squared: bool = False

    def backward_reads(self, need_lhs: bool, need_rhs: bool) -> tuple[bool, bool]:
        """Whether the backward reads ``(lhs, rhs)`` themselves, not only their shapes, when
        these gradients are needed: ``rhs`` for ``lhs``'s gradient under a factor, ``lhs``
        for ``rhs``'s, ``rhs`` again for ``a / b``'s."""
        return (need_rhs and self.rhs_grad_factor is not None,
                (need_lhs and self.lhs_grad_factor is not None) or (need_rhs and self.rhs_grad_over_rhs_squared))


@dataclass(frozen=True)
class Reducer:
    """A reducer Φ over the messages of one destination row.

    ``identity`` seeds the accumulator. A reducer either adds its messages up
    (``selects_by`` None) or keeps one of them: the message that compares ``selects_by``
    (``">"`` for max) against the accumulator replaces it, and the winning edge is
    remembered for the backward pass (:attr:`keeps_arg`). Rows with no edges give 0 for
    every reducer (DGL). The methods spell the reducer in C for the code generators.
    """

    name: str
    identity: float
    scatter_reduce: str  # the torch.Tensor.scatter_reduce_ name that computes it
    selects_by: str | None = None
    divides_by_degree: bool = False  # mean: the sum over the in-degree (clamped to 1)

    @property
    def keeps_arg(self) -> bool:
        """Whether the reducer keeps one message, whose edge the backward pass needs."""
        return self.selects_by is not None

    def beats(self, value: str, acc: str) -> str:
        """The C condition under which ``value`` replaces the accumulator ``acc`` (strict:
        of equal messages the first stays)."""
        return f"{value} {self.selects_by} {acc}"

    def fold(self, acc: str, value: str) -> str:
        """The C expression of ``acc`` folded with ``value`` (NaN never wins a selection)."""
        if self.selects_by is None:
            return f"{acc} + {value}"
        return f"({self.beats(value, acc)} ? {value} : {acc})"

    def accumulate(self, acc: str, value: str) -> str:
        """The C statement that folds ``value`` into ``acc``."""
        if self.selects_by is None:
            return f"{acc} += {value};"
        return f"if ({self.beats(value, acc)}) {acc} = {value};"

    def finish(self, acc: str, degree: str) -> str:
        """The C expression of a row's result from its accumulator and its in-degree."""
        return f"{acc} / A({degree})" if self.divides_by_degree else acc


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # einsum reduces while it multiplies: no [..., F] product in memory (1.4-1.6x faster
    # than multiply-then-sum on the CPU for gathered edge rows).
    return torch.einsum("...f,...f->...", a, b).unsqueeze(-1)


BINARY_OPS: dict[str, BinaryOp] = {
    op.name: op
    for op in (
        BinaryOp("add", True, True, lambda a, b: a + b, "a + b"),
        BinaryOp("sub", True, True, lambda a, b: a - b, "a - b", rhs_grad_sign=-1),
        BinaryOp("mul", True, True, lambda a, b: a * b, "a * b", scales=True,
                 lhs_grad_factor="rhs", rhs_grad_factor="lhs"),
        BinaryOp("div", True, True, lambda a, b: a / b, "a / b", lhs_grad_factor="1/rhs",
                 rhs_grad_factor="lhs", rhs_grad_sign=-1, rhs_grad_over_rhs_squared=True),
        BinaryOp("dot", True, True, _dot, "a * b", reduces_last_dim=True, scales=True,
                 lhs_grad_factor="rhs", rhs_grad_factor="lhs"),
        BinaryOp("copy_lhs", True, False, lambda a, b: a, "a", copies="lhs"),
        BinaryOp("copy_rhs", False, True, lambda a, b: b, "b", copies="rhs"),
    )
}

SPMM_OPS: tuple[str, ...] = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs")
SDDMM_OPS: tuple[str, ...] = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")

REDUCERS: dict[str, Reducer] = {
    r.name: r
    for r in (
        Reducer("sum", 0.0, "sum"),
        Reducer("mean", 0.0, "sum", divides_by_degree=True),
        Reducer("max", float("-inf"), "amax", selects_by=">"),
        Reducer("min", float("inf"), "amin", selects_by="<"),
    )
}

# Where an operand of g-SDDMM lives: source node, destination node, or edge.
TARGETS: tuple[str, ...] = ("u", "v", "e")

FLOAT_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
