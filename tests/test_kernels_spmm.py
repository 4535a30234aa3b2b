"""Generated g-SpMM kernels: schedules, code generation (NVRTC, no GPU) and GPU results."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

import gsparse
from gsparse.algebra import BINARY_OPS, REDUCERS, SPMM_OPS
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels.common import Layout
from gsparse.kernels.spmm import SpmmSchedule, default_schedule, schedule_space
from gsparse.kernels.spmm_codegen import (
    KERNEL_NAME,
    MERGE_KERNEL_NAME,
    TILED_KERNEL_NAME,
    SpmmAlgorithm,
    generate,
    generate_tiled,
    launch_geometry,
)
from gsparse.kernels.spmm_schedule import default_schedule_for, row_splits_for, schedule_grid
from gsparse.runtime import compile_cuda, nvrtc_version
from gsparse.testing.reference import gspmm_ref

from graphs import named_graph, random_features
from recording import record_kernel_lookups

needs_nvrtc = pytest.mark.skipif(nvrtc_version() is None, reason="needs NVRTC")
FEATURE_LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def _sample(items: list, k: int, seed: int) -> list:
    return random.Random(seed).sample(items, min(k, len(items)))


# --- schedules ----------------------------------------------------------------------------


def test_schedule_json_round_trip() -> None:
    for schedule in schedule_grid(64, vector_ok=4):
        assert SpmmSchedule.from_json(schedule.to_json()) == schedule


@pytest.mark.parametrize(
    ("knobs", "reason"),
    [
        ({"feature_lanes": 3}, "feature_lanes must be one of"),
        ({"edge_lanes": 64}, "edge_lanes must be one of"),
        ({"vector_width": 3}, "vector_width must be 1, 2, 4 or 8"),
        ({"feature_lanes": 32, "edge_lanes": 2}, "must fit in one warp"),
        ({"rows_per_block": 64, "feature_lanes": 32}, "more than 1024"),
        ({"rows_per_block": 3, "feature_lanes": 4}, "not a multiple of 32"),
        ({"feature_lanes": 8, "edge_lanes": 4, "index_tile": True}, "needs edge_lanes 1"),
        ({"rows_per_block": 0}, "rows_per_block must be >= 1"),
    ],
)
def test_invalid_schedules_say_why(knobs: dict, reason: str) -> None:
    schedule = SpmmSchedule(**knobs)
    assert any(reason in problem for problem in schedule.problems())
    with pytest.raises(ValueError, match=reason):
        schedule.validate()
    with pytest.raises(ValueError, match=reason):
        SpmmSchedule.from_json(schedule.to_json())


def test_from_json_rejects_unknown_knobs() -> None:
    with pytest.raises(ValueError, match="unknown SpmmSchedule knobs \\['warps'\\]"):
        SpmmSchedule.from_json(json.dumps({"warps": 4}))


@pytest.mark.parametrize("feature_len", FEATURE_LENGTHS)
def test_grid_is_valid_and_covers_every_knob(feature_len: int) -> None:
    grid = schedule_grid(feature_len, vector_ok=4)
    assert grid and all(not s.problems() for s in grid)
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


@pytest.mark.parametrize("feature_len", [*FEATURE_LENGTHS, 3, 100, 1000])
@pytest.mark.parametrize("mean_degree", [0.0, 1.5, 12.0, 492.0, 5000.0])
@pytest.mark.parametrize("vector_ok", [1, 2, 4])
def test_default_rule_gives_a_valid_schedule(feature_len, mean_degree, vector_ok) -> None:
    s = default_schedule_for(mean_degree, 1.6, feature_len, vector_ok, 50 << 20, 232_965, 4)
    assert not s.problems()
    assert s.vector_width <= vector_ok and feature_len % s.vector_width == 0
    assert s.threads >= 128  # enough warps per block to hide latency


def test_default_slice_keeps_the_dense_input_in_l2() -> None:
    # reddit-like: 232,965 source rows of fp32; a 32-feature slice is 29.8 MB.
    wide = default_schedule_for(492, 1.6, 512, 4, 50 << 20, 232_965, 4)
    assert wide.feature_slice == 32
    small_graph = default_schedule_for(492, 1.6, 512, 4, 50 << 20, 2_000, 4)
    assert small_graph.feature_slice == 128
    # products-like: no slice fits, so the widest slice reads the indices the fewest times
    no_reuse = default_schedule_for(51, 1.9, 512, 4, 50 << 20, 2_449_029, 4)
    assert no_reuse.feature_slice == 128


def test_default_splits_long_rows_beyond_four_features() -> None:
    # reddit-like statistics: rows far longer than the mean are cut into the longest chunks
    # row_splits_for offers (the H100 sweep's winners at 8-512 features).
    reddit = dict(mean_degree=492, cov=1.63, vector_ok=4, l2_bytes=50 << 20,
                  source_rows=232_965, element_bytes=4, max_degree=40_000)
    assert row_splits_for(492, 40_000) == [1024, 4096]
    for feature_len in (8, 32, 512):
        wide = default_schedule_for(feature_len=feature_len, **reddit)
        assert (wide.row_split, wide.degree_sorted) == (4096, True)
    assert default_schedule_for(feature_len=4, **reddit).row_split == 0
    # No long rows (or no statistics): nothing to split.
    assert default_schedule_for(feature_len=32, **{**reddit, "max_degree": 3_000}).row_split == 0
    assert default_schedule_for(492, 1.63, 32, 4, 50 << 20, 232_965, 4).row_split == 0


def test_default_keeps_natural_order_for_short_rows_and_features() -> None:
    products = dict(mean_degree=51, cov=1.88, vector_ok=4, l2_bytes=50 << 20,
                    source_rows=2_449_029, element_bytes=4, max_degree=20_000)
    assert not default_schedule_for(feature_len=2, **products).degree_sorted
    assert default_schedule_for(feature_len=8, **products).degree_sorted
    assert default_schedule_for(feature_len=2, **{**products, "mean_degree": 492}).degree_sorted


def test_launch_geometry_covers_rows_and_features() -> None:
    s = SpmmSchedule(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4)
    geometry = launch_geometry(s, num_rows=1001, num_features=100)
    assert geometry.block == 256
    assert geometry.grid == (126, 4)  # ceil(1001 / 8), ceil(100 / 32)


# --- code generation, compiled with NVRTC (no GPU) ----------------------------------------


def _algorithms(seed: int, k: int) -> list[SpmmAlgorithm]:
    layouts = [Layout.FULL, Layout.SCALAR, Layout.INDEXED]
    every = []
    for op in SPMM_OPS:
        binop = BINARY_OPS[op]
        for reduce in REDUCERS:
            for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
                for index_dtype in (torch.int32, torch.int64):
                    for lhs in layouts if binop.uses_lhs else [None]:
                        for rhs in layouts if binop.uses_rhs else [None]:
                            for with_arg in (False, True) if REDUCERS[reduce].keeps_arg else (False,):
                                every.append(SpmmAlgorithm(op, reduce, lhs, rhs, dtype,
                                                           index_dtype, has_eid=binop.uses_rhs,
                                                           with_arg=with_arg))
    return _sample(every, k, seed)


def _sampled_pairs() -> list[tuple[SpmmAlgorithm, SpmmSchedule]]:
    pairs = []
    for i, feature_len in enumerate(FEATURE_LENGTHS):
        for j, schedule in enumerate(_sample(schedule_grid(feature_len, 4), 3, seed=i)):
            pairs.append((_algorithms(seed=10 * i + j, k=1)[0], schedule))
    return pairs


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(("algorithm", "schedule"), _sampled_pairs(), ids=str)
def test_sampled_space_compiles_without_spills(arch, algorithm, schedule) -> None:
    binary = compile_cuda(generate(algorithm, schedule), arch=arch, cache=None)
    resources = binary.resources[KERNEL_NAME]
    assert resources.spill_stores == 0 and resources.spill_loads == 0, binary.log
    assert resources.stack_bytes == 0, binary.log
    # __launch_bounds__(threads) keeps registers within what one block needs to launch.
    assert resources.registers * schedule.threads <= 65536


def test_half_precision_grid_moves_16_bytes_per_access() -> None:
    g = named_graph("random")
    assert {s.vector_width for s in schedule_space(g, 64, torch.float16)} == {1, 8}
    assert {s.vector_width for s in schedule_space(g, 64, torch.float32)} == {1, 4}
    assert default_schedule(g, 256, torch.bfloat16).vector_width == 8


@needs_nvrtc
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_eight_wide_half_vectors_compile_without_spills(dtype) -> None:
    algorithm = SpmmAlgorithm("mul", "max", Layout.FULL, Layout.FULL, dtype, torch.int32,
                              has_eid=True, with_arg=True)
    schedule = SpmmSchedule(feature_lanes=8, edge_lanes=4, vector_width=8, nnz_tile=4)
    binary = compile_cuda(generate(algorithm, schedule), arch="sm_90", cache=None)
    assert binary.resources[KERNEL_NAME].spill_stores == 0, binary.log


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("algorithm", _algorithms(seed=99, k=40), ids=str)
def test_column_tiled_skeleton_compiles_without_spills(arch, algorithm) -> None:
    if algorithm.lhs_layout is None:
        with pytest.raises(ValueError, match="copy_rhs has none"):
            generate_tiled(algorithm, SpmmSchedule(rows_per_block=32, feature_lanes=1,
                                                   edge_lanes=32, column_tile=8192))
        return
    schedule = SpmmSchedule(rows_per_block=64, feature_lanes=2, edge_lanes=8,
                            vector_width=2, column_tile=8192, degree_sorted=True)
    binary = compile_cuda(generate_tiled(algorithm, schedule), arch=arch, cache=None)
    for name in (TILED_KERNEL_NAME, MERGE_KERNEL_NAME):
        assert binary.resources[name].spill_stores == 0, binary.log


@pytest.mark.parametrize(
    ("column_tile", "reason"),
    [(1000, "multiple of 1024"), (2 ** 17, "up to 65536")],
)
def test_column_tile_bounds(column_tile: int, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        SpmmSchedule(feature_lanes=1, edge_lanes=32, column_tile=column_tile).validate()
    with pytest.raises(ValueError, match="index_tile off and nnz_tile 1"):
        SpmmSchedule(feature_lanes=1, edge_lanes=32, nnz_tile=2, column_tile=4096).validate()


def test_default_uses_column_tiles_only_when_their_row_pointers_are_small() -> None:
    gen = torch.Generator().manual_seed(0)
    # few tiles: 50,000 sources, 1,000 long rows
    few = gsparse.Graph.from_edge_index(torch.stack([
        torch.randint(0, 50_000, (100_000,), generator=gen),
        torch.randint(0, 1_000, (100_000,), generator=gen)]), 50_000, 1_000)
    chosen = default_schedule(few, 1, lhs_len=1)
    assert chosen.column_tile and not chosen.problems()
    assert default_schedule(few, 1).column_tile == 0  # no lhs (copy_rhs): no tiles
    assert default_schedule(few, 16, lhs_len=16).column_tile == 0  # wide features
    assert chosen.threads == 1024 and chosen.group == 16
    # many tiles x many short rows (products-like): per-tile row pointers would dominate
    many = gsparse.Graph.from_edge_index(torch.stack([
        torch.randint(0, 200_000, (400_000,), generator=gen),
        torch.randint(0, 200_000, (400_000,), generator=gen)]), 200_000, 200_000)
    assert default_schedule(many, 1, lhs_len=1).column_tile == 0


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_column_tiles_group_every_edge_by_tile_and_row(index_dtype) -> None:
    g = named_graph("random").with_index_dtype(index_dtype)  # 150 sources: tiles of 64 -> 3
    tile_rowptr, local_col, position, tiles = spmm_kernels._column_tiles(g, 64)
    assert tiles == 3 and tile_rowptr.dtype == position.dtype == index_dtype
    assert int(tile_rowptr[-1]) == g.num_edges
    assert sorted(position.tolist()) == list(range(g.num_edges))  # a permutation
    col, dst = g.col.long(), g.csr_dst.long()
    local = local_col.long() % 65536
    for t in range(tiles):
        for r in range(g.num_dst):
            lo, hi = int(tile_rowptr[t * g.num_dst + r]), int(tile_rowptr[t * g.num_dst + r + 1])
            p = position[lo:hi].long()
            assert (dst[p] == r).all() and (col[p] // 64 == t).all()
            assert torch.equal(local[lo:hi], col[p] % 64)
            assert (p[1:] > p[:-1]).all()  # CSR order kept within a (tile, row)
    assert spmm_kernels._column_tiles(g, 64)[0] is tile_rowptr  # built once per graph


def test_local_indices_use_all_sixteen_bits() -> None:
    src = torch.tensor([65535, 40000, 3, 70000])
    g = gsparse.Graph.from_edge_index(torch.stack([src, torch.zeros(4, dtype=torch.long)]), 70001, 1)
    _, local_col, position, tiles = spmm_kernels._column_tiles(g, 65536)
    assert tiles == 2
    assert (local_col.long() % 65536).tolist() == (g.col.long()[position.long()] % 65536).tolist()


@pytest.mark.parametrize(("num_rows", "tile_blocks", "rows"), [
    (232_965, 5, 2048),   # reddit-like, 1 feature: 4,096 rows would make 285 blocks
    (232_965, 9, 4096),   # reddit-like, 2 features: 513 blocks of 4,096 rows
    (132_534, 3, 1024),   # proteins-like, 1 feature: even 1,024 rows make 390 blocks
    (132_534, 10, 2048),  # proteins-like, 4 features
    (230, 3, 1024),       # small graphs: one block of 1,024 rows per tile
])
def test_tiled_blocks_keep_three_per_sm(num_rows: int, tile_blocks: int, rows: int) -> None:
    assert spmm_kernels._tiled_block_rows(num_rows, tile_blocks, sms=132) == rows


def test_space_holds_column_tiled_schedules_for_short_features() -> None:
    g = named_graph("random")
    assert any(s.column_tile for s in schedule_space(g, 4))
    assert not any(s.column_tile for s in schedule_space(g, 16))


def test_generated_source_reads_well() -> None:
    algorithm = SpmmAlgorithm("mul", "max", Layout.FULL, Layout.SCALAR, torch.float16,
                              torch.int32, has_eid=True, with_arg=True)
    schedule = SpmmSchedule(feature_lanes=32, vector_width=2, index_tile=True)
    source = generate(algorithm, schedule)
    assert source.startswith("// gsparse g-SpMM: mul.max lhs:full/rhs:scalar float16 int32 eid arg")
    assert schedule.to_json() in source
    assert "const A m = a[i] * b[i];" in source
    assert "__shfl_sync(mask, tile_u, j, G)" in source


def test_column_tiled_source_stages_with_loads_in_flight_and_takes_block_rows() -> None:
    algorithm = SpmmAlgorithm("copy_lhs", "sum", Layout.FULL, None, torch.float32, torch.int32,
                              has_eid=False)
    source = generate_tiled(algorithm, SpmmSchedule(rows_per_block=64, feature_lanes=1,
                                                    edge_lanes=16, column_tile=4096))
    assert "constexpr int AHEAD = 4;" in source and "uint4 v[AHEAD];" in source
    assert "tile_lhs[i] = tile_src[i];" in source  # elements past the last whole vector
    assert "long long num_tiles, long long block_rows)" in source  # chosen at launch


def test_algorithm_rejects_operands_the_op_does_not_read() -> None:
    with pytest.raises(ValueError, match="ignores rhs"):
        SpmmAlgorithm("copy_lhs", "sum", Layout.FULL, Layout.FULL, torch.float32, torch.int32, False)
    with pytest.raises(ValueError, match="keeps no arg index"):
        SpmmAlgorithm("copy_lhs", "sum", Layout.FULL, None, torch.float32, torch.int32, False, True)


# --- launch plans (CPU: a recording kernel stands in for the GPU) -----------------------


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Kernel lookups and default-schedule choices counted; launches recorded, not run."""
    seen = record_kernel_lookups(monkeypatch, spmm_kernels)
    seen["defaults"] = 0
    real_default = spmm_kernels.default_schedule

    def default(*args, **kwargs):
        seen["defaults"] += 1
        return real_default(*args, **kwargs)

    monkeypatch.setattr(spmm_kernels, "default_schedule", default)
    return seen


def test_a_repeated_call_reuses_its_launch_plan_and_passes_the_new_operands(recorded) -> None:
    g = named_graph("random")
    x1, x2 = torch.randn(g.num_src, 8), torch.randn(g.num_src, 8)
    out1 = spmm_kernels.run_spmm(g, "copy_lhs", "sum", x1, None, (8,))
    out2 = spmm_kernels.run_spmm(g, "copy_lhs", "sum", x2, None, (8,))
    assert recorded["kernels"] == recorded["defaults"] == 1
    (grid1, block1, args1), (grid2, block2, args2) = recorded["kernel"].launches
    assert (grid1, block1) == (grid2, block2)
    assert args1[4] is x1 and args2[4] is x2 and args1[8] is out1 and args2[8] is out2
    assert args1[0] is g.rowptr and args1[1] is g.col
    assert [a.value for a in args2[-4:]] == [g.num_dst, 8, 8, 0]


def test_a_new_shape_dtype_or_schedule_gets_its_own_plan(recorded) -> None:
    g = named_graph("random")
    spmm_kernels.run_spmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 8), None, (8,))
    spmm_kernels.run_spmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 16), None, (16,))
    spmm_kernels.run_spmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 16).double(), None, (16,))
    forced = SpmmSchedule(rows_per_block=4, feature_lanes=16)
    spmm_kernels.run_spmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 16), None, (16,), forced)
    spmm_kernels.run_spmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 16), None, (16,), forced)
    assert recorded["kernels"] == 4 and recorded["defaults"] == 3
    assert len(recorded["kernel"].launches) == 5


def test_an_invalid_forced_schedule_raises_on_every_call(recorded) -> None:
    g = named_graph("random")
    x = torch.randn(g.num_src, 6)  # 6 features: no 4-wide vectors
    bad = SpmmSchedule(rows_per_block=16, feature_lanes=2, vector_width=4)
    for _ in range(2):
        with pytest.raises(ValueError, match="allow at most 2"):
            spmm_kernels.run_spmm(g, "copy_lhs", "sum", x, None, (6,), bad)
    assert recorded["kernel"].launches == []


# --- GPU: results against the float64 reference -------------------------------------------

gpu = pytest.mark.gpu


@pytest.fixture
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs start as NaN (floats) or -7 (indices): every element must be written."""

    def allocate(shape, dtype, device):
        fill = -7 if dtype == torch.int64 else float("nan")
        return torch.full(shape, fill, dtype=dtype, device=device)

    monkeypatch.setattr(spmm_kernels, "_allocate", allocate)


def _operands(g: gsparse.Graph, op: str, lhs_shape, rhs_shape, dtype, seed: int):
    binop = BINARY_OPS[op]
    lhs = random_features((g.num_src, *lhs_shape), dtype, seed) if binop.uses_lhs else None
    rhs = (random_features((g.num_edges, *rhs_shape), dtype, seed + 1, away_from_zero=op == "div")
           if binop.uses_rhs else None)
    return lhs, rhs


def _tolerance(dtype: torch.dtype) -> dict:
    return {
        torch.float16: {"rtol": 2e-3, "atol": 2e-3},
        torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2},
        torch.float32: {"rtol": 1e-5, "atol": 1e-4},
        torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    }[dtype]


def _check(g, op, reduce, lhs, rhs, schedule=None, *, expected=None, atol=None) -> None:
    cuda = g.to("cuda")
    out = gsparse.gspmm(cuda, op, reduce,
                        None if lhs is None else lhs.cuda(), None if rhs is None else rhs.cuda(),
                        schedule=schedule)
    if expected is None:
        expected = gspmm_ref(g, op, reduce, lhs, rhs)
    dtype = (lhs if lhs is not None else rhs).dtype
    tolerance = _tolerance(dtype)
    if atol is not None:
        tolerance["atol"] = atol
    torch.testing.assert_close(out.cpu().double(), expected.to(dtype).double(),
                               **tolerance, msg=lambda m: f"{op}/{reduce} {schedule}: {m}")


SHAPES = {  # (lhs feature shape, rhs feature shape): full/full, full/scalar, broadcast
    "full": ((3, 8), (3, 8)),
    "scalar": ((3, 8), (1, 1)),
    "indexed": ((1, 8), (3, 1)),
}


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("reduce", list(REDUCERS))
@pytest.mark.parametrize("op", SPMM_OPS)
def test_every_operator_and_dtype_matches_reference(poisoned, op, reduce, dtype) -> None:
    g = named_graph("random")
    for i, (lhs_shape, rhs_shape) in enumerate(SHAPES.values()):
        lhs, rhs = _operands(g, op, lhs_shape, rhs_shape, dtype, seed=i)
        _check(g, op, reduce, lhs, rhs)


@gpu
@pytest.mark.parametrize("kind", ["random", "int64"])
@pytest.mark.parametrize("feature_len", [1, 4, 32, 96, 256])
def test_sampled_schedules_match_reference(poisoned, kind, feature_len) -> None:
    g = named_graph(kind)
    schedules = _sample(schedule_space(g, feature_len), 12, seed=feature_len)
    for i, schedule in enumerate(schedules):
        for op, reduce in (("copy_lhs", "sum"), ("mul", "max"), ("add", "mean"), ("copy_rhs", "min")):
            lhs, rhs = _operands(g, op, (feature_len,), (feature_len,), torch.float32, seed=i)
            _check(g, op, reduce, lhs, rhs, schedule)
        lhs, rhs = _operands(g, "mul", (feature_len,), (1,), torch.float32, seed=i)
        _check(g, "mul", "sum", lhs, rhs, schedule)


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_sampled_schedules(poisoned, dtype) -> None:
    g = named_graph("random")
    for i, schedule in enumerate(_sample(schedule_space(g, 64, dtype), 10, seed=7)):
        for op, reduce in (("copy_lhs", "sum"), ("mul", "max"), ("div", "mean")):
            lhs, rhs = _operands(g, op, (64,), (64,), dtype, seed=i)
            _check(g, op, reduce, lhs, rhs, schedule)


@gpu
@pytest.mark.parametrize("reduce", list(REDUCERS))
def test_hundred_thousand_edge_row(poisoned, reduce) -> None:
    g = named_graph("long_row")
    lhs, rhs = _operands(g, "mul", (64,), (1,), torch.float32, seed=3)
    expected = gsparse.gspmm(g, "mul", reduce, lhs.double(), rhs.double())
    for schedule in [None, *_sample(schedule_space(g, 64), 6, seed=1)]:
        # fp32 sums of 100,000 terms of magnitude ~1 carry absolute errors ~1e-3
        _check(g, "mul", reduce, lhs, rhs, schedule, expected=expected, atol=1e-2)


def _wide_graph() -> gsparse.Graph:
    """3,000 sources: three 1,024-row column tiles; empty rows; a longer row."""
    gen = torch.Generator().manual_seed(5)
    src = torch.randint(0, 3_000, (20_000,), generator=gen)
    dst = torch.randint(0, 230, (20_000,), generator=gen)
    dst[dst % 5 == 0] = 1
    return gsparse.Graph.from_edge_index(torch.stack([src, dst]), 3_000, 230)


@gpu
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_column_tiled_skeleton_matches_reference(poisoned, dtype, index_dtype) -> None:
    g = _wide_graph().with_index_dtype(index_dtype)
    cuda = g.to("cuda")
    # copy_rhs stages nothing: its column-tiled schedules run the one-pass skeleton
    for i, (op, reduce) in enumerate([(op, r) for op in SPMM_OPS for r in REDUCERS]):
        for layout, (lhs_shape, rhs_shape) in SHAPES.items():
            lhs_shape, rhs_shape = (1, 4), (2, 4) if layout == "full" else rhs_shape
            if layout == "indexed":
                lhs_shape, rhs_shape = (1, 2), (2, 1)
            lhs, rhs = _operands(g, op, lhs_shape, rhs_shape, dtype, seed=i)
            used = [shape for shape, t in ((lhs_shape, lhs), (rhs_shape, rhs)) if t is not None]
            features = math.prod(torch.broadcast_shapes(*used))
            vector = 2 if features % 2 == 0 and layout != "indexed" else 1
            schedule = SpmmSchedule(rows_per_block=64, feature_lanes=1, edge_lanes=16,
                                    vector_width=vector, column_tile=1024,
                                    degree_sorted=bool(i % 2))
            result = gsparse.gspmm(cuda, op, reduce, None if lhs is None else lhs.cuda(),
                                   None if rhs is None else rhs.cuda(), schedule=schedule)
            expected = gspmm_ref(g, op, reduce, lhs, rhs)
            torch.testing.assert_close(result.cpu().double(), expected.to(dtype).double(),
                                       **_tolerance(dtype), msg=lambda m: f"{op}/{reduce}: {m}")


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_column_tiled_staging_of_unaligned_lhs(poisoned, dtype) -> None:
    """An ``lhs`` 2 bytes past a 16-byte boundary is staged one element at a time; a
    3-feature fp16 tile (not a whole number of 16-byte vectors) ends in such elements."""
    g = _wide_graph()
    for features, skip in ((3, 0), (3, 1), (1, 1)):
        storage = random_features((g.num_src * features + skip,), dtype, seed=features + skip)
        lhs = storage[skip:].view(g.num_src, features)
        on_gpu = storage.cuda()[skip:].view(g.num_src, features)
        assert (on_gpu.data_ptr() % 16 != 0) == bool(skip)
        schedule = SpmmSchedule(rows_per_block=64, feature_lanes=1, edge_lanes=16,
                                column_tile=1024)
        result = gsparse.gspmm(g.to("cuda"), "copy_lhs", "sum", on_gpu, schedule=schedule)
        expected = gspmm_ref(g, "copy_lhs", "sum", lhs, None)
        torch.testing.assert_close(result.cpu().double(), expected.to(dtype).double(),
                                   **_tolerance(dtype))


@gpu
def test_column_tiled_skeleton_over_several_row_blocks(poisoned) -> None:
    """5,000 rows: five blocks of 1,024 rows per tile, the last one partial."""
    gen = torch.Generator().manual_seed(8)
    src = torch.randint(0, 3_000, (60_000,), generator=gen)
    dst = torch.randint(0, 5_000, (60_000,), generator=gen)
    g = gsparse.Graph.from_edge_index(torch.stack([src, dst]), 3_000, 5_000)
    lhs = random_features((g.num_src, 2), torch.float32, seed=8)
    schedule = SpmmSchedule(rows_per_block=64, feature_lanes=1, edge_lanes=16, vector_width=2,
                            column_tile=1024)
    for reduce in ("sum", "max"):
        result = gsparse.gspmm(g.to("cuda"), "copy_lhs", reduce, lhs.cuda(), schedule=schedule)
        expected = gspmm_ref(g, "copy_lhs", reduce, lhs, None)
        torch.testing.assert_close(result.cpu().double(), expected.to(torch.float32).double(),
                                   **_tolerance(torch.float32))


@gpu
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_column_tiled_arg_indices_match_single_pass(reduce) -> None:
    g = _wide_graph().to("cuda")
    lhs = torch.randint(-2, 3, (g.num_src, 4), dtype=torch.float32, device="cuda")
    rhs = torch.randint(1, 3, (g.num_edges, 4), dtype=torch.float32, device="cuda")
    tiled = SpmmSchedule(rows_per_block=32, feature_lanes=1, edge_lanes=32, column_tile=1024)
    plain = SpmmSchedule(rows_per_block=8, feature_lanes=1, edge_lanes=32)
    a = spmm_kernels.run_spmm(g, "mul", reduce, lhs, rhs, (4,), tiled, with_arg=True)
    b = spmm_kernels.run_spmm(g, "mul", reduce, lhs, rhs, (4,), plain, with_arg=True)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


@gpu
def test_graph_without_edges_gives_zeros(poisoned) -> None:
    g = named_graph("empty")
    x = random_features((g.num_src, 16), torch.float32, 0)
    for reduce in REDUCERS:
        for schedule in [None, *_sample(schedule_space(g, 16), 4, seed=2)]:
            out = gsparse.gspmm(g.to("cuda"), "copy_lhs", reduce, x.cuda(), schedule=schedule)
            assert torch.equal(out.cpu(), torch.zeros(9, 16))


@gpu
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_arg_indices_name_the_first_winning_edge(poisoned, reduce) -> None:
    g = named_graph("random")
    # Few distinct values, so ties are common and the tie rule is exercised.
    lhs = torch.randint(-2, 3, (g.num_src, 2, 8), dtype=torch.float32)
    rhs = torch.randint(1, 3, (g.num_edges, 1, 8), dtype=torch.float32)
    cuda = g.to("cuda")
    for schedule in [None, *_sample(schedule_space(g, 16), 8, seed=4)]:
        out, arg_u, arg_e = spmm_kernels.run_spmm(cuda, "mul", reduce, lhs.cuda(), rhs.cuda(),
                                                  (2, 8), schedule, with_arg=True)
        out, arg_u, arg_e = out.cpu(), arg_u.cpu(), arg_e.cpu()
        expected = gspmm_ref(g, "mul", reduce, lhs, rhs).float()
        torch.testing.assert_close(out, expected)
        empty = g.in_degrees() == 0
        assert (arg_u[empty] == -1).all() and (arg_e[empty] == -1).all()
        src, dst = g.edges()
        for v, h, f in zip(*torch.nonzero(~empty[:, None, None].expand_as(out), as_tuple=True)):
            e = int(arg_e[v, h, f])
            assert int(dst[e]) == v and int(src[e]) == int(arg_u[v, h, f])
            assert lhs[src[e], h, f] * rhs[e, 0, f] == out[v, h, f]
            # the first edge of the row (in CSR order) with the winning message
            row = slice(int(g.rowptr[v]), int(g.rowptr[v + 1]))
            eids = g.col.new_tensor(range(row.start, row.stop)) if g.eid is None else g.eid[row]
            messages = lhs[g.col[row].long(), h, f] * rhs[eids.long(), 0, f]
            first = int(torch.nonzero(messages == out[v, h, f])[0])
            assert e == int(eids[first])


@gpu
def test_forced_schedule_needing_wider_vectors_than_the_data_allows() -> None:
    g = named_graph("random").to("cuda")
    x = torch.randn(g.num_src, 6, device="cuda")
    with pytest.raises(ValueError, match="allow at most 2"):
        gsparse.gspmm(g, "copy_lhs", "sum", x, schedule=SpmmSchedule(feature_lanes=8, vector_width=4))


def test_default_schedule_from_graph_statistics() -> None:
    g = named_graph("random")
    assert not default_schedule(g, 256).problems()
    assert default_schedule(g, 6, vector_ok=4).vector_width == 2
