"""The edge softmax hand rule: a row's lanes sized to its heads and mean length, loads in
flight to the edges each lane walks, read from what the host knows."""

from __future__ import annotations

import pytest
import torch

from gsparse.graph import GraphStats, RowStats
from gsparse.kernels.softmax import SoftmaxTask, WarpPerRow, default_schedule, schedule_space
from gsparse.target import A100, H100


def _stats(rows: int, mean: float, exact: bool = True) -> GraphStats:
    edges = round(rows * mean)
    return GraphStats(rows, rows, edges, RowStats(mean, edges, 1.0 if exact else float("nan"), exact))


def _task(heads: int) -> SoftmaxTask:
    return SoftmaxTask("forward", torch.float32, torch.int32, True, heads)


@pytest.mark.parametrize(("heads", "mean", "lanes", "flight"), [
    (1, 5.3, 4, 4),      # youtube-like: four lanes a row, eight rows a warp
    (1, 10.4, 4, 4),     # citation-like
    (1, 50.5, 16, 4),    # products-like
    (1, 492.0, 32, 8),   # reddit-like: a warp a row, eight loads in flight a lane
    (8, 5.3, 16, 4),     # GAT's eight heads on short rows: two edges at a time
    (8, 50.5, 32, 8),    # ... on 50-edge rows: a warp, 12 edges a lane
    (3, 2.0, 4, 4),      # three heads take four lanes, never fewer
    (40, 2.0, 32, 4),    # more heads than lanes: walked 32 at a time by a warp
])
def test_lanes_cover_the_heads_and_a_quarter_of_the_mean_row(heads, mean, lanes, flight) -> None:
    pick = default_schedule(_task(heads), _stats(2_000_000, mean), H100)
    assert pick == WarpPerRow(lanes_per_row=lanes, edges_in_flight=flight)


def test_few_rows_keep_half_the_resident_warps_busy() -> None:
    # 1,024 rows of 25 edges: four lanes a row would fill 128 warps of the H100's 8,448
    half = H100.sms * H100.warps_per_sm // 2
    assert default_schedule(_task(1), _stats(1024, 25.0), H100).lanes_per_row == 32
    for rows in (10_000, 100_000, 1_000_000):
        pick = default_schedule(_task(1), _stats(rows, 25.0), H100)
        assert rows * pick.lanes_per_row / 32 >= half or pick.lanes_per_row == 32
    # 10,000 rows of 25 edges: 8 lanes by the mean, 16 to fill half of an H100 or an A100;
    # 40,000 rows: 8 either way
    for target in (H100, A100):
        assert default_schedule(_task(1), _stats(10_000, 25.0), target).lanes_per_row == 16
        assert default_schedule(_task(1), _stats(40_000, 25.0), target).lanes_per_row == 8


def test_a_sampled_blocks_statistics_are_enough_and_the_pick_is_in_the_space() -> None:
    stats = _stats(25_000, 10.0, exact=False)  # mean exact, no COV
    pick = default_schedule(_task(8), stats, H100)
    assert pick == WarpPerRow(lanes_per_row=32, edges_in_flight=4)
    assert pick in schedule_space(_task(8), stats, H100)


@pytest.mark.parametrize(("heads", "dtype", "mean", "kept"), [
    (1, torch.float32, 492.0, True),     # reddit-like, one head: 6 MB of logits in flight
    (8, torch.bfloat16, 492.0, True),    # eight bfloat16 heads: 25 MB, half of an H100's L2
    (8, torch.float32, 492.0, False),    # eight float32 heads: 50 MB, the whole L2
    (8, torch.float32, 50.5, True),      # products-like rows: 5 MB
])
def test_gat_forward_keeps_its_logits_where_the_rows_in_flight_fit_half_the_l2(heads, dtype, mean, kept) -> None:
    task = SoftmaxTask("forward", dtype, torch.int32, False, heads, "gat")
    stats = _stats(232_965, mean)
    pick = default_schedule(task, stats, H100)
    assert pick.logits_in_output is kept and pick in schedule_space(task, stats, H100)
    # few rows hold few logits, however long; the backward and given logits never keep them
    assert default_schedule(task, _stats(100, mean), H100).logits_in_output
    for other in (SoftmaxTask("backward", dtype, torch.int32, False, heads, "gat"), _task(heads)):
        assert not default_schedule(other, stats, H100).logits_in_output


@pytest.mark.parametrize(("heads", "mean", "lanes", "flight"), [
    (1, 10.4, 2, 4),     # citation-like: two lanes a row (the edge softmax takes four)
    (2, 5.3, 2, 4),      # youtube-like, two heads: a lane a head
    (8, 10.4, 16, 4),    # eight heads on citation-like rows: half a warp (a warp forward)
    (1, 50.5, 8, 4),     # products-like: eight lanes (sixteen forward)
    (1, 492.0, 32, 8),   # long rows take a warp either way
])
def test_gat_backward_gives_a_lane_eight_edges(heads, mean, lanes, flight) -> None:
    backward = SoftmaxTask("backward", torch.float32, torch.int32, False, heads, "gat")
    pick = default_schedule(backward, _stats(2_000_000, mean), H100)
    assert pick == WarpPerRow(lanes_per_row=lanes, edges_in_flight=flight)
    assert default_schedule(_task(heads), _stats(2_000_000, mean), H100).lanes_per_row == max(4, min(32, 2 * lanes))
