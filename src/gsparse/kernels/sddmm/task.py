"""What a g-SDDMM call computes, and the facts about its operands the kernels depend on.

``Z_e = lhs[t_l(e)] ⊕ rhs[t_r(e)]`` for every edge ``e = (u, v)``, the targets picking the
source ``u``, the destination ``v`` or the edge itself. Element-wise operators write one
output per feature; ``dot`` reduces the last feature dimension, so its features are
``num_heads`` *heads* of ``head_len`` elements each, and each head gives one output.
Element-wise operators are the one-head case with ``head_len`` = all output features.

A :class:`SddmmTask` is built on every call from what the host knows; it keys the graph's
launch plans. Its :attr:`~SddmmTask.algorithm` is what generated code is specialised on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

from ...algebra import BINARY_OPS, TARGETS, BinaryOp
from ..operands import Layout, operand_layout

__all__ = ["SddmmAlgorithm", "SddmmTask"]


@dataclass(frozen=True)
class SddmmAlgorithm:
    """What to compute, and the facts about the operands the code is specialised on.

    Attributes:
        op: ⊕, a key of :data:`gsparse.algebra.BINARY_OPS` valid for g-SDDMM.
        lhs_target, rhs_target: ``"u"``, ``"v"`` or ``"e"`` for each operand the op reads,
            None for one it ignores.
        lhs_layout, rhs_layout: how each read operand maps onto the (for ``dot``:
            unreduced) output features; None for one the op ignores.
        dtype: feature dtype; index_dtype: int32 or int64.
        has_eid: edge ids differ from CSR positions (read ``eid[p]``).
    """

    op: str
    lhs_target: str | None
    rhs_target: str | None
    lhs_layout: Layout | None
    rhs_layout: Layout | None
    dtype: torch.dtype
    index_dtype: torch.dtype
    has_eid: bool

    def __post_init__(self) -> None:
        binop = self.binop
        for name, uses in (("lhs", binop.uses_lhs), ("rhs", binop.uses_rhs)):
            target, layout = getattr(self, f"{name}_target"), getattr(self, f"{name}_layout")
            if (target is not None, layout is not None) != (uses, uses):
                raise ValueError(f"op {self.op!r} {'reads' if uses else 'ignores'} {name}: "
                                 f"give both its target and layout, or neither")
            if target is not None and target not in TARGETS:
                raise ValueError(f"{name}_target must be one of {TARGETS}, got {target!r}")

    @property
    def binop(self) -> BinaryOp:
        return BINARY_OPS[self.op]

    @property
    def is_dot(self) -> bool:
        return self.binop.reduces_last_dim

    def targets(self) -> set[str]:
        return {t for t in (self.lhs_target, self.rhs_target) if t is not None}

    def __str__(self) -> str:
        operands = "/".join(
            f"{name}:{target}:{layout.value}"
            for name, target, layout in (("lhs", self.lhs_target, self.lhs_layout),
                                         ("rhs", self.rhs_target, self.rhs_layout))
            if layout is not None
        )
        return (f"{self.op} {operands} {str(self.dtype).removeprefix('torch.')} "
                f"{str(self.index_dtype).removeprefix('torch.')}{' eid' if self.has_eid else ''}")


@dataclass(frozen=True)
class SddmmTask:
    """One g-SDDMM as the kernels see it.

    Attributes:
        op: ⊕.
        lhs_target, rhs_target: ``"u"``, ``"v"`` or ``"e"`` for each operand the op reads
            (None for one it ignores).
        lhs_shape, rhs_shape: the operands' feature shapes, the output's rank (None for an
            operand the op ignores).
        full_shape: the output's features before a ``dot`` reduces the last dimension
            (for element-wise operators, the output's feature shape).
        num_heads: heads of a ``dot`` (1 for element-wise operators).
        dtype: the operands' dtype; index_dtype: the graph's.
        has_eid: the graph's edge ids differ from its CSR positions.
        vector_ok: the widest vector (elements) the operands' alignment and head length allow.
    """

    op: str
    lhs_target: str | None
    rhs_target: str | None
    lhs_shape: tuple[int, ...] | None
    rhs_shape: tuple[int, ...] | None
    full_shape: tuple[int, ...]
    num_heads: int
    dtype: torch.dtype
    index_dtype: torch.dtype
    has_eid: bool
    vector_ok: int

    @cached_property
    def algorithm(self) -> SddmmAlgorithm:
        def layout(shape: tuple[int, ...] | None) -> Layout | None:
            return None if shape is None else operand_layout(shape, self.full_shape)

        return SddmmAlgorithm(self.op, self.lhs_target, self.rhs_target, layout(self.lhs_shape),
                              layout(self.rhs_shape), self.dtype, self.index_dtype, self.has_eid)

    # Cached: spaces, pruning and features read these once per candidate.
    @cached_property
    def is_dot(self) -> bool:
        return BINARY_OPS[self.op].reduces_last_dim

    @cached_property
    def head_len(self) -> int:
        """Features of one head: what a ``dot`` reduces, or all features."""
        return self.full_shape[-1] if self.is_dot else math.prod(self.full_shape)

    @property
    def lhs_len(self) -> int:
        return 0 if self.lhs_shape is None else math.prod(self.lhs_shape)

    @property
    def rhs_len(self) -> int:
        return 0 if self.rhs_shape is None else math.prod(self.rhs_shape)

    def __str__(self) -> str:
        return f"{self.algorithm} [{self.num_heads} x {self.head_len} features]"
