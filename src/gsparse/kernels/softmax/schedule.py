"""The edge softmax schedule: one skeleton, a group of lanes per row.

A group of ``lanes_per_row`` lanes (a whole warp by default) owns a row. Its lanes split
the heads (the heads rounded up to a power of two, at most the group) and the row's edges
(the rest of the group); a warp holds ``32 / lanes_per_row`` rows and ``warps_per_block``
warps share a block. Groups narrower than a warp serve short rows with few heads, where a
warp would leave most of its lanes idle. Each lane issues the loads of ``edges_in_flight``
of its edges before it folds them: a group walks a whole row, so on long rows its loads in
flight, not the warps per SM, set how much latency is hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schedule import Schedule, one_of

__all__ = ["WarpPerRow", "SOFTMAX_SCHEDULES"]

WARPS = (4, 8, 16, 32)
EDGES_IN_FLIGHT = (1, 2, 4, 8)
LANES_PER_ROW = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True, kw_only=True)
class WarpPerRow(Schedule):
    """``lanes_per_row`` lanes a row (32: a warp), ``warps_per_block`` warps a block,
    ``edges_in_flight`` edges' loads issued together by each lane. ``logits_in_output``
    (GAT's forward only): the first pass leaves each logit it computes in the output, where
    the second reads it back, instead of gathering its source score again."""

    skeleton = "softmax.warp_per_row"
    warps_per_block: int = 8
    edges_in_flight: int = 1
    lanes_per_row: int = 32
    logits_in_output: bool = False

    @property
    def threads(self) -> int:
        return 32 * self.warps_per_block

    @property
    def rows_per_block(self) -> int:
        return self.warps_per_block * (32 // self.lanes_per_row)

    def problems(self) -> list[str]:
        return (one_of("warps_per_block", self.warps_per_block, WARPS)
                + one_of("edges_in_flight", self.edges_in_flight, EDGES_IN_FLIGHT)
                + one_of("lanes_per_row", self.lanes_per_row, LANES_PER_ROW)
                + one_of("logits_in_output", self.logits_in_output, (False, True)))

    def __str__(self) -> str:
        flight = f".f{self.edges_in_flight}" if self.edges_in_flight > 1 else ""
        group = f".l{self.lanes_per_row}" if self.lanes_per_row < 32 else ""
        kept = ".lo" if self.logits_in_output else ""
        return f"warp_per_row.w{self.warps_per_block}{flight}{group}{kept}"


SOFTMAX_SCHEDULES: tuple[type, ...] = (WarpPerRow,)
