"""Edge softmax launch plans on the CPU: launches recorded through a recording loader, the
front end's checks, and calls that launch nothing."""

from __future__ import annotations

import pytest
import torch

import gsparse
from gsparse.kernels.softmax import (
    SoftmaxTask,
    WarpPerRow,
    build_plan,
    codegen,
    default_schedule,
    run_edge_softmax,
    run_edge_softmax_backward,
)

from gsparse.target import H100

from graphs import named_graph
from recording import RecordingLoader


def _built_on_first_use(rows: gsparse.Graph, direction: str, dtype: torch.dtype, num_heads: int,
                        loader: RecordingLoader) -> None:
    """What the first call over ``rows`` builds on a GPU, built here with a recording loader
    and kept in the rows' plans, where a call looks it up."""
    task = SoftmaxTask(direction, dtype, rows.index_dtype, rows.eid is not None, num_heads)
    schedule = default_schedule(task, rows.stats, H100)
    rows.plans.get(task, lambda: build_plan(rows, task, schedule, loader=loader))


def test_no_edges_launch_nothing() -> None:
    g = named_graph("empty")  # on the CPU: a launch would fail, so none may happen
    assert run_edge_softmax(g, torch.randn(0, 8, 1)).shape == (0, 8, 1)
    assert run_edge_softmax(g, torch.randn(0), "src").shape == (0,)
    assert run_edge_softmax_backward(g, torch.randn(0, 4), torch.randn(0, 4)).shape == (0, 4)
    assert len(g.plans) == 0


def test_backward_checks_its_operands_and_norm_by() -> None:
    g = named_graph("random")
    with pytest.raises(ValueError, match="same shape and dtype"):
        run_edge_softmax_backward(g, torch.randn(g.num_edges, 2), torch.randn(g.num_edges, 3))
    with pytest.raises(ValueError, match="norm_by must be 'dst' or 'src'"):
        run_edge_softmax(g, torch.randn(g.num_edges), "both")


@pytest.mark.parametrize("warps", [4, 8, 32])
def test_plan_launches_a_warp_per_row(warps: int) -> None:
    g, loader = named_graph("random"), RecordingLoader()
    task = SoftmaxTask("backward", torch.float32, g.index_dtype, True, 3)
    plan = build_plan(g, task, WarpPerRow(warps_per_block=warps), loader=loader)
    y, dy, dz = (torch.randn(g.num_edges, 3) for _ in range(3))
    plan(y=y, dy=dy, dz=dz)
    launch = loader.only("edge_softmax_backward")
    assert launch.grid == (-(-g.num_dst // warps),) and launch.block == 32 * warps
    assert launch.args["rowptr"] is g.rowptr and launch.args["eid"] is g.eid
    assert launch.args["y"] is y and launch.args["dy"] is dy and launch.args["dz"] is dz
    assert (launch.args["num_rows"], launch.args["num_heads"]) == (g.num_dst, 3)
    with pytest.raises(TypeError, match=r"this launch takes the operands \['y', 'dy', 'dz'\]"):
        plan(x=y, y=dz)


def test_repeated_calls_reuse_their_plans_and_pass_the_new_values() -> None:
    g, loader = named_graph("random"), RecordingLoader()
    for direction, heads in (("forward", 4), ("forward", 2), ("backward", 4)):
        _built_on_first_use(g, direction, torch.float32, heads, loader)
    z1, z2 = torch.randn(g.num_edges, 4), torch.randn(g.num_edges, 4)
    y1, y2 = run_edge_softmax(g, z1), run_edge_softmax(g, z2)
    run_edge_softmax(g, torch.randn(g.num_edges, 2))  # other head count: other plan
    dz = run_edge_softmax_backward(g, y1, z1)
    assert loader.loaded == [codegen.kernel_name("forward")] * 2 + [codegen.kernel_name("backward")]
    assert len(g.plans) == 3
    first, second, other = loader.launches["edge_softmax_forward"]
    assert first.args["x"] is z1 and second.args["x"] is z2
    assert first.args["y"] is y1 and second.args["y"] is y2
    assert other.args["num_heads"] == 2
    backward = loader.only("edge_softmax_backward")
    assert backward.args["y"] is y1 and backward.args["dy"] is z1 and backward.args["dz"] is dz


def test_norm_by_src_walks_the_reverse_graphs_rows() -> None:
    g, loader = named_graph("random"), RecordingLoader()
    rows = g.reverse()
    _built_on_first_use(rows, "forward", torch.float32, 1, loader)
    z = torch.randn(g.num_edges)
    run_edge_softmax(g, z, "src")
    launch = loader.only("edge_softmax_forward")
    assert launch.args["rowptr"] is rows.rowptr and launch.args["eid"] is rows.eid
    assert launch.args["num_rows"] == g.num_src and launch.args["x"] is z
    assert len(rows.plans) == 1 and len(g.plans) == 0
