"""The g-SDDMM search space: valid for its task, pruned to the shapes that can win."""

from __future__ import annotations

import pytest
import torch

from gsparse import datasets
from gsparse.kernels.pruning import Thresholds
from gsparse.kernels.sddmm import (
    Edge,
    EdgeTransposed,
    Row,
    RowTransposed,
    default_schedule,
    pruned_space,
    schedule_space,
)
from gsparse.kernels.sddmm.plan import check_schedule
from gsparse.target import A100, H100

from graphs import named_graph
from kernels.sddmm.support import FEATURE_LENGTHS, space, task


@pytest.mark.parametrize("feature_len", FEATURE_LENGTHS)
def test_space_is_valid_and_covers_every_knob(feature_len: int) -> None:
    candidates = space(named_graph("sorted"), feature_len)
    assert candidates and all(not s.problems() for s in candidates)
    assert len(set(candidates)) == len(candidates)
    # the transposed dot needs groups of 8 lanes or more, so heads of 8 features or more
    transposed = {RowTransposed} if feature_len >= 8 else set()
    transposed |= {EdgeTransposed} if feature_len >= 3 else set()  # 4 lanes or more
    assert {type(s) for s in candidates} == {Edge, Row, *transposed}
    assert all(s.edges_per_batch in (8, s.lanes) for s in candidates if isinstance(s, RowTransposed))
    assert all(s.edges_per_batch in (4, 8, s.lanes) for s in candidates
               if isinstance(s, EdgeTransposed))
    # a batch's sums, v's features and the next batch's int64 indices (one per edge on
    # row_transposed, two on edge_transposed) fit in 64 registers
    for s in candidates:
        indices = {RowTransposed: 1, EdgeTransposed: 2}.get(type(s), 0)
        words = getattr(s, "edges_per_batch", 0) * (1 + 2 * indices) + s.features_per_thread * s.vector_width
        assert words <= 64, s
    assert {s.threads for s in candidates if isinstance(s, Edge)} == {128, 256}
    # every row skeleton holds a whole head, or a launch's part of it, in one slice, so
    # dot runs on it too; only row_transposed slices launches
    assert all(s.feature_slice >= (s.features_per_launch or feature_len)
               for s in candidates if not isinstance(s, Edge))
    assert {type(s) for s in candidates if s.features_per_launch} <= {Edge, RowTransposed}
    if feature_len > 32:
        assert any(isinstance(s, RowTransposed) and s.features_per_launch == 32 for s in candidates)
    # no slice wider than a launch's features need, and at most four passes over them
    for s in candidates:
        span = s.features_per_launch or feature_len
        assert s.feature_slice <= max(1 << (span - 1).bit_length(), s.vector_width)
        assert 4 * s.feature_slice >= span
    widest = 4 if feature_len % 4 == 0 else 2 if feature_len % 2 == 0 else 1
    assert {s.vector_width for s in candidates} == {1, widest}
    # 16-byte vectors: 8 elements of a 2-byte dtype
    halves = space(named_graph("sorted"), feature_len, torch.bfloat16)
    widest = 8 if feature_len % 8 == 0 else widest
    assert {s.vector_width for s in halves} == {1, widest}
    # launches of 32 and 128 features where the head is longer; never for 2-byte dtypes
    launches = {s.features_per_launch for s in candidates}
    assert launches == {0, *(w for w in (32, 128) if w < feature_len)}
    assert all(s.features_per_launch >= s.feature_slice for s in candidates if s.features_per_launch)
    assert {s.features_per_launch for s in halves} == {0}
    if feature_len >= 32:
        assert {s.lanes for s in candidates} >= {8, 16, 32}


@pytest.mark.parametrize("feature_len", [8, 32, 100, 512])
def test_element_wise_operators_take_the_row_skeleton_where_a_dot_transposes(feature_len: int) -> None:
    # Only a dot has a reduction to transpose: where its space holds row_transposed
    # schedules, an element-wise operator's holds the row schedules with the same knobs.
    g = named_graph("sorted")
    dot, add = space(g, feature_len), space(g, feature_len, op="add")
    assert not any(isinstance(s, RowTransposed) for s in add)
    assert any(isinstance(s, EdgeTransposed) for s in add)
    for s in dot:
        if isinstance(s, RowTransposed):
            knobs = s.knobs()
            del knobs["edges_per_batch"]
            assert Row(**knobs) in add, s


@pytest.mark.parametrize("feature_len", [1, 3, 16, 100, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_every_candidate_can_run_its_task(feature_len: int, dtype) -> None:
    for op in ("dot", "add", "mul", "copy_rhs"):
        t = task(op, feature_len, dtype)
        for schedule in schedule_space(t, named_graph("sorted").stats, H100):
            check_schedule(t, schedule)


def test_the_graph_and_target_do_not_shape_the_space() -> None:
    t = task("dot", 64)
    assert schedule_space(t, named_graph("sorted").stats, H100) == \
        schedule_space(t, named_graph("long_row").stats, A100)


# --- pruning (LO-SpMM's constraints on the graph at hand) ------------------------------------


def test_very_skewed_rows_prune_the_row_skeletons_never_the_edge_ones() -> None:
    skewed = datasets.synthetic(20_000, datasets.LogNormal(10.0, 3.0), seed=1)
    uniform = datasets.random_graph(20_000, datasets.Regular(10.0), seed=1)
    t = task("dot", 64)
    result = pruned_space(t, skewed.stats, H100)
    removed = [s for s, f in zip(result.candidates, result.failed) if "row_balance" in f]
    # COV_row = 3 / sqrt(rows per block): 1.5 and 1.06 for 4 and 8 rows
    assert removed and all(isinstance(s, (Row, RowTransposed)) for s in removed)
    assert not any("row_balance" in f for f in pruned_space(t, uniform.stats, H100).failed)
    assert pruned_space(t, skewed.stats, H100, Thresholds(max_row_cov=2.0)).alone()["row_balance"] == 0


def test_padded_launches_of_100_features_prune_the_wide_slices() -> None:
    stats = named_graph("random").stats
    t = task("add", 100)
    # launches of 32 features cover 100 as 32 + 32 + 32 + 4: slices of 32 pad 28 columns
    # (22%), slices of 8 pad 4 (4%)
    result = pruned_space(t, stats, H100, Thresholds(max_column_waste=0.1))
    removed = [s for s, f in zip(result.candidates, result.failed) if "column_waste" in f]
    assert removed and all(s.feature_slice * 4 > 100 or s.features_per_launch == 32 for s in removed)
    assert pruned_space(t, stats, H100).alone()["column_waste"] == 0  # 22% is under the default 25%


@pytest.mark.parametrize("feature_len", [1, 4, 16, 100, 602])
def test_pruning_keeps_the_hand_rules_pick(feature_len: int) -> None:
    strict = Thresholds(min_blocks_per_sm=1e6, max_row_cov=0.0, max_column_waste=0.0)
    for g in (named_graph("long_row"), named_graph("random")):
        for op in ("dot", "add"):
            t = task(op, feature_len)
            for thresholds in (Thresholds(), strict):
                result = pruned_space(t, g.stats, H100, thresholds)
                hand_rule = default_schedule(t, g.stats, H100)
                assert hand_rule in result.kept
                assert set(result.kept) <= {*schedule_space(t, g.stats, H100), hand_rule}


def test_the_hand_rules_pick_joins_the_pruned_space_where_the_space_lacks_it() -> None:
    # 602 features: the pick's slice of 32 would pass a head 19 times, the space stops at 4
    stats = named_graph("long_row").stats
    t = task("dot", 602)
    hand_rule = default_schedule(t, stats, H100)
    assert hand_rule not in schedule_space(t, stats, H100)
    assert hand_rule in pruned_space(t, stats, H100).candidates
