"""The SpTRSV schedule type and its scheme spaces."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
import torch

from gsparse.kernels.sptrsv.default import default_schedule
from gsparse.kernels.sptrsv.features import FEATURE_NAMES
from gsparse.kernels.sptrsv.schedule import (
    ALPHA_LEVELS,
    GROUPINGS,
    MERGE_STRATEGIES,
    WARP_SCHEDULES,
    SptrsvSchedule,
    sw_rnnz_choices,
)
from gsparse.kernels.sptrsv.space import (
    PARALLEL,
    SCHEDULING,
    TRANSFORMS,
    full_space,
    reduced_space,
    selection_space,
)
from gsparse.kernels.sptrsv.task import SptrsvTask
from gsparse.target import H100


def test_the_default_schedule_is_valid_and_prints_its_knobs():
    schedule = SptrsvSchedule()
    assert schedule.validate() is schedule and schedule.subwarp_width == 32
    assert str(schedule) == "nw32.ng1.sw0+cr+se+ed.merge_fixed(1).rg_sequential.ws_rr.ainf"
    assert str(SptrsvSchedule(subwarps=4, sw_rnnz=math.inf, merge="merge_avg", merge_rows=32, merge_thresh=8,
                              collaborative_read=False, reorder=True, alpha_level=2)) == \
        "nw32.ng4.swinf+se+ed+reorder.merge_avg(32,8).rg_sequential.ws_rr.a2"


def test_sw_rnnz_choices_follow_the_subwarp_width():
    assert sw_rnnz_choices(1) == (0, 1, 2, 4, 8, 16, 32, math.inf)
    assert sw_rnnz_choices(8) == (0, 1, 2, 4, math.inf)
    assert sw_rnnz_choices(32) == (0, 1, math.inf)


@pytest.mark.parametrize("knobs,problem", [
    ({"warps_per_block": 3}, r"warps_per_block must be one of \(1, 2, 4, 8, 16, 32\), got 3"),
    ({"warps_per_block": True}, r"warps_per_block must be one of .*, got True"),
    ({"subwarps": 64}, r"subwarps must be one of .*, got 64"),
    ({"merge_rows": 0}, r"merge_rows must be one of .*, got 0"),
    ({"early_division": 1}, r"early_division must be a bool, got 1"),
    ({"merge": "merge_all"}, r"merge must be one of \('merge_fixed', 'merge_avg', 'merge_thresh'\), got 'merge_all'"),
    ({"grouping": "sequential"}, r"grouping must be one of \('rg_sequential', 'rg_balance'\), got 'sequential'"),
    ({"warp_schedule": "rr"}, r"warp_schedule must be one of .*, got 'rr'"),
    ({"alpha_level": 3}, r"alpha_level must be one of \(0, 2, 4, 8, inf\), got 3"),
    ({"alpha_level": False}, r"alpha_level must be a number, got False"),
    ({"merge_thresh": 4}, r"merge_fixed has no threshold: merge_thresh must be 0, got 4"),
    ({"merge": "merge_avg"}, r"merge_avg needs merge_thresh in \(1, 2, 4, 8, 16, 32\), got 0"),
    ({"subwarps": 8, "sw_rnnz": 8}, r"sw_rnnz must be one of \(0, 1, 2, 4, inf\) with 8 subwarps, got 8"),
])
def test_each_invalid_knob_is_named(knobs, problem):
    schedule = SptrsvSchedule(**knobs)
    assert any(re.search(problem, p) for p in schedule.problems()), schedule.problems()
    with pytest.raises(ValueError, match=r"invalid SptrsvSchedule .*: " + problem):
        schedule.validate()


def test_every_problem_is_listed_at_once():
    problems = SptrsvSchedule(warps_per_block=3, grouping="x", alpha_level=1).problems()
    assert len(problems) == 3


def test_json_round_trip_keeps_infinities():
    schedule = SptrsvSchedule(subwarps=2, sw_rnnz=math.inf, merge="merge_thresh", merge_rows=16,
                              merge_thresh=4, reorder=True, grouping="rg_balance", warp_schedule="ws_locality",
                              alpha_level=math.inf)
    text = schedule.to_json()
    assert '"sw_rnnz": Infinity' in text
    assert SptrsvSchedule.from_json(text) == schedule
    with pytest.raises(ValueError, match=r"unknown SptrsvSchedule knobs \['nw'\]"):
        SptrsvSchedule.from_json('{"skeleton": "sptrsv.scheme", "nw": 4}')
    with pytest.raises(ValueError, match="invalid SptrsvSchedule"):
        SptrsvSchedule.from_json('{"skeleton": "sptrsv.scheme", "subwarps": 5}')


def test_the_reduced_space_covers_every_strategy_once_per_scheme():
    space = reduced_space()
    assert len(space) == len(set(space)) == len(PARALLEL) * len(TRANSFORMS) * len(SCHEDULING) * len(ALPHA_LEVELS) == 1680
    assert all(not s.problems() for s in space)
    assert {s.merge for s in space} == set(MERGE_STRATEGIES)
    assert {s.grouping for s in space} == set(GROUPINGS)
    assert {s.warp_schedule for s in space} == set(WARP_SCHEDULES)
    assert {s.alpha_level for s in space} == set(ALPHA_LEVELS)
    assert {s.reorder for s in space} == {False, True}
    assert all(s.collaborative_read and s.sync_elimination and s.early_division for s in space)


def test_the_full_space_has_the_papers_shape_and_holds_the_reduced_one():
    full = list(full_space())
    assert len(full) == len(set(full)) == 213_840
    assert all(not s.problems() for s in full[::97])
    assert set(reduced_space()) <= set(full)


def test_the_selection_space_holds_every_scheme_of_the_hand_rule():
    space = selection_space()
    assert len(space) == len(set(space)) == 54 and all(not s.problems() for s in space)
    assert all(s.ready_by_value and not s.reorder and s.merge == "merge_fixed" for s in space)
    picked = set()
    # Each of the rule's thresholds crossed: row length, its spread, rows per level, dep_dist, depth, k.
    for rnnz, cov, rows_per_level, dep, depth, k in itertools.product(
            (2.0, 5.0, 20.0), (0.1, 3.0), (1.0, 50.0, 1e5), (0.1, 0.9), (10.0, 1e3), (1, 16)):
        f = dict.fromkeys(FEATURE_NAMES, 1.0)
        f.update(m=rows_per_level * depth, rnnz=rnnz, rnnz_cov=cov, layer_num=depth, dep_dist=dep)
        task = SptrsvTask(dtype=torch.float64, index_dtype=torch.int32, lower=True, unit_diagonal=False,
                          transpose=False, num_rhs=k)
        picked.add(default_schedule(np.array([f[name] for name in FEATURE_NAMES]), task, H100))
    assert picked <= set(space) and len(picked) == 3  # a chain at one right-hand side, wide levels, the rest
