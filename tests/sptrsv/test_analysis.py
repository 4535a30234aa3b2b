"""Row graphs, levels, reordering, merges, grouping, kernel partitioning and warp scheduling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv import analysis, scheduling, warps
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.kernels.sptrsv.transforms import (
    RowGroups,
    merge_avg,
    merge_fixed,
    merge_thresh,
    row_groups,
)

from .factors import family_factor, hand_factor


def _row_graph(matrix: sp.sparray, lower: bool = True) -> analysis.RowGraph:
    return analysis.dependency_graph(matrix.indptr, matrix.indices, lower)


def _levels_by_recurrence(graph: analysis.RowGraph) -> np.ndarray:
    level = np.zeros(graph.n, dtype=np.int64)
    for k in range(graph.n):
        deps = graph.deps[graph.ptr[k]:graph.ptr[k + 1]]
        level[k] = 1 + level[deps].max() if len(deps) else 0
    return level


def test_the_row_graph_of_a_lower_and_an_upper_factor():
    lower = _row_graph(hand_factor())
    np.testing.assert_array_equal(lower.order, np.arange(5))
    np.testing.assert_array_equal(lower.ptr, [0, 0, 1, 1, 4, 6])
    np.testing.assert_array_equal(lower.deps, [0, 0, 1, 2, 1, 3])
    np.testing.assert_array_equal(lower.row_nnz, [1, 2, 1, 4, 3])
    upper = _row_graph(sp.csr_array(hand_factor().T), lower=False)
    # Solved bottom up: position k is row 4 - k; row 1 of U depends on rows 3 and 4.
    np.testing.assert_array_equal(upper.order, [4, 3, 2, 1, 0])
    np.testing.assert_array_equal(upper.ptr, [0, 0, 1, 2, 4, 6])
    np.testing.assert_array_equal(upper.deps, [0, 1, 1, 0, 3, 1])
    with pytest.raises(ValueError, match="it is not upper triangular"):
        _row_graph(hand_factor(), lower=False)


@pytest.mark.parametrize("path", ["wavefront", "in order", "chain runs"])
@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_levels_follow_the_recurrence_on_every_path(family, path, monkeypatch):
    if path == "wavefront":
        monkeypatch.setattr(analysis, "_MIN_MEAN_FRONTIER", 0)
    else:  # node by node with long and short dependency lists, or by chain runs of >= 2
        monkeypatch.setattr(analysis, "_FREE_ROUNDS", 0)
        monkeypatch.setattr(analysis, "_MIN_MEAN_FRONTIER", 10**9)
        monkeypatch.setattr(analysis, "_LONG_DEPENDENCY_LIST", 3)
        monkeypatch.setattr(analysis, "_CHAIN_RUN", 10**9 if path == "in order" else 2)
    for upper in (False, True):
        graph = _row_graph(family_factor(family, seed=2, upper=upper), lower=not upper)
        np.testing.assert_array_equal(analysis.levels(graph.ptr, graph.deps), _levels_by_recurrence(graph))


def test_levels_of_a_laplacian_are_its_antidiagonals():
    graph = _row_graph(triangular.laplacian((7, 5, 4)))
    x, y, z = np.unravel_index(np.arange(140), (7, 5, 4), order="F")
    np.testing.assert_array_equal(analysis.levels(graph.ptr, graph.deps), x + y + z)


def test_levels_of_a_deep_chain_switch_to_the_in_order_pass():
    graph = _row_graph(triangular.banded(5000, 1, 0.0))
    np.testing.assert_array_equal(analysis.levels(graph.ptr, graph.deps), np.arange(5000))


def test_the_longest_chain_bounds_the_levels_from_below():
    assert analysis.longest_chain(_row_graph(triangular.banded(5000, 3, 0.0))) == 5000
    # A 7 x 5 grid, natural order: each grid line is a chain of 7 (the line before is 7 back).
    assert analysis.longest_chain(_row_graph(triangular.laplacian((7, 5)))) == 7
    # Upper systems are solved bottom up: the chain runs through decreasing rows.
    upper = sp.csr_array(triangular.laplacian((7, 5)).T)
    upper.sort_indices()
    assert analysis.longest_chain(_row_graph(upper, lower=False)) == 7
    assert analysis.longest_chain(_row_graph(sp.csr_array(np.eye(4)))) == 1
    for family in triangular.FAMILIES:
        graph = _row_graph(family_factor(family, seed=1))
        assert analysis.longest_chain(graph) <= analysis.levels(graph.ptr, graph.deps).max() + 1, family


def test_chain_runs_take_the_dependencies_before_them():
    # Rows 0-1 and 2-4 are chains; row 3 also reads row 0; a run of 2 is long enough here.
    dense = np.eye(5) + np.diag([1.0, 0, 1, 1], -1)
    dense[3, 0] = dense[4, 0] = 1.0
    graph = _row_graph(sp.csr_array(dense))
    level, values = np.array([0, 1, -1, -1, -1]), [0, 1, -1, -1, -1]
    analysis._chain_run(graph.ptr, graph.deps, level, values, 2, 5)
    np.testing.assert_array_equal(level, [0, 1, 0, 1, 2])
    assert values == [0, 1, 0, 1, 2]


def test_reordering_by_level_keeps_dependencies_earlier():
    graph = _row_graph(family_factor("power_law", 1))
    level = analysis.levels(graph.ptr, graph.deps)
    reordered, new_level = analysis.reorder_by_level(graph, level)
    assert np.all(np.diff(new_level) >= 0)
    owner = np.repeat(np.arange(graph.n), np.diff(reordered.ptr))
    assert np.all(reordered.deps < owner)
    np.testing.assert_array_equal(np.sort(reordered.order), np.arange(graph.n))
    np.testing.assert_array_equal(new_level, analysis.levels(reordered.ptr, reordered.deps))
    np.testing.assert_array_equal(reordered.row_nnz, graph.row_nnz[np.argsort(level, kind="stable")])


def test_contracting_groups_drops_inner_dependencies():
    graph = _row_graph(hand_factor())  # deps: 1->0, 3->0,1,2, 4->1,3
    ptr, deps, inner = analysis.contract(graph.ptr, graph.deps, np.array([0, 2, 3, 5]))
    # Group 0 = rows {0, 1}: 1 -> 0 is inside. Group 2 = rows {3, 4}: row 3 -> groups 0, 0, 1;
    # row 4 -> group 0 (4 -> 3 is inside).
    np.testing.assert_array_equal(ptr, [0, 0, 0, 4])
    np.testing.assert_array_equal(deps, [0, 0, 1, 0])
    np.testing.assert_array_equal(inner, [0, 5])


ROW_NNZ = np.array([1, 5, 1, 1, 1, 9, 2, 2])


def test_merge_fixed_cuts_every_rb_rows():
    np.testing.assert_array_equal(merge_fixed(ROW_NNZ, 3), [0, 3, 6, 8])
    np.testing.assert_array_equal(merge_fixed(ROW_NNZ, 1), np.arange(9))
    np.testing.assert_array_equal(merge_fixed(np.zeros(0, np.int64), 4), [0])


def test_merge_avg_keeps_blocks_of_short_rows_only():
    # Block [0, 4) averages 2 entries: one group; block [4, 8) averages 3.5: single rows.
    np.testing.assert_array_equal(merge_avg(ROW_NNZ, 4, 2), [0, 4, 5, 6, 7, 8])
    np.testing.assert_array_equal(merge_avg(ROW_NNZ, 4, 4), [0, 4, 8])


def test_merge_thresh_isolates_long_rows_and_caps_runs():
    np.testing.assert_array_equal(merge_thresh(ROW_NNZ, 2, 2), [0, 1, 2, 4, 5, 6, 8])
    np.testing.assert_array_equal(merge_thresh(ROW_NNZ, 32, 9), [0, 8])


def test_levels_are_recomputed_after_merging():
    graph = _row_graph(triangular.banded(6, 1, 0.0))  # a chain: levels 0..5
    level = analysis.levels(graph.ptr, graph.deps)
    groups = RowGroups(graph, level, merge_fixed(graph.row_nnz, 2))
    np.testing.assert_array_equal(groups.level, [0, 1, 2])
    np.testing.assert_array_equal(groups.nnz, [3, 4, 4])
    reordered = row_groups(graph, level, "merge_fixed", 1, 0, reorder=True)
    np.testing.assert_array_equal(reordered.level, level)


def _groups_of_hand_factor() -> RowGroups:
    graph = _row_graph(hand_factor())
    return RowGroups(graph, analysis.levels(graph.ptr, graph.deps), merge_fixed(graph.row_nnz, 1))


def test_grouping_cuts_each_level_in_order_or_by_entries():
    groups = _groups_of_hand_factor()  # levels [0, 1, 0, 2, 3], entries [1, 2, 1, 4, 3]
    sequential = scheduling.node_groups(groups, 2, "rg_sequential")
    np.testing.assert_array_equal(sequential.ptr, [0, 2, 3, 4, 5])
    np.testing.assert_array_equal(sequential.members, [0, 2, 1, 3, 4])
    np.testing.assert_array_equal(sequential.level, [0, 1, 2, 3])
    np.testing.assert_array_equal(sequential.nnz, [2, 2, 4, 3])
    # Rows 2 (2 entries) and 3 (3 entries) share level 1.
    dense = np.eye(4) + np.array([[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0]])
    graph = _row_graph(sp.csr_array(dense))
    rows = RowGroups(graph, analysis.levels(graph.ptr, graph.deps), np.arange(5))
    np.testing.assert_array_equal(scheduling.node_groups(rows, 1, "rg_balance").members, [0, 1, 3, 2])
    np.testing.assert_array_equal(scheduling.node_groups(rows, 1, "rg_sequential").members, [0, 1, 2, 3])
    with pytest.raises(ValueError, match="grouping must be 'rg_sequential' or 'rg_balance', got 'x'"):
        scheduling.node_groups(groups, 2, "x")


def test_partition_by_alpha_level():
    level = np.repeat(np.arange(6), [1, 10, 1, 1, 10, 1])
    cuts = np.cumsum([0, 1, 10, 1, 1, 10, 1])
    np.testing.assert_array_equal(scheduling.partition(level, 2, 2), cuts[[0, 1, 2, 4, 5, 6]])
    np.testing.assert_array_equal(scheduling.partition(level, math.inf, 2), [0, 24])
    np.testing.assert_array_equal(scheduling.partition(level, 0, 2), cuts)
    np.testing.assert_array_equal(scheduling.partition(level, 8, 2), [0, 24])


def _parents_of_chain(q: int) -> tuple[np.ndarray, np.ndarray]:
    return np.append(0, np.arange(q)), np.arange(q - 1)


def test_round_robin_interleaves_blocks():
    level = np.zeros(7, dtype=np.int64)
    warp = warps.assign_warps(level, np.ones(7, np.int64), (np.zeros(8, np.int64), np.zeros(0, np.int64)),
                              np.array([0, 7]), "ws_rr", 3, 2)
    np.testing.assert_array_equal(warp, [0, 2, 4, 1, 3, 5, 0])
    with pytest.raises(ValueError, match="warp_schedule must be one of"):
        warps.assign_warps(level, level, (level, level), np.array([0, 7]), "ws_x", 3, 2)


def test_balance_evens_out_the_load():
    nnz = np.random.default_rng(0).integers(1, 100, 400)
    level = np.zeros(400, dtype=np.int64)
    no_parents = (np.zeros(401, np.int64), np.zeros(0, np.int64))
    balanced = warps.assign_warps(level, nnz, no_parents, np.array([0, 400]), "ws_balance", 4, 2)
    in_turn = warps.assign_warps(level, nnz, no_parents, np.array([0, 400]), "ws_rr", 4, 2)
    load_of = lambda w: np.bincount(w, weights=nnz, minlength=8)  # noqa: E731
    assert np.ptp(load_of(balanced)) <= nnz.max() < np.ptp(load_of(in_turn))


def test_locality_keeps_a_chain_on_its_block():
    level = np.arange(10)
    warp = warps.assign_warps(level, np.ones(10, np.int64), _parents_of_chain(10), np.array([0, 10]),
                              "ws_locality", 3, 4)
    assert len(set((warp // 4).tolist())) == 1 and len(set(warp.tolist())) == 4


@pytest.mark.parametrize("alpha", [0, 2, math.inf])
@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_locality_by_loop_and_vectorised_agree(family, alpha, monkeypatch):
    graph = _row_graph(family_factor(family, seed=3))
    level = analysis.levels(graph.ptr, graph.deps)
    schedule = SptrsvSchedule(warps_per_block=4, subwarps=2, sw_rnnz=2, warp_schedule="ws_locality",
                              alpha_level=alpha)
    found = []
    for wide in (1, 10**9):
        monkeypatch.setattr(warps, "_WIDE_LEVEL", wide)
        found.append(scheduling.plan(graph, level, schedule, num_blocks=5, max_warps=3).node_warp)
    np.testing.assert_array_equal(*found)


def test_sync_elimination_drops_waits_and_flags():
    graph = _row_graph(family_factor("power_law", 4))
    level = analysis.levels(graph.ptr, graph.deps)
    level_set = scheduling.plan(graph, level, SptrsvSchedule(alpha_level=0), 2, 4)
    assert level_set.num_kernels == level.max() + 1 and not level_set.kernel_waits.any()
    assert not level_set.row_flag.any()
    one_kernel = scheduling.plan(graph, level, SptrsvSchedule(), 2, 4)
    assert one_kernel.num_kernels == 1 and one_kernel.kernel_waits.all()
    has_dependents = np.zeros(graph.n, dtype=bool)
    has_dependents[graph.deps] = True
    np.testing.assert_array_equal(one_kernel.row_flag, has_dependents)
    off = scheduling.plan(graph, level, SptrsvSchedule(alpha_level=0, sync_elimination=False), 2, 4)
    assert off.kernel_waits.all() and off.row_flag.all()


def test_threads_of_a_subwarp_flag_rows_of_their_own_group():
    graph = _row_graph(triangular.banded(64, 1, 0.0))  # a chain: every row depends on the last
    level = analysis.levels(graph.ptr, graph.deps)
    shared = scheduling.plan(graph, level, SptrsvSchedule(merge_rows=32, alpha_level=0), 2, 4)
    per_thread = scheduling.plan(graph, level, SptrsvSchedule(merge_rows=32, subwarps=8, sw_rnnz=math.inf,
                                                              alpha_level=0), 2, 4)
    one_thread = scheduling.plan(graph, level, SptrsvSchedule(merge_rows=32, subwarps=32, sw_rnnz=math.inf,
                                                              alpha_level=0), 2, 4)
    assert not shared.group_per_thread.any() and not shared.row_flag.any()
    assert per_thread.group_per_thread.all()
    # 4 threads take the group's rows in turn: each row but the group's last has a dependent
    # on another thread. A subwarp of one thread reads its own rows in program order.
    np.testing.assert_array_equal(per_thread.row_flag, np.arange(64) % 32 != 31)
    assert one_thread.group_per_thread.all() and not one_thread.row_flag.any()


def test_plan_rejects_a_bad_grid_and_an_invalid_schedule():
    graph = _row_graph(hand_factor())
    level = analysis.levels(graph.ptr, graph.deps)
    with pytest.raises(ValueError, match="num_blocks and max_warps must be >= 1, got 0 and 4"):
        scheduling.plan(graph, level, SptrsvSchedule(), 0, 4)
    with pytest.raises(ValueError, match="invalid SptrsvSchedule"):
        scheduling.plan(graph, level, SptrsvSchedule(subwarps=3), 1, 4)


def _same_plan(a: scheduling.SolvePlan, b: scheduling.SolvePlan) -> bool:
    return all(np.array_equal(getattr(a, name), getattr(b, name))
               for name in ("group_starts", "group_level", "group_per_thread", "node_warp", "kernel_ptr",
                            "kernel_waits", "row_flag")) and np.array_equal(a.nodes.members, b.nodes.members)


def test_a_transform_cache_shares_row_and_node_groups_and_changes_no_plan():
    graph = _row_graph(family_factor("power_law", seed=2))
    level = analysis.levels(graph.ptr, graph.deps)
    cache = scheduling.TransformCache(graph, level)
    schemes = [SptrsvSchedule(merge_rows=rb, subwarps=ng, sw_rnnz=math.inf, alpha_level=alpha, warps_per_block=nw)
               for rb in (1, 4) for ng in (1, 4) for alpha in (0, math.inf) for nw in (4, 32)]
    for schedule in schemes:
        assert _same_plan(scheduling.plan(graph, level, schedule, 3, 24, cache),
                          scheduling.plan(graph, level, schedule, 3, 24))
    assert len(cache._groups) == 2 and len(cache._nodes) == 4
    assert cache.row_groups(schemes[0]) is cache.row_groups(schemes[7])  # rb 1: ng, alpha and nw vary
    other = scheduling.TransformCache(graph, level.copy())
    with pytest.raises(ValueError, match="cache holds the transforms of another system"):
        scheduling.plan(graph, level, schemes[0], 3, 24, other)


@pytest.mark.parametrize("n, high", [(0, 1), (1, 1), (1000, 7), (5000, 5000)])
def test_counting_order_is_the_stable_argsort_and_the_counts(n, high):
    key = np.random.default_rng(n).integers(0, min(high, max(n, 1)), n)
    order, counts = analysis.counting_order(key)
    assert order.dtype == np.int64 and counts.dtype == np.int64
    np.testing.assert_array_equal(order, np.argsort(key, kind="stable"))
    np.testing.assert_array_equal(counts, np.bincount(key))
