"""Generated g-SpMM kernels on the GPU: results against the float64 reference, with every
output element poisoned until a kernel writes it."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import gsparse
from gsparse import datasets
from gsparse.algebra import REDUCERS, SPMM_OPS
from gsparse.kernels import memory
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels.spmm import (
    ColumnTiled,
    OnePass,
    OutputTiled,
    SplitRows,
    build_plan,
    run_spmm,
)
from gsparse.kernels.spmm.output_tiling import tiling_for
from gsparse.target import Target
from gsparse.tune import select
from gsparse.testing.reference import gspmm_ref

from graphs import named_graph, random_features
from kernels.spmm.support import (
    SHAPES,
    check,
    operand_task,
    operands,
    output_tiled_graphs,
    skewed_graph,
    wide_graph,
)
from kernels.support import TOLERANCE, gpu, sample

pytestmark = gpu


def _space(g: gsparse.Graph, op: str, reduce: str, lhs, rhs, with_arg: bool = False) -> list:
    """The space of the task a call on these operands runs, on this GPU."""
    task = operand_task(g, op, reduce, lhs, rhs, with_arg)
    return list(spmm_kernels.schedule_space(task, g.stats, Target.of("cuda")))


# --- every operator, dtype and layout; sampled schedules ------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("reduce", list(REDUCERS))
@pytest.mark.parametrize("op", SPMM_OPS)
def test_every_operator_and_dtype_matches_reference(poisoned, op, reduce, dtype) -> None:
    g = named_graph("random")
    for i, (lhs_shape, rhs_shape) in enumerate(SHAPES.values()):
        lhs, rhs = operands(g, op, lhs_shape, rhs_shape, dtype, seed=i)
        check(g, op, reduce, lhs, rhs)
    assert poisoned, "the CUDA backend did not run gsparse.kernels.spmm"


@pytest.mark.parametrize("kind", ["random", "int64"])
@pytest.mark.parametrize("feature_len", [1, 4, 32, 96, 256])
def test_sampled_schedules_match_reference(poisoned, kind, feature_len) -> None:
    g = named_graph(kind)
    for op, reduce, rhs_len in (("copy_lhs", "sum", feature_len), ("mul", "max", feature_len),
                                ("add", "mean", feature_len), ("copy_rhs", "min", feature_len),
                                ("mul", "sum", 1)):
        lhs, rhs = operands(g, op, (feature_len,), (rhs_len,), torch.float32, seed=feature_len)
        # each task's own space: column- and output-tiled schedules only where they apply
        for i, schedule in enumerate(sample(_space(g, op, reduce, lhs, rhs), 12, seed=feature_len)):
            lhs, rhs = operands(g, op, (feature_len,), (rhs_len,), torch.float32, seed=i)
            check(g, op, reduce, lhs, rhs, schedule)


@pytest.mark.parametrize("kind", ["random", "int64"])
@pytest.mark.parametrize("feature_len", [6, 20, 100])
def test_groups_that_do_not_divide_a_warp_match_reference(poisoned, kind, feature_len) -> None:
    g = named_graph(kind)
    for op, reduce in (("copy_lhs", "sum"), ("mul", "max"), ("div", "mean"), ("copy_rhs", "min")):
        for dtype in (torch.float32, torch.bfloat16):
            lhs, rhs = operands(g, op, (feature_len,), (feature_len,), dtype, seed=feature_len)
            odd = [s for s in _space(g, op, reduce, lhs, rhs) if not getattr(s, "packs_warp", True)]
            assert odd, "the space has groups sized to this width's vectors"
            for schedule in odd:
                check(g, op, reduce, lhs, rhs, schedule)
    # a split-rows walk of such groups, with rows cut into chunks
    skewed = skewed_graph(32, seed=1)
    lhs, rhs = operands(skewed, "mul", (100,), (100,), torch.float32, seed=5)
    split = SplitRows(rows_per_block=48, feature_lanes=5, vector_width=4, outputs_per_thread=5, row_split=32,
                      degree_sorted=True)
    check(skewed, "mul", "sum", lhs, rhs, split)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_sampled_schedules(poisoned, dtype) -> None:
    g = named_graph("random")
    for op, reduce in (("copy_lhs", "sum"), ("mul", "max"), ("div", "mean")):
        lhs, rhs = operands(g, op, (64,), (64,), dtype, seed=0)
        for i, schedule in enumerate(sample(_space(g, op, reduce, lhs, rhs), 10, seed=7)):
            lhs, rhs = operands(g, op, (64,), (64,), dtype, seed=i)
            check(g, op, reduce, lhs, rhs, schedule)


@pytest.mark.parametrize("reduce", list(REDUCERS))
def test_hundred_thousand_edge_row(poisoned, reduce) -> None:
    g = named_graph("long_row")
    lhs, rhs = operands(g, "mul", (64,), (1,), torch.float32, seed=3)
    expected = gsparse.gspmm(g, "mul", reduce, lhs.double(), rhs.double())
    for schedule in [None, *sample(_space(g, "mul", reduce, lhs, rhs), 6, seed=1)]:
        # fp32 sums of 100,000 terms of magnitude ~1 carry absolute errors ~1e-3
        check(g, "mul", reduce, lhs, rhs, schedule, expected=expected, atol=1e-2)


def test_graph_without_edges_gives_zeros(poisoned) -> None:
    g = named_graph("empty")
    x = random_features((g.num_src, 16), torch.float32, 0)
    for reduce in REDUCERS:
        for schedule in [None, *sample(_space(g, "copy_lhs", reduce, x, None), 4, seed=2)]:
            out = gsparse.gspmm(g.to("cuda"), "copy_lhs", reduce, x.cuda(), schedule=schedule)
            assert torch.equal(out.cpu(), torch.zeros(9, 16))


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_arg_indices_name_the_first_winning_edge(poisoned, reduce) -> None:
    g = named_graph("random")
    # Few distinct values, so ties are common and the tie rule is exercised.
    lhs = torch.randint(-2, 3, (g.num_src, 2, 8), dtype=torch.float32)
    rhs = torch.randint(1, 3, (g.num_edges, 1, 8), dtype=torch.float32)
    cuda = g.to("cuda")
    # and groups that do not divide a warp, whose edge lanes merge from named lanes
    odd = [OnePass(rows_per_block=24, feature_lanes=5, edge_lanes=2, outputs_per_thread=2),
           OnePass(rows_per_block=8, feature_lanes=3, edge_lanes=8, vector_width=2, nnz_tile=2)]
    for schedule in [None, *sample(_space(g, "mul", reduce, lhs, rhs, with_arg=True), 8, seed=4), *odd]:
        out, arg_u, arg_e = run_spmm(cuda, "mul", reduce, lhs.cuda(), rhs.cuda(), (2, 8), schedule,
                                     with_arg=True)
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


def test_forced_schedule_needing_wider_vectors_than_the_data_allows() -> None:
    g = named_graph("random").to("cuda")
    x = torch.randn(g.num_src, 6, device="cuda")
    with pytest.raises(ValueError, match="allow at most 2"):
        gsparse.gspmm(g, "copy_lhs", "sum", x, schedule=OnePass(feature_lanes=8, vector_width=4))


@pytest.mark.parametrize(("op", "schedule", "reason"), [
    ("copy_rhs", ColumnTiled(feature_lanes=1, edge_lanes=32, column_tile=1024), "reads no lhs"),
    ("mul", OutputTiled(vector_width=2), "is output-tiled, which runs copy_lhs"),
])
def test_forced_schedule_that_cannot_run_the_call_raises(op, schedule, reason) -> None:
    g = named_graph("random").to("cuda")
    x, w = torch.randn(g.num_src, 2, device="cuda"), torch.randn(g.num_edges, 2, device="cuda")
    with pytest.raises(ValueError, match=reason):
        gsparse.gspmm(g, op, "sum", x, w, schedule=schedule)


# --- plans: chosen and built once per graph, task and schedule --------------------------------


def test_a_call_runs_the_chosen_schedule_and_a_repeated_call_reuses_its_plan(poisoned) -> None:
    g = named_graph("random").to("cuda")
    x1, x2 = torch.randn(g.num_src, 8, device="cuda"), torch.randn(g.num_src, 8, device="cuda")
    task = spmm_kernels.task_for(g, "copy_lhs", "sum", x1, None, (8,))
    first = gsparse.gspmm(g, "copy_lhs", "sum", x1)
    second = gsparse.gspmm(g, "copy_lhs", "sum", x2)
    chosen = select.choose("spmm", g, task, call=None)  # the call's choice, made once: found
    assert len(g.schedules) == 1 and len(g.plans) == 1 and (task, chosen) in g.plans
    torch.testing.assert_close(first.cpu().double(), gspmm_ref(g.to("cpu"), "copy_lhs", "sum", x1.cpu()),
                               **TOLERANCE[torch.float32])
    torch.testing.assert_close(second.cpu().double(), gspmm_ref(g.to("cpu"), "copy_lhs", "sum", x2.cpu()),
                               **TOLERANCE[torch.float32])


def test_a_new_shape_dtype_or_schedule_gets_its_own_plan() -> None:
    g = named_graph("random").to("cuda")
    forced = OnePass(rows_per_block=4, feature_lanes=16)
    gsparse.gspmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 8, device="cuda"))
    gsparse.gspmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 16, device="cuda"))
    gsparse.gspmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 16, device="cuda").double())
    for _ in range(2):
        gsparse.gspmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 16, device="cuda"), schedule=forced)
    assert len(g.plans) == 4 and len(g.schedules) == 3


# --- the column-tiled skeleton ------------------------------------------------------------------


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_column_tiled_skeleton_matches_reference(poisoned, dtype, index_dtype) -> None:
    g = wide_graph().with_index_dtype(index_dtype)
    cuda = g.to("cuda")
    for i, (op, reduce) in enumerate([(op, r) for op in SPMM_OPS for r in REDUCERS]):
        for layout, (lhs_shape, rhs_shape) in SHAPES.items():
            lhs_shape, rhs_shape = (1, 4), (2, 4) if layout == "full" else rhs_shape
            if layout == "indexed":
                lhs_shape, rhs_shape = (1, 2), (2, 1)
            lhs, rhs = operands(g, op, lhs_shape, rhs_shape, dtype, seed=i)
            used = [shape for shape, t in ((lhs_shape, lhs), (rhs_shape, rhs)) if t is not None]
            features = math.prod(torch.broadcast_shapes(*used))
            vector = 2 if features % 2 == 0 and layout != "indexed" else 1
            schedule = ColumnTiled(rows_per_block=64, feature_lanes=1, edge_lanes=16,
                                   vector_width=vector, column_tile=1024, degree_sorted=bool(i % 2))
            args = (None if lhs is None else lhs.cuda(), None if rhs is None else rhs.cuda())
            if op == "copy_rhs":  # stages nothing: a forced column-tiled schedule is refused
                with pytest.raises(ValueError, match="copy_rhs reads no lhs"):
                    gsparse.gspmm(cuda, op, reduce, *args, schedule=schedule)
                continue
            result = gsparse.gspmm(cuda, op, reduce, *args, schedule=schedule)
            expected = gspmm_ref(g, op, reduce, lhs, rhs)
            torch.testing.assert_close(result.cpu().double(), expected.to(dtype).double(),
                                       **TOLERANCE[dtype], msg=lambda m: f"{op}/{reduce}: {m}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_column_tiled_staging_of_unaligned_lhs(poisoned, dtype) -> None:
    """An ``lhs`` 2 bytes past a 16-byte boundary is staged one element at a time; a
    3-feature fp16 tile (not a whole number of 16-byte vectors) ends in such elements."""
    g = wide_graph()
    for features, skip in ((3, 0), (3, 1), (1, 1)):
        storage = random_features((g.num_src * features + skip,), dtype, seed=features + skip)
        lhs = storage[skip:].view(g.num_src, features)
        on_gpu = storage.cuda()[skip:].view(g.num_src, features)
        assert (on_gpu.data_ptr() % 16 != 0) == bool(skip)
        schedule = ColumnTiled(rows_per_block=64, feature_lanes=1, edge_lanes=16, column_tile=1024)
        result = gsparse.gspmm(g.to("cuda"), "copy_lhs", "sum", on_gpu, schedule=schedule)
        expected = gspmm_ref(g, "copy_lhs", "sum", lhs, None)
        torch.testing.assert_close(result.cpu().double(), expected.to(dtype).double(),
                                   **TOLERANCE[dtype])


def test_column_tiled_skeleton_over_several_row_blocks(poisoned) -> None:
    """5,000 rows: five blocks of 1,024 rows per tile, the last one partial."""
    gen = torch.Generator().manual_seed(8)
    src = torch.randint(0, 3_000, (60_000,), generator=gen)
    dst = torch.randint(0, 5_000, (60_000,), generator=gen)
    g = gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_src=3_000, num_dst=5_000)
    lhs = random_features((g.num_src, 2), torch.float32, seed=8)
    schedule = ColumnTiled(rows_per_block=64, feature_lanes=1, edge_lanes=16, vector_width=2,
                           column_tile=1024)
    for reduce in ("sum", "max"):
        result = gsparse.gspmm(g.to("cuda"), "copy_lhs", reduce, lhs.cuda(), schedule=schedule)
        expected = gspmm_ref(g, "copy_lhs", reduce, lhs, None)
        torch.testing.assert_close(result.cpu().double(), expected.to(torch.float32).double(),
                                   **TOLERANCE[torch.float32])


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_column_tiled_arg_indices_match_single_pass(reduce) -> None:
    g = wide_graph().to("cuda")
    lhs = torch.randint(-2, 3, (g.num_src, 4), dtype=torch.float32, device="cuda")
    rhs = torch.randint(1, 3, (g.num_edges, 4), dtype=torch.float32, device="cuda")
    tiled = ColumnTiled(rows_per_block=32, feature_lanes=1, edge_lanes=32, column_tile=1024)
    plain = OnePass(rows_per_block=8, feature_lanes=1, edge_lanes=32)
    a = run_spmm(g, "mul", reduce, lhs, rhs, (4,), tiled, with_arg=True)
    b = run_spmm(g, "mul", reduce, lhs, rhs, (4,), plain, with_arg=True)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


# --- the split-rows skeleton -----------------------------------------------------------------

# Chunks of 32 or 64 edges, so that small graphs have many; the knobs vary around them:
# several feature slices (blockIdx.y), edge lanes merged by shuffles, edges in flight,
# index tiles, the whole rows in either order, and chunks shorter than one pass of the
# group's lanes (32 edge lanes x 4 edges in flight over chunks of 64).
SPLIT_SCHEDULES = [
    SplitRows(rows_per_block=8, feature_lanes=32, row_split=32),
    SplitRows(rows_per_block=8, feature_lanes=4, edge_lanes=8, vector_width=2,
              row_split=32, degree_sorted=True),
    SplitRows(rows_per_block=16, feature_lanes=4, edge_lanes=4, vector_width=2,
              outputs_per_thread=2, nnz_tile=4, row_split=64),
    SplitRows(rows_per_block=32, feature_lanes=8, outputs_per_thread=4, index_tile=True,
              row_split=32, degree_sorted=True),
    SplitRows(rows_per_block=8, feature_lanes=1, edge_lanes=32, nnz_tile=4, row_split=64,
              degree_sorted=True),
]


def _unsplit(schedule: SplitRows) -> OnePass:
    """The one-pass schedule that walks whole rows as ``schedule`` walks its chunks."""
    knobs = schedule.knobs()
    del knobs["row_split"]
    return OnePass(**knobs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("reduce", list(REDUCERS))
def test_split_rows_match_reference(poisoned, reduce, dtype) -> None:
    graph = skewed_graph(32)
    for i, op in enumerate(SPMM_OPS):
        g = graph.with_index_dtype(torch.int64 if i % 2 else torch.int32)
        for j, (lhs_shape, rhs_shape) in enumerate(SHAPES.values()):
            lhs, rhs = operands(g, op, lhs_shape, rhs_shape, dtype, seed=3 * i + j)
            schedule = SPLIT_SCHEDULES[(i + j) % len(SPLIT_SCHEDULES)]
            # copy_rhs of a scalar per edge has one feature: no wider vectors
            features = math.prod((rhs if op == "copy_rhs" else lhs).shape[1:]) if op.startswith("copy") \
                else math.prod(torch.broadcast_shapes(lhs.shape[1:], rhs.shape[1:]))
            if features % schedule.vector_width:
                schedule = dataclasses.replace(schedule, vector_width=1)
            check(g, op, reduce, lhs, rhs, schedule)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_split_arg_indices_match_one_pass(poisoned, reduce, index_dtype) -> None:
    g = skewed_graph(32, seed=1).with_index_dtype(index_dtype).to("cuda")
    gen = torch.Generator().manual_seed(2)
    # few distinct values, so ties across chunks are common and the tie rule is exercised
    lhs = torch.randint(-2, 3, (g.num_src, 2, 8), generator=gen).float().cuda()
    rhs = torch.randint(1, 3, (g.num_edges, 1, 8), generator=gen).float().cuda()
    for schedule in SPLIT_SCHEDULES:
        split = run_spmm(g, "mul", reduce, lhs, rhs, (2, 8), schedule, with_arg=True)
        whole = run_spmm(g, "mul", reduce, lhs, rhs, (2, 8), _unsplit(schedule), with_arg=True)
        for name, a, b in zip(("out", "arg_u", "arg_e"), split, whole):
            assert torch.equal(a, b), f"{reduce} {schedule}: {name}"


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
        out, arg_u, arg_e = run_spmm(cuda, "mul", reduce, lhs, rhs, (4,), schedule, with_arg=True)
        assert torch.equal(arg_e.cpu(), expected_e), f"{reduce} {schedule}"
        src, _ = g.edges()
        expected_u = torch.where(expected_e >= 0, src[expected_e.clamp(min=0)], -1)
        assert torch.equal(arg_u.cpu(), expected_u)
        filled = torch.where(degree[:, None] > 0, value, 0.0).expand(-1, 4)
        assert torch.equal(out.cpu(), filled)


@pytest.mark.parametrize("reduce", list(REDUCERS))
def test_split_hundred_thousand_edge_row(poisoned, reduce) -> None:
    g = named_graph("long_row")
    lhs, rhs = operands(g, "mul", (64,), (1,), torch.float32, seed=3)
    expected = gspmm_ref(g, "mul", reduce, lhs, rhs)
    chosen = [SplitRows(rows_per_block=8, feature_lanes=16, edge_lanes=2, vector_width=4,
                        nnz_tile=4, row_split=256),
              SplitRows(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4,
                        outputs_per_thread=2, row_split=65536, degree_sorted=True)]
    split = [s for s in _space(g, "mul", reduce, lhs, rhs) if isinstance(s, SplitRows)]
    for schedule in chosen + sample(split, 4, seed=5):
        # fp32 sums of 100,000 terms of magnitude ~1 carry absolute errors ~1e-3
        check(g, "mul", reduce, lhs, rhs, schedule, expected=expected, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_short_chunks_of_a_small_graph_of_long_rows_match_reference(poisoned, dtype) -> None:
    # 426 rows of 251 edges on average (the community graph of docs/performance.md's
    # "short row splits"): its space cuts every row into chunks of 64 edges
    g = datasets.synthetic(426, datasets.LogNormal(251.0, 0.6), seed=3)
    for op, reduce, features in (("copy_lhs", "sum", 32), ("mul", "max", 64), ("mul", "mean", 100)):
        lhs, rhs = operands(g, op, (features,), (1,), dtype, seed=features)
        split = [s for s in _space(g, op, reduce, lhs, rhs) if isinstance(s, SplitRows)]
        assert {s.row_split for s in split} == {64}
        for schedule in sample(split, 6, seed=features):
            check(g, op, reduce, lhs, rhs, schedule)


def test_split_sums_are_deterministic(poisoned) -> None:
    g = named_graph("long_row").to("cuda")
    x = random_features((g.num_src, 32), torch.float32, 4).cuda()
    schedule = SplitRows(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4,
                         row_split=256)
    first = gsparse.gspmm(g, "copy_lhs", "sum", x, schedule=schedule)
    for _ in range(3):
        assert torch.equal(gsparse.gspmm(g, "copy_lhs", "sum", x, schedule=schedule), first)


def test_split_schedule_on_graph_without_edges_gives_zeros(poisoned) -> None:
    g = named_graph("empty").to("cuda")
    x = random_features((g.num_src, 16), torch.float32, 0).cuda()
    for reduce in REDUCERS:
        for schedule in SPLIT_SCHEDULES:
            out = gsparse.gspmm(g, "copy_lhs", reduce, x, schedule=schedule)
            assert torch.equal(out.cpu(), torch.zeros(g.num_dst, 16))


# --- the output-tiled skeleton -------------------------------------------------------------


def _tiled(warps: int = 32, vector: int = 1, outputs: int = 1, groups: int = 1) -> OutputTiled:
    return OutputTiled(warps_per_block=warps, vector_width=vector, outputs_per_thread=outputs,
                       column_groups=groups)


def _vector(features: int, dtype: torch.dtype) -> tuple[int, int]:
    widest = 2 if dtype == torch.float64 else 4
    vector = max(v for v in (1, 2, 4) if v <= widest and features % v == 0)
    return vector, 1 << max(0, math.ceil(math.log2(math.ceil(features / vector))))


@pytest.mark.parametrize("name", ["random", "int64", "empty", "hub", "sparse_rows", "long_row"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_output_tiled_matches_reference(poisoned, name: str, dtype: torch.dtype) -> None:
    g = named_graph("long_row") if name == "long_row" else output_tiled_graphs()[name]
    cuda = g.to("cuda")
    for i, reduce in enumerate(REDUCERS):
        features = (1, 2, 3, 4)[i]
        vector, outputs = _vector(features, dtype)
        lhs = random_features((g.num_src, features), dtype, seed=i)
        expected = gspmm_ref(g, "copy_lhs", reduce, lhs, None)
        for warps, groups in ((8, 1), (32, 1), (16, 2), (8, 4)):
            out = gsparse.gspmm(cuda, "copy_lhs", reduce, lhs.cuda(),
                                schedule=_tiled(warps, vector, outputs, groups))
            tolerance = dict(TOLERANCE[dtype])
            if name == "long_row" and dtype == torch.float32:
                tolerance["atol"] = 1e-2  # 100,000 terms of magnitude ~1
            torch.testing.assert_close(out.cpu().double(), expected.to(dtype).double(), **tolerance,
                                       msg=lambda m: f"{name} {reduce} {dtype} {warps} warps "
                                                     f"{groups} groups: {m}")


def test_output_tiled_over_several_tiles_and_waves(poisoned) -> None:
    """Little shared memory: many tiles, row ranges capped. The plan is built for this GPU
    with a 24 KB shared-memory budget per block."""
    small = dataclasses.replace(Target.of("cuda"), shared_bytes_per_block=24 * 1024)
    for name, groups in (("hub", 1), ("sparse_rows", 1), ("hub", 2), ("sparse_rows", 4)):
        g = output_tiled_graphs()[name]
        tiling = tiling_for(g, 4, torch.float32, small, groups)
        assert tiling.tiles > groups or name != "hub"
        lhs = random_features((g.num_src, 4), torch.float32, seed=5)
        cuda = g.to("cuda")
        task = spmm_kernels.task_for(cuda, "copy_lhs", "sum", lhs.cuda(), None, (4,))
        plan = build_plan(cuda, task, _tiled(16, 4, groups=groups), small)
        out = memory.allocate((g.num_dst, 4), torch.float32, cuda.device)
        plan(lhs=lhs.cuda(), rhs=None, out=out, arg_u=None, arg_e=None)
        torch.testing.assert_close(out.cpu().double(), gspmm_ref(g, "copy_lhs", "sum", lhs, None),
                                   **TOLERANCE[torch.float32])


@pytest.mark.parametrize(("skip", "groups"), [(1, 1), (2, 2), (3, 4)])
def test_output_tiled_stages_unaligned_lhs(poisoned, skip: int, groups: int) -> None:
    g = output_tiled_graphs()["hub"]
    storage = random_features((g.num_src + skip,), torch.float32, seed=skip)
    on_gpu = storage.cuda()[skip:].view(g.num_src, 1)
    assert on_gpu.data_ptr() % 16
    out = gsparse.gspmm(g.to("cuda"), "copy_lhs", "sum", on_gpu, schedule=_tiled(groups=groups))
    expected = gspmm_ref(g, "copy_lhs", "sum", storage[skip:].view(g.num_src, 1), None)
    torch.testing.assert_close(out.cpu().double(), expected, **TOLERANCE[torch.float32])


def test_output_tiled_is_deterministic() -> None:
    g = output_tiled_graphs()["hub"].to("cuda")
    lhs = torch.randn(g.num_src, 2, device="cuda")
    for groups in (1, 2):
        schedule = _tiled(vector=2, groups=groups)
        first = gsparse.gspmm(g, "copy_lhs", "sum", lhs, schedule=schedule)
        for _ in range(5):
            assert torch.equal(gsparse.gspmm(g, "copy_lhs", "sum", lhs, schedule=schedule), first)
