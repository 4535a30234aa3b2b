"""The edge softmax schedule: one skeleton, a warp per row.

A warp owns a row. Its lanes split the heads (the heads rounded up to a power of two, at
most 32) and the row's edges (the other ``32 / lanes``); ``warps_per_block`` rows share a
block.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schedule import Schedule, one_of

__all__ = ["WarpPerRow", "SOFTMAX_SCHEDULES"]

WARPS = (4, 8, 16, 32)


@dataclass(frozen=True, kw_only=True)
class WarpPerRow(Schedule):
    """A warp per row, ``warps_per_block`` rows per block."""

    skeleton = "softmax.warp_per_row"
    warps_per_block: int = 8

    @property
    def threads(self) -> int:
        return 32 * self.warps_per_block

    def problems(self) -> list[str]:
        return one_of("warps_per_block", self.warps_per_block, WARPS)

    def __str__(self) -> str:
        return f"warp_per_row.w{self.warps_per_block}"


SOFTMAX_SCHEDULES: tuple[type, ...] = (WarpPerRow,)
