"""The g-SDDMM hand rule: a schedule from the task, the graph's statistics and the target,
fitted to H100 sweeps."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

import gsparse
from gsparse.graph import GraphStats, RowStats
from gsparse.kernels.sddmm import Edge, EdgeTransposed, Row, RowTransposed, default_schedule
from gsparse.kernels.sddmm.default import RowReading, _decide
from gsparse.kernels.sddmm.plan import check_schedule
from gsparse.target import H100

from graphs import named_graph
from kernels.sddmm.support import FEATURE_LENGTHS, task


def _graph_with_degrees(degrees: list[int], num_src: int = 1) -> gsparse.Graph:
    rowptr = torch.tensor([0, *itertools.accumulate(degrees)])
    col = torch.zeros(int(rowptr[-1]), dtype=torch.int64)
    return gsparse.Graph.from_csr(rowptr, col, num_src=num_src)


def _resident(warps: int):
    """An H100 (its L2) that keeps ``warps`` warps resident at once."""
    return dataclasses.replace(H100, sms=warps, warps_per_sm=1)


def _default(g: gsparse.Graph, head_len: int, dtype: torch.dtype = torch.float32, *, op: str = "dot",
             target=H100, vector_ok: int | None = None):
    return default_schedule(task(op, head_len, dtype, vector_ok=vector_ok), g.stats, target)


# A reddit-like graph in miniature, as the rule sees it on an H100 (132 SMs of 64 warps, 50
# MiB of L2): mean degree 500, the longest row several warps' share of the grid (a long
# tail), and 232,965 source nodes, whose features overflow the L2 from 128 floats.
def _reddit_in_miniature(num_src: int = 232_965) -> gsparse.Graph:
    return _graph_with_degrees([500] * 200 + [20_000], num_src)


def _products_in_miniature(num_src: int = 2_449_029) -> gsparse.Graph:
    """Mean degree 51: the row_transposed rules do not fire."""
    return _graph_with_degrees([51] * 2000, num_src)


@pytest.mark.parametrize(("feature_len", "chosen"), [
    (1, "edge.g128.l1.f1.v1"),
    (2, "edge.g128.l1.f2.v1"),  # two scalar loads: 1.13-1.15x faster than one float2
    (4, "edge.g128.l1.f4.v1"),
    (8, "edge.g128.l1.f2.v4"),
    (16, "edge_transposed.g4.l4.f1.v4.b4"),  # 1.35x / 1.46x over edge.g128.l1.f4.v4
    (32, "edge_transposed.g4.l4.f2.v4.b4"),  # 1.23x / 1.19x over row_transposed.l8
    (64, "edge_transposed.g4.l8.f2.v4.b4"),
    (96, "row_transposed.g4.l8.f1.v4.s32.b8"),  # whole-line gathers of a 32-feature slice
    (128, "row_transposed.g4.l8.f1.v4.s32.b8"),
    (256, "row_transposed.g4.l8.f1.v4.s32.b8"),
    (512, "row_transposed.g4.l8.f1.v4.s32.b8"),
])
def test_default_follows_the_h100_sweep(feature_len: int, chosen: str) -> None:
    assert str(_default(_reddit_in_miniature(), feature_len)) == chosen


@pytest.mark.parametrize(("feature_len", "chosen"), [
    (16, "edge.g128.l1.f4.v4"),  # edge_transposed: 0.98x on products-like
    (32, "edge.g64.l2.f4.v4"),
    # 8 lanes, one launch: 1.05-1.14x over 4 lanes in launches of 128
    (128, "edge.g16.l8.f4.v4"),
    (512, "edge.g16.l8.f4.v4"),
])
def test_default_on_short_rows_follows_the_h100_sweep(feature_len: int, chosen: str) -> None:
    assert str(_default(_products_in_miniature(), feature_len)) == chosen


def test_default_splits_launches_only_where_the_gathered_rows_overflow_the_l2() -> None:
    assert str(_default(_products_in_miniature(2_000), 512)) == "edge.g32.l4.f4.v4"
    # element-wise operators keep launches of 128 features, with up to 16 lanes an edge (8
    # cover a launch of 128 fp32 features)
    assert str(_default(_products_in_miniature(), 512, op="add")) == "edge.g16.l8.f4.v4.s128"
    # a half-precision dot cannot keep partial sums in out between launches
    half = _default(_reddit_in_miniature(), 512, torch.float16)
    assert str(half) == "edge.g32.l4.f2.v8"  # at most 16 elements per lane and pass
    assert _default(_products_in_miniature(), 512, torch.float64).features_per_launch == 128
    # a larger L2 holds the gathered rows: one launch
    large_l2 = dataclasses.replace(H100, l2_bytes=8 << 30)
    assert _default(_products_in_miniature(), 512, op="add", target=large_l2).features_per_launch == 0


@pytest.mark.parametrize("feature_len", [*FEATURE_LENGTHS, 6, 1000])
@pytest.mark.parametrize("vector_ok", [1, 2, 4])
def test_default_rule_gives_a_valid_schedule(feature_len: int, vector_ok: int) -> None:
    for g in (named_graph("sorted"), named_graph("empty"), _graph_with_degrees([64] * 100)):
        for op in ("dot", "add"):
            t = task(op, feature_len, vector_ok=vector_ok)
            s = default_schedule(t, g.stats, _resident(4))
            assert not s.problems()
            check_schedule(t, s)  # it can run the task
            assert s.vector_width <= vector_ok and feature_len % s.vector_width == 0
            if isinstance(s, Row):
                assert s.feature_slice >= feature_len


def test_default_skeleton_weighs_row_length_against_the_grid() -> None:
    even = _graph_with_degrees([64] * 1000)  # 64,000 edges, longest row 64
    # Long even rows, few resident warps: each warp's share dwarfs one row -> row skeleton.
    assert isinstance(_default(even, 16, target=_resident(100)), Row)
    # Many resident warps: a 64-edge row is more than half a warp's share -> edge skeleton.
    assert isinstance(_default(even, 16, target=_resident(1000)), Edge)
    # 2-byte dtypes: the edge skeleton (faster in 17 of 18 collected bf16 cells)
    assert isinstance(_default(even, 16, torch.bfloat16, target=_resident(100)), Edge)
    assert isinstance(_default(even, 16, torch.float64, target=_resident(100)), Row)
    # Rows too short to fill a warp's edge groups -> edge skeleton.
    short = _graph_with_degrees([2] * 30_000)
    assert isinstance(_default(short, 16, target=_resident(10)), Edge)
    # One row holding most edges -> edge skeleton, whatever else.
    skewed = _graph_with_degrees([50_000, *[64] * 1000])
    assert isinstance(_default(skewed, 16, target=_resident(100)), Edge)
    # 16 to 64 fp32 features: edge ranges only where rows are long on average (not
    # products-like); longer heads: the transposed rows, same graphs
    products_like = _graph_with_degrees([51] * 1000 + [5_000])
    for feature_len, chosen in ((16, "edge.g128.l1.f4.v4"), (32, "edge.g64.l2.f4.v4"),
                                (128, "edge.g32.l4.f4.v4")):  # one source node: fits L2
        assert isinstance(_default(_reddit_in_miniature(), feature_len), (EdgeTransposed, RowTransposed))
        assert str(_default(products_like, feature_len)) == chosen
    assert str(_default(short, 32, target=_resident(10))) == "edge.g64.l2.f4.v4"
    # element-wise operators keep the transposed cases fitted before the dot-only ones; where
    # that was row_transposed they take the row skeleton (no reduction to transpose)
    for feature_len, skeleton in ((16, EdgeTransposed), (32, Row), (64, Edge), (128, Edge),
                                  (512, Edge)):
        schedule = _default(_reddit_in_miniature(), feature_len, op="add")
        assert type(schedule) is skeleton, feature_len
    assert str(_default(_reddit_in_miniature(), 16, op="add")) == "edge_transposed.g4.l4.f1.v4.b4"
    assert str(_default(_reddit_in_miniature(), 32, op="add")) == "row.g4.l8.f1.v4"
    assert isinstance(_default(_reddit_in_miniature(), 16, torch.float16), Edge)
    assert isinstance(_default(_reddit_in_miniature(), 32, torch.float16), Edge)
    # A head too long for one slice -> edge skeleton (several passes).
    assert isinstance(_default(even, 1000, target=_resident(100)), Edge)


def test_the_rules_reading_tells_apart_every_mean_it_compares_with() -> None:
    t = task("dot", 32)
    for mean in [0.0, 7.9, 8.0, 15.9, 16.0, 31.9, 32.0, 255.9, 256.0, 1e4]:
        rows = RowStats(mean, int(mean) + 1, float("nan"), exact=False)
        stats = GraphStats(1_000, 1_000, int(mean * 1_000), rows)
        reaches = RowReading.of(t, stats, H100).mean_reaches
        assert all((reaches >= threshold) == (mean >= threshold) for threshold in (8, 16, 32, 256))


def test_blocks_whose_statistics_read_alike_share_the_decision() -> None:
    t = task("add", 4)
    blocks = [GraphStats(src, dst, edges, RowStats(edges / dst, 25, float("nan"), exact=False))
              for src, dst, edges in ((30_000, 1_024, 25_600), (29_000, 1_024, 24_900))]
    before = _decide.cache_info()
    chosen = [default_schedule(t, stats, H100) for stats in blocks]
    assert chosen[0] is chosen[1] and _decide.cache_info().misses - before.misses <= 1


def test_element_wise_heads_take_up_to_16_lanes_an_edge() -> None:
    # One pass over the head: with 4 lanes, element-wise operators ran 2.4-7.4x slower than
    # the best at 100-256 features on the collected cells; a dot keeps 4 lanes.
    g = _products_in_miniature(2_000)  # its features fit in the L2: one launch
    assert str(_default(g, 128, torch.bfloat16, op="add")) == "edge.g16.l8.f2.v8"
    assert str(_default(g, 256, torch.bfloat16, op="add")) == "edge.g8.l16.f2.v8"
    assert str(_default(g, 100, torch.float32, op="add")) == "edge.g16.l8.f4.v4"
    assert _default(g, 128, torch.bfloat16).lanes == 4
    assert str(_default(g, 16, op="add")) == str(_default(g, 16))  # short heads: as a dot
