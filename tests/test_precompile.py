"""gsparse precompile: the programs the calls of operators and layers need, forward and
backward, compiled into the kernel cache ahead of time, without a GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gsparse import Graph, _block_loops as block_loops, _block_scatter as block_scatter, cli, precompile, runtime
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels.spmm import codegen
from gsparse.target import H100
from gsparse.tune import select

needs_nvrtc = pytest.mark.skipif(runtime.nvrtc_version() is None, reason="needs NVRTC")


def _graph_file(tmp_path) -> tuple[Graph, str]:
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 300, (2, 2_000), generator=gen)
    path = tmp_path / "graph.npz"
    np.savez(path, edge_index=edge_index.numpy(), num_nodes=np.array(300))
    return Graph.from_edge_index(edge_index, num_nodes=300), str(path)


def _program_key(g: Graph, features: int) -> str:
    x = torch.randn(g.num_src, features)
    task = spmm_kernels.task_for(g, "copy_lhs", "sum", x, None, (features,))
    program = codegen.program(task.algorithm, spmm_kernels.default_schedule(task, g.stats, H100), features)
    return runtime.cache_key(program.source, "sm_90", ())


def test_the_traced_tasks_cover_forward_and_backward_with_and_without_edge_ids():
    tasks = precompile.collect_tasks(["u_mul_e_sum"], features=(8,))
    spmm = [t.task for t in tasks if t.kind == "spmm"]
    sddmm = [t.task for t in tasks if t.kind == "sddmm"]
    # forward and the lhs gradient: u_mul_e_sum, on the graph and its reverse; the rhs
    # gradient: a g-SDDMM (dot for the per-edge weights, mul for per-feature ones)
    assert {(t.op, t.rhs_shape, t.has_eid) for t in spmm} == {
        ("mul", shape, eid) for shape in ((8,), (1,)) for eid in (False, True)}
    assert {(t.op, t.has_eid) for t in sddmm} == {(op, eid) for op in ("dot", "mul") for eid in (False, True)}
    models = precompile.collect_tasks([], ["gat"], channels=(16, 16, 3))
    assert {t.kind for t in models} == {"spmm", "sddmm", "softmax"}
    # GAT's attention, forward and backward, each its own fused kernel
    assert {(t.task.direction, t.task.logits) for t in models if t.kind == "softmax"} == {
        ("forward", "gat"), ("backward", "gat")}
    attention = precompile.collect_tasks(["gat_attention"], features=(8,), heads=(4,))
    assert {(t.task.direction, t.task.logits, t.task.num_heads, t.task.has_eid) for t in attention
            if t.kind == "softmax"} == {(d, "gat", 4, eid) for d in ("forward", "backward") for eid in (False, True)}


def test_unknown_operators_and_models_are_named():
    with pytest.raises(ValueError, match="unknown operators \\['u_frob_v'\\]"):
        precompile.collect_tasks(["u_frob_v"])
    with pytest.raises(ValueError, match="unknown models \\['gin'\\]"):
        precompile.collect_tasks([], ["gin"])


def test_the_grid_holds_full_batch_and_block_statistics():
    assert all(s.rows.exact for s in precompile.full_batch_grid())
    blocks = precompile.block_grid()
    assert blocks and not any(s.rows.exact for s in blocks)


@needs_nvrtc
def test_precompile_fills_the_cache_with_what_a_first_call_loads(tmp_path):
    g, path = _graph_file(tmp_path)
    cache = runtime.KernelCache(tmp_path / "cache")
    forward, backward = _program_key(g, 8), _program_key(g.reverse(), 8)
    assert cache.get(forward) is None
    report = precompile.precompile(["copy_u_sum"], features=(8,), graphs=[path], grid=False,
                                   archs=("sm_90",), cache=cache, workers=2)
    assert report.compiled == report.programs > 0 and not report.failed
    assert cache.get(forward) is not None and cache.get(backward) is not None
    assert all(cache.get(runtime.cache_key(block_scatter.source(*pair), "sm_90", ())) is not None
               for pair in block_scatter.PROGRAMS)
    assert all(cache.get(runtime.cache_key(block_loops.source(index), "sm_90", ())) is not None
               for index in block_loops.PROGRAMS)
    again = precompile.precompile(["copy_u_sum"], features=(8,), graphs=[path], grid=False,
                                  archs=("sm_90",), cache=cache, workers=2)
    assert again.compiled == 0 and again.cached == report.programs


def test_the_command_is_wired_into_gsparse(tmp_path, capsys):
    _, path = _graph_file(tmp_path)
    assert cli.main(["precompile", "--ops", "copy_u_sum", "--features", "8", "--no-grid",
                     "--graph", path, "--archs", "sm_90", "--dry-run"]) == 0
    assert "tasks" in capsys.readouterr().out
    capsys.readouterr()
    assert cli.main(["precompile", "--dtypes", "float8", "--dry-run"]) == 2
    assert "gsparse precompile: unknown dtype 'float8'" in capsys.readouterr().err
    assert cli.main(["precompile", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
    assert cli.main(["info", "--bogus"]) == 2


def test_a_real_graph_also_gets_the_cost_models_pick(tmp_path):
    """Calls run the shipped model's pick by default: on a graph given to precompile, that
    is what must be in the cache (the grid, with statistics only, gets the hand rule's)."""
    g, _ = _graph_file(tmp_path)
    tasks = {t for t in precompile.collect_tasks(["copy_u_sum"], features=(32,)) if t.kind == "spmm"}
    found = precompile.programs(tasks, [], H100, [g, g.reverse()])
    for graph in (g, g.reverse()):
        for item in tasks:
            pick = select.model_choice("spmm", graph, item.task, H100)
            assert codegen.program(item.task.algorithm, pick, item.task.num_features).source in found
    assert precompile.programs(tasks, [], H100) == {}


def test_the_triangular_solvers_fast_start_and_checks_are_counted_per_dtype_and_rhs():
    found = precompile.sptrsv_programs([torch.float32, torch.float64, torch.bfloat16], [1, 16])
    # per solver dtype: the checks, then lower/upper x unit or not x (k = 1: the rule's eleven schemes,
    # six of them lane rows by level; 16: its two of a warp per row and six of a row a subwarp);
    # and the levels kernel, lower and upper, for either dtype
    assert len(found) == 2 * (1 + 2 * 2 * 11 + 2 * 2 * 8) + 2
    assert precompile.sptrsv_programs([torch.bfloat16], [1]) == {}
    with pytest.raises(ValueError, match="sptrsv_rhs must hold positive numbers of right-hand sides"):
        precompile.precompile([], sptrsv_rhs=(0,), dry_run=True)


@needs_nvrtc
def test_precompile_fills_the_cache_with_a_triangular_solvers_first_programs(tmp_path):
    """What a TriangularSolver on a mesh factor compiles before its first fast-start solve
    (the factor checks, the fast start's kernel and, by level, the levels kernel) is in the
    cache after precompile."""
    from gsparse.kernels.sptrsv import checks
    from gsparse.kernels.sptrsv.codegen import levels_program, natural_program
    from gsparse.kernels.sptrsv.default import natural_schedule
    from gsparse.kernels.sptrsv.stats import PatternStats
    from gsparse.kernels.sptrsv.task import SptrsvTask

    cache = runtime.KernelCache(tmp_path / "cache")
    task = SptrsvTask(torch.float64, torch.int32, True, False, False, 1)
    mesh = PatternStats(500_000, 1_500_000, 3, 500_000)  # a 2-D mesh's rows, one right-hand side
    scheme = natural_schedule(mesh, task, H100, lambda: 1_414)  # laplacian2d 500K's levels
    assert scheme.level_order
    wanted = [natural_program(task.algorithm, scheme).source, checks.checks_program(torch.float64).source,
              levels_program(torch.int32, True).source]
    assert all(cache.get(runtime.cache_key(source, "sm_90", ())) is None for source in wanted)
    report = precompile.precompile([], dtypes=(torch.float64,), grid=False, archs=("sm_90",),
                                   sptrsv_rhs=(1,), cache=cache, workers=2)
    # the mini-batch programs (block checks, feature gather, four of the block scatter, two of
    # the block loops), the factor checks, the fast start's kernels, the levels kernels
    assert report.compiled == report.programs == 8 + 1 + 2 * 2 * 11 + 2 and not report.failed
    assert all(cache.get(runtime.cache_key(source, "sm_90", ())) is not None for source in wanted)
