"""The edge softmax space: every warps-per-block count, whatever the graph and target."""

from __future__ import annotations

import torch

from gsparse.kernels.softmax import SoftmaxTask, WarpPerRow, schedule_space
from gsparse.target import A100, H100

from graphs import named_graph

_TASK = SoftmaxTask("forward", torch.float32, torch.int32, True, 8)


def test_space_holds_every_warps_per_block() -> None:
    space = schedule_space(_TASK, named_graph("random").stats, H100)
    assert list(space) == [WarpPerRow(warps_per_block=w) for w in (4, 8, 16, 32)]
    assert space.domain(WarpPerRow, "warps_per_block") == (4, 8, 16, 32)
    assert schedule_space(_TASK, named_graph("long_row").stats, A100) == space
