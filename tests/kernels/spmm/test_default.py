"""The g-SpMM hand rule: a schedule from the task, the graph's statistics and the target."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gsparse.graph import GraphStats, RowStats
from gsparse.kernels.spmm import (
    OnePass,
    OutputTiled,
    SplitRows,
    default_schedule,
    schedule_space,
)
from gsparse.kernels.spmm.default import RowReading, _row_groups
from gsparse.kernels.spmm.plan import check_schedule
from gsparse.kernels.spmm.shapes import edge_lanes_for
from gsparse.target import H100

from graphs import named_graph
from kernels.spmm.support import FEATURE_LENGTHS, probe_stats, task


def _stats(mean_degree: float, cov: float, source_rows: int, max_degree: int = 0,
           rows: int = 1_000) -> GraphStats:
    return GraphStats(source_rows, rows, round(mean_degree * rows), RowStats(mean_degree, max_degree, cov))


def _row_rule(mean_degree: float, cov: float, feature_len: int, vector_ok: int, source_rows: int,
              dtype: torch.dtype = torch.float32, max_degree: int = 0, target=H100):
    """The one-pass family's rule alone: a task that reads no lhs (copy_rhs) takes it at
    every feature length."""
    return default_schedule(task("copy_rhs", "sum", feature_len, dtype, vector_ok=vector_ok),
                            _stats(mean_degree, cov, source_rows, max_degree), target)


@pytest.mark.parametrize("feature_len", [*FEATURE_LENGTHS, 3, 100, 1000])
@pytest.mark.parametrize("mean_degree", [0.0, 1.5, 12.0, 492.0, 5000.0])
@pytest.mark.parametrize("vector_ok", [1, 2, 4])
def test_default_rule_gives_a_valid_schedule(feature_len, mean_degree, vector_ok) -> None:
    stats = _stats(mean_degree, 1.6, 232_965, max_degree=int(mean_degree), rows=232_965)
    for op in ("copy_rhs", "copy_lhs", "mul"):
        t = task(op, "sum", feature_len, vector_ok=vector_ok)
        s = default_schedule(t, stats, H100)
        assert not s.problems()
        check_schedule(t, s)  # it can run the task
        assert s.vector_width <= vector_ok and feature_len % s.vector_width == 0
        assert s.threads >= 128  # enough warps per block to hide latency


def test_default_slice_keeps_the_dense_input_in_l2() -> None:
    # reddit-like: 232,965 source rows of fp32; a 32-feature slice is 29.8 MB.
    wide = _row_rule(492, 1.6, 512, 4, 232_965)
    assert wide.feature_slice == 32
    small_graph = _row_rule(492, 1.6, 512, 4, 2_000)
    assert small_graph.feature_slice == 128
    # products-like: no slice fits, so the widest slice reads the indices the fewest times
    no_reuse = _row_rule(51, 1.9, 512, 4, 2_449_029)
    assert no_reuse.feature_slice == 128


def test_default_slice_follows_the_targets_l2() -> None:
    large_l2 = dataclasses.replace(H100, l2_bytes=200 << 20)  # 128 features of reddit: 119 MB
    assert _row_rule(492, 1.6, 512, 4, 232_965, target=large_l2).feature_slice == 128
    small_l2 = dataclasses.replace(H100, l2_bytes=4 << 20)
    assert _row_rule(492, 1.6, 512, 4, 2_000, target=small_l2).feature_slice == 128  # no reuse
    assert _row_rule(492, 1.6, 512, 4, 20_000, target=small_l2).feature_slice == 32


def test_default_splits_long_rows_beyond_four_features() -> None:
    # reddit-like statistics: rows far longer than the mean are cut into the longer of the
    # two shortest of 256, 1,024, ... edges at least the mean row that cut the longest row
    # into more than 8 chunks (the H100 sweep's winners at 8-512 features)...
    reddit = dict(mean_degree=492, cov=1.63, vector_ok=4, source_rows=232_965, max_degree=40_000)
    for feature_len in (8, 32, 512):
        stats = _stats(492, 1.63, 232_965, 40_000, rows=232_965)
        wide = default_schedule(task("copy_rhs", "sum", feature_len, vector_ok=4), stats, H100)
        assert isinstance(wide, SplitRows)
        assert (wide.row_split, wide.degree_sorted) == (4096, True)
        # ... the shorter where the longer exceeds twice a resident warp's share of the
        # edges (1,000 such rows: 492,000 edges, 58 a warp of the H100)
        assert _row_rule(feature_len=feature_len, **reddit).row_split == 1024
    # Up to 4 features, the shortest such chunk at least the mean row: 1,024 edges here
    narrow = _row_rule(feature_len=4, **reddit)
    assert isinstance(narrow, SplitRows) and (narrow.row_split, narrow.degree_sorted) == (1024, True)
    # No long rows (or no statistics): nothing to split.
    assert isinstance(_row_rule(feature_len=32, **{**reddit, "max_degree": 3_000}), OnePass)
    assert isinstance(_row_rule(492, 1.63, 32, 4, 232_965), OnePass)


@pytest.mark.parametrize("name", ["community", "power_law", "bipartite", "hubs"])
def test_default_cuts_the_long_rows_of_small_graphs_into_short_chunks(name) -> None:
    # Fewer than 32 edges per resident warp: whole rows leave most of the GPU idle.
    stats = probe_stats(name)
    for op, feature_len in (("copy_lhs", 32), ("mul", 64), ("mul", 256)):
        t = task(op, "sum", feature_len)
        chosen = default_schedule(t, stats, H100)
        assert isinstance(chosen, SplitRows) and chosen.row_split == 64, chosen
        assert chosen.degree_sorted
    # up to 4 features, chunks only where the longest row is a hub (see the hub rows' test):
    # in the hubs graph, 3,618 edges, 1,809 steps of a row's two lanes
    narrow = default_schedule(task("copy_rhs", "sum", 4), stats, H100)
    assert isinstance(narrow, SplitRows) == (name == "hubs"), narrow


def test_default_cuts_hub_rows_into_chunks_up_to_four_features() -> None:
    # A hub graph of the corpus (hubs family: 392,942 rows of 3.2 edges on average, one of
    # 125,040): whole rows left a lane walking the hub, 184x slower than the best schedule
    # at 2 features; chunks of 256 edges, rows longest first, were within 1.3x of it.
    hubs = GraphStats(392_942, 392_942, 1_255_688, RowStats(3.2, 125_040, 88.3))
    for feature_len in (1, 2, 4):
        chosen = default_schedule(task("copy_rhs", "sum", feature_len), hubs, H100)
        assert isinstance(chosen, SplitRows) and chosen.row_split == 256 and chosen.degree_sorted
    # A longest row of fewer than 1,024 steps of its lanes: whole rows (chunks cost 30-70 us
    # more where whole rows took 0.05 ms)
    short_hub = GraphStats(392_942, 392_942, 1_255_688, RowStats(3.2, 1_000, 1.0))
    assert isinstance(default_schedule(task("copy_rhs", "sum", 2), short_hub, H100), OnePass)
    # products-like: a row of 12,242 edges is 765 steps of 16 lanes, under 8 times a lane's
    # share of 123.7M edges (chunks ran 10-15% slower there)
    products = GraphStats(2_449_029, 2_449_029, 123_718_280, RowStats(50.5, 12_242, 1.88))
    assert isinstance(default_schedule(task("copy_rhs", "sum", 2), products, H100), OnePass)
    # a row of 40,000 edges on a graph of 2.5M edges: a hub
    small = GraphStats(49_000, 49_000, 2_474_500, RowStats(50.5, 40_000, 1.88))
    assert isinstance(default_schedule(task("copy_rhs", "sum", 2), small, H100), SplitRows)


def test_a_hub_walk_that_gathers_source_rows_is_cut_four_times_sooner() -> None:
    # An R-MAT graph of the collected cells: 16,384 rows of 25 edges, one of 5,504, 688
    # steps of a row's 8 lanes. Gathering a source row a step, whole rows took 0.083 ms and
    # chunks 0.017; streaming edge values alone, a step costs a fraction of that.
    rmat = GraphStats(16_384, 16_384, 409_600, RowStats(25.0, 5_504, 3.1))
    for op in ("copy_lhs", "mul"):
        chosen = default_schedule(task(op, "sum", 2), rmat, H100)
        assert isinstance(chosen, SplitRows) and chosen.degree_sorted, (op, chosen)
    assert isinstance(default_schedule(task("copy_rhs", "sum", 2), rmat, H100), OnePass)
    # under 256 steps, whole rows either way
    short = GraphStats(16_384, 16_384, 409_600, RowStats(25.0, 1_600, 3.1))
    assert isinstance(default_schedule(task("copy_lhs", "sum", 2), short, H100), OnePass)


def test_default_keeps_its_chunks_on_graphs_with_many_edges_per_warp() -> None:
    # banded: 259 edges per resident warp, longest row 1,830 < 8 x 256: whole rows
    assert isinstance(default_schedule(task("mul", "sum", 64), probe_stats("banded"), H100), OnePass)
    # the same rows on a 270,000-edge graph (32 edges per warp of the H100) or on a block
    # (statistics that are not exact) keep what the rule picked before
    rows, edges = 38_605 * 2, 270_336
    wide = GraphStats(rows, rows, edges, RowStats(edges / rows, 3_618, 5.56))
    assert default_schedule(task("mul", "sum", 64), wide, H100).row_split == 256
    inexact = GraphStats(426, 426, 107_004, RowStats(251.2, 426, float("nan"), exact=False))
    assert isinstance(default_schedule(task("mul", "sum", 64), inexact, H100), OnePass)


def test_default_splits_the_rows_of_a_skewed_graph_at_a_length_the_space_offers() -> None:
    skewed = named_graph("long_row")  # 40 rows, 102,000 edges, one row of 100,061
    t = task("copy_lhs", "sum", 64)
    chosen = default_schedule(t, skewed.stats, H100)
    assert isinstance(chosen, SplitRows) and chosen.row_split == 64
    assert {s.row_split for s in schedule_space(t, skewed.stats, H100)
            if isinstance(s, SplitRows)} == {64, 256}
    uniform = GraphStats(150, 230, 3_000, RowStats(13.0, 256, 0.5))  # no row past 4 x 64
    assert isinstance(default_schedule(t, uniform, H100), OnePass)


def test_default_keeps_natural_order_for_short_rows_and_features() -> None:
    # products-like sizes, rows of at most 2,000 edges: none long enough to split (see the
    # hub rows' test)
    def rule(feature_len: int, mean: float) -> OnePass:
        stats = GraphStats(2_449_029, 2_449_029, round(2_449_029 * mean), RowStats(mean, 2_000, 1.88))
        chosen = default_schedule(task("copy_rhs", "sum", feature_len), stats, H100)
        assert isinstance(chosen, OnePass)
        return chosen

    assert not rule(2, 51).degree_sorted
    assert rule(8, 51).degree_sorted
    assert rule(2, 492).degree_sorted


def test_default_never_takes_column_tiles() -> None:
    # Graphs where the rule took them until they were measured (few tiles of long rows,
    # reddit-like proportions): the one-pass pick, or output tiles where messages are lhs rows.
    for stats in (GraphStats(50_000, 1_000, 100_000, RowStats(100.0, 140, 0.1)),
                  GraphStats(232_965, 232_965, 114_615_892, RowStats(492.0, 21_657, 0.9))):
        for op in ("mul", "copy_lhs", "copy_rhs"):
            for feature_len in (1, 2, 4):
                for dtype in (torch.float32, torch.bfloat16):
                    chosen = default_schedule(task(op, "sum", feature_len, dtype), stats, H100)
                    assert isinstance(chosen, (OnePass, SplitRows, OutputTiled)), (op, feature_len, dtype)


def test_default_vectors_are_as_wide_as_the_data_allows() -> None:
    g = named_graph("random")
    assert default_schedule(task("copy_lhs", "sum", 256, torch.bfloat16), g.stats, H100).vector_width == 8
    assert not default_schedule(task("copy_lhs", "sum", 256), g.stats, H100).problems()
    assert default_schedule(task("copy_lhs", "sum", 6, vector_ok=4), g.stats, H100).vector_width == 2


# --- the output-tiled skeleton --------------------------------------------------------------


def _uniform(num_src: int, rows: int, degree: int) -> GraphStats:
    """``rows`` rows of ``degree`` uniformly random sources each."""
    return GraphStats(num_src, rows, rows * degree, RowStats(float(degree), degree, 0.0))


def _tiled(warps: int, vector: int = 1, outputs: int = 1, groups: int = 1) -> OutputTiled:
    return OutputTiled(warps_per_block=warps, vector_width=vector, outputs_per_thread=outputs,
                       column_groups=groups)


def test_default_takes_the_output_tiled_skeleton_for_copy_lhs() -> None:
    # short rows over many sources (products-like proportions): 16 warps, 4 column groups
    short = _uniform(300_000, 200_000, 60)
    for features in (1, 2):
        assert default_schedule(task("copy_lhs", "sum", features), short, H100) == \
            _tiled(16, vector=features, groups=4)
    # long rows (reddit-like proportions): 32 warps; lhs of 1.5 tiles: one group
    long = _uniform(10_000, 1_000, 2_000)
    assert default_schedule(task("copy_lhs", "sum", 1), long, H100) == _tiled(32, groups=1)
    assert default_schedule(task("copy_lhs", "mean", 1, torch.float64), long, H100) == _tiled(16, groups=1)
    assert default_schedule(task("copy_lhs", "sum", 3), long, H100) == _tiled(32, vector=1, outputs=4)
    # not for weighted messages nor arg indices, nor beyond 4 features
    assert not isinstance(default_schedule(task("mul", "sum", 1), short, H100), OutputTiled)
    assert not isinstance(default_schedule(task("copy_lhs", "max", 1, with_arg=True), short, H100),
                          OutputTiled)
    assert not isinstance(default_schedule(task("copy_lhs", "sum", 8), long, H100), OutputTiled)
    # 4 features of 300,000 sources: staging would pass 8 bytes per edge
    assert not isinstance(default_schedule(task("copy_lhs", "sum", 4), short, H100), OutputTiled)


def test_default_leaves_graphs_with_few_edges_per_source_to_the_gathers() -> None:
    sparse = _uniform(1_000_000, 100_000, 4)  # 132 blocks would stage 132 x 4 MB
    chosen = default_schedule(task("copy_lhs", "sum", 1), sparse, H100)
    assert not isinstance(chosen, OutputTiled) and not chosen.problems()


@pytest.mark.parametrize("budget", [1, 2, 4, 8, 16, 32])
def test_the_rules_reading_of_row_lengths_gives_the_lanes_of_every_budget(budget) -> None:
    # RowReading keeps the lanes a row fills out of 32; the rule caps them at its budget.
    for mean in [0.0, 0.5, 1.0, 3.9, 4.0, 4.1, 8.0, 8.1, 16.0, 31.9, 32.0, 64.5, 128.0, 129.0, 1e4]:
        assert min(edge_lanes_for(mean, 32), budget) == edge_lanes_for(mean, budget)


def test_blocks_whose_statistics_read_alike_share_the_decision() -> None:
    # A sampler's blocks differ in sizes but read alike (slice, lanes, long rows): the rule
    # decides once and every block gets the same schedule object.
    t = task("copy_lhs", "sum", 64)
    sizes = ((30_000, 1_024, 25_600), (29_000, 1_024, 24_900), (31_500, 1_000, 24_000))
    blocks = [GraphStats(src, dst, edges, RowStats(edges / dst, 25, float("nan"), exact=False))
              for src, dst, edges in sizes]
    readings = {RowReading.of(t, stats, H100) for stats in blocks}
    assert len(readings) == 1
    before = _row_groups.cache_info()
    chosen = [default_schedule(t, stats, H100) for stats in blocks]
    after = _row_groups.cache_info()
    assert chosen[0] is chosen[1] is chosen[2] and after.misses - before.misses <= 1
    assert after.hits - before.hits >= 2
    wide = GraphStats(100_000, 1_024, 25_600, RowStats(25.0, 25, float("nan"), exact=False))
    assert RowReading.of(t, wide, H100) not in readings  # its lhs slice no longer fits the L2


def test_a_hub_no_long_chunk_cuts_takes_the_shortest_chunk_the_space_offers() -> None:
    # A cliques graph of the collected cells: 132,539 rows of 2.3 edges, one of 1,268. No
    # chunk of 256 or more cuts it into more than 8, so whole rows were taken at every
    # width, 7.4-8.9x slower than chunks of 64 at 64-128 features.
    cliques = GraphStats(132_539, 132_539, 309_272, RowStats(2.3, 1_268, 5.0))
    for op, feature_len in (("copy_lhs", 100), ("copy_lhs", 4), ("mul", 128)):
        chosen = default_schedule(task(op, "sum", feature_len), cliques, H100)
        assert isinstance(chosen, SplitRows) and chosen.row_split == 64 and chosen.degree_sorted, chosen
    # A hubs graph of 1.9M edges, one row of 1,760: chunks of 256, the shortest offered
    hubs = GraphStats(398_162, 398_162, 1_926_132, RowStats(4.8, 1_760, 4.0))
    chosen = default_schedule(task("copy_lhs", "sum", 1), hubs, H100)
    assert isinstance(chosen, SplitRows) and chosen.row_split == 256, chosen
    # the same rows as a sampled block's statistics (not exact): whole rows
    block = GraphStats(132_539, 132_539, 309_272, RowStats(2.3, 1_268, float("nan"), exact=False))
    assert isinstance(default_schedule(task("copy_lhs", "sum", 100), block, H100), OnePass)
