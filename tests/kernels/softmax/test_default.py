"""The edge softmax hand rule: 8 warps per block, whatever the graph."""

from __future__ import annotations

import torch

from gsparse.kernels.softmax import SoftmaxTask, WarpPerRow, default_schedule, schedule_space
from gsparse.target import H100

from graphs import named_graph

_TASK = SoftmaxTask("forward", torch.float32, torch.int32, True, 8)


def test_default_is_eight_warps_and_reads_nothing_of_the_graph() -> None:
    assert default_schedule(_TASK, None, None) == WarpPerRow(warps_per_block=8)
    assert default_schedule(_TASK, named_graph("long_row").stats, H100) == WarpPerRow()
    assert default_schedule(_TASK, None, None) in schedule_space(_TASK, None, None)
