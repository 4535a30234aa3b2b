"""The edge softmax search space: the warps per block, edges in flight and lanes per row of
the warp-per-row skeleton."""

from __future__ import annotations

from ...graph import GraphStats
from ...target import Target
from ..space import Space
from .schedule import EDGES_IN_FLIGHT, LANES_PER_ROW, WARPS, WarpPerRow
from .task import SoftmaxTask

__all__ = ["schedule_space"]


def schedule_space(task: SoftmaxTask, stats: GraphStats, target: Target) -> Space:
    """Every combination of the knobs (the graph and target do not shape it)."""
    del task, stats, target
    return Space([WarpPerRow(warps_per_block=w, edges_in_flight=f, lanes_per_row=r)
                  for w in WARPS for f in EDGES_IN_FLIGHT for r in LANES_PER_ROW])
