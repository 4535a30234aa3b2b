"""What an edge softmax call computes: a direction, where its logits come from, dtypes, and
the head count."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["DIRECTIONS", "LOGITS", "SoftmaxTask", "head_lanes"]

DIRECTIONS = ("forward", "backward")
# "given": the logits are an operand. "gat": GAT's, computed per edge from node scores
# (``leaky_relu(score_src[u] + score_dst[v] + edge_scores[e])``, masked edges -inf).
LOGITS = ("given", "gat")
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
        logits: ``"given"`` or ``"gat"`` (see :data:`LOGITS`): GAT's attention, whose
            backward also carries the gradient through the LeakyReLU and sums it over each
            destination's edges.
        edge_scores: a ``"gat"`` task adds a score per edge and head to its logits.
        masked: a ``"gat"`` task excludes the edges a mask marks (their attention is 0).
    """

    direction: str
    dtype: torch.dtype
    index_dtype: torch.dtype
    has_eid: bool
    num_heads: int
    logits: str = "given"
    edge_scores: bool = False
    masked: bool = False

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.logits not in LOGITS:
            raise ValueError(f"logits must be one of {LOGITS}, got {self.logits!r}")
        if self.logits == "given" and (self.edge_scores or self.masked):
            raise ValueError("edge_scores and masked belong to GAT's logits (logits='gat')")

    @property
    def computes_logits_once(self) -> bool:
        """GAT's forward: its first pass computes the logits the second needs again, so it may
        leave them in the output between the passes (``WarpPerRow.logits_in_output``)."""
        return self.logits == "gat" and self.direction == "forward"

    @property
    def lanes(self) -> int:
        """Lanes per edge (:func:`head_lanes`): the part of the task the code depends on."""
        return head_lanes(self.num_heads)
