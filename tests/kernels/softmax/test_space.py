"""The edge softmax space: every warps per block, edges in flight and lanes per row, whatever
the graph and target."""

from __future__ import annotations

import torch

from gsparse.kernels.softmax import SoftmaxTask, WarpPerRow, schedule_space
from gsparse.target import A100, H100

from graphs import named_graph

_TASK = SoftmaxTask("forward", torch.float32, torch.int32, True, 8)


def test_space_holds_every_combination_of_the_knobs() -> None:
    space = schedule_space(_TASK, named_graph("random").stats, H100)
    assert list(space) == [WarpPerRow(warps_per_block=w, edges_in_flight=f, lanes_per_row=r)
                           for w in (4, 8, 16, 32) for f in (1, 2, 4, 8) for r in (1, 2, 4, 8, 16, 32)]
    assert space.domain(WarpPerRow, "warps_per_block") == (4, 8, 16, 32)
    assert space.domain(WarpPerRow, "edges_in_flight") == (1, 2, 4, 8)
    assert space.domain(WarpPerRow, "lanes_per_row") == (1, 2, 4, 8, 16, 32)
    assert schedule_space(_TASK, named_graph("long_row").stats, A100) == space
