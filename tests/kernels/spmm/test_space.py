"""The g-SpMM search space: the one-pass grid, and where the other skeletons join it."""

from __future__ import annotations

import pytest
import torch

import gsparse
from gsparse import datasets
from gsparse.kernels.pruning import Thresholds
from gsparse.kernels.space import Space
from gsparse.graph import GraphStats, RowStats
from gsparse.kernels.spmm import (
    ColumnTiled,
    OnePass,
    OutputTiled,
    SplitRows,
    SpmmTask,
    default_schedule,
    pruned_space,
    schedule_space,
)
from gsparse.kernels.spmm import space as spmm_space
from gsparse.kernels.spmm.plan import check_schedule
from gsparse.kernels.spmm.shapes import (
    column_tile_for,
    output_tiled_schedule,
    output_tiled_warps,
    row_splits_for,
)
from gsparse.kernels.spmm.space import one_pass_grid
from gsparse.target import A100, H100

from graphs import named_graph
from kernels.spmm.support import FEATURE_LENGTHS, probe_cells, probe_stats, space, task


@pytest.mark.parametrize("feature_len", FEATURE_LENGTHS)
def test_grid_is_valid_and_covers_every_knob(feature_len: int) -> None:
    grid = one_pass_grid(feature_len, vector_ok=4)
    assert grid and all(isinstance(s, OnePass) and not s.problems() for s in grid)
    assert len(set(grid)) == len(grid)
    assert {s.degree_sorted for s in grid} == {False, True}
    assert {s.nnz_tile for s in grid} == {1, 2, 4}
    if feature_len >= 4:
        assert {s.vector_width for s in grid} == {1, 4}
        assert any(s.edge_lanes > 1 for s in grid)
    if feature_len >= 32:
        assert any(s.index_tile for s in grid)
    # No group is more than twice as wide as the features it covers.
    assert all(s.feature_slice <= max(feature_len, 2) * 2 for s in grid)


def test_half_precision_space_moves_16_bytes_per_access() -> None:
    g = named_graph("random")
    assert {s.vector_width for s in space(g, 64, torch.float16)} == {1, 8}
    assert {s.vector_width for s in space(g, 64, torch.bfloat16)} == {1, 8}
    assert {s.vector_width for s in space(g, 64, torch.float32)} == {1, 4}
    assert {s.vector_width for s in space(g, 64, torch.float64)} == {1, 2}


def test_space_vectors_stay_within_what_the_operands_allow() -> None:
    g = named_graph("random")
    assert {s.vector_width for s in space(g, 64, vector_ok=2)} == {1, 2}
    assert {s.vector_width for s in space(g, 64, vector_ok=1)} == {1}


@pytest.mark.parametrize("kind", ["random", "long_row"])
def test_every_candidate_can_run_its_task(kind) -> None:
    for op, reduce, features, with_arg in (("copy_lhs", "sum", 1, False),
                                           ("copy_lhs", "mean", 3, False),
                                           ("copy_lhs", "max", 4, True),
                                           ("mul", "max", 2, True),
                                           ("copy_rhs", "min", 4, False),
                                           ("div", "sum", 64, False)):
        t = task(op, reduce, features, with_arg=with_arg)
        candidates = schedule_space(t, named_graph(kind).stats, H100)
        assert isinstance(candidates, Space) and len(candidates)
        for schedule in candidates:
            check_schedule(t, schedule)


def test_space_holds_column_tiled_schedules_for_short_features_that_read_lhs() -> None:
    g = named_graph("random")
    tiled = [s for s in space(g, 4, op="mul") if isinstance(s, ColumnTiled)]
    assert tiled and all(s.threads == 1024 and s.group >= 16 for s in tiled)
    assert {s.column_tile for s in tiled} == {column_tile_for(4, torch.float32, H100)} == {14 * 1024}
    assert not any(isinstance(s, ColumnTiled) for s in space(g, 16, op="mul"))
    # copy_rhs reads no lhs: nothing to stage
    assert not any(isinstance(s, ColumnTiled) for s in space(g, 4, op="copy_rhs"))


def test_column_tiles_are_as_wide_as_shared_memory_allows() -> None:
    assert column_tile_for(1, torch.float32, H100) == 56 * 1024  # 232,448 bytes / 4
    assert column_tile_for(1, torch.float16, H100) == 64 * 1024  # 16-bit local indices
    assert column_tile_for(4, torch.float32, A100) == 10 * 1024
    assert column_tile_for(64, torch.float64, A100) == 0  # not one tile of 1,024 rows


def _splits(edges: int, rows: int, longest: int, target=H100) -> list[int]:
    return row_splits_for(GraphStats(rows, rows, edges, RowStats(edges / rows, longest, 1.0)), target)


def test_chunk_lengths_cut_the_longest_row_into_more_than_four_chunks() -> None:
    # few edges per resident warp: the two shortest of 64, 256, 1,024, ... edges
    assert _splits(100_000, 1_000, 100_000) == [64, 256]
    assert _splits(100_000, 1_000, 1_025) == [64, 256]
    assert _splits(100_000, 1_000, 1_024) == [64]
    assert _splits(100_000, 1_000, 256) == []  # no row longer than four chunks
    # 64 edges or more per resident warp (8,448 on an H100): from 256 edges, and the chunk
    # of a warp's share (64 edges here)
    assert _splits(64 * 8_448, 100_000, 10 ** 6) == [64, 256, 1024]
    assert _splits(64 * 8_448 - 1, 100_000, 10 ** 6) == [64, 256]
    assert _splits(64 * 6_912, 100_000, 10 ** 6, A100) == [64, 256, 1024]
    # enough edges: chunks at least the mean row, cutting the longest into more than 8
    assert _splits(114_615_000, 232_965, 21_657) == [1024]  # reddit, rows of 492 on average
    assert _splits(64 * 8_448, 100_000, 255) == []  # the share's 64 would cut it into 4 chunks only
    assert _splits(3_000, 230, 608) == [64]  # the test graph "random"


def test_large_graphs_get_the_chunk_of_a_warps_share_where_the_longest_row_holds_five() -> None:
    # banded, 2.2 M edges, rows of 31, the longest 1,830: a share of 259 edges, chunks of 256
    assert _splits(2_185_757, 71_173, 1_830) == [256]
    assert _splits(2_185_757, 71_173, 1_024) == []  # only 4 chunks of 256
    # the benchmark's graphs: shares over 8,000 edges, their longest rows under 4 x 16,384
    assert _splits(114_615_892, 232_965, 48_586) == [1024, 4096]  # reddit-like
    assert _splits(79_122_504, 132_534, 19_355) == [1024]  # proteins-like
    # a share chunk below the mean row only where rows are fewer than resident warps
    assert _splits(10 ** 7, 9_000, 10 ** 5) == [4096]  # share 1,184: no 1,024, below rows of 1,111
    assert _splits(10 ** 7, 2_000, 10 ** 5) == [1024]  # 2,000 rows of 5,000 for 8,448 warps
    assert _splits(1_040_733, 2_741, 2_741) == [64]  # lognormal: 2,741 rows of 380


def test_space_splits_the_degree_sorted_schedules_of_graphs_with_long_rows_only() -> None:
    skewed = named_graph("long_row")  # 40 rows, mean 2,550 edges, one row of 100,061
    for features in (1, 64):
        candidates = space(skewed, features)
        split = [s for s in candidates if isinstance(s, SplitRows)]
        assert {s.row_split for s in split} == {64, 256}
        assert all(s.degree_sorted and not s.problems() for s in split)
        sorted_grid = [s for s in candidates if isinstance(s, OnePass) and s.degree_sorted]
        for length in (64, 256):
            # chunks at least one pass of the group's lanes (edge_lanes x nnz_tile edges)
            assert len([s for s in split if s.row_split == length]) == sum(
                s.edge_lanes * s.nnz_tile <= length for s in sorted_grid)
    assert any(s.edge_lanes * s.nnz_tile > 64 for s in one_pass_grid(1, 4))  # 32 lanes x 4 edges
    # rows of at most 256 edges (4 chunks of 64): the space of before, without split rows
    for stats in (_uniform().stats, GraphStats(20_000, 20_000, 2_000_000, RowStats(100.0, 256, 0.5))):
        assert row_splits_for(stats, H100) == []
        assert not any(isinstance(s, SplitRows) for s in schedule_space(task(features=64), stats, H100))


# The banded graph (2.2 M edges) fills the GPU: its space keeps to chunks at least the mean
# row that cut the longest into more than 8, none of which it has (1,830 edges at most).
_SMALL_PROBE_CELLS = [cell for cell in probe_cells() if cell[0] != "banded"]


@pytest.mark.parametrize(("graph", "t", "fastest"), _SMALL_PROBE_CELLS,
                         ids=[f"{g}-{t.op}-{t.num_features}-{str(t.dtype)[6:]}" for g, t, _ in _SMALL_PROBE_CELLS])
def test_spaces_of_the_probe_cells_offer_a_chunk_near_the_fastest(graph, t, fastest) -> None:
    stats = probe_stats(graph)
    candidates = schedule_space(t, stats, H100)
    lengths = {s.row_split for s in candidates if isinstance(s, SplitRows)}
    assert 1 <= len(lengths) <= 2
    near = {length for length in lengths if fastest / 2 <= length <= fastest * 2}
    assert near, f"{graph}: chunks {sorted(lengths)}, fastest {fastest}"
    for schedule in candidates:
        if isinstance(schedule, SplitRows):
            check_schedule(t, schedule)
    # the pruning keeps every split candidate: degree-sorted, and their chunks fill the GPU
    kept = pruned_space(t, stats, H100).kept
    assert {s for s in candidates if isinstance(s, SplitRows)} <= set(kept)


def test_split_rows_count_their_chunks_for_the_utilisation_constraint() -> None:
    stats = probe_stats("community")  # 426 rows of 251 edges on average
    t = task("copy_lhs", "sum", 32)
    whole = OnePass(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4, degree_sorted=True)
    split = SplitRows(**whole.knobs(), row_split=64)
    table = spmm_space.knob_table([spmm_space.knob_row(whole), spmm_space.knob_row(split)])
    whole_facts, split_facts = spmm_space.facts(t, stats, H100, table)
    assert whole_facts.blocks == 54  # 426 rows / 8 per block
    assert split_facts.blocks == 209  # 107,004 edges / 64 / 8
    # 54 blocks leave most of 132 SMs idle: the whole-row walks go, the hand rule's pick stays
    result = pruned_space(t, stats, H100)
    assert whole in result.candidates and whole not in result.kept
    assert all(isinstance(s, SplitRows) for s in result.kept)


def test_space_holds_output_tiled_schedules_up_to_four_features() -> None:
    g = named_graph("random")
    for features, vector, outputs in ((1, 1, 1), (2, 2, 1), (3, 1, 4), (4, 4, 1)):
        tiled = [s for s in space(g, features) if isinstance(s, OutputTiled)]
        assert {(s.vector_width, s.outputs_per_thread) for s in tiled} == {(vector, outputs)}
        assert {(s.warps_per_block, s.column_groups) for s in tiled} == {
            (warps, groups) for warps in (16, 32) for groups in (1, 2, 4)}
    assert not any(isinstance(s, OutputTiled) for s in space(g, 8))
    wide = [s for s in space(g, 4, torch.float64) if isinstance(s, OutputTiled)]
    assert {s.vector_width for s in wide} == {2} and {s.warps_per_block for s in wide} == {8, 16}
    # only where each message is a whole lhs row: not for weighted messages nor arg indices
    assert not any(isinstance(s, OutputTiled) for s in space(g, 2, op="mul"))
    assert not any(isinstance(s, OutputTiled) for s in space(g, 2, reduce="max", with_arg=True))


def test_output_tiled_schedules_cover_every_feature() -> None:
    assert output_tiled_warps(torch.float32) == (16, 32)
    assert output_tiled_warps(torch.float64) == (8, 16)
    assert output_tiled_schedule(3, torch.float32, 16, 2) == OutputTiled(
        warps_per_block=16, vector_width=1, outputs_per_thread=4, column_groups=2)
    assert output_tiled_schedule(4, torch.float16, 32, 1, vector_ok=2) == OutputTiled(
        warps_per_block=32, vector_width=2, outputs_per_thread=2, column_groups=1)
    for features in range(1, 9):
        assert output_tiled_schedule(features, torch.float32, 16, 1).features_covered >= features


def test_space_domains_name_each_knobs_values() -> None:
    candidates = schedule_space(task("copy_lhs", "sum", 4), named_graph("random").stats, H100)
    assert candidates.skeletons() == [OnePass, ColumnTiled, SplitRows, OutputTiled]
    assert candidates.domain(OnePass, "nnz_tile") == (1, 2, 4)
    assert candidates.domain(OutputTiled, "column_groups") == (1, 2, 4)
    assert candidates.domain(SplitRows, "row_split") == (64,)  # its longest row: 608 edges


def test_the_hand_rules_pick_is_always_in_the_space() -> None:
    # a graph of very short rows, where the rule's thread per row beats any warp-wide group
    stats = GraphStats(11_000_000, 11_000_000, 12_000_000, RowStats(1.07, 2, 0.23))
    for feature_len in (1, 16, 100):
        task = SpmmTask("mul", "sum", (feature_len,), (1,), (feature_len,), torch.float32,
                        torch.int32, False, False, 4 if feature_len % 4 == 0 else 1)
        space = schedule_space(task, stats, H100)
        assert default_schedule(task, stats, H100) in space
    # and the short rows' own edge-lane counts are in the one-pass grid
    assert any(s.edge_lanes == 1 and s.feature_lanes == 1 for s in one_pass_grid(1, 4, 1.07))
    assert not any(s.edge_lanes == 1 and s.feature_lanes == 1 for s in one_pass_grid(1, 4))


def test_column_tiles_whose_index_outweighs_the_edges_are_pruned() -> None:
    task = SpmmTask("copy_lhs", "sum", (1,), None, (1,), torch.float32, torch.int32, False, False, 1)
    sparse = GraphStats(11_000_000, 11_000_000, 12_000_000, RowStats(1.07, 2, 0.23))
    dense = GraphStats(200_000, 200_000, 20_000_000, RowStats(100.0, 400, 0.5))
    assert not any(isinstance(s, ColumnTiled) for s in schedule_space(task, sparse, H100))
    assert any(isinstance(s, ColumnTiled) for s in schedule_space(task, dense, H100))


# --- pruning (LO-SpMM's constraints on the graph at hand) ------------------------------------


def _skewed() -> gsparse.Graph:
    """20,000 rows of lognormal lengths, mean 10 and COV 3: a few rows of hundreds of edges."""
    return datasets.synthetic(20_000, datasets.LogNormal(10.0, 3.0), seed=1)


def _uniform() -> gsparse.Graph:
    """20,000 rows of exactly 10 edges."""
    return datasets.random_graph(20_000, datasets.Regular(10.0), seed=1)


def test_very_skewed_rows_prune_the_small_row_tiles_of_natural_order_walks() -> None:
    t = task(features=64)
    skewed, uniform = _skewed(), _uniform()
    assert skewed.stats.rows.cov > 2.5 and uniform.stats.rows.cov == 0.0
    result = pruned_space(t, skewed.stats, H100)
    removed = {s for s, f in zip(result.candidates, result.failed) if "row_balance" in f}
    # COV_row = 3 / sqrt(rows per block) > 0.5 below 36 rows per block, in graph order only
    assert removed and all(not s.degree_sorted and s.rows_per_block < 36 for s in removed)
    assert all(s.degree_sorted or s.rows_per_block >= 36 for s in result.kept if s not in removed)
    assert not any("row_balance" in f for f in pruned_space(t, uniform.stats, H100).failed)
    # a looser threshold keeps them
    looser = pruned_space(t, skewed.stats, H100, Thresholds(max_row_cov=4.0))
    assert looser.alone()["row_balance"] == 0 and len(looser.kept) > len(result.kept)


def test_padded_feature_columns_prune_the_wide_slices() -> None:
    stats = _uniform().stats
    # 100 features: every slice pads to 128 (4 x 32, 2 x 64, 1 x 128); nothing is removed
    assert pruned_space(task(features=100), stats, H100).alone()["column_waste"] == 0
    # 160 features: 5 x 32 pads nothing, 3 x 64 pads 17%, 2 x 128 pads 38%
    result = pruned_space(task(features=160), stats, H100)
    removed = {s for s, f in zip(result.candidates, result.failed) if "column_waste" in f}
    assert removed and {s.feature_slice for s in removed} == {128}
    assert pruned_space(task(features=160), stats, H100, Thresholds(max_column_waste=0.1)).alone()[
        "column_waste"] > len(removed)
    assert pruned_space(task(features=160), stats, H100, Thresholds(max_column_waste=0.4)).alone()[
        "column_waste"] == 0


def test_a_tiny_graph_prunes_the_grids_that_leave_most_sms_idle() -> None:
    stats = GraphStats(1_000, 1_000, 8_000, RowStats(8.0, 12, 0.2))  # 8 to 125 blocks of 256 threads
    result = pruned_space(task(features=32), stats, H100)
    removed = {s for s, f in zip(result.candidates, result.failed) if "utilisation" in f}
    # fewer than 66 blocks (half of 132 SMs): 16 rows per block or more (63 blocks)
    assert removed and all(s.rows_per_block >= 16 for s in removed)
    hand_rule = default_schedule(task(features=32), stats, H100)  # 16 rows per block, protected
    assert all(s.rows_per_block < 16 for s in result.kept if s != hand_rule) and hand_rule in result.kept
    assert pruned_space(task(features=32), stats, H100, Thresholds(min_blocks_per_sm=0.0)).alone()[
        "utilisation"] == 0


@pytest.mark.parametrize("features", [1, 4, 16, 100, 602])
def test_pruning_keeps_the_hand_rules_pick_and_never_empties_the_space(features: int) -> None:
    strict = Thresholds(min_blocks_per_sm=1e6, max_row_cov=0.0, max_column_waste=0.0)
    for g in (_skewed(), _uniform(), named_graph("long_row")):
        for thresholds in (Thresholds(), strict):
            t = task(features=features)
            result = pruned_space(t, g.stats, H100, thresholds)
            assert default_schedule(t, g.stats, H100) in result.kept
            assert set(result.kept) <= set(schedule_space(t, g.stats, H100))
            assert len(result.candidates) == len(schedule_space(t, g.stats, H100))


def test_the_register_constraint_compiles_only_when_asked(monkeypatch) -> None:
    stats = _skewed().stats
    t = task(features=64)
    compiled = []

    def spills(task_, schedule, target):
        compiled.append(schedule)
        return 8.0 if schedule.nnz_tile == 4 else 0.0

    monkeypatch.setattr(spmm_space, "register_spills", spills)
    off = pruned_space(t, stats, H100)
    assert not compiled and off.in_order()["registers"] is None
    kept = pruned_space(t, stats, H100, registers="kept")
    assert set(compiled) == set(off.kept)  # only what the arithmetic constraints kept
    hand_rule = default_schedule(t, stats, H100)
    assert all(s.nnz_tile != 4 or s == hand_rule for s in kept.kept)
    assert kept.in_order()["registers"] == sum(s.nnz_tile == 4 and s != hand_rule for s in off.kept)


def test_odd_groups_join_where_they_use_a_warp_better_than_the_slices() -> None:
    # 100 features, 25 vectors of 4, slices of 8, 16 or 32 vectors: every slice uses 25 of
    # each 32 slots; five lanes of five vectors, six groups a warp, use 150 of 160
    assert spmm_space.odd_groups(25, [8, 16, 32]) == [(5, 5)]
    # 96 features (24 vectors): slices of 8 vectors cover them exactly, nothing to gain
    assert spmm_space.odd_groups(24, [8, 16, 32]) == []
    # 20 features (5 vectors, slices of 8): five lanes of one, or three of two
    assert spmm_space.odd_groups(5, [8]) == [(5, 1), (3, 2)]
    assert spmm_space.odd_groups(64, [8, 16, 32]) == []  # powers of two never


def test_the_grid_has_odd_groups_at_the_widest_vector_only() -> None:
    grid = one_pass_grid(100, 4, mean_degree=10.0)
    odd = [s for s in grid if not s.packs_warp]
    assert odd and all(s.vector_width == 4 and s.feature_slice == 100 and not s.index_tile for s in odd)
    assert {(s.feature_lanes, s.edge_lanes) for s in odd} == {(5, 1), (5, 2)}  # 30 lanes busy either way
    assert all(s.threads == 256 and not s.problems() for s in odd)
    # where the data allows scalar loads only, the widest vector is 1: fifteen lanes of seven
    assert {(s.feature_lanes, s.outputs_per_thread) for s in one_pass_grid(100, 1) if not s.packs_warp} == {(15, 7)}
    assert all(s.packs_warp for s in one_pass_grid(128, 4))
