"""g-SpMM launch plans, recorded on the CPU, and the graph structures their skeletons walk
(column tiles, work lists; the output tiling is in test_output_tiled.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gsparse
from gsparse.kernels import memory
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels.spmm import (
    ColumnTiled,
    OnePass,
    OutputTiled,
    SplitRows,
    SpmmTask,
    build_plan,
    default_schedule,
    run_spmm,
)
from gsparse.kernels.spmm.codegen import column_tiled, one_pass, split_rows
from gsparse.kernels.spmm.plan import check_schedule
from gsparse.kernels.spmm.shapes import column_tiled_block_rows, row_grid
from gsparse.kernels.spmm.structures import column_tiles, work_list
from gsparse.target import H100

from graphs import graphs, named_graph
from kernels.spmm.support import skewed_graph, task, wide_graph
from recording import RecordingLoader


def _built_on_first_use(g: gsparse.Graph, task, schedule, loader: RecordingLoader):
    """What the first call of ``task`` on a GPU builds, built here on an H100's facts with a
    recording loader: the schedule chosen for the task (when none is forced) and its plan,
    kept in the graph's caches where a call looks them up. Returns the schedule."""
    if schedule is None:
        schedule = _h100_rule(g, task)
    g.plans.get((task, schedule), lambda: build_plan(g, task, schedule, H100, loader=loader))
    return schedule


def _h100_rule(g: gsparse.Graph, task, call=None):
    """The hand rule on an H100's facts, chosen once per graph and task: the chooser the
    calls below pass, as a GPU's front end passes the tuner's."""
    return g.schedules.get(task, lambda: default_schedule(task, g.stats, H100))


def _run(plan, lhs=None, rhs=None, out=None, arg_u=None, arg_e=None) -> None:
    plan(lhs=lhs, rhs=rhs, out=out, arg_u=arg_u, arg_e=arg_e)


# --- calls find their plan, and pass it the new operands ----------------------------------------


def test_a_repeated_call_reuses_its_launch_plan_and_passes_the_new_operands() -> None:
    g, loader = named_graph("short_rows"), RecordingLoader()
    x1, x2 = torch.randn(g.num_src, 8), torch.randn(g.num_src, 8)
    chosen = _built_on_first_use(g, spmm_kernels.task_for(g, "copy_lhs", "sum", x1, None, (8,)),
                                 None, loader)
    assert isinstance(chosen, OnePass)
    out1 = run_spmm(g, "copy_lhs", "sum", x1, None, (8,), choose=_h100_rule)
    out2 = run_spmm(g, "copy_lhs", "sum", x2, None, (8,), choose=_h100_rule)
    assert len(g.schedules) == len(g.plans) == 1 and loader.loaded == [one_pass.KERNEL]
    first, second = loader.launches[one_pass.KERNEL]
    assert (first.grid, first.block) == (second.grid, second.block)
    assert first.args["lhs"] is x1 and second.args["lhs"] is x2
    assert first.args["out"] is out1 and second.args["out"] is out2
    assert first.args["rowptr"] is g.rowptr and first.args["col"] is g.col
    assert first.args["rhs"] is first.args["eid"] is first.args["arg_u"] is None
    assert {k: second.args[k] for k in ("num_rows", "num_features", "lhs_len", "rhs_len")} == {
        "num_rows": g.num_dst, "num_features": 8, "lhs_len": 8, "rhs_len": 0}
    assert second.c_types["num_rows"] == "int64_t" and second.c_types["num_features"] == "int32_t"


def _sampled_block(seed: int, seeds: int) -> gsparse.Graph:
    gen = torch.Generator().manual_seed(seed)
    dst = torch.arange(seeds).repeat_interleave(5)
    src = torch.randint(0, 3 * seeds, (dst.numel(),), generator=gen)
    return gsparse.Graph.from_block(torch.stack([src, dst]), num_src=3 * seeds, num_dst=seeds,
                                    dst_sorted=True, max_degree=5)


def test_sampled_blocks_share_one_prepared_launch_and_pass_their_own_arrays() -> None:
    """A block serves a step: its plan binds no launch of its own (preparing one cost more
    host time than its calls), the blocks' calls pass their arrays and grids to one."""
    loader = RecordingLoader()
    blocks = [_sampled_block(seed, seeds) for seed, seeds in ((0, 40), (1, 70))]
    schedule = OnePass(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4, degree_sorted=False)
    for g in blocks:
        x = torch.randn(g.num_src, 32)
        t = spmm_kernels.task_for(g, "copy_lhs", "sum", x, None, (32,))
        _run(build_plan(g, t, schedule, H100, loader=loader), lhs=x, out=torch.empty(g.num_dst, 32))
    assert loader.prepared == [one_pass.KERNEL]
    for g, launch in zip(blocks, loader.launches[one_pass.KERNEL], strict=True):
        assert launch.args["rowptr"] is g.rowptr and launch.args["col"] is g.col
        assert launch.args["num_rows"] == g.num_dst and launch.c_types["num_rows"] == "int64_t"
        assert launch.grid == row_grid(schedule, g.num_dst, 32)


def test_a_new_shape_dtype_or_schedule_gets_its_own_plan() -> None:
    g, loader = named_graph("short_rows"), RecordingLoader()
    forced = OnePass(rows_per_block=4, feature_lanes=16)
    calls = [(torch.randn(g.num_src, 8), None), (torch.randn(g.num_src, 16), None),
             (torch.randn(g.num_src, 16).double(), None), (torch.randn(g.num_src, 16), forced),
             (torch.randn(g.num_src, 16), forced)]
    for x, schedule in calls:
        t = spmm_kernels.task_for(g, "copy_lhs", "sum", x, None, tuple(x.shape[1:]))
        _built_on_first_use(g, t, schedule, loader)
    for x, schedule in calls:
        run_spmm(g, "copy_lhs", "sum", x, None, tuple(x.shape[1:]), schedule, choose=_h100_rule)
    assert len(g.plans) == 4 and len(g.schedules) == 3  # a forced schedule is not chosen
    assert len(loader.loaded) == 4 and len(loader.order) == 5


def test_an_invalid_forced_schedule_raises_on_every_call() -> None:
    g, loader = named_graph("random"), RecordingLoader()
    t = spmm_kernels.task_for(g, "copy_lhs", "sum", torch.randn(g.num_src, 6), None, (6,))
    bad = OnePass(rows_per_block=16, feature_lanes=2, vector_width=4)  # 6 features: no 4-wide vectors
    for _ in range(2):
        with pytest.raises(ValueError, match="allow at most 2"):
            g.plans.get((t, bad), lambda: build_plan(g, t, bad, H100, loader=loader))
    assert (t, bad) not in g.plans and loader.loaded == [] and loader.order == []


@pytest.mark.parametrize(("t", "schedule", "reason"), [
    (task("copy_lhs", "sum", 6, vector_ok=2), OnePass(rows_per_block=16, feature_lanes=2, vector_width=4),
     "loads 4 features at a time, but these operands allow at most 2"),
    (task("copy_lhs", "sum", 8), OnePass(feature_lanes=3), "must be a multiple of the 10 groups"),
    (task("copy_rhs", "sum", 4), ColumnTiled(feature_lanes=1, edge_lanes=32, column_tile=4096),
     "stages lhs in shared memory, but copy_rhs reads no lhs; use a OnePass or SplitRows schedule"),
    (task("mul", "sum", 2), OutputTiled(vector_width=2),
     "is output-tiled, which runs copy_lhs of full-shape features without arg indices, not mul.sum"),
    (task("copy_lhs", "max", 2, with_arg=True), OutputTiled(vector_width=2),
     "runs copy_lhs of full-shape features without arg indices, not copy_lhs.max lhs:full float32 int32 arg"),
    (task("copy_lhs", "sum", 4), OutputTiled(vector_width=2),
     r"carries 2 features per edge \(vector_width \* outputs_per_thread\); these operands have 4"),
])
def test_a_forced_schedule_that_cannot_run_the_task_says_why(t, schedule, reason: str) -> None:
    # Such schedules used to be rewritten silently into ones that could run; now the caller
    # learns, once, when the plan is built.
    with pytest.raises(ValueError, match=reason):
        check_schedule(t, schedule)
    with pytest.raises(ValueError, match=reason):
        build_plan(named_graph("random"), t, schedule, H100, loader=RecordingLoader())


def test_every_skeleton_takes_a_valid_schedule_of_its_task() -> None:
    for t, schedule in [(task("copy_lhs", "sum", 4), OutputTiled(vector_width=4)),
                        (task("mul", "max", 4, with_arg=True), ColumnTiled(
                            feature_lanes=1, edge_lanes=32, vector_width=4, column_tile=4096)),
                        (task("copy_rhs", "min", 64), SplitRows(feature_lanes=8, vector_width=4,
                                                                row_split=64))]:
        check_schedule(t, schedule)


# --- the one-pass skeleton ------------------------------------------------------------------


def test_row_grid_covers_rows_and_feature_slices() -> None:
    s = OnePass(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4)
    assert s.threads == 256
    assert row_grid(s, num_rows=1001, num_features=100) == (126, 4)  # ceil(1001 / 8), ceil(100 / 32)


def test_one_pass_plan_launches_one_group_per_row() -> None:
    g, loader = named_graph("random"), RecordingLoader()
    # lhs broadcast over the first feature dimension: its offsets are read from a table
    t = SpmmTask(op="mul", reduce="sum", lhs_shape=(1, 25), rhs_shape=(4, 25), out_shape=(4, 25),
                 dtype=torch.float32, index_dtype=torch.int32, has_eid=True, with_arg=False,
                 vector_ok=4)
    s = OnePass(rows_per_block=8, feature_lanes=8, edge_lanes=4, vector_width=4, degree_sorted=True)
    x, w = torch.randn(g.num_src, 1, 25), torch.randn(g.num_edges, 4, 25)
    out = torch.empty(g.num_dst, 4, 25)
    _run(build_plan(g, t, s, H100, loader=loader), lhs=x, rhs=w, out=out)
    launch = loader.only(one_pass.KERNEL)
    assert (launch.grid, launch.block, launch.shared_bytes) == ((29, 4), 256, 0)
    assert launch.args["row_order"] is g.degree_sorted_rows and launch.args["eid"] is g.eid
    assert launch.args["lhs_offset"].tolist() == [f % 25 for f in range(100)]
    assert launch.args["rhs_offset"] is None  # full shape: offset f is feature f
    assert (launch.args["num_features"], launch.args["lhs_len"], launch.args["rhs_len"]) == (100, 25, 100)


# --- the column-tiled skeleton ------------------------------------------------------------------


@pytest.mark.parametrize(("num_rows", "tile_blocks", "rows"), [
    (232_965, 5, 2048),   # reddit-like, 1 feature: 4,096 rows would make 285 blocks
    (232_965, 9, 4096),   # reddit-like, 2 features: 513 blocks of 4,096 rows
    (132_534, 3, 1024),   # proteins-like, 1 feature: even 1,024 rows make 390 blocks
    (132_534, 10, 2048),  # proteins-like, 4 features
    (230, 3, 1024),       # small graphs: one block of 1,024 rows per tile
])
def test_tiled_blocks_keep_three_per_sm(num_rows: int, tile_blocks: int, rows: int) -> None:
    assert column_tiled_block_rows(num_rows, tile_blocks, sms=132) == rows


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_column_tiles_group_every_edge_by_tile_and_row(index_dtype) -> None:
    g = named_graph("random").with_index_dtype(index_dtype)  # 150 sources: tiles of 64 -> 3
    tiles = column_tiles(g, 64)
    tile_rowptr, local_col, position = tiles.tile_rowptr, tiles.local_col, tiles.position
    assert tiles.tiles == 3 and tile_rowptr.dtype == position.dtype == index_dtype
    assert int(tile_rowptr[-1]) == g.num_edges
    assert sorted(position.tolist()) == list(range(g.num_edges))  # a permutation
    col, dst = g.col.long(), g.csr_dst.long()
    local = local_col.long() % 65536
    for t in range(tiles.tiles):
        for r in range(g.num_dst):
            lo, hi = int(tile_rowptr[t * g.num_dst + r]), int(tile_rowptr[t * g.num_dst + r + 1])
            p = position[lo:hi].long()
            assert (dst[p] == r).all() and (col[p] // 64 == t).all()
            assert torch.equal(local[lo:hi], col[p] % 64)
            assert (p[1:] > p[:-1]).all()  # CSR order kept within a (tile, row)
    assert column_tiles(g, 64) is tiles  # built once per graph and tile
    assert ("column_tiles", 64) in g.layouts


def test_local_indices_use_all_sixteen_bits() -> None:
    src = torch.tensor([65535, 40000, 3, 70000])
    g = gsparse.Graph.from_edge_index(torch.stack([src, torch.zeros(4, dtype=torch.long)]), num_src=70001, num_dst=1)
    tiles = column_tiles(g, 65536)
    assert tiles.tiles == 2 and tiles.local_col.dtype == torch.int16
    assert (tiles.local_col.long() % 65536).tolist() == \
        (g.col.long()[tiles.position.long()] % 65536).tolist()


@pytest.mark.parametrize("with_arg", [False, True])
def test_column_tiled_plan_stages_tiles_then_merges_them_in_order(with_arg: bool) -> None:
    g, loader = wide_graph(), RecordingLoader()  # 3,000 sources: three tiles of 1,024
    reduce = "max" if with_arg else "sum"
    t = task("mul", reduce, 4, with_arg=with_arg, has_eid=True)
    s = ColumnTiled(rows_per_block=64, feature_lanes=1, edge_lanes=16, vector_width=2,
                    column_tile=1024)
    x, w, out = torch.randn(g.num_src, 4), torch.randn(g.num_edges, 4), torch.empty(g.num_dst, 4)
    arg_u, arg_e = (torch.empty(g.num_dst, 4, dtype=torch.int64) for _ in range(2))
    plan = build_plan(g, t, s, H100, loader=loader)
    with memory.poisoned() as allocated:
        _run(plan, lhs=x, rhs=w, out=out, arg_u=arg_u if with_arg else None,
             arg_e=arg_e if with_arg else None)
    assert loader.order == [column_tiled.KERNEL, column_tiled.MERGE]
    first, merge = loader.only(column_tiled.KERNEL), loader.only(column_tiled.MERGE)
    tiles = column_tiles(g, 1024)
    block_rows = column_tiled_block_rows(g.num_dst, 3 * 2, H100.sms)  # 3 tiles x 2 feature slices
    assert first.grid == (-(-g.num_dst // block_rows), 3 * 2) and first.block == 1024
    assert first.shared_bytes == 1024 * 4 * 4  # a tile of lhs rows of 4 floats
    assert first.args["tile_rowptr"] is tiles.tile_rowptr and first.args["lhs_global"] is x
    assert (first.args["num_tiles"], first.args["block_rows"]) == (3, block_rows)
    # partial rows, one per tile, fresh on each call and handed to the merge
    partial = first.args["partial"]
    assert partial.shape == (3 * g.num_dst * 4,) and partial.dtype == torch.float32
    assert merge.args["partial"] is partial and merge.args["out"] is out
    assert (merge.args["partial_arg"] is first.args["partial_arg"]) and \
        (merge.args["partial_arg"] is None) == (not with_arg)
    assert merge.args["arg_e"] is (arg_e if with_arg else None)
    assert merge.grid == (-(-g.num_dst * 4 // 256),) and merge.args["num_tiles"] == 3
    assert allocated == [(3 * g.num_dst * 4,)] * (2 if with_arg else 1)


def test_column_tiles_must_fit_the_targets_shared_memory() -> None:
    g = wide_graph()
    s = ColumnTiled(feature_lanes=1, edge_lanes=32, vector_width=4, column_tile=8192)
    small = dataclasses.replace(H100, shared_bytes_per_block=24 * 1024)
    with pytest.raises(ValueError, match=r"stages 8192 rows of 4 torch.float32 features \(131072 "
                                         r"bytes\); a block may use 24576"):
        build_plan(g, task("copy_lhs", "sum", 4), s, small, loader=RecordingLoader())
    build_plan(g, task("copy_lhs", "sum", 4), s, H100, loader=RecordingLoader())


# --- the split-rows skeleton: the work list, and the plan over it --------------------------------


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


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("degree_sorted", [False, True])
def test_work_list_cuts_only_rows_longer_than_the_split(index_dtype, degree_sorted) -> None:
    split = 1024
    lengths = torch.tensor([0, split, split + 1, 0, 100_000, 1, 2 * split])
    dst = torch.repeat_interleave(torch.arange(7), lengths)
    g = gsparse.Graph.from_edge_index(torch.stack([dst % 13, dst]), num_src=13, num_dst=7)
    g = g.with_index_dtype(index_dtype)
    work = work_list(g, split, degree_sorted)
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
    assert work_list(g, split, degree_sorted) is work  # built once per graph


def test_work_list_of_a_graph_without_long_rows_is_its_rows() -> None:
    g = named_graph("empty")
    work = work_list(g, 32, False)
    assert work.num_chunks == 0 and work.split_row.numel() == 0
    assert work.row.tolist() == list(range(g.num_dst)) and work.split_first.tolist() == [0]


@settings(max_examples=60, deadline=None)
@given(g=graphs(max_nodes=8, max_edges=120), split=st.sampled_from([32, 64]),
       degree_sorted=st.booleans())
def test_work_list_partitions_every_graph(g, split, degree_sorted) -> None:
    _assert_partition(g, work_list(g, split, degree_sorted), split)


def test_split_plan_walks_the_work_list_then_merges_each_split_row() -> None:
    g, loader = skewed_graph(32), RecordingLoader()
    s = SplitRows(rows_per_block=8, feature_lanes=4, edge_lanes=8, vector_width=2, row_split=32,
                  degree_sorted=True)
    x, out = torch.randn(g.num_src, 8), torch.empty(g.num_dst, 8)
    _run(build_plan(g, task("copy_lhs", "sum", 8), s, H100, loader=loader), lhs=x, out=out)
    assert loader.order == [split_rows.KERNEL, split_rows.MERGE]
    first, merge = loader.only(split_rows.KERNEL), loader.only(split_rows.MERGE)
    work = work_list(g, 32, True)
    assert work.num_chunks == 2 + 2 + 31  # rows of 32 + 1, 2 x 32 and 30 x 32 + 7 edges
    assert first.grid == row_grid(s, work.num_items, 8) and first.block == 256
    assert first.args["work_row"] is work.row and first.args["work_start"] is work.start
    assert (first.args["num_items"], first.args["num_chunks"]) == (work.num_items, work.num_chunks)
    assert first.args["out"] is out and first.args["partial"].shape == (work.num_chunks * 8,)
    assert merge.args["partial"] is first.args["partial"] and merge.args["out"] is out
    assert merge.args["split_row"] is work.split_row and merge.args["num_split"] == 3
    assert merge.grid == (-(-3 * 8 // 256),)


def test_split_plan_without_long_rows_launches_no_merge() -> None:
    g, loader = named_graph("random"), RecordingLoader()  # longest row: 608 edges
    s = SplitRows(feature_lanes=8, row_split=1024)
    _run(build_plan(g, task("copy_lhs", "sum", 8), s, H100, loader=loader),
         lhs=torch.randn(g.num_src, 8), out=torch.empty(g.num_dst, 8))
    assert loader.order == [split_rows.KERNEL] and loader.loaded == [split_rows.KERNEL]
    assert loader.only(split_rows.KERNEL).args["num_chunks"] == 0


def test_a_column_tile_index_past_two_to_the_31_is_refused_before_it_is_built() -> None:
    # 70,000 sources in tiles of 1,024 make 69 tiles; with 40 M rows the index would need
    # 2.8 G entries: the plan refuses it (it used to crash building the index on a GPU)
    rows = 40_000_000
    g = gsparse.Graph.from_csr(torch.zeros(rows + 1, dtype=torch.int32),
                               torch.zeros(0, dtype=torch.int32), num_src=70_000)
    task = SpmmTask("copy_lhs", "sum", (1,), None, (1,), torch.float32, torch.int32, False, False, 1)
    schedule = ColumnTiled(rows_per_block=64, feature_lanes=1, edge_lanes=16, column_tile=1024)
    with pytest.raises(ValueError, match="indexes the edges by .tile, row.: 2760000001 entries"):
        build_plan(g, task, schedule, H100, loader=RecordingLoader())
    assert len(g.layouts) == 0
