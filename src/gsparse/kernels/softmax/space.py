"""The edge softmax search space: the warps per block of the warp-per-row skeleton."""

from __future__ import annotations

from ...graph import GraphStats
from ...target import Target
from ..space import Space
from .schedule import WARPS, WarpPerRow
from .task import SoftmaxTask

__all__ = ["schedule_space"]


def schedule_space(task: SoftmaxTask, stats: GraphStats, target: Target) -> Space:
    """Every warps-per-block count (the graph and target do not shape it)."""
    del task, stats, target
    return Space([WarpPerRow(warps_per_block=w) for w in WARPS])
