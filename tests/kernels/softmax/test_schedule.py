"""The edge softmax schedule: a warp per row, its validation, name and JSON round trip."""

from __future__ import annotations

import pytest

import gsparse
from gsparse.kernels.softmax import WarpPerRow


def test_schedule_reads_as_its_warps_and_round_trips() -> None:
    for warps in (4, 8, 16, 32):
        schedule = WarpPerRow(warps_per_block=warps)
        assert str(schedule) == f"warp_per_row.w{warps}" and schedule.threads == 32 * warps
        assert gsparse.schedule_from_json(schedule.to_json()) == schedule
        assert WarpPerRow.from_json(schedule.to_json()) == schedule
    assert WarpPerRow() == WarpPerRow(warps_per_block=8)


@pytest.mark.parametrize("warps", [0, 3, 64, True])
def test_invalid_schedules_say_why(warps) -> None:
    schedule = WarpPerRow(warps_per_block=warps)
    assert schedule.problems() == [f"warps_per_block must be one of (4, 8, 16, 32), got {warps!r}"]
    with pytest.raises(ValueError, match="warps_per_block must be one of"):
        WarpPerRow.from_json(schedule.to_json())
