"""The g-SpMM schedules: one type per skeleton, validation, names, JSON round trip."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

import gsparse
from gsparse.kernels.spmm import ColumnTiled, OnePass, OutputTiled, SplitRows
from gsparse.kernels.spmm.space import one_pass_grid

from graphs import named_graph
from kernels.spmm.support import space

EVERY_SKELETON = [
    OnePass(rows_per_block=4, feature_lanes=8, edge_lanes=4, vector_width=2, nnz_tile=2,
            degree_sorted=True),
    SplitRows(feature_lanes=8, edge_lanes=4, row_split=1024, degree_sorted=True),
    ColumnTiled(rows_per_block=64, feature_lanes=1, edge_lanes=16, column_tile=4096),
    OutputTiled(warps_per_block=16, vector_width=2, column_groups=2),
]


def test_schedule_json_round_trip() -> None:
    for schedule in [*one_pass_grid(64, vector_ok=4), *EVERY_SKELETON]:
        assert gsparse.schedule_from_json(schedule.to_json()) == schedule
        assert type(schedule).from_json(schedule.to_json()) == schedule
        assert json.loads(schedule.to_json())["skeleton"] == type(schedule).skeleton


def test_every_schedule_of_a_space_round_trips() -> None:
    # the long row makes split-rows schedules; copy_lhs of 4 features column- and output-tiled
    # ones; 100 features groups that do not divide a warp
    for schedule in space(named_graph("long_row"), 64) + space(named_graph("random"), 4) + space(
            named_graph("long_row"), 100):
        assert gsparse.schedule_from_json(schedule.to_json()) == schedule


def test_every_schedule_is_a_spmm_schedule() -> None:
    for schedule in EVERY_SKELETON:
        assert isinstance(schedule, gsparse.SpmmSchedule) and not schedule.problems()
        assert schedule.validate() is schedule
    assert (gsparse.SpmmOnePass, gsparse.SpmmSplitRows, gsparse.SpmmColumnTiled,
            gsparse.SpmmOutputTiled) == (OnePass, SplitRows, ColumnTiled, OutputTiled)
    assert not isinstance(gsparse.SddmmEdge(), gsparse.SpmmSchedule)


def test_schedules_are_keyword_only_values() -> None:
    with pytest.raises(TypeError):
        OnePass(8, 32)  # type: ignore[misc]
    a, b = OnePass(feature_lanes=8), OnePass(feature_lanes=8)
    assert a == b and hash(a) == hash(b) and len({a, b, OnePass()}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.feature_lanes = 4  # type: ignore[misc]


@pytest.mark.parametrize(("schedule", "name"), [
    (OnePass(), "r8.f32.e1.v1.o1.n1"),
    (OnePass(rows_per_block=4, feature_lanes=8, edge_lanes=4, vector_width=2,
             outputs_per_thread=2, nnz_tile=4, index_tile=False, degree_sorted=True),
     "r4.f8.e4.v2.o2.n4+sorted"),
    (OnePass(feature_lanes=32, vector_width=2, index_tile=True), "r8.f32.e1.v2.o1.n1+tile"),
    (SplitRows(feature_lanes=8, edge_lanes=4, row_split=1024, degree_sorted=True),
     "r8.f8.e4.v1.o1.n1+sorted+split1024"),
    (ColumnTiled(rows_per_block=64, feature_lanes=1, edge_lanes=16, column_tile=4096),
     "r64.f1.e16.v1.o1.n1+ct4096"),
    (OutputTiled(warps_per_block=16, vector_width=2), "r16.f1.e32.v2.o1.n1+ot"),
    (OutputTiled(warps_per_block=32, column_groups=2), "r32.f1.e32.v1.o1.n1+otx2"),
])
def test_names_read_as_reports_and_sweeps_print_them(schedule, name: str) -> None:
    assert str(schedule) == name


def test_shape_of_a_schedule() -> None:
    s = OnePass(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4, outputs_per_thread=2)
    assert (s.group, s.threads, s.feature_slice) == (32, 256, 64)
    # six groups of five lanes a warp, its last two lanes idle
    odd = OnePass(rows_per_block=48, feature_lanes=5, vector_width=4, outputs_per_thread=5)
    assert (odd.group, odd.packs_warp, odd.groups_per_warp, odd.threads, odd.feature_slice) == (5, False, 6, 256, 100)
    assert not odd.problems() and str(odd) == "r48.f5.e1.v4.o5.n1"
    tiled = OutputTiled(warps_per_block=16, vector_width=2, outputs_per_thread=2)
    assert (tiled.threads, tiled.features_covered) == (512, 4)


@pytest.mark.parametrize(
    ("cls", "knobs", "reason"),
    [
        (OnePass, {"feature_lanes": 33}, "feature_lanes must be an int from 1 to 32"),
        (OnePass, {"feature_lanes": 5, "rows_per_block": 8}, "multiple of the 6 groups of 5 lanes"),
        (OnePass, {"feature_lanes": 5, "edge_lanes": 8, "rows_per_block": 48}, "must fit in one warp"),
        (OnePass, {"feature_lanes": 5, "edge_lanes": 2, "rows_per_block": 8}, "multiple of the 3 groups of 10 lanes"),
        (OnePass, {"feature_lanes": 5, "rows_per_block": 48, "index_tile": True}, "needs a power-of-two group"),
        (OnePass, {"feature_lanes": 4, "outputs_per_thread": 3}, r"outputs_per_thread must be one of \(1, 2, 4, 8\)"),
        (OnePass, {"feature_lanes": 5, "rows_per_block": 48, "outputs_per_thread": 9}, "from 1 to 8"),
        (OnePass, {"edge_lanes": 64}, "edge_lanes must be one of"),
        (OnePass, {"vector_width": 3}, "vector_width must be one of"),
        (OnePass, {"feature_lanes": 32, "edge_lanes": 2}, "must fit in one warp"),
        (OnePass, {"rows_per_block": 64, "feature_lanes": 32}, "more than 1024"),
        (OnePass, {"rows_per_block": 3, "feature_lanes": 4}, "not a multiple of 32"),
        (OnePass, {"feature_lanes": 8, "edge_lanes": 4, "index_tile": True}, "needs edge_lanes 1"),
        (OnePass, {"rows_per_block": 0}, "rows_per_block must be an int >= 1"),
        (OnePass, {"nnz_tile": 3}, "nnz_tile must be one of"),
        (OnePass, {"degree_sorted": 1}, "degree_sorted must be one of"),
        (SplitRows, {"row_split": 1000}, "row_split must be a power of two from 32 to 65536"),
        (SplitRows, {"row_split": 16}, "row_split must be a power of two"),
        (SplitRows, {"row_split": 2 ** 17}, "row_split must be a power of two"),
        (SplitRows, {"row_split": 64, "feature_lanes": 0}, "feature_lanes must be an int from 1 to 32"),
        (ColumnTiled, {"feature_lanes": 5, "rows_per_block": 48, "column_tile": 4096}, "power-of-two group"),
        (ColumnTiled, {"feature_lanes": 1, "edge_lanes": 32, "column_tile": 1000}, "multiple of 1024"),
        (ColumnTiled, {"feature_lanes": 1, "edge_lanes": 32, "column_tile": 2 ** 17}, "up to 65536"),
        (ColumnTiled, {"column_tile": 4096, "feature_lanes": 32, "edge_lanes": 2}, "must fit in one warp"),
        (OutputTiled, {"warps_per_block": 4}, r"warps_per_block must be one of \(8, 16, 32\)"),
        (OutputTiled, {"column_groups": 3}, r"column_groups must be one of \(1, 2, 4\)"),
        (OutputTiled, {"vector_width": 16}, "vector_width must be one of"),
        (OutputTiled, {"outputs_per_thread": 3}, "outputs_per_thread must be one of"),
    ],
)
def test_invalid_schedules_say_why(cls, knobs: dict, reason: str) -> None:
    schedule = cls(**knobs)
    assert any(re.search(reason, problem) for problem in schedule.problems())
    with pytest.raises(ValueError, match=reason):
        schedule.validate()
    with pytest.raises(ValueError, match=reason):
        cls.from_json(schedule.to_json())
    with pytest.raises(ValueError, match=reason):
        gsparse.schedule_from_json(schedule.to_json())


def test_every_problem_is_listed() -> None:
    problems = OutputTiled(warps_per_block=4, column_groups=3).problems()
    assert len(problems) == 2
    with pytest.raises(ValueError, match="warps_per_block .*; column_groups"):
        OutputTiled(warps_per_block=4, column_groups=3).validate()


@pytest.mark.parametrize(("cls", "knob", "value"), [
    # a column-tiled block walks one edge at a time per lane: no edges fetched ahead or broadcast
    (ColumnTiled, "nnz_tile", 2),
    (ColumnTiled, "index_tile", True),
    (ColumnTiled, "row_split", 256),  # tiles and split rows are two skeletons
    (SplitRows, "column_tile", 4096),
    (OnePass, "row_split", 256),
    (OnePass, "column_groups", 2),
    # the output-tiled skeleton's warp walks a chunk of edges: one feature lane, 32 edge
    # lanes, rows in their natural order
    (OutputTiled, "feature_lanes", 2),
    (OutputTiled, "edge_lanes", 16),
    (OutputTiled, "degree_sorted", True),
    (OutputTiled, "row_split", 64),
    (OutputTiled, "rows_per_block", 16),
])
def test_each_skeleton_takes_only_its_own_knobs(cls, knob: str, value) -> None:
    required = {SplitRows: {"row_split": 64}, ColumnTiled: {"column_tile": 4096}}.get(cls, {})
    with pytest.raises(TypeError):
        cls(**required, **{knob: value})
    record = json.loads(cls(**required).to_json())
    with pytest.raises(ValueError, match=rf"unknown {cls.__name__} knobs \['{knob}'\]"):
        cls.from_json(json.dumps({**record, knob: value}))


def test_from_json_rejects_unknown_knobs_and_other_skeletons() -> None:
    with pytest.raises(ValueError, match=r"unknown OnePass knobs \['warps'\]"):
        OnePass.from_json(json.dumps({"skeleton": "spmm.one_pass", "warps": 4}))
    with pytest.raises(ValueError, match="is a SplitRows, not a OnePass"):
        OnePass.from_json(EVERY_SKELETON[1].to_json())
    with pytest.raises(ValueError, match="missing 1 required keyword-only argument: 'row_split'"):
        SplitRows.from_json(json.dumps({"skeleton": "spmm.split_rows"}))


def test_records_without_a_skeleton_are_refused() -> None:
    # Records written before the skeleton types existed named no skeleton; they are not
    # guessed at.
    with pytest.raises(ValueError, match="names skeleton None"):
        OnePass.from_json('{"feature_lanes": 8, "edge_lanes": 4}')
