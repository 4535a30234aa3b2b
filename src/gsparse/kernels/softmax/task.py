"""What an edge softmax call computes: a direction, dtypes, and the head count."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["DIRECTIONS", "SoftmaxTask", "head_lanes"]

DIRECTIONS = ("forward", "backward")
_WARP = 32


def head_lanes(num_heads: int) -> int:
    """Lanes of a warp that split the heads: ``num_heads`` rounded up to a power of two, at
    most 32 (more heads are walked 32 at a time)."""
    return min(_WARP, 1 << max(0, math.ceil(math.log2(max(num_heads, 1)))))


@dataclass(frozen=True)
class SoftmaxTask:
    """One edge softmax pass over the rows of a graph (destinations, or with
    ``norm_by="src"`` the reverse graph's rows).

    Attributes:
        direction: ``"forward"`` (logits -> softmax) or ``"backward"`` (its gradient).
        dtype: the values' dtype; index_dtype: the graph's.
        has_eid: the rows' edge ids differ from their CSR positions.
        num_heads: values per edge.
    """

    direction: str
    dtype: torch.dtype
    index_dtype: torch.dtype
    has_eid: bool
    num_heads: int

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")

    @property
    def lanes(self) -> int:
        """Lanes per edge (:func:`head_lanes`): the part of the task the code depends on."""
        return head_lanes(self.num_heads)
