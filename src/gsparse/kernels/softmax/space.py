"""The edge softmax search space: the warps per block, edges in flight and lanes per row of
the warp-per-row skeleton."""

from __future__ import annotations

import torch

from ...graph import GraphStats
from ...target import Target
from ..space import Space
from .schedule import EDGES_IN_FLIGHT, LANES_PER_ROW, WARPS, WarpPerRow
from .task import SoftmaxTask

__all__ = ["schedule_space"]


def schedule_space(task: SoftmaxTask, stats: GraphStats, target: Target) -> Space:
    """Every combination of the knobs (the graph and target do not shape it), but those whose
    registers cannot fit: GAT's logits in float64 with 8 edges in flight spill in blocks of
    1,024 threads (64 registers a thread; NVRTC's report, tests/kernels/softmax). Where the
    logits wait between the passes is a knob of GAT's forward alone."""
    del stats, target
    kept = (False, True) if task.computes_logits_once else (False,)
    return Space([WarpPerRow(warps_per_block=w, edges_in_flight=f, lanes_per_row=r, logits_in_output=k)
                  for w in WARPS for f in EDGES_IN_FLIGHT for r in LANES_PER_ROW for k in kept
                  if not _spills(task, w, f)])


def _spills(task: SoftmaxTask, warps: int, edges_in_flight: int) -> bool:
    return task.logits == "gat" and task.dtype == torch.float64 and warps == 32 and edges_in_flight == 8
