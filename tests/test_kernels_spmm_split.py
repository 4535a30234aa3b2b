"""g-SpMM with long rows split into chunks (``SpmmSchedule.row_split``): the work list,
code generation (NVRTC, no GPU) and GPU results against the float64 reference."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gsparse
from gsparse.algebra import REDUCERS, SPMM_OPS
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels.common import Layout
from gsparse.kernels.spmm import SpmmSchedule, default_schedule, schedule_space
from gsparse.kernels.spmm_codegen import (
    SPLIT_KERNEL_NAME,
    SPLIT_MERGE_KERNEL_NAME,
    SpmmAlgorithm,
    generate,
    generate_split,
)
from gsparse.kernels.spmm_schedule import row_splits_for, schedule_grid
from gsparse.runtime import compile_cuda
from gsparse.testing.reference import gspmm_ref

from graphs import graphs, named_graph, random_features
from test_kernels_spmm import (  # noqa: F401 - poisoned is a fixture
    FEATURE_LENGTHS,
    SHAPES,
    _algorithms,
    _check,
    _operands,
    _sample,
    needs_nvrtc,
    poisoned,
)


def skewed_graph(split: int, seed: int = 0) -> gsparse.Graph:
    """Rows of every length the work list treats differently for chunks of ``split`` edges:
    empty, exactly ``split``, ``split + 1``, exactly ``2 * split``, ``30 * split + 7`` (31
    chunks), then 60 rows of 0 to 7 edges. Edges in random order: edge ids differ from CSR
    positions."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.cat([torch.tensor([0, split, split + 1, 0, 2 * split, 30 * split + 7]),
                         torch.randint(0, 8, (60,), generator=gen)])
    dst = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    src = torch.randint(0, 150, (dst.numel(),), generator=gen)
    order = torch.randperm(dst.numel(), generator=gen)
    edge_index = torch.stack([src[order], dst[order]])
    return gsparse.Graph.from_edge_index(edge_index, 150, lengths.numel())


def _assert_partition(g: gsparse.Graph, work, split: int) -> None:
    """Every CSR position lies in exactly one item; items of a row are disjoint, in order."""
    rowptr = g.rowptr.long()
    row, start = work.row.long(), work.start.long()
    end = torch.minimum(start + split, rowptr[row + 1])
    covered = torch.zeros(g.num_edges, dtype=torch.int64)
    for s, e in zip(start.tolist(), end.tolist()):
        covered[s:e] += 1
    assert (covered == 1).all()
    rows = row[work.num_chunks:].tolist() + work.split_row.long().tolist()
    assert sorted(rows) == list(range(g.num_dst))  # each row whole or split, once
    # whole rows start at their first edge; chunks of row r are consecutive items
    assert torch.equal(start[work.num_chunks:], rowptr[row[work.num_chunks:]])
    first = work.split_first.long()
    for r, v in enumerate(work.split_row.long().tolist()):
        items = slice(int(first[r]), int(first[r + 1]))
        assert (row[items] == v).all()
        assert start[items].tolist() == list(range(int(rowptr[v]), int(rowptr[v + 1]), split))


# --- the work list ------------------------------------------------------------------------


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("degree_sorted", [False, True])
def test_work_list_cuts_only_rows_longer_than_the_split(index_dtype, degree_sorted) -> None:
    split = 1024
    lengths = torch.tensor([0, split, split + 1, 0, 100_000, 1, 2 * split])
    dst = torch.repeat_interleave(torch.arange(7), lengths)
    g = gsparse.Graph.from_edge_index(torch.stack([dst % 13, dst]), 13, 7)
    g = g.with_index_dtype(index_dtype)
    work = spmm_kernels._work_list(g, split, degree_sorted)
    parts = (work.row, work.start, work.split_row, work.split_first)
    assert {t.dtype for t in parts} == {index_dtype}
    rowptr = [0, *torch.cumsum(lengths, 0).tolist()]
    chunks = {2: 2, 4: 98, 6: 2}  # ceil(length / split) for the rows longer than split
    assert work.split_row.tolist() == list(chunks)
    assert work.split_first.tolist() == [0, 2, 100, 102]
    assert work.num_chunks == 102 and work.num_items == 102 + 4
    assert work.row[:102].tolist() == [r for r, n in chunks.items() for _ in range(n)]
    starts = [rowptr[r] + k * split for r, n in chunks.items() for k in range(n)]
    assert work.start[:102].tolist() == starts
    whole = [1, 5, 0, 3] if degree_sorted else [0, 1, 3, 5]  # longest first, ties in row order
    assert work.row[102:].tolist() == whole
    assert work.start[102:].tolist() == [rowptr[r] for r in whole]
    _assert_partition(g, work, split)
    assert spmm_kernels._work_list(g, split, degree_sorted) is work  # built once per graph


def test_work_list_of_a_graph_without_long_rows_is_its_rows() -> None:
    g = named_graph("empty")
    work = spmm_kernels._work_list(g, 32, False)
    assert work.num_chunks == 0 and work.split_row.numel() == 0
    assert work.row.tolist() == list(range(g.num_dst)) and work.split_first.tolist() == [0]


@settings(max_examples=60, deadline=None)
@given(g=graphs(max_nodes=8, max_edges=120), split=st.sampled_from([32, 64]),
       degree_sorted=st.booleans())
def test_work_list_partitions_every_graph(g, split, degree_sorted) -> None:
    _assert_partition(g, spmm_kernels._work_list(g, split, degree_sorted), split)


# --- schedules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("knobs", "reason"),
    [
        ({"row_split": 1000}, "row_split must be 0 or a power of two from 32 to 65536"),
        ({"row_split": 16}, "row_split must be 0 or a power of two"),
        ({"row_split": 2 ** 17}, "row_split must be 0 or a power of two"),
        ({"feature_lanes": 1, "edge_lanes": 32, "column_tile": 4096, "row_split": 256},
         "set at most one of them"),
    ],
)
def test_invalid_split_schedules_say_why(knobs: dict, reason: str) -> None:
    schedule = SpmmSchedule(**knobs)
    assert any(reason in problem for problem in schedule.problems())
    with pytest.raises(ValueError, match=reason):
        SpmmSchedule.from_json(schedule.to_json())


def test_split_schedules_round_trip_and_name_their_chunks() -> None:
    for schedule in schedule_space(named_graph("long_row"), 64):
        assert SpmmSchedule.from_json(schedule.to_json()) == schedule
    schedule = SpmmSchedule(feature_lanes=8, edge_lanes=4, row_split=1024, degree_sorted=True)
    assert str(schedule).endswith("+sorted+split1024")
    # records written before the knob existed still load, unsplit
    assert SpmmSchedule.from_json('{"feature_lanes": 8, "edge_lanes": 4}').row_split == 0


def test_chunk_lengths_swept_only_where_the_longest_row_is_far_longer_than_the_mean() -> None:
    assert row_splits_for(mean_degree=10.0, max_degree=100_000) == [256, 1024]
    assert row_splits_for(mean_degree=492.0, max_degree=21_657) == [1024]  # reddit
    assert row_splits_for(mean_degree=50.0, max_degree=2_000) == []  # longest < 8 chunks
    assert row_splits_for(mean_degree=5_000.0, max_degree=10 ** 6) == [16384]


def test_space_splits_the_degree_sorted_schedules_of_skewed_graphs_only() -> None:
    skewed = named_graph("long_row")  # mean 2,550 edges, one row of 100,061
    space = schedule_space(skewed, 64)
    split = [s for s in space if s.row_split]
    assert {s.row_split for s in split} == {4096}
    assert all(s.degree_sorted and not s.problems() for s in split)
    assert len(split) == sum(1 for s in space if s.degree_sorted and not s.row_split)
    assert not any(s.row_split for s in schedule_space(named_graph("random"), 64))
    # The default splits too (the H100 sweep's winners), at a length the space offers.
    assert default_schedule(skewed, 64).row_split == 4096
    assert default_schedule(named_graph("random"), 64).row_split == 0


# --- code generation, compiled with NVRTC (no GPU) ----------------------------------------


def _split_pairs() -> list[tuple[SpmmAlgorithm, SpmmSchedule]]:
    pairs = []
    splits = (32, 256, 4096, 65536)
    for i, feature_len in enumerate(FEATURE_LENGTHS):
        for j, schedule in enumerate(_sample(schedule_grid(feature_len, 4), 2, seed=100 + i)):
            split = dataclasses.replace(schedule, row_split=splits[(i + j) % 4])
            pairs.append((_algorithms(seed=1000 + 10 * i + j, k=1)[0], split))
    return pairs


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(("algorithm", "schedule"), _split_pairs(), ids=str)
def test_split_programs_compile_without_spills(arch, algorithm, schedule) -> None:
    binary = compile_cuda(generate_split(algorithm, schedule), arch=arch, cache=None)
    for name in (SPLIT_KERNEL_NAME, SPLIT_MERGE_KERNEL_NAME):
        resources = binary.resources[name]
        assert resources.spill_stores == 0 and resources.spill_loads == 0, binary.log
        assert resources.stack_bytes == 0, binary.log
    assert binary.resources[SPLIT_KERNEL_NAME].registers * schedule.threads <= 65536


def test_each_generator_takes_only_its_own_skeleton() -> None:
    algorithm = SpmmAlgorithm("copy_lhs", "sum", Layout.FULL, None, torch.float32, torch.int32,
                              has_eid=False)
    with pytest.raises(ValueError, match="generate_split builds its program"):
        generate(algorithm, SpmmSchedule(row_split=256))
    with pytest.raises(ValueError, match="splits no rows"):
        generate_split(algorithm, SpmmSchedule())


def test_split_source_reads_well() -> None:
    algorithm = SpmmAlgorithm("mul", "max", Layout.FULL, Layout.SCALAR, torch.float16,
                              torch.int64, has_eid=True, with_arg=True)
    schedule = SpmmSchedule(feature_lanes=8, edge_lanes=4, row_split=1024)
    source = generate_split(algorithm, schedule)
    assert source.startswith("// gsparse g-SpMM, split rows: mul.max lhs:full/rhs:scalar float16")
    assert schedule.to_json() in source
    assert "constexpr long long SPLIT = 1024;" in source
    assert f"void {SPLIT_MERGE_KERNEL_NAME}(" in source


# --- GPU: results against the float64 reference -------------------------------------------

gpu = pytest.mark.gpu

# Chunks of 32 or 64 edges, so that small graphs have many; the knobs vary around them:
# several feature slices (blockIdx.y), edge lanes merged by shuffles, edges in flight,
# index tiles, and the whole rows in either order.
SPLIT_SCHEDULES = [
    SpmmSchedule(rows_per_block=8, feature_lanes=32, row_split=32),
    SpmmSchedule(rows_per_block=8, feature_lanes=4, edge_lanes=8, vector_width=2,
                 row_split=32, degree_sorted=True),
    SpmmSchedule(rows_per_block=16, feature_lanes=4, edge_lanes=4, vector_width=2,
                 outputs_per_thread=2, nnz_tile=4, row_split=64),
    SpmmSchedule(rows_per_block=32, feature_lanes=8, outputs_per_thread=4, index_tile=True,
                 row_split=32, degree_sorted=True),
]


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("reduce", list(REDUCERS))
def test_split_rows_match_reference(poisoned, reduce, dtype) -> None:
    graph = skewed_graph(32)
    for i, op in enumerate(SPMM_OPS):
        g = graph.with_index_dtype(torch.int64 if i % 2 else torch.int32)
        for j, (lhs_shape, rhs_shape) in enumerate(SHAPES.values()):
            lhs, rhs = _operands(g, op, lhs_shape, rhs_shape, dtype, seed=3 * i + j)
            schedule = SPLIT_SCHEDULES[(i + j) % len(SPLIT_SCHEDULES)]
            # copy_rhs of a scalar per edge has one feature: no wider vectors
            features = math.prod((rhs if op == "copy_rhs" else lhs).shape[1:]) if op.startswith("copy") \
                else math.prod(torch.broadcast_shapes(lhs.shape[1:], rhs.shape[1:]))
            if features % schedule.vector_width:
                schedule = dataclasses.replace(schedule, vector_width=1)
            _check(g, op, reduce, lhs, rhs, schedule)


@gpu
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_split_arg_indices_match_one_pass(poisoned, reduce, index_dtype) -> None:
    g = skewed_graph(32, seed=1).with_index_dtype(index_dtype).to("cuda")
    gen = torch.Generator().manual_seed(2)
    # few distinct values, so ties across chunks are common and the tie rule is exercised
    lhs = torch.randint(-2, 3, (g.num_src, 2, 8), generator=gen).float().cuda()
    rhs = torch.randint(1, 3, (g.num_edges, 1, 8), generator=gen).float().cuda()
    for schedule in SPLIT_SCHEDULES:
        one_pass = dataclasses.replace(schedule, row_split=0)
        split = spmm_kernels.run_spmm(g, "mul", reduce, lhs, rhs, (2, 8), schedule, with_arg=True)
        whole = spmm_kernels.run_spmm(g, "mul", reduce, lhs, rhs, (2, 8), one_pass, with_arg=True)
        for name, a, b in zip(("out", "arg_u", "arg_e"), split, whole):
            assert torch.equal(a, b), f"{reduce} {schedule}: {name}"


@gpu
@pytest.mark.parametrize("value", [1.0, float("-inf"), float("inf")])
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_split_rows_of_equal_messages_name_their_first_edge(poisoned, reduce, value) -> None:
    g = skewed_graph(32, seed=2)
    cuda = g.to("cuda")
    lhs = torch.full((g.num_src, 4), value, device="cuda")
    rhs = torch.ones(g.num_edges, 4, device="cuda")
    degree = g.in_degrees().long()
    first_edge = g.eid.long()[g.rowptr[:-1].long().clamp(max=g.num_edges - 1)]
    expected_e = torch.where(degree > 0, first_edge, -1)[:, None].expand(-1, 4)
    for schedule in SPLIT_SCHEDULES:
        out, arg_u, arg_e = spmm_kernels.run_spmm(cuda, "mul", reduce, lhs, rhs, (4,), schedule,
                                                  with_arg=True)
        assert torch.equal(arg_e.cpu(), expected_e), f"{reduce} {schedule}"
        src, _ = g.edges()
        expected_u = torch.where(expected_e >= 0, src[expected_e.clamp(min=0)], -1)
        assert torch.equal(arg_u.cpu(), expected_u)
        filled = torch.where(degree[:, None] > 0, value, 0.0).expand(-1, 4)
        assert torch.equal(out.cpu(), filled)


@gpu
@pytest.mark.parametrize("reduce", list(REDUCERS))
def test_split_hundred_thousand_edge_row(poisoned, reduce) -> None:
    g = named_graph("long_row")
    lhs, rhs = _operands(g, "mul", (64,), (1,), torch.float32, seed=3)
    expected = gspmm_ref(g, "mul", reduce, lhs, rhs)
    chosen = [SpmmSchedule(rows_per_block=8, feature_lanes=16, edge_lanes=2, vector_width=4,
                           nnz_tile=4, row_split=256),
              SpmmSchedule(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4,
                           outputs_per_thread=2, row_split=65536, degree_sorted=True)]
    split = [s for s in schedule_space(g, 64) if s.row_split]
    for schedule in chosen + _sample(split, 4, seed=5):
        # fp32 sums of 100,000 terms of magnitude ~1 carry absolute errors ~1e-3
        _check(g, "mul", reduce, lhs, rhs, schedule, expected=expected, atol=1e-2)


@gpu
def test_split_sums_are_deterministic(poisoned) -> None:
    g = named_graph("long_row").to("cuda")
    x = random_features((g.num_src, 32), torch.float32, 4).cuda()
    schedule = SpmmSchedule(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4,
                            row_split=256)
    first = gsparse.gspmm(g, "copy_lhs", "sum", x, schedule=schedule)
    for _ in range(3):
        assert torch.equal(gsparse.gspmm(g, "copy_lhs", "sum", x, schedule=schedule), first)


@gpu
def test_split_schedule_on_graph_without_edges_gives_zeros(poisoned) -> None:
    g = named_graph("empty").to("cuda")
    x = random_features((g.num_src, 16), torch.float32, 0).cuda()
    for reduce in REDUCERS:
        for schedule in SPLIT_SCHEDULES:
            out = gsparse.gspmm(g, "copy_lhs", reduce, x, schedule=schedule)
            assert torch.equal(out.cpu(), torch.zeros(g.num_dst, 16))
