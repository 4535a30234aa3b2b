"""What a g-SpMM call computes, and the facts about its operands the kernels depend on.

A :class:`SpmmTask` is built on every call from what the host already knows (operator,
shapes, dtypes, the graph's index type, the operands' alignment): it is the key of the
graph's launch plans and, with the graph's signature and the :class:`~gsparse.target.Target`,
of the tuner's records. Statistics of the graph itself (:class:`~gsparse.graph.GraphStats`)
are not part of it: they belong to the graph and are computed once, when a rule needs them.

Its :attr:`~SpmmTask.algorithm` is the part generated code is specialised on, shared by
every graph and feature length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

from ...algebra import BINARY_OPS, REDUCERS, BinaryOp, Reducer
from ..operands import Layout, operand_layout

__all__ = ["SpmmAlgorithm", "SpmmTask"]


@dataclass(frozen=True)
class SpmmAlgorithm:
    """What to compute, and the facts about the operands that the code is specialised on.

    Attributes:
        op: ⊕, a key of :data:`gsparse.algebra.BINARY_OPS` valid for g-SpMM.
        reduce: Φ, a key of :data:`gsparse.algebra.REDUCERS`.
        lhs_layout, rhs_layout: how each used operand maps onto the output features
            (None for an operand the op does not read).
        dtype: feature dtype; index_dtype: int32 or int64.
        has_eid: edge ids differ from CSR positions (read ``eid[p]``).
        with_arg: max/min also write the winning source node and edge of each output.
    """

    op: str
    reduce: str
    lhs_layout: Layout | None
    rhs_layout: Layout | None
    dtype: torch.dtype
    index_dtype: torch.dtype
    has_eid: bool
    with_arg: bool = False

    def __post_init__(self) -> None:
        binop = self.binop
        if (self.lhs_layout is not None) != binop.uses_lhs:
            raise ValueError(f"op {self.op!r} {'reads' if binop.uses_lhs else 'ignores'} lhs")
        if (self.rhs_layout is not None) != binop.uses_rhs:
            raise ValueError(f"op {self.op!r} {'reads' if binop.uses_rhs else 'ignores'} rhs")
        if self.with_arg and not self.reducer.keeps_arg:
            raise ValueError(f"reduce {self.reduce!r} keeps no arg index")

    @property
    def binop(self) -> BinaryOp:
        return BINARY_OPS[self.op]

    @property
    def reducer(self) -> Reducer:
        return REDUCERS[self.reduce]

    @property
    def message_is_lhs(self) -> bool:
        """Whether each message is a whole ``lhs`` row (copy_lhs of full-shape features)
        and no edge position is needed (no arg index): the output-tiled skeleton's case."""
        return (self.binop.copies == "lhs" and self.lhs_layout is Layout.FULL
                and not self.with_arg)

    def __str__(self) -> str:
        layouts = "/".join(
            f"{name}:{layout.value}"
            for name, layout in (("lhs", self.lhs_layout), ("rhs", self.rhs_layout))
            if layout is not None
        )
        return (
            f"{self.op}.{self.reduce} {layouts} {str(self.dtype).removeprefix('torch.')} "
            f"{str(self.index_dtype).removeprefix('torch.')}"
            f"{' eid' if self.has_eid else ''}{' arg' if self.with_arg else ''}"
        )


@dataclass(frozen=True)
class SpmmTask:
    """One g-SpMM as the kernels see it.

    Attributes:
        op, reduce: ⊕ and Φ.
        lhs_shape, rhs_shape: the operands' feature shapes, padded to the output's rank
            (None for an operand the op does not read).
        out_shape: the output's feature shape.
        dtype: the operands' dtype; index_dtype: the graph's.
        has_eid: the graph's edge ids differ from its CSR positions and the kernels read
            them (for ``rhs`` or arg indices).
        with_arg: max/min also return the winners.
        vector_ok: the widest vector (elements) the operands' alignment and row length allow.
    """

    op: str
    reduce: str
    lhs_shape: tuple[int, ...] | None
    rhs_shape: tuple[int, ...] | None
    out_shape: tuple[int, ...]
    dtype: torch.dtype
    index_dtype: torch.dtype
    has_eid: bool
    with_arg: bool
    vector_ok: int

    @cached_property
    def algorithm(self) -> SpmmAlgorithm:
        def layout(shape: tuple[int, ...] | None) -> Layout | None:
            return None if shape is None else operand_layout(shape, self.out_shape)

        return SpmmAlgorithm(self.op, self.reduce, layout(self.lhs_shape), layout(self.rhs_shape),
                             self.dtype, self.index_dtype, self.has_eid, self.with_arg)

    @property
    def num_features(self) -> int:
        return math.prod(self.out_shape)

    @property
    def lhs_len(self) -> int:
        """Elements per row of ``lhs`` (0 without one)."""
        return 0 if self.lhs_shape is None else math.prod(self.lhs_shape)

    @property
    def rhs_len(self) -> int:
        """Elements per row of ``rhs`` (0 without one)."""
        return 0 if self.rhs_shape is None else math.prod(self.rhs_shape)

    def __str__(self) -> str:
        return f"{self.algorithm} [{self.num_features} features]"
