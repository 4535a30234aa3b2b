"""g-SDDMM launch plans on the CPU: grids, forced schedules checked against their task, and
launches recorded through a recording loader."""

from __future__ import annotations

import pytest
import torch

import gsparse
from gsparse.kernels.sddmm import (
    Edge,
    EdgeTransposed,
    Row,
    RowTransposed,
    build_plan,
    codegen,
    default_schedule,
    run_sddmm,
    task_for,
)
from gsparse.kernels.sddmm.plan import grid
from gsparse.target import H100

from graphs import named_graph
from kernels.sddmm.support import task
from recording import RecordingLoader


def _built_on_first_use(g: gsparse.Graph, task, schedule, loader: RecordingLoader):
    """What the first call of ``task`` on a GPU builds, built here on an H100's facts with a
    recording loader: the schedule chosen for the task (when none is forced) and its plan,
    kept in the graph's caches where a call looks them up. Returns the schedule."""
    if schedule is None:
        schedule = _h100_rule(g, task)
    g.plans.get((task, schedule), lambda: build_plan(g, task, schedule, loader=loader))
    return schedule


def _h100_rule(g: gsparse.Graph, task, call=None):
    """The hand rule on an H100's facts, chosen once per graph and task: the chooser the
    calls below pass, as a GPU's front end passes the tuner's."""
    return g.schedules.get(task, lambda: default_schedule(task, g.stats, H100))


# --- grids ------------------------------------------------------------------------------------


def test_grid_covers_the_work_and_respects_limits() -> None:
    edge = Edge(groups_per_block=32, lanes=8, features_per_thread=1, vector_width=4)
    assert edge.threads == 256
    assert grid(edge, task("dot", 16, num_heads=8), num_edges=1001, num_rows=10) == (32, 1)
    assert grid(edge, task("dot", 16), num_edges=2**40, num_rows=10)[0] == 2**31 - 1
    row = Row(groups_per_block=8, lanes=4, features_per_thread=1, vector_width=4)
    assert row.threads == 256
    assert grid(row, task("dot", 16, num_heads=8), num_edges=1001, num_rows=17) == (3, 8)
    assert grid(row, task("dot", 16, num_heads=10**6), num_edges=1001, num_rows=17) == (3, 65535)
    # element-wise: feature slices of 16 over y
    assert grid(row, task("add", 100), 1001, 17) == (3, 7)
    # edge_transposed: a warp per range of 32 / lanes * B * 8 edges, heads (dot) or
    # feature slices (element-wise) over y
    ranged = EdgeTransposed(groups_per_block=4, lanes=8, features_per_thread=1, vector_width=4,
                            edges_per_batch=8)
    assert ranged.edges_per_warp == 256 and ranged.threads == 128
    assert grid(ranged, task("dot", 32, num_heads=3), 1025 * 256, 10) == (257, 3)
    assert grid(ranged, task("add", 100), 256, 10) == (1, 4)
    # row_transposed: rows x heads
    transposed = RowTransposed(groups_per_block=4, lanes=32, features_per_thread=1, vector_width=4,
                               edges_per_batch=8)
    assert transposed.threads == 128
    assert grid(transposed, task("dot", 128, num_heads=3), 1001, 17) == (5, 3)


# --- calls that launch nothing ------------------------------------------------------------------


def test_no_edges_launch_nothing() -> None:
    g = named_graph("empty")  # on the CPU: a launch would fail, so none may happen
    x = torch.randn(g.num_src, 8)
    y = torch.randn(g.num_dst, 8)
    assert run_sddmm(g, "dot", x, y, "u", "v", (1,)).shape == (0, 1)
    assert run_sddmm(g, "add", x, y, "u", "v", (8,)).shape == (0, 8)
    assert len(g.plans) == len(g.schedules) == 0


def test_dot_over_nothing_is_zero() -> None:
    g = named_graph("sorted")
    x = torch.randn(g.num_src, 3, 0)
    out = run_sddmm(g, "dot", x, torch.randn(g.num_dst, 3, 0), "u", "v", (3, 1))
    assert torch.equal(out, torch.zeros(g.num_edges, 3, 1))


# --- forced schedules are checked against the task, once, when the plan is built ------------------


def test_forced_schedule_needing_wider_vectors_than_the_data_allows() -> None:
    g = named_graph("sorted")
    # One element past an aligned allocation: rows of 8 floats start 4 bytes off 16.
    x = torch.randn(g.num_src * 8 + 1)[1:].view(g.num_src, 8)
    y = torch.randn(g.num_dst, 8)
    with pytest.raises(ValueError, match="allow at most 1"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,), Edge(groups_per_block=32, lanes=8, vector_width=2))
    with pytest.raises(ValueError, match="allow at most 2"):  # 6 features per head
        run_sddmm(g, "add", torch.randn(g.num_src, 6), torch.randn(g.num_dst, 6), "u", "v",
                  (6,), Edge(groups_per_block=32, lanes=8, vector_width=4))


def test_forced_launch_slices_need_a_wide_dtype_for_dot() -> None:
    g = named_graph("sorted")
    x, y = torch.randn(g.num_src, 64).half(), torch.randn(g.num_dst, 64).half()
    with pytest.raises(ValueError, match="round its partial sums"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,),
                  Edge(groups_per_block=32, lanes=8, vector_width=4, features_per_launch=32))


def test_forced_row_schedule_must_hold_a_dot_head() -> None:
    g = named_graph("sorted")
    x, y = torch.randn(g.num_src, 100), torch.randn(g.num_dst, 100)
    knobs = dict(lanes=8, features_per_thread=2, vector_width=4)
    with pytest.raises(ValueError, match="cannot hold the 100 features of a dot head"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,), Row(groups_per_block=8, **knobs))
    with pytest.raises(ValueError, match="cannot hold the 100 features of a dot head"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,),
                  RowTransposed(groups_per_block=4, edges_per_batch=8, **knobs))
    # launches of 64 features fit the slice; 128 would not
    with pytest.raises(ValueError, match="cannot hold the 100 features of a dot head"):
        run_sddmm(g, "dot", x, y, "u", "v", (1,),
                  Row(groups_per_block=8, features_per_launch=128, **knobs))


def test_forced_transposed_row_schedule_needs_a_dot() -> None:
    # Element-wise operators used to run a row_transposed schedule as the row skeleton;
    # now the caller is told to force that one.
    g = named_graph("sorted")
    x, y = torch.randn(g.num_src, 32), torch.randn(g.num_dst, 32)
    schedule = RowTransposed(groups_per_block=4, lanes=8, vector_width=4, edges_per_batch=8)
    with pytest.raises(ValueError, match=r"transposes a dot's reduction; add has none \(use a Row "
                                         r"schedule\)"):
        run_sddmm(g, "add", x, y, "u", "v", (32,), schedule)


def test_forced_schedule_is_validated() -> None:
    g = named_graph("sorted")
    x, y = torch.randn(g.num_src, 8), torch.randn(g.num_dst, 8)
    with pytest.raises(ValueError, match="lanes must be one of"):
        run_sddmm(g, "add", x, y, "u", "v", (8,), Edge(lanes=5))
    with pytest.raises(TypeError, match=r"must be a g-SDDMM schedule \(Edge, Row, RowTransposed, "
                                        r"EdgeTransposed\), got dict"):
        run_sddmm(g, "add", x, y, "u", "v", (8,), {"lanes": 8})
    with pytest.raises(TypeError, match="got OnePass"):
        run_sddmm(g, "add", x, y, "u", "v", (8,), gsparse.SpmmOnePass())


# --- recorded launches ------------------------------------------------------------------------


def test_a_repeated_call_reuses_its_launch_plan_and_passes_the_new_operands() -> None:
    g, loader = named_graph("random"), RecordingLoader()
    x1, x2 = torch.randn(g.num_src, 64), torch.randn(g.num_src, 64)
    y = torch.randn(g.num_dst, 64)
    sliced = Edge(groups_per_block=32, lanes=8, features_per_launch=32)
    t = task_for(g, "dot", x1, y, "u", "v", (1,))
    _built_on_first_use(g, t, None, loader)
    _built_on_first_use(g, t, sliced, loader)
    # a kernel per launch, looked up when the plan is built: one launch, then one per slice
    assert loader.loaded == [codegen.KERNEL] * 3
    out1 = run_sddmm(g, "dot", x1, y, "u", "v", (1,), choose=_h100_rule)
    out2 = run_sddmm(g, "dot", x2, y, "u", "v", (1,), choose=_h100_rule)
    run_sddmm(g, "dot", x2, y, "u", "v", (1,), sliced)
    assert len(loader.loaded) == 3 and len(g.plans) == 2 and len(g.schedules) == 1
    first, second, *by_slice = loader.launches[codegen.KERNEL]
    assert first.args["lhs"] is x1 and second.args["lhs"] is x2
    assert first.args["out"] is out1 and second.args["out"] is out2 and second.args["rhs"] is y
    assert [second.args[k] for k in ("num_rows", "num_edges", "num_heads", "head_len", "lhs_len",
                                     "rhs_len", "d_begin", "d_end", "accumulate")] == \
        [g.num_dst, g.num_edges, 1, 64, 64, 64, 0, 64, 0]
    # features_per_launch 32: two launches, the second adding to the first's partial sums
    assert [[launch.args[k] for k in ("d_begin", "d_end", "accumulate")] for launch in by_slice] == \
        [[0, 32, 0], [32, 64, 1]]
    assert by_slice[0].args["out"] is by_slice[1].args["out"]


@pytest.mark.parametrize(("schedule", "walks_rows"), [
    (Edge(groups_per_block=32, lanes=8), False),
    (Row(groups_per_block=8, lanes=8), True),
    (RowTransposed(groups_per_block=4, lanes=8, edges_per_batch=8), True),
    (EdgeTransposed(groups_per_block=4, lanes=8, edges_per_batch=8), False),
])
def test_plans_pass_only_the_graph_arrays_their_skeleton_reads(schedule, walks_rows: bool) -> None:
    g, loader = named_graph("random"), RecordingLoader()
    for lhs_target, rhs_target in (("u", "v"), ("e", "v"), ("u", "e")):
        t = task("dot", 8, lhs_target=lhs_target, rhs_target=rhs_target, has_eid=True)
        plan = build_plan(g, t, schedule, loader=loader)
        plan(lhs=None, rhs=None, out=None)
        launch = loader.launches[codegen.KERNEL][-1]
        assert launch.grid == grid(schedule, t, g.num_edges, g.num_dst)
        assert launch.block == schedule.threads
        assert (launch.args["rowptr"] is g.rowptr) == walks_rows
        assert launch.args["rowptr"] is (g.rowptr if walks_rows else None)
        assert launch.args["col"] is (g.col if "u" in (lhs_target, rhs_target) else None)
        uses_v = "v" in (lhs_target, rhs_target) and not walks_rows  # a row is its v
        assert launch.args["dst"] is (g.csr_dst if uses_v else None)
        assert launch.args["eid"] is g.eid


def _two_sampled_blocks() -> list[gsparse.Graph]:
    """Two sampled blocks of 40 and 70 destinations with 5 sources each."""
    blocks = []
    for seed, seeds in ((0, 40), (1, 70)):
        gen = torch.Generator().manual_seed(seed)
        dst = torch.arange(seeds).repeat_interleave(5)
        src = torch.randint(0, seeds, (dst.numel(),), generator=gen)
        blocks.append(gsparse.Graph.from_block(torch.stack([src, dst]), num_src=seeds, num_dst=seeds,
                                               dst_sorted=True, max_degree=5))
    return blocks


def test_sampled_blocks_share_one_prepared_launch_and_pass_their_own_arrays() -> None:
    """A block's plan binds no launch of its own: every block's calls pass their arrays and
    grid to one launch (see gsparse.kernels.source.LaunchTemplate)."""
    loader, schedule = RecordingLoader(), Edge(groups_per_block=32, lanes=8)
    t = task("dot", 8, lhs_target="u", rhs_target="v")
    blocks = _two_sampled_blocks()
    for g in blocks:
        build_plan(g, t, schedule, loader=loader)(lhs=None, rhs=None, out=None)
    assert loader.prepared == [codegen.KERNEL]
    for g, launch in zip(blocks, loader.launches[codegen.KERNEL], strict=True):
        assert launch.args["col"] is g.col and launch.args["dst"] is g.csr_dst
        assert launch.args["num_edges"] == g.num_edges
        assert launch.grid == grid(schedule, t, g.num_edges, g.num_dst)


def test_blocks_sharing_a_launch_pass_their_operands_in_any_order_of_names() -> None:
    """A shared launch works out once per order of names where each slot's value comes from;
    every block bound to it, in either order, passes its own arrays and its call's operands
    to the slots they belong to."""
    loader, schedule = RecordingLoader(), Edge(groups_per_block=32, lanes=8)
    t = task("dot", 8, lhs_target="u", rhs_target="v")
    calls = []
    for g in _two_sampled_blocks():
        plan = build_plan(g, t, schedule, loader=loader)
        lhs, rhs, out = (torch.zeros(1) for _ in range(3))
        plan.positional("lhs", "rhs", "out")(lhs, rhs, out)
        plan.positional("out", "lhs", "rhs")(out, lhs, rhs)
        calls += [(g, lhs, rhs, out)] * 2
    assert loader.prepared == [codegen.KERNEL]
    for (g, lhs, rhs, out), launch in zip(calls, loader.launches[codegen.KERNEL], strict=True):
        assert launch.args["col"] is g.col and launch.args["num_edges"] == g.num_edges
        assert launch.args["lhs"] is lhs and launch.args["rhs"] is rhs and launch.args["out"] is out
