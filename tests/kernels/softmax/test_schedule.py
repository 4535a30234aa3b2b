"""The edge softmax schedule: a warp per row, its validation, name and JSON round trip."""

from __future__ import annotations

import pytest

import gsparse
from gsparse.kernels.softmax import WarpPerRow


def test_schedule_reads_as_its_knobs_and_round_trips() -> None:
    for warps in (4, 8, 16, 32):
        for flight in (1, 2, 4, 8):
            schedule = WarpPerRow(warps_per_block=warps, edges_in_flight=flight)
            suffix = f".f{flight}" if flight > 1 else ""
            assert str(schedule) == f"warp_per_row.w{warps}{suffix}" and schedule.threads == 32 * warps
            assert gsparse.schedule_from_json(schedule.to_json()) == schedule
            assert WarpPerRow.from_json(schedule.to_json()) == schedule
    assert WarpPerRow() == WarpPerRow(warps_per_block=8, edges_in_flight=1, lanes_per_row=32)
    group = WarpPerRow(warps_per_block=4, edges_in_flight=2, lanes_per_row=8)
    assert str(group) == "warp_per_row.w4.f2.l8" and group.rows_per_block == 16
    assert WarpPerRow.from_json(group.to_json()) == group


@pytest.mark.parametrize("warps", [0, 3, 64, True])
def test_invalid_schedules_say_why(warps) -> None:
    schedule = WarpPerRow(warps_per_block=warps)
    assert schedule.problems() == [f"warps_per_block must be one of (4, 8, 16, 32), got {warps!r}"]
    with pytest.raises(ValueError, match="warps_per_block must be one of"):
        WarpPerRow.from_json(schedule.to_json())


@pytest.mark.parametrize("flight", [0, 3, 16, True])
def test_invalid_edges_in_flight_say_why(flight) -> None:
    schedule = WarpPerRow(edges_in_flight=flight)
    assert schedule.problems() == [f"edges_in_flight must be one of (1, 2, 4, 8), got {flight!r}"]


@pytest.mark.parametrize("lanes", [0, 3, 64, True])
def test_invalid_lanes_per_row_say_why(lanes) -> None:
    schedule = WarpPerRow(lanes_per_row=lanes)
    assert schedule.problems() == [f"lanes_per_row must be one of (1, 2, 4, 8, 16, 32), got {lanes!r}"]
