"""The g-SDDMM schedules: one type per skeleton, validation, names, JSON round trip."""

from __future__ import annotations

import json
import re

import pytest
import torch

import gsparse
from gsparse.kernels.sddmm import Edge, EdgeTransposed, Row, RowTransposed

from graphs import named_graph
from kernels.sddmm.support import FEATURE_LENGTHS, space


def test_schedule_json_round_trip() -> None:
    for feature_len in FEATURE_LENGTHS:
        for op in ("dot", "add"):
            for schedule in space(named_graph("sorted"), feature_len, op=op):
                assert gsparse.schedule_from_json(schedule.to_json()) == schedule
                assert type(schedule).from_json(schedule.to_json()) == schedule


def test_every_schedule_is_a_sddmm_schedule() -> None:
    schedules = [Edge(), Row(), RowTransposed(edges_per_batch=8), EdgeTransposed(edges_per_batch=8)]
    for schedule in schedules:
        assert isinstance(schedule, gsparse.SddmmSchedule) and not schedule.problems()
    assert [type(s) for s in schedules] == [gsparse.SddmmEdge, gsparse.SddmmRow,
                                            gsparse.SddmmRowTransposed, gsparse.SddmmEdgeTransposed]
    assert not isinstance(gsparse.SpmmOnePass(), gsparse.SddmmSchedule)


@pytest.mark.parametrize(("schedule", "name"), [
    (Edge(groups_per_block=128, lanes=1, features_per_thread=4), "edge.g128.l1.f4.v1"),
    (Edge(groups_per_block=32, lanes=4, features_per_thread=4, vector_width=4, features_per_launch=128),
     "edge.g32.l4.f4.v4.s128"),
    (Row(groups_per_block=4, lanes=8, vector_width=4), "row.g4.l8.f1.v4"),
    (RowTransposed(groups_per_block=4, lanes=8, vector_width=4, features_per_launch=32,
                   edges_per_batch=8), "row_transposed.g4.l8.f1.v4.s32.b8"),
    (EdgeTransposed(groups_per_block=4, lanes=4, vector_width=4, edges_per_batch=4),
     "edge_transposed.g4.l4.f1.v4.b4"),
])
def test_names_read_as_reports_and_sweeps_print_them(schedule, name: str) -> None:
    assert str(schedule) == name


def test_shape_of_a_schedule() -> None:
    # an edge block holds groups of `lanes` threads; the others hold warps
    assert Edge(groups_per_block=32, lanes=8).threads == 256
    assert Row(groups_per_block=8, lanes=4).threads == 256
    ranged = EdgeTransposed(groups_per_block=4, lanes=8, features_per_thread=1, vector_width=4,
                            edges_per_batch=8)
    assert ranged.threads == 128 and ranged.feature_slice == 32
    assert ranged.edges_per_warp == 256  # 32 / lanes groups x 8 edges x 8 batches
    assert Edge(features_per_launch=64).launch_len(100) == 64 and Edge().launch_len(100) == 100


@pytest.mark.parametrize(
    ("schedule", "reason"),
    [
        (Edge(lanes=3), "lanes must be one of"),
        (Edge(lanes=64), "lanes must be one of"),
        (Edge(vector_width=16), "vector_width must be one of"),
        (Edge(features_per_thread=3), r"features_per_thread must be one of \(1, 2, 4, 8\)"),
        (Edge(groups_per_block=0), "groups_per_block must be an int >= 1"),
        (Edge(groups_per_block=64, lanes=32), "more than 1024"),
        (Row(groups_per_block=33), "more than 1024"),
        (Edge(groups_per_block=3, lanes=4), "not a multiple of 32"),
        (Edge(features_per_thread=8, vector_width=4), "more than 16 spills"),
        (Edge(features_per_launch=48), "features_per_launch must be one of"),
        (Row(lanes=32, vector_width=4, features_per_launch=32), "narrower than the 128"),
        (Edge(lanes=32, vector_width=2, features_per_launch=32), "narrower than the 64"),
        (RowTransposed(groups_per_block=4, edges_per_batch=0), "edges_per_batch must be one of"),
        (RowTransposed(groups_per_block=4, lanes=8, edges_per_batch=16), "at most lanes = 8"),
        (RowTransposed(groups_per_block=4, edges_per_batch=12), "edges_per_batch must be one of"),
        (EdgeTransposed(groups_per_block=4, lanes=4, edges_per_batch=8), "at most lanes = 4"),
        (EdgeTransposed(groups_per_block=4, lanes=5, edges_per_batch=4), "lanes must be one of"),
    ],
)
def test_invalid_schedules_say_why(schedule, reason: str) -> None:
    assert any(re.search(reason, problem) for problem in schedule.problems())
    with pytest.raises(ValueError, match=reason):
        schedule.validate()
    with pytest.raises(ValueError, match=reason):
        type(schedule).from_json(schedule.to_json())
    with pytest.raises(ValueError, match=reason):
        gsparse.schedule_from_json(schedule.to_json())


@pytest.mark.parametrize(("cls", "knob", "value"), [
    # batches are a knob of the transposed skeletons only
    (Row, "edges_per_batch", 8),
    (Edge, "edges_per_batch", 8),
    (Edge, "skeleton", "row"),  # the skeleton is the schedule's type, not a knob
])
def test_each_skeleton_takes_only_its_own_knobs(cls, knob: str, value) -> None:
    with pytest.raises(TypeError):
        cls(**{knob: value})
    record = json.loads(cls().to_json())
    if knob != "skeleton":
        with pytest.raises(ValueError, match=rf"unknown {cls.__name__} knobs \['{knob}'\]"):
            cls.from_json(json.dumps({**record, knob: value}))


def test_the_transposed_skeletons_need_their_batch() -> None:
    with pytest.raises(TypeError, match="edges_per_batch"):
        RowTransposed(groups_per_block=4)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="missing 1 required keyword-only argument: 'edges_per_batch'"):
        EdgeTransposed.from_json(json.dumps({"skeleton": "sddmm.edge_transposed"}))


def test_from_json_rejects_unknown_knobs_skeletons_and_non_objects() -> None:
    with pytest.raises(ValueError, match=r"unknown Edge knobs \['warps'\]"):
        Edge.from_json(json.dumps({"skeleton": "sddmm.edge", "warps": 4}))
    with pytest.raises(ValueError, match="names skeleton 'sddmm.warp'"):
        gsparse.schedule_from_json(json.dumps({"skeleton": "sddmm.warp"}))
    with pytest.raises(ValueError, match="is a JSON object"):
        Edge.from_json("[1, 2]")
    with pytest.raises(ValueError, match="is a Row, not a Edge"):
        Edge.from_json(Row().to_json())


def test_half_and_double_precision_spaces_round_trip() -> None:
    for dtype in (torch.float16, torch.float64):
        for schedule in space(named_graph("sorted"), 64, dtype):
            assert gsparse.schedule_from_json(schedule.to_json()) == schedule
