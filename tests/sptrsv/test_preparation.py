"""The preparation's vectorised shortcuts against plain formulations of what they compute:
the row graph, the longest chain, stable orders, ranges, the transposed pattern, node
groups, contraction of groups (its inner dependencies) and ready flags."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv import analysis, scheduling
from gsparse.kernels.sptrsv.levelset import transposed_pattern
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.kernels.sptrsv.transforms import row_groups

from .factors import family_factor

SCHEMES = [
    SptrsvSchedule(),
    SptrsvSchedule(subwarps=4, sw_rnnz=2, merge_rows=4, alpha_level=0),
    SptrsvSchedule(subwarps=8, sw_rnnz=math.inf, merge_rows=32, alpha_level=2),
    SptrsvSchedule(subwarps=4, sw_rnnz=2, merge="merge_avg", merge_rows=32, merge_thresh=8, reorder=True,
                   warp_schedule="ws_locality", alpha_level=math.inf),
    SptrsvSchedule(subwarps=2, sw_rnnz=4, merge="merge_thresh", merge_rows=8, merge_thresh=4,
                   grouping="rg_balance", warp_schedule="ws_balance", alpha_level=4),
]


def _row_graph_by_rows(crow: np.ndarray, col: np.ndarray, lower: bool) -> tuple[list, list, list]:
    """``(order, deps per position, entries per position)``, row by row."""
    n = len(crow) - 1
    order = list(range(n)) if lower else list(range(n - 1, -1, -1))
    position = {row: p for p, row in enumerate(order)}
    deps = [[position[c] for c in col[crow[row]:crow[row + 1]] if c != row] for row in order]
    return order, deps, [int(crow[row + 1] - crow[row]) for row in order]


@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_the_row_graph_matches_a_row_by_row_construction(family):
    for upper in (False, True):
        matrix = family_factor(family, seed=3, upper=upper)
        graph = analysis.dependency_graph(matrix.indptr, matrix.indices, not upper)
        order, deps, row_nnz = _row_graph_by_rows(matrix.indptr, matrix.indices, not upper)
        np.testing.assert_array_equal(graph.order, order)
        np.testing.assert_array_equal(graph.row_nnz, row_nnz)
        np.testing.assert_array_equal(graph.ptr, np.cumsum([0] + [len(d) for d in deps]))
        np.testing.assert_array_equal(graph.deps, [j for d in deps for j in d])
        assert graph.ptr.dtype == graph.deps.dtype == graph.row_nnz.dtype == np.int64


def _longest_chain_by_positions(graph: analysis.RowGraph) -> int:
    """The longest run of positions whose nearest dependency (the latest position among its
    dependencies) is the position before, one by one."""
    longest = run = min(graph.n, 1)
    for k in range(1, graph.n):
        deps = graph.deps[graph.ptr[k]:graph.ptr[k + 1]]
        run = run + 1 if len(deps) and int(deps.max()) == k - 1 else 1
        longest = max(longest, run)
    return longest


@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_the_nearest_dependency_is_the_latest_position_depended_on(family):
    for upper in (False, True):
        matrix = family_factor(family, seed=2, upper=upper)
        graph = analysis.dependency_graph(matrix.indptr, matrix.indices, not upper)
        has, nearest = analysis.nearest_dependencies(graph)
        np.testing.assert_array_equal(has, np.diff(graph.ptr) > 0)
        want = [int(graph.deps[graph.ptr[k]:graph.ptr[k + 1]].max()) for k in np.flatnonzero(has)]
        np.testing.assert_array_equal(nearest[has], want)


@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_the_longest_chain_matches_a_position_by_position_count(family):
    factors = [(family_factor(family, seed=2, upper=upper), not upper) for upper in (False, True)]
    factors += [(sp.csr_array(dense), True) for dense in (np.zeros((0, 0)), np.eye(1), np.eye(3),
                                                          np.eye(3) + np.tri(3, k=-1))]
    for matrix, lower in factors:
        graph = analysis.dependency_graph(matrix.indptr, matrix.indices, lower)
        assert analysis.longest_chain(graph) == _longest_chain_by_positions(graph), (matrix.shape, lower)


@pytest.mark.parametrize("high", [5, 1 << 16, 1 << 40])
def test_stable_order_is_the_stable_argsort(high):
    key = np.random.default_rng(high % 97).integers(0, high, 2000)
    np.testing.assert_array_equal(analysis.stable_order(key), np.argsort(key, kind="stable"))


def test_ranges_concatenate_the_aranges():
    starts, counts = np.array([5, 0, 9, 2]), np.array([3, 0, 1, 4])
    np.testing.assert_array_equal(analysis.ranges(starts, counts), [5, 6, 7, 9, 2, 3, 4, 5])
    assert analysis.ranges(starts, np.zeros(4)).size == analysis.ranges(starts[:0], counts[:0]).size == 0


@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_the_transposed_pattern_is_a_stable_sort_by_column(family):
    matrix = family_factor(family, seed=1)
    crow, col = matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64)
    crow_t, col_t, value_index = transposed_pattern(crow, col)
    by_column = np.argsort(col, kind="stable")
    np.testing.assert_array_equal(value_index, by_column)
    np.testing.assert_array_equal(col_t, np.repeat(np.arange(len(crow) - 1), np.diff(crow))[by_column])
    np.testing.assert_array_equal(crow_t, np.r_[0, np.cumsum(np.bincount(col, minlength=len(crow) - 1))])
    assert crow_t.dtype == col_t.dtype == value_index.dtype == np.int64


def _node_groups_by_lexsort(groups, subwarps: int, grouping: str) -> tuple[np.ndarray, np.ndarray]:
    index = np.arange(groups.count)
    keys = (index, groups.level) if grouping == "rg_sequential" else (index, -groups.nnz, groups.level)
    order = np.lexsort(keys)
    level = groups.level[order]
    rank = index - np.searchsorted(level, level, side="left")
    return order, np.append(np.flatnonzero(rank % subwarps == 0), groups.count)


def _inner_entry_by_entry(groups) -> list[int]:
    """The entries of ``groups.rows.deps`` inside their dependent's row group, one by one."""
    rows = groups.rows
    group_of = np.repeat(np.arange(groups.count), groups.sizes)
    return [e for k in range(rows.n) for e in range(rows.ptr[k], rows.ptr[k + 1])
            if group_of[rows.deps[e]] == group_of[k]]


def _row_flags_entry_by_entry(solve: scheduling.SolvePlan) -> np.ndarray:
    """A row flags when a row waiting on it depends on it (see ``scheduling._row_flags``)."""
    rows, schedule = solve.rows, solve.schedule
    if not schedule.sync_elimination:
        return np.ones(rows.n, dtype=bool)
    group_of = np.repeat(np.arange(len(solve.group_starts) - 1), np.diff(solve.group_starts))
    node_of_group = np.empty(len(group_of) and group_of[-1] + 1, dtype=np.int64)
    node_of_group[solve.nodes.members] = np.repeat(np.arange(solve.nodes.count), np.diff(solve.nodes.ptr))
    kernel_of_node = np.repeat(np.arange(solve.num_kernels), np.diff(solve.kernel_ptr))
    lane = (np.arange(rows.n) - solve.group_starts[group_of]) % schedule.subwarp_width
    flag = np.zeros(rows.n, dtype=bool)
    for k in range(rows.n):
        g = group_of[k]
        for j in rows.deps[rows.ptr[k]:rows.ptr[k + 1]]:
            if group_of[j] == g:
                flag[j] |= solve.group_per_thread[g] and lane[j] != lane[k]
            else:
                flag[j] |= solve.kernel_waits[kernel_of_node[node_of_group[g]]]
    return flag


@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_groups_and_flags_match_their_plain_formulations(family):
    matrix = family_factor(family, seed=5)
    graph = analysis.dependency_graph(matrix.indptr, matrix.indices, True)
    level = analysis.levels(graph.ptr, graph.deps)
    for schedule in SCHEMES:
        solve = scheduling.plan(graph, level, schedule, num_blocks=3, max_warps=2)
        groups = row_groups(graph, level, schedule.merge, schedule.merge_rows, schedule.merge_thresh,
                            schedule.reorder)
        ptr, deps, inner = analysis.contract(groups.rows.ptr, groups.rows.deps, groups.starts)
        np.testing.assert_array_equal(groups.ptr, ptr)
        np.testing.assert_array_equal(groups.deps, deps)
        np.testing.assert_array_equal(groups.inner, inner)
        np.testing.assert_array_equal(inner, _inner_entry_by_entry(groups))
        members, cuts = _node_groups_by_lexsort(groups, schedule.subwarps, schedule.grouping)
        np.testing.assert_array_equal(solve.nodes.members, members)
        np.testing.assert_array_equal(solve.nodes.ptr, cuts)
        np.testing.assert_array_equal(solve.nodes.nnz, [groups.nnz[members[a:b]].sum()
                                                        for a, b in zip(cuts[:-1], cuts[1:])])
        np.testing.assert_array_equal(solve.row_flag, _row_flags_entry_by_entry(solve))
