"""Generated g-SDDMM kernels: schedules, code generation (NVRTC, no GPU) and GPU results."""

from __future__ import annotations

import itertools
import json
import random

import pytest
import torch

import gsparse
from gsparse.algebra import BINARY_OPS, SDDMM_OPS, TARGETS
from gsparse.kernels import sddmm as sddmm_kernels
from gsparse.kernels.common import Layout
from gsparse.kernels.sddmm import (
    KERNEL_NAME,
    SddmmAlgorithm,
    SddmmSchedule,
    default_schedule,
    generate,
    run_sddmm,
    schedule_space,
)
from gsparse.runtime import compile_cuda, nvrtc_version
from gsparse.testing.reference import gsddmm_ref

from graphs import named_graph, random_features
from recording import record_kernel_lookups

needs_nvrtc = pytest.mark.skipif(nvrtc_version() is None, reason="needs NVRTC")
FEATURE_LENGTHS = (1, 2, 3, 4, 8, 16, 32, 64, 100, 128, 256, 512)


def _sample(items: list, k: int, seed: int) -> list:
    return random.Random(seed).sample(items, min(k, len(items)))


# --- schedules ----------------------------------------------------------------------------


def test_schedule_json_round_trip() -> None:
    for feature_len in FEATURE_LENGTHS:
        for schedule in schedule_space(named_graph("sorted"), feature_len):
            assert SddmmSchedule.from_json(schedule.to_json()) == schedule


@pytest.mark.parametrize(
    ("knobs", "reason"),
    [
        ({"skeleton": "warp"}, "skeleton must be one of"),
        ({"lanes": 3}, "lanes must be one of"),
        ({"lanes": 64}, "lanes must be one of"),
        ({"vector_width": 16}, "vector_width must be one of"),
        ({"features_per_thread": 3}, "features_per_thread must be 1, 2, 4 or 8"),
        ({"groups_per_block": 0}, "groups_per_block must be an int >= 1"),
        ({"groups_per_block": 64, "lanes": 32}, "more than 1024"),
        ({"skeleton": "row", "groups_per_block": 33}, "more than 1024"),
        ({"groups_per_block": 3, "lanes": 4}, "not a multiple of 32"),
        ({"features_per_thread": 8, "vector_width": 4}, "more than 16 spills"),
        ({"features_per_launch": 48}, "features_per_launch must be one of"),
        ({"skeleton": "row", "lanes": 32, "vector_width": 4, "features_per_launch": 32},
         "narrower than the 128"),
        ({"lanes": 32, "vector_width": 2, "features_per_launch": 32}, "narrower than the 64"),
        ({"skeleton": "row_transposed", "groups_per_block": 4}, "edges_per_batch must be one of"),
        ({"skeleton": "row_transposed", "groups_per_block": 4, "lanes": 8, "edges_per_batch": 16},
         "at most lanes = 8"),
        ({"skeleton": "row_transposed", "groups_per_block": 4, "edges_per_batch": 12},
         "edges_per_batch must be one of"),
        ({"skeleton": "row", "edges_per_batch": 8}, "knob of the row_transposed and edge_transposed"),
        ({"skeleton": "edge_transposed", "groups_per_block": 4, "lanes": 4, "edges_per_batch": 8},
         "at most lanes = 4 for the edge_transposed skeleton"),
    ],
)
def test_invalid_schedules_say_why(knobs: dict, reason: str) -> None:
    schedule = SddmmSchedule(**knobs)
    assert any(reason in problem for problem in schedule.problems())
    with pytest.raises(ValueError, match=reason):
        schedule.validate()
    with pytest.raises(ValueError, match=reason):
        SddmmSchedule.from_json(schedule.to_json())


def test_from_json_rejects_unknown_knobs_and_non_objects() -> None:
    with pytest.raises(ValueError, match="unknown SddmmSchedule knobs \\['warps'\\]"):
        SddmmSchedule.from_json(json.dumps({"warps": 4}))
    with pytest.raises(ValueError, match="is a JSON object"):
        SddmmSchedule.from_json("[1, 2]")


@pytest.mark.parametrize("feature_len", FEATURE_LENGTHS)
def test_space_is_valid_and_covers_every_knob(feature_len: int) -> None:
    space = schedule_space(named_graph("sorted"), feature_len)
    assert space and all(not s.problems() for s in space)
    assert len(set(space)) == len(space)
    # the transposed dot needs groups of 8 lanes or more, so heads of 8 features or more
    transposed = {"row_transposed"} if feature_len >= 8 else set()
    transposed |= {"edge_transposed"} if feature_len >= 3 else set()  # 4 lanes or more
    assert {s.skeleton for s in space} == {"edge", "row", *transposed}
    assert all(s.edges_per_batch in (8, s.lanes) for s in space if s.skeleton == "row_transposed")
    assert all(s.edges_per_batch in (4, 8, s.lanes) for s in space
               if s.skeleton == "edge_transposed")
    # a batch's sums, v's features and the next batch's int64 indices (one per edge on
    # row_transposed, two on edge_transposed) fit in 64 registers
    for s in space:
        indices = {"row_transposed": 1, "edge_transposed": 2}.get(s.skeleton, 0)
        words = s.edges_per_batch * (1 + 2 * indices) + s.features_per_thread * s.vector_width
        assert words <= 64, s
    assert {s.threads for s in space if s.skeleton == "edge"} == {128, 256}
    # every row skeleton holds a whole head, or a launch's part of it, in one slice, so
    # dot runs on it too; only row_transposed slices launches
    assert all(s.feature_slice >= (s.features_per_launch or feature_len)
               for s in space if s.skeleton != "edge")
    assert {s.skeleton for s in space if s.features_per_launch} <= {"edge", "row_transposed"}
    if feature_len > 32:
        assert any(s.skeleton == "row_transposed" and s.features_per_launch == 32 for s in space)
    # no slice wider than a launch's features need, and at most four passes over them
    for s in space:
        span = s.features_per_launch or feature_len
        assert s.feature_slice <= max(1 << (span - 1).bit_length(), s.vector_width)
        assert 4 * s.feature_slice >= span
    widest = 4 if feature_len % 4 == 0 else 2 if feature_len % 2 == 0 else 1
    assert {s.vector_width for s in space} == {1, widest}
    # 16-byte vectors: 8 elements of a 2-byte dtype
    halves = schedule_space(named_graph("sorted"), feature_len, torch.bfloat16)
    widest = 8 if feature_len % 8 == 0 else widest
    assert {s.vector_width for s in halves} == {1, widest}
    # launches of 32 and 128 features where the head is longer; never for 2-byte dtypes
    launches = {s.features_per_launch for s in space}
    assert launches == {0, *(w for w in (32, 128) if w < feature_len)}
    assert all(s.features_per_launch >= s.feature_slice for s in space if s.features_per_launch)
    assert {s.features_per_launch for s in halves} == {0}
    if feature_len >= 32:
        assert {s.lanes for s in space} >= {8, 16, 32}


def _graph_with_degrees(degrees: list[int], num_src: int = 1) -> gsparse.Graph:
    rowptr = torch.tensor([0, *itertools.accumulate(degrees)])
    col = torch.zeros(int(rowptr[-1]), dtype=torch.int64)
    return gsparse.Graph.from_csr(rowptr, col, num_src=num_src)


# A reddit-like graph in miniature, as default_schedule sees it on an H100 (132 SMs of 64
# warps, 50 MiB of L2): mean degree 500, the longest row several warps' share of the grid
# (a long tail), and 232,965 source nodes, whose features overflow the L2 from 128 floats.
_H100 = {"resident_warps": 132 * 64, "l2_bytes": 50 << 20}


def _reddit_in_miniature(num_src: int = 232_965) -> gsparse.Graph:
    return _graph_with_degrees([500] * 200 + [20_000], num_src)


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
    assert str(default_schedule(_reddit_in_miniature(), feature_len, **_H100)) == chosen


def _products_in_miniature(num_src: int = 2_449_029) -> gsparse.Graph:
    """Mean degree 51: the row_transposed rules do not fire."""
    return _graph_with_degrees([51] * 2000, num_src)


@pytest.mark.parametrize(("feature_len", "chosen"), [
    (16, "edge.g128.l1.f4.v4"),  # edge_transposed: 0.98x on products-like
    (32, "edge.g64.l2.f4.v4"),
    # 8 lanes, one launch: 1.05-1.14x over 4 lanes in launches of 128
    (128, "edge.g16.l8.f4.v4"),
    (512, "edge.g16.l8.f4.v4"),
])
def test_default_on_short_rows_follows_the_h100_sweep(feature_len: int, chosen: str) -> None:
    assert str(default_schedule(_products_in_miniature(), feature_len, **_H100)) == chosen


def test_default_splits_launches_only_where_the_gathered_rows_overflow_the_l2() -> None:
    assert str(default_schedule(_products_in_miniature(2_000), 512, **_H100)) == "edge.g32.l4.f4.v4"
    # element-wise operators keep 4 lanes and launches of 128 features
    assert str(default_schedule(_products_in_miniature(), 512, dot=False, **_H100)
               ) == "edge.g32.l4.f4.v4.s128"
    # a half-precision dot cannot keep partial sums in out between launches
    half = default_schedule(_reddit_in_miniature(), 512, torch.float16, **_H100)
    assert str(half) == "edge.g32.l4.f2.v8"  # at most 16 elements per lane and pass
    assert default_schedule(_products_in_miniature(), 512, torch.float64, **_H100
                            ).features_per_launch == 128


@pytest.mark.parametrize("feature_len", [*FEATURE_LENGTHS, 6, 1000])
@pytest.mark.parametrize("vector_ok", [1, 2, 4])
def test_default_rule_gives_a_valid_schedule(feature_len: int, vector_ok: int) -> None:
    for g in (named_graph("sorted"), named_graph("empty"), _graph_with_degrees([64] * 100)):
        s = default_schedule(g, feature_len, vector_ok=vector_ok, resident_warps=4)
        assert not s.problems()
        assert s.vector_width <= vector_ok and feature_len % s.vector_width == 0
        if s.skeleton == "row":
            assert s.feature_slice >= feature_len


def test_default_skeleton_weighs_row_length_against_the_grid() -> None:
    even = _graph_with_degrees([64] * 1000)  # 64,000 edges, longest row 64
    # Long even rows, few resident warps: each warp's share dwarfs one row -> row skeleton.
    assert default_schedule(even, 16, resident_warps=100).skeleton == "row"
    # Many resident warps: a 64-edge row is more than half a warp's share -> edge skeleton.
    assert default_schedule(even, 16, resident_warps=1000).skeleton == "edge"
    # Rows too short to fill a warp's edge groups -> edge skeleton.
    short = _graph_with_degrees([2] * 30_000)
    assert default_schedule(short, 16, resident_warps=10).skeleton == "edge"
    # One row holding most edges -> edge skeleton, whatever else.
    skewed = _graph_with_degrees([50_000, *[64] * 1000])
    assert default_schedule(skewed, 16, resident_warps=100).skeleton == "edge"
    # 16 to 64 fp32 features: edge ranges only where rows are long on average (not
    # products-like); longer heads: the transposed rows, same graphs
    products_like = _graph_with_degrees([51] * 1000 + [5_000])
    for feature_len, chosen in ((16, "edge.g128.l1.f4.v4"), (32, "edge.g64.l2.f4.v4"),
                                (128, "edge.g32.l4.f4.v4")):  # one source node: fits L2
        assert default_schedule(_reddit_in_miniature(), feature_len, **_H100).skeleton in (
            "edge_transposed", "row_transposed")
        assert str(default_schedule(products_like, feature_len, **_H100)) == chosen
    assert str(default_schedule(short, 32, resident_warps=10)) == "edge.g64.l2.f4.v4"
    # element-wise operators keep the transposed cases fitted before the dot-only ones
    for feature_len, skeleton in ((16, "edge_transposed"), (32, "row_transposed"), (64, "edge"),
                                  (128, "edge"), (512, "edge")):
        schedule = default_schedule(_reddit_in_miniature(), feature_len, dot=False, **_H100)
        assert schedule.skeleton == skeleton, feature_len
    assert str(default_schedule(_reddit_in_miniature(), 16, dot=False, **_H100)
               ) == "edge_transposed.g4.l4.f1.v4.b4"
    assert str(default_schedule(_reddit_in_miniature(), 32, dot=False, **_H100)
               ) == "row_transposed.g4.l8.f1.v4.b8"
    assert default_schedule(_reddit_in_miniature(), 16, torch.float16, **_H100).skeleton == "edge"
    assert default_schedule(_reddit_in_miniature(), 32, torch.float16, **_H100).skeleton == "edge"
    # A head too long for one slice -> edge skeleton (several passes).
    assert default_schedule(even, 1000, resident_warps=100).skeleton == "edge"


def test_grid_covers_the_work_and_respects_limits() -> None:
    algorithm = SddmmAlgorithm("dot", "u", "v", Layout.FULL, Layout.FULL, torch.float32,
                               torch.int32, False)
    edge = generate(algorithm, SddmmSchedule("edge", 32, 8, 1, 4))
    assert edge.block == 256
    assert edge.grid(num_edges=1001, num_rows=10, num_heads=8, head_len=16) == (32, 1)
    assert edge.grid(num_edges=2**40, num_rows=10, num_heads=1, head_len=16)[0] == 2**31 - 1
    row = generate(algorithm, SddmmSchedule("row", 8, 4, 1, 4))
    assert row.block == 256
    assert row.grid(num_edges=1001, num_rows=17, num_heads=8, head_len=16) == (3, 8)
    assert row.grid(num_edges=1001, num_rows=17, num_heads=10**6, head_len=16) == (3, 65535)
    add = SddmmAlgorithm("add", "u", "v", Layout.FULL, Layout.FULL, torch.float32, torch.int32, False)
    assert generate(add, SddmmSchedule("row", 8, 4, 1, 4)).grid(1001, 17, 1, 100) == (3, 7)
    # edge_transposed: a warp per range of 32 / lanes * B * 8 edges, heads (dot) or
    # feature slices (element-wise) over y
    ranged = SddmmSchedule("edge_transposed", 4, 8, 1, 4, edges_per_batch=8)
    assert ranged.edges_per_warp == 256 and ranged.threads == 128
    assert generate(algorithm, ranged).grid(1025 * 256, 10, 3, 32) == (257, 3)
    assert generate(add, ranged).grid(256, 10, 1, 100) == (1, 4)
    assert SddmmSchedule("edge", 32, 8, 1, 4).edges_per_warp == 0


# --- code generation, compiled with NVRTC (no GPU) ----------------------------------------


def _algorithms(seed: int, k: int) -> list[SddmmAlgorithm]:
    layouts = [Layout.FULL, Layout.SCALAR, Layout.INDEXED]
    every = []
    for op in SDDMM_OPS:
        binop = BINARY_OPS[op]
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            for index_dtype in (torch.int32, torch.int64):
                for lt, rt, has_eid in itertools.product(TARGETS, TARGETS, (False, True)):
                    for ll in layouts if binop.uses_lhs else [None]:
                        for rl in layouts if binop.uses_rhs else [None]:
                            every.append(SddmmAlgorithm(
                                op, lt if binop.uses_lhs else None, rt if binop.uses_rhs else None,
                                ll, rl, dtype, index_dtype, has_eid))
    return _sample(list(dict.fromkeys(every)), k, seed)


def _sampled_pairs() -> list[tuple[SddmmAlgorithm, SddmmSchedule]]:
    pairs = []
    for i, feature_len in enumerate(FEATURE_LENGTHS):
        algorithms = _algorithms(seed=i, k=3)
        for j, algorithm in enumerate(algorithms):
            space = schedule_space(named_graph("sorted"), feature_len, algorithm.dtype)
            skeleton = "row" if j == 0 else "edge"
            schedule = _sample([s for s in space if s.skeleton == skeleton], 1, seed=10 * i + j)[0]
            pairs.append((algorithm, schedule))
    return pairs


@needs_nvrtc
@pytest.mark.parametrize("schedule", [SddmmSchedule("edge", 32, 8, 2, 4),
                                      SddmmSchedule("row", 8, 8, 2, 4)], ids=str)
@pytest.mark.parametrize("op", SDDMM_OPS)
def test_every_operator_compiles_on_both_skeletons(op: str, schedule: SddmmSchedule) -> None:
    binop = BINARY_OPS[op]
    algorithm = SddmmAlgorithm(op, "u" if binop.uses_lhs else None, "v" if binop.uses_rhs else None,
                               Layout.FULL if binop.uses_lhs else None,
                               Layout.FULL if binop.uses_rhs else None,
                               torch.bfloat16, torch.int64, has_eid=True)
    resources = compile_cuda(generate(algorithm, schedule).source, arch="sm_90",
                             cache=None).resources[KERNEL_NAME]
    assert resources.spill_stores == 0 and resources.stack_bytes == 0


def _transposed_pairs() -> list[tuple[SddmmAlgorithm, SddmmSchedule]]:
    """Per (head length, dtype): the transposed schedule that holds the most registers
    (the batch's sums and v's features) and a sampled other, on dots whose operands
    vary in layout, target, index width and edge ids."""
    cases = [(8, torch.float32), (32, torch.float32), (100, torch.bfloat16),
             (256, torch.float64), (512, torch.float32), (512, torch.float16)]
    layouts = [(Layout.FULL, Layout.FULL), (Layout.FULL, Layout.INDEXED),
               (Layout.INDEXED, Layout.FULL)]
    targets = [("u", "v"), ("v", "u"), ("e", "v"), ("u", "e")]
    pairs = []
    for i, (feature_len, dtype) in enumerate(cases):
        space = [s for s in schedule_space(named_graph("sorted"), feature_len, dtype)
                 if s.skeleton == "row_transposed"]
        def weight(s: SddmmSchedule) -> int:
            return s.edges_per_batch + s.features_per_thread * s.vector_width
        heaviest = max(space, key=weight)
        # and the heaviest over feature launches, where the dtype allows them
        launched = [max(launches, key=weight)
                    for launches in [[s for s in space if s.features_per_launch]] if launches]
        for j, schedule in enumerate(dict.fromkeys([heaviest, *launched,
                                                    *_sample(space, 1, seed=i)])):
            (lt, rt), (ll, rl) = targets[(i + j) % 4], layouts[(i + j) % 3]
            pairs.append((SddmmAlgorithm("dot", lt, rt, ll, rl, dtype,
                                         (torch.int32, torch.int64)[(i + j) % 2], j == 0), schedule))
    return pairs


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(("algorithm", "schedule"), _sampled_pairs() + _transposed_pairs(), ids=str)
def test_sampled_space_compiles_without_spills(arch, algorithm, schedule) -> None:
    program = generate(algorithm, schedule)
    binary = compile_cuda(program.source, arch=arch, cache=None)
    resources = binary.resources[program.kernel_name]
    assert resources.spill_stores == 0 and resources.spill_loads == 0, binary.log
    # No stack either: the transposed skeleton's batch of sums must stay in registers.
    assert resources.stack_bytes == 0, binary.log
    # __launch_bounds__(threads) keeps registers within what one block needs to launch.
    assert resources.registers * schedule.threads <= 65536


def test_transposed_dot_source() -> None:
    algorithm = SddmmAlgorithm("dot", "u", "v", Layout.FULL, Layout.FULL, torch.float16,
                               torch.int64, has_eid=True)
    source = generate(algorithm, SddmmSchedule("row_transposed", 4, 32, 1, 4,
                                               edges_per_batch=8)).source
    assert "constexpr int B = 8;" in source and "A sums[B];" in source
    assert "sums[i] = keep + __shfl_xor_sync(mask, give, half, LANES);" in source
    assert "sums[0] += __shfl_xor_sync(mask, sums[0], offset, LANES);" in source
    # lane j writes edge j of the batch, in user edge order, rounded once from fp32
    assert "if (lane < B && p0 + lane < end) {" in source
    assert "const long long i = eid[p] * num_heads + h;" in source
    assert "out[i] = gs::from_acc<T>(accumulate ? gs::to_acc(out[i]) + sums[0] : sums[0]);" in source
    assert "using A = float;" in source and "A b_cache[K][V];" in source
    assert "partial += __shfl_xor_sync" not in source and "dst[p]" not in source
    # source indices are loaded a batch ahead: a batch's gathers read them from registers
    assert source.count("next_u[j] = p < end ? col[p] : 0;") == 2
    assert "const long long u = batch_u[j];" in source and "u = col[p]" not in source
    # other operators have no reduction to transpose: they run the row skeleton's code
    add = SddmmAlgorithm("add", "u", "v", Layout.FULL, Layout.FULL, torch.float32, torch.int32, False)
    transposed = generate(add, SddmmSchedule("row_transposed", 8, 4, 1, 4, edges_per_batch=4))
    assert "sums" not in transposed.source
    assert transposed.grid(1001, 17, 1, 100) == (3, 7)  # chunks of the row skeleton
    assert transposed.grid(1001, 17, 3, 100) == (3, 7)
    dot = generate(algorithm, SddmmSchedule("row_transposed", 4, 32, 1, 4, edges_per_batch=8))
    assert dot.block == 128 and dot.grid(1001, 17, 3, 128) == (5, 3)  # rows x heads


def test_edge_transposed_source() -> None:
    algorithm = SddmmAlgorithm("dot", "u", "v", Layout.FULL, Layout.FULL, torch.float32,
                               torch.int32, has_eid=True)
    source = generate(algorithm, SddmmSchedule("edge_transposed", 4, 8, 1, 4,
                                               edges_per_batch=8)).source
    # a warp walks a range of 256 CSR positions, striding over what the grid leaves
    assert "constexpr long long RANGE = STRIDE * 8;" in source
    assert "start += range_stride" in source and "rowptr[" not in source
    # both indices a batch ahead; v read per edge, not cached per row
    assert source.count("next_u[j] = p < end ? col[p] : 0;") == 2
    assert source.count("next_v[j] = p < end ? dst[p] : 0;") == 2
    assert "const long long v = batch_v[j];" in source and "b_cache" not in source
    assert "sums[i] = keep + __shfl_xor_sync(mask, give, half, LANES);" in source
    assert "const long long i = eid[p] * num_heads + h;" in source
    assert "out[i] = gs::from_acc<T>(accumulate ? gs::to_acc(out[i]) + sums[0] : sums[0]);" in source
    # element-wise operators walk the same batches and store each edge's messages
    mul = SddmmAlgorithm("mul", "u", "e", Layout.FULL, Layout.FULL, torch.float32,
                         torch.int64, has_eid=True)
    elementwise = generate(mul, SddmmSchedule("edge_transposed", 4, 4, 1, 4,
                                              edges_per_batch=4)).source
    assert "sums" not in elementwise and "next_v" not in elementwise
    assert "const long long e = eid[p];" in elementwise
    assert "gs::store<V>(out + e * head_len + f, m);" in elementwise


def _transposed_reduce_on_the_cpu(partials: torch.Tensor, batch: int) -> torch.Tensor:
    """``_TRANSPOSED_REDUCE`` step for step over ``[lanes, batch]`` partial sums: what each
    lane holds in ``sums[0]`` at the end."""
    lanes = partials.shape[0]
    sums = [list(row) for row in partials.tolist()]
    step = 1
    while step < batch:
        half = batch // 2 // step
        sent = [[(s[i] if lane & half else s[i + half]) for i in range(half)]
                for lane, s in enumerate(sums)]
        sums = [[(s[i + half] if lane & half else s[i]) + sent[lane ^ half][i]
                 for i in range(half)] for lane, s in enumerate(sums)]
        step *= 2
    offset = batch
    while offset < lanes:
        sums = [[s[0] + sums[lane ^ offset][0]] for lane, s in enumerate(sums)]
        offset *= 2
    return torch.tensor([s[0] for s in sums], dtype=torch.float64)


@pytest.mark.parametrize(("lanes", "batch"), [(8, 2), (8, 8), (16, 8), (32, 8), (32, 16), (32, 32)])
def test_transposed_butterfly_leaves_edge_j_in_lane_j(lanes: int, batch: int) -> None:
    # The scheme of the generated reduction, replayed on the CPU with exact integers.
    partials = torch.randint(-1000, 1000, (lanes, batch), dtype=torch.float64)
    held = _transposed_reduce_on_the_cpu(partials, batch)
    totals = partials.sum(0)
    assert torch.equal(held, totals.repeat(lanes // batch))


def test_generated_source_reads_well() -> None:
    algorithm = SddmmAlgorithm("dot", "u", "v", Layout.FULL, Layout.INDEXED, torch.float16,
                               torch.int32, has_eid=True)
    schedule = SddmmSchedule("edge", 32, 8, 2, 2)
    source = generate(algorithm, schedule).source
    assert source.startswith("// gsparse g-SDDMM: dot lhs:u:full/rhs:v:indexed float16 int32 eid")
    assert schedule.to_json() in source
    assert "partial += __shfl_xor_sync(mask, partial, offset, LANES);" in source
    assert "rhs_offset[f + i]" in source
    # launches after the first add their slice's products to the sum in out
    assert "out[i] = gs::from_acc<T>(accumulate ? gs::to_acc(out[i]) + partial : partial);" in source
    assert "for (int d0 = d_begin; d0 < d_end; d0 += SLICE)" in source
    # the row skeleton keeps v's features in registers and reads them from there per edge
    row = generate(algorithm, SddmmSchedule("row", 8, 8, 2, 2)).source
    assert "A b_cache[K][V];" in row and "const A (&b)[V] = b_cache[k];" in row
    assert "dst[p]" not in row
    # every skeleton adds to earlier launches' sums, and covers the launch's features only
    for skeleton, batch in (("row", 0), ("row_transposed", 8), ("edge_transposed", 8)):
        sliced = generate(algorithm, SddmmSchedule(skeleton, 4, 8, 2, 2, 32, batch)).source
        assert "accumulate ? gs::to_acc(out[i]) +" in sliced
        assert "const int base = h * head_len + d_begin;" in sliced
        assert "const int limit = h * head_len + d_end;" in sliced


def test_edge_ids_and_offsets_are_64_bit() -> None:
    algorithm = SddmmAlgorithm("mul", "e", "u", Layout.FULL, Layout.FULL, torch.float32,
                               torch.int32, has_eid=True)
    for skeleton in ("edge", "row"):
        source = generate(algorithm, SddmmSchedule(skeleton, 8, 32)).source
        assert "const long long e = eid[p];" in source
        assert "const long long u = col[p];" in source
        assert "gs::store<V>(out + e * head_len + f, m);" in source


def test_algorithm_rejects_operands_the_op_does_not_read() -> None:
    with pytest.raises(ValueError, match="ignores rhs"):
        SddmmAlgorithm("copy_lhs", "u", "v", Layout.FULL, Layout.FULL, torch.float32,
                       torch.int32, False)
    with pytest.raises(ValueError, match="reads lhs"):
        SddmmAlgorithm("add", None, "v", None, Layout.FULL, torch.float32, torch.int32, False)
    with pytest.raises(ValueError, match="lhs_target must be one of"):
        SddmmAlgorithm("add", "w", "v", Layout.FULL, Layout.FULL, torch.float32, torch.int32, False)


# --- launch decisions that need no GPU ----------------------------------------------------


def test_no_edges_launch_nothing() -> None:
    g = named_graph("empty")  # on the CPU: a launch would fail, so none may happen
    x = torch.randn(g.num_src, 8)
    y = torch.randn(g.num_dst, 8)
    assert run_sddmm(g, "dot", x, y, "u", "v", (1,)).shape == (0, 1)
    assert run_sddmm(g, "add", x, y, "u", "v", (8,)).shape == (0, 8)


def test_dot_over_nothing_is_zero() -> None:
    g = named_graph("sorted")
    x = torch.randn(g.num_src, 3, 0)
    out = run_sddmm(g, "dot", x, torch.randn(g.num_dst, 3, 0), "u", "v", (3, 1))
    assert torch.equal(out, torch.zeros(g.num_edges, 3, 1))


def test_forced_schedule_needing_wider_vectors_than_the_data_allows() -> None:
    g = named_graph("sorted")
    # One element past an aligned allocation: rows of 8 floats start 4 bytes off 16.
    x = torch.randn(g.num_src * 8 + 1)[1:].view(g.num_src, 8)
    y = torch.randn(g.num_dst, 8)
    with pytest.raises(ValueError, match="allow at most 1"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,), SddmmSchedule("edge", 32, 8, 1, 2))
    with pytest.raises(ValueError, match="allow at most 2"):  # 6 features per head
        run_sddmm(g, "add", torch.randn(g.num_src, 6), torch.randn(g.num_dst, 6), "u", "v",
                  (6,), SddmmSchedule("edge", 32, 8, 1, 4))


def test_forced_launch_slices_need_a_wide_dtype_for_dot() -> None:
    g = named_graph("sorted")
    x, y = torch.randn(g.num_src, 64).half(), torch.randn(g.num_dst, 64).half()
    with pytest.raises(ValueError, match="round its partial sums"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,), SddmmSchedule("edge", 32, 8, 1, 4, 32))


def test_forced_row_schedule_must_hold_a_dot_head() -> None:
    g = named_graph("sorted")
    x, y = torch.randn(g.num_src, 100), torch.randn(g.num_dst, 100)
    with pytest.raises(ValueError, match="cannot hold the 100 features of a dot head"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,), SddmmSchedule("row", 8, 8, 2, 4))
    with pytest.raises(ValueError, match="cannot hold the 100 features of a dot head"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,),
                  SddmmSchedule("row_transposed", 4, 8, 2, 4, edges_per_batch=8))
    # launches of 64 features fit the slice; 128 would not
    with pytest.raises(ValueError, match="cannot hold the 100 features of a dot head"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,), SddmmSchedule("row", 8, 8, 2, 4, 128))


def test_forced_schedule_is_validated() -> None:
    g = named_graph("sorted")
    x, y = torch.randn(g.num_src, 8), torch.randn(g.num_dst, 8)
    with pytest.raises(ValueError, match="lanes must be one of"):
        run_sddmm(g, "add", x, y, "u", "v", (8,), SddmmSchedule(lanes=5))
    with pytest.raises(TypeError, match="must be an SddmmSchedule"):
        run_sddmm(g, "add", x, y, "u", "v", (8,), {"lanes": 8})


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Kernel lookups counted; launches recorded, not run (no GPU needed)."""
    return record_kernel_lookups(monkeypatch, sddmm_kernels)


def test_a_repeated_call_reuses_its_launch_plan_and_passes_the_new_operands(recorded) -> None:
    g = named_graph("random")
    x1, x2 = torch.randn(g.num_src, 64), torch.randn(g.num_src, 64)
    y = torch.randn(g.num_dst, 64)
    out1 = run_sddmm(g, "dot", x1, y, "u", "v", (1,))
    out2 = run_sddmm(g, "dot", x2, y, "u", "v", (1,))
    run_sddmm(g, "dot", x2, y, "u", "v", (1,), SddmmSchedule("edge", 32, 8, 1, 1, 32))
    assert recorded["kernels"] == 2
    (_, _, first), (_, _, second), *sliced = recorded["kernel"].launches
    assert first[4] is x1 and second[4] is x2 and first[8] is out1 and second[8] is out2
    assert [a.value for a in second[-9:]] == [g.num_dst, g.num_edges, 1, 64, 64, 64, 0, 64, 0]
    # features_per_launch 32: two launches, the second adding to the first's partial sums
    assert [[a.value for a in args[-3:]] for _, _, args in sliced] == [[0, 32, 0], [32, 64, 1]]


# --- GPU: results against the float64 reference -------------------------------------------

gpu = pytest.mark.gpu


@pytest.fixture
def poisoned(monkeypatch: pytest.MonkeyPatch) -> list:
    """Outputs start as NaN: every element must be written. Records each allocation, so a
    test can tell that the generated kernels (not another backend) computed its result."""
    calls = []

    def allocate(shape, dtype, device):
        calls.append(shape)
        return torch.full(shape, float("nan"), dtype=dtype, device=device)

    monkeypatch.setattr(sddmm_kernels, "_allocate", allocate)
    return calls


_ROWS = {"u": lambda g: g.num_src, "v": lambda g: g.num_dst, "e": lambda g: g.num_edges}


def _operands(g, op, lhs_target, rhs_target, lhs_shape, rhs_shape, dtype, seed):
    binop = BINARY_OPS[op]
    lhs = (random_features((_ROWS[lhs_target](g), *lhs_shape), dtype, seed)
           if binop.uses_lhs else None)
    rhs = (random_features((_ROWS[rhs_target](g), *rhs_shape), dtype, seed + 1,
                           away_from_zero=op == "div")
           if binop.uses_rhs else None)
    return lhs, rhs


def _tolerance(dtype: torch.dtype) -> dict:
    return {
        torch.float16: {"rtol": 2e-3, "atol": 2e-3},
        torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2},
        torch.float32: {"rtol": 1e-5, "atol": 1e-4},
        torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    }[dtype]


def _check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target, schedule=None, *,
           expected=None) -> None:
    launched = len(poisoned)
    out = gsparse.gsddmm(g.to("cuda"), op,
                         None if lhs is None else lhs.cuda(), None if rhs is None else rhs.cuda(),
                         lhs_target, rhs_target, schedule=schedule)
    assert len(poisoned) == launched + 1, "the CUDA backend did not run gsparse.kernels.sddmm"
    if expected is None:
        expected = gsddmm_ref(g, op, lhs, rhs, lhs_target, rhs_target)
    dtype = (lhs if lhs is not None else rhs).dtype
    torch.testing.assert_close(
        out.cpu().double(), expected.to(dtype).double(), **_tolerance(dtype),
        msg=lambda m: f"{lhs_target}_{op}_{rhs_target} {schedule}: {m}")


# (lhs feature shape, rhs feature shape): full/full, full/scalar, broadcast both ways.
SHAPES = {
    "full": ((3, 8), (3, 8)),
    "scalar": ((3, 8), (1, 1)),
    "indexed": ((1, 8), (3, 1)),
}
DOT_SHAPES = {  # the last dimension is reduced
    "full": ((3, 8), (3, 8)),
    "scalar": ((1, 1), (3, 1)),
    "indexed": ((1, 8), (3, 8)),
}


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("op", SDDMM_OPS)
def test_every_operator_target_and_dtype_matches_reference(poisoned, op, dtype) -> None:
    g = named_graph("random")
    shapes = DOT_SHAPES if op == "dot" else SHAPES
    # every pair of targets on full operands; broadcasting on a spread of pairs
    cases = [(pair, "full") for pair in itertools.product(TARGETS, TARGETS)]
    cases += [(("u", "v"), "scalar"), (("e", "u"), "scalar"), (("v", "e"), "indexed"),
              (("u", "u"), "indexed")]
    for i, ((lhs_target, rhs_target), shape) in enumerate(cases):
        lhs_shape, rhs_shape = shapes[shape]
        lhs, rhs = _operands(g, op, lhs_target, rhs_target, lhs_shape, rhs_shape, dtype, seed=i)
        _check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target)


@gpu
@pytest.mark.parametrize("kind", ["random", "sorted", "square", "int64"])
@pytest.mark.parametrize("feature_len", [1, 3, 16, 64, 100, 256])
def test_sampled_schedules_match_reference(poisoned, kind, feature_len) -> None:
    g = named_graph(kind)
    space = schedule_space(g, feature_len)
    launches = [s for s in space if s.features_per_launch]
    schedules = [*_sample([s for s in space if s.skeleton == "edge"], 3, seed=feature_len),
                 *_sample(launches, 1, seed=feature_len),
                 *_sample([s for s in launches if s.skeleton == "row_transposed"], 1,
                          seed=feature_len),
                 *_sample([s for s in space if s.skeleton == "row"], 2, seed=feature_len),
                 *_sample([s for s in space if s.skeleton == "edge_transposed"], 2,
                          seed=feature_len)]
    cases = [("dot", "u", "v", (feature_len,), (feature_len,)),
             ("dot", "e", "u", (2, feature_len), (1, feature_len)),  # two heads
             ("add", "u", "v", (feature_len,), (feature_len,)),
             ("mul", "u", "e", (feature_len,), (1,)),
             ("sub", "v", "e", (feature_len,), (feature_len,)),
             ("copy_rhs", "u", "v", (feature_len,), (feature_len,))]
    for i, schedule in enumerate(schedules):
        for op, lhs_target, rhs_target, lhs_shape, rhs_shape in cases:
            lhs, rhs = _operands(g, op, lhs_target, rhs_target, lhs_shape, rhs_shape,
                                 torch.float32, seed=i)
            _check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target, schedule)


@gpu
def test_hundred_thousand_edge_row(poisoned) -> None:
    g = named_graph("long_row")
    space = schedule_space(g, 64)
    schedules = [None, *_sample([s for s in space if s.skeleton == "row"], 3, seed=1),
                 *_sample([s for s in space if s.skeleton == "edge"], 3, seed=1),
                 *_sample([s for s in space if s.skeleton == "edge_transposed"], 3, seed=1)]
    for op, lhs_target, rhs_target, rhs_shape in (("dot", "u", "v", (64,)),
                                                  ("mul", "u", "e", (1,))):
        lhs, rhs = _operands(g, op, lhs_target, rhs_target, (64,), rhs_shape, torch.float32, 3)
        expected = gsparse.gsddmm(g, op, lhs.double(), rhs.double(), lhs_target, rhs_target)
        for schedule in schedules:
            _check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target, schedule, expected=expected)


@gpu
def test_graph_without_edges(poisoned) -> None:
    g = named_graph("empty").to("cuda")
    x = torch.randn(g.num_src, 16, device="cuda")
    y = torch.randn(g.num_dst, 16, device="cuda")
    schedules = [None, *_sample(schedule_space(g, 16), 4, seed=2)]
    for op in ("dot", "add"):
        for schedule in schedules:
            out = gsparse.gsddmm(g, op, x, y, "u", "v", schedule=schedule)
            assert out.shape == (0, 1 if op == "dot" else 16)
    assert len(poisoned) == 2 * len(schedules)


@gpu
def test_multi_head_attention_shapes(poisoned) -> None:
    # GAT: [N, 8, 16] features; per-head scores u_dot_v -> [E, 8, 1], u_add_v -> [E, 8, 16].
    g = named_graph("random")
    for op in ("dot", "add"):
        lhs, rhs = _operands(g, op, "u", "v", (8, 16), (8, 16), torch.float32, seed=5)
        for schedule in [None, *_sample(schedule_space(g, 16 if op == "dot" else 128), 6, seed=5)]:
            _check(poisoned, g, op, lhs, rhs, "u", "v", schedule)


@gpu
def test_misaligned_operands_fall_back_to_scalar_loads(poisoned) -> None:
    g = named_graph("random")
    base = random_features((g.num_src * 8 + 1,), torch.float32, 0)
    x = base[1:].view(g.num_src, 8)  # 4 bytes past a 16-byte boundary
    y = random_features((g.num_dst, 8), torch.float32, 1)
    for op in ("dot", "mul"):
        _check(poisoned, g, op, x, y, "u", "v")
    with pytest.raises(ValueError, match="allow at most 1"):
        gsparse.gsddmm(g.to("cuda"), "mul", base.cuda()[1:].view(g.num_src, 8), y.cuda(),
                       "u", "v", schedule=SddmmSchedule("edge", 32, 8, 1, 4))


def _transposed(g: gsparse.Graph, feature_len: int, dtype: torch.dtype,
                skeleton: str = "row_transposed") -> list[SddmmSchedule]:
    """Every ``row_transposed`` schedule of the space, or 3 sampled ``edge_transposed`` ones
    (a larger space: batches of 4 too, from 4 lanes)."""
    space = [s for s in schedule_space(g, feature_len, dtype) if s.skeleton == skeleton]
    return space if skeleton == "row_transposed" else _sample(space, 3, seed=feature_len)


@gpu
@pytest.mark.parametrize("skeleton", ["row_transposed", "edge_transposed"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["random", "sorted", "int64"])
@pytest.mark.parametrize("feature_len", [8, 16, 32, 100, 128, 512])
def test_transposed_dot_matches_reference(poisoned, kind, feature_len, dtype, skeleton) -> None:
    # "random" and "int64" have empty rows, rows shorter than a batch and edge ids unlike
    # CSR positions; "sorted" writes edges in CSR order. Half dtypes accumulate in fp32.
    # edge_transposed ranges end inside batches and rows run across ranges.
    g = named_graph(kind)
    cases = [("u", "v", (feature_len,), (feature_len,)),
             ("u", "v", (4, feature_len), (4, feature_len)),  # heads: out [E, 4, 1]
             ("v", "u", (1, feature_len), (3, feature_len)),  # lhs broadcast over heads
             ("e", "v", (2, feature_len), (2, feature_len)),
             ("u", "e", (feature_len,), (feature_len,))]
    for i, schedule in enumerate(_transposed(g, feature_len, dtype, skeleton)):
        for lhs_target, rhs_target, lhs_shape, rhs_shape in cases:
            lhs, rhs = _operands(g, "dot", lhs_target, rhs_target, lhs_shape, rhs_shape, dtype, i)
            _check(poisoned, g, "dot", lhs, rhs, lhs_target, rhs_target, schedule)


@gpu
def test_transposed_dot_on_a_hundred_thousand_edge_row(poisoned) -> None:
    g = named_graph("long_row")
    lhs, rhs = _operands(g, "dot", "u", "v", (64,), (64,), torch.float32, 4)
    expected = gsparse.gsddmm(g, "dot", lhs.double(), rhs.double(), "u", "v")
    for schedule in [*_transposed(g, 64, torch.float32),
                     *_transposed(g, 64, torch.float32, "edge_transposed")]:
        _check(poisoned, g, "dot", lhs, rhs, "u", "v", schedule, expected=expected)


@gpu
def test_transposed_skeleton_without_edges_and_for_other_operators(poisoned) -> None:
    empty = named_graph("empty").to("cuda")
    x = torch.randn(empty.num_src, 32, device="cuda")
    y = torch.randn(empty.num_dst, 32, device="cuda")
    transposed = [*_transposed(empty, 32, torch.float32),
                  *_transposed(empty, 32, torch.float32, "edge_transposed")]
    for schedule in transposed:
        assert gsparse.gsddmm(empty, "dot", x, y, "u", "v", schedule=schedule).shape == (0, 1)
    # element-wise operators have no reduction to transpose: they run the row code on
    # row_transposed and walk edge_transposed's batches without it
    g = named_graph("random")
    for schedule in [*_sample(_transposed(g, 32, torch.float32), 3, seed=7),
                     *_transposed(g, 32, torch.float32, "edge_transposed")]:
        for op, lhs_target, rhs_target, rhs_shape in (("add", "u", "v", (32,)),
                                                      ("mul", "e", "u", (1,))):
            lhs, rhs = _operands(g, op, lhs_target, rhs_target, (32,), rhs_shape,
                                 torch.float32, seed=7)
            _check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target, schedule)
