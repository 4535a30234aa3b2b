"""The schedule base class and the one JSON reader of every operator's schedules."""

from __future__ import annotations

import dataclasses
import json

import pytest

import gsparse
from gsparse.kernels.schedule import SCHEDULES, Schedule, one_of, schedule_from_json
from gsparse.kernels.sddmm import Edge, EdgeTransposed, Row, RowTransposed
from gsparse.kernels.softmax import WarpPerRow
from gsparse.kernels.spmm import ColumnTiled, OnePass, OutputTiled, SplitRows
from gsparse.kernels.sptrsv.schedule import NaturalOrderSchedule, SptrsvSchedule

ONE_OF_EACH = [
    OnePass(feature_lanes=8, edge_lanes=4, nnz_tile=2), SplitRows(row_split=1024),
    ColumnTiled(feature_lanes=1, edge_lanes=32, column_tile=4096), OutputTiled(column_groups=2),
    Edge(lanes=8), Row(lanes=4), RowTransposed(lanes=8, edges_per_batch=8),
    EdgeTransposed(lanes=8, edges_per_batch=4), WarpPerRow(warps_per_block=16),
    SptrsvSchedule(subwarps=4, sw_rnnz=2), NaturalOrderSchedule(rows_per_ticket=4, rows_per_thread=False),
]


def test_every_skeleton_is_registered_under_its_operator() -> None:
    assert SCHEDULES == {type(s).skeleton: type(s) for s in ONE_OF_EACH}
    assert all(name.split(".")[0] in ("spmm", "sddmm", "softmax", "sptrsv") for name in SCHEDULES)
    assert gsparse.schedule_from_json is schedule_from_json


@pytest.mark.parametrize("schedule", ONE_OF_EACH, ids=str)
def test_schedule_from_json_reads_any_operators_schedule(schedule) -> None:
    text = schedule.to_json()
    assert json.loads(text) == {"skeleton": schedule.skeleton, **schedule.knobs()}
    assert list(json.loads(text)) == sorted(json.loads(text))  # sorted keys: stable records
    assert schedule_from_json(text) == schedule and type(schedule_from_json(text)) is type(schedule)
    assert schedule.knobs() == {f.name: getattr(schedule, f.name) for f in dataclasses.fields(schedule)}


@pytest.mark.parametrize(("text", "message"), [
    ("{", "a schedule is a JSON object"),
    ("[1, 2]", "a schedule is a JSON object"),
    ('{"feature_lanes": 8}', "names skeleton None; known: \\['sddmm.edge'"),
    ('{"skeleton": "spmm.two_pass"}', "names skeleton 'spmm.two_pass'"),
    ('{"skeleton": "sddmm.edge", "warps": 4}', r"unknown Edge knobs \['warps'\]; known: "),
    ('{"skeleton": "spmm.split_rows"}', "missing 1 required keyword-only argument: 'row_split'"),
    ('{"skeleton": "softmax.warp_per_row", "warps_per_block": 3}',
     r"invalid WarpPerRow warp_per_row.w3: warps_per_block must be one of \(4, 8, 16, 32\)"),
])
def test_schedule_from_json_says_why_it_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        schedule_from_json(text)


def test_from_json_of_a_class_checks_the_class() -> None:
    with pytest.raises(ValueError, match="is a WarpPerRow, not a OnePass"):
        OnePass.from_json(WarpPerRow().to_json())
    assert Schedule.from_json(Edge().to_json()) == Edge()  # the base class takes any


def test_two_schedule_classes_cannot_share_a_skeleton_name() -> None:
    with pytest.raises(TypeError, match="two schedule classes are named 'spmm.one_pass'"):
        @dataclasses.dataclass(frozen=True, kw_only=True)
        class Again(Schedule):
            skeleton = "spmm.one_pass"
    assert SCHEDULES["spmm.one_pass"] is OnePass


def test_validate_returns_the_schedule_or_lists_every_problem() -> None:
    assert Edge().validate() == Edge()
    with pytest.raises(ValueError, match="invalid Edge edge.g0.l3.f1.v1: lanes must be one of .*; "
                                         "groups_per_block must be an int >= 1"):
        Edge(lanes=3, groups_per_block=0).validate()


def test_one_of_tells_bools_from_ints() -> None:
    assert one_of("lanes", 4, (1, 2, 4)) == []
    assert one_of("lanes", 3, (1, 2, 4)) == ["lanes must be one of (1, 2, 4), got 3"]
    assert one_of("lanes", True, (1, 2, 4)) == ["lanes must be one of (1, 2, 4), got True"]
    assert one_of("sorted", 1, (False, True)) == ["sorted must be one of (False, True), got 1"]
    assert one_of("sorted", False, (False, True)) == []
