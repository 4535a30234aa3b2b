"""The edge softmax space: every warps per block, edges in flight and lanes per row, whatever
the graph and target, and for GAT's forward where its logits wait between the passes."""

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


def test_gat_logits_in_float64_leave_out_what_spills() -> None:
    stats = named_graph("random").stats
    gat = schedule_space(SoftmaxTask("backward", torch.float64, torch.int64, True, 8, "gat"), stats, H100)
    left_out = set(schedule_space(_TASK, stats, H100)) - set(gat)
    assert left_out == {WarpPerRow(warps_per_block=32, edges_in_flight=8, lanes_per_row=r)
                        for r in (1, 2, 4, 8, 16, 32)}
    assert len(schedule_space(SoftmaxTask("backward", torch.float32, torch.int64, True, 8, "gat"),
                              stats, H100)) == 96


def test_only_gats_forward_chooses_where_its_logits_wait() -> None:
    stats = named_graph("random").stats
    forward = schedule_space(SoftmaxTask("forward", torch.float32, torch.int32, False, 8, "gat"), stats, H100)
    assert len(forward) == 192
    assert {s for s in forward if s.logits_in_output} == {
        WarpPerRow(warps_per_block=s.warps_per_block, edges_in_flight=s.edges_in_flight,
                   lanes_per_row=s.lanes_per_row, logits_in_output=True) for s in schedule_space(_TASK, stats, H100)}
    for task in (_TASK, SoftmaxTask("backward", torch.float32, torch.int32, False, 8, "gat")):
        assert not any(s.logits_in_output for s in schedule_space(task, stats, H100))
