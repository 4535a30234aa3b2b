"""Resolved calls: a repeated call goes from the facts of its operands to its bound launch,
without building its task, choosing its schedule or building its plan again; what a call
resolved to changes when its facts, the graph's schedules or its plans do."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import gsparse
from gsparse import _calls
from gsparse.kernels import memory
from gsparse.kernels import sddmm as sddmm_kernels
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels import source
from gsparse.kernels.source import refuse_capture
from gsparse.kernels.spmm import OnePass
from gsparse.kernels.spmm.codegen import one_pass
from gsparse.tune import select

from cuda_path import cuda_path_on_cpu
from graphs import named_graph


@pytest.fixture
def counted(monkeypatch):
    """Counts the tasks built and the schedules chosen (by the tuner's policy) on the CUDA
    kernels' host path."""
    seen = {"spmm_task": 0, "sddmm_task": 0, "schedule": 0}

    def counting(module, name, key):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            seen[key] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counting(spmm_kernels, "task_for", "spmm_task")
    counting(sddmm_kernels, "task_for", "sddmm_task")
    counting(select, "_decide", "schedule")  # the policy's decision, made once per task
    return seen


def test_a_repeated_call_builds_no_task_schedule_or_plan_again(counted):
    g = named_graph("short_rows")
    x = torch.randn(g.num_src, 16)
    with cuda_path_on_cpu() as loader:
        outs = [gsparse.gspmm(g, "copy_lhs", "sum", x) for _ in range(3)]
        assert counted == {"spmm_task": 1, "sddmm_task": 0, "schedule": 1}
        assert loader.prepared == [one_pass.KERNEL] and len(loader.launches[one_pass.KERNEL]) == 3
        assert [launch.args["out"] for launch in loader.launches[one_pass.KERNEL]] == outs
        assert all(launch.args["lhs"] is x for launch in loader.launches[one_pass.KERNEL])


def test_repeated_training_steps_resolve_nothing_after_the_first(counted):
    g = named_graph("square")
    layer = gsparse.nn.GATConv(8, 4, heads=2)
    x = torch.randn(g.num_src, 8, requires_grad=True)
    with cuda_path_on_cpu() as loader:
        layer(x, g).sum().backward()
        first = (dict(counted), list(loader.prepared), len(loader.order))
        layer(x, g).sum().backward()
        assert (dict(counted), loader.prepared) == first[:2]  # nothing built again ...
        assert len(loader.order) == 2 * first[2]  # ... and every kernel launched again


def test_new_facts_resolve_a_new_call(counted):
    g = named_graph("random")
    flat = torch.randn(g.num_src * 16 + 1)
    x = flat[:-1].view(g.num_src, 16)
    with cuda_path_on_cpu():
        gsparse.gspmm(g, "copy_lhs", "sum", flat[1:].view(g.num_src, 16))  # 4 bytes off: scalars
        gsparse.gspmm(g, "copy_lhs", "sum", x)  # aligned: vectors
        gsparse.gspmm(g, "copy_lhs", "sum", x.double())
        gsparse.gspmm(g, "copy_lhs", "sum", x[:, :8])  # another shape, not contiguous
        gsparse.gspmm(g, "copy_lhs", "sum", x[:, :8])
    assert counted["spmm_task"] == 4
    assert sorted(key[3][3] for key in g.calls._entries) == [-1, 0, 0, 4]
    assert {task.vector_ok for task, _policy, _generation in g.schedules._entries} == {1, 2, 4}


def test_a_new_choice_of_schedule_takes_effect_on_the_next_call():
    g = named_graph("short_rows")
    x = torch.randn(g.num_src, 16)
    with cuda_path_on_cpu() as loader:
        gsparse.gspmm(g, "copy_lhs", "sum", x)
        (key,) = g.schedules._entries
        task = key[0]
        forced = OnePass(rows_per_block=4, feature_lanes=16)
        g.schedules.replace(key, forced)
        gsparse.gspmm(g, "copy_lhs", "sum", x)
        assert (task, forced) in g.plans and len(loader.prepared) == 2
        first, second = loader.launches[one_pass.KERNEL]
        assert second.block == forced.threads != first.block
        g.plans.clear()
        gsparse.gspmm(g, "copy_lhs", "sum", x)
        assert len(loader.prepared) == 3  # plans dropped: built again


def test_a_resolved_call_keeps_validating_calls_with_other_facts():
    g = named_graph("random")
    x = torch.randn(g.num_src, 4)
    gsparse.gspmm(g, "copy_lhs", "sum", x)
    with pytest.raises(ValueError, match="lhs has 7 rows but the graph has 150 source nodes"):
        gsparse.gspmm(g, "copy_lhs", "sum", x[:7])
    with pytest.raises(ValueError, match="op must be one of"):
        gsparse.gspmm(g, "copy", "sum", x)
    with pytest.raises(TypeError, match="lhs must be a torch.Tensor"):
        gsparse.gspmm(g, "copy_lhs", "sum", [1.0])


def test_subclass_tensors_and_autocast_take_the_full_path():
    g = named_graph("random")
    w = torch.nn.Parameter(torch.randn(g.num_src, 4))
    out = gsparse.gspmm(g, "copy_lhs", "sum", w)
    out.sum().backward()
    assert w.grad is not None and not g.calls._entries  # nothing resolved for a Parameter
    x = torch.randn(g.num_src, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert gsparse.gspmm(g, "copy_lhs", "sum", x).dtype == torch.bfloat16
        assert gsparse.gspmm(g, "mul", "sum", x, torch.randn(g.num_edges, 1)).dtype == torch.bfloat16
    assert not g.calls._entries
    gsparse.gspmm(g, "copy_lhs", "sum", x)
    (call,) = g.calls._entries.values()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # a resolved call is not taken either
        assert _calls.find(g, next(iter(g.calls._entries))) is None


def test_resolved_calls_pad_broadcast_operands_and_ignore_unused_ones():
    g = named_graph("random")
    x, w = torch.randn(g.num_src, 2, 3), torch.randn(g.num_edges, 1)  # w padded to [E, 1, 1]
    full = gsparse.gspmm(g, "mul", "sum", x, w)
    again = gsparse.gspmm(g, "mul", "sum", x, w)
    torch.testing.assert_close(again, full)
    ignored = torch.randn(3, requires_grad=True)  # copy_lhs ignores rhs: no gradient for it
    out = gsparse.gspmm(g, "copy_lhs", "sum", x, ignored)
    out = gsparse.gspmm(g, "copy_lhs", "sum", x, ignored)
    assert not out.requires_grad


def test_a_run_that_takes_flat_weights_gets_them_as_given():
    """The CPU backend's weighted sums read one weight per edge whatever its shape: their
    resolved call passes ``[E]`` weights on unpadded (padded for autograd's formulas), and
    the results and gradients do not change."""
    g = named_graph("random")
    x, w = torch.randn(g.num_src, 3, dtype=torch.float64), torch.rand(g.num_edges, dtype=torch.float64)
    want = gsparse.gspmm(g, "mul", "sum", x, w.unsqueeze(-1))
    for _ in range(2):
        torch.testing.assert_close(gsparse.u_mul_e_sum(g, x, w), want, rtol=0, atol=1e-12)
    calls = list(g.calls._entries.values())
    assert [c.shapes for c in calls] == [(None, None), (None, (g.num_edges, 1))]  # autograd pads [E]
    assert [c.flat_rhs for c in calls] == [True, True]
    w.requires_grad_()
    torch.testing.assert_close(gsparse.u_mul_e_sum(g, x, w), want, rtol=0, atol=1e-12)
    gsparse.u_mul_e_sum(g, x, w).sum().backward()
    torch.testing.assert_close(w.grad, gsparse.u_dot_v(g, x, torch.ones(g.num_dst, 3, dtype=torch.float64)).view(-1))


def test_building_a_plan_during_a_capture_is_refused_unless_the_graph_never_waits(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)

    def graph(device: str, sync_free: bool):
        return SimpleNamespace(device=torch.device(device), sync_free=sync_free)

    with pytest.raises(RuntimeError, match="while a CUDA graph was being captured.*Run the same "
                                           "call once before capturing"):
        refuse_capture(graph("cuda:0", sync_free=False), "the task")
    refuse_capture(graph("cuda:0", sync_free=True), "the task")  # a sampled block: host facts only
    refuse_capture(graph("cpu", sync_free=False), "the task")  # only CUDA graphs capture


def test_loading_a_kernel_during_a_capture_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    program = source.Program("extern \"C\" __global__ void k() {}", {}, "a test program")
    with pytest.raises(RuntimeError, match="kernel k .a test program. is first needed while a CUDA graph"):
        source.RUNTIME_LOADER.kernel(program, "k", 0)
    program.loaded[("k", 0)] = "loaded"
    assert source.RUNTIME_LOADER.kernel(program, "k", 0) == "loaded"  # loaded before: no refusal


def test_a_first_call_imports_no_reference_operators():
    """``torch.broadcast_shapes`` imports PyTorch's reference operators and SymPy on its first
    call: 1.6 s of a process's first u_dot_v here, 3-4 s on the H100 machine's first calls.
    A first call of each kind (the CPU backend and the CUDA path's host side) imports no
    SymPy."""
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).parent
    script = (
        "import sys, torch, gsparse\n"
        "from cuda_path import cuda_path_on_cpu\n"
        "ei = torch.randint(0, 300, (2, 2000), generator=torch.Generator().manual_seed(0))\n"
        "g = gsparse.Graph.from_edge_index(ei, num_nodes=300)\n"
        "x, w = torch.randn(300, 8), torch.rand(2000, 1)\n"
        "gsparse.u_dot_v(g, x, x); gsparse.u_mul_e_sum(g, x, w); gsparse.u_add_v(g, x, x)\n"
        "with cuda_path_on_cpu():\n"
        "    gsparse.u_dot_v(g, x, x); gsparse.u_mul_e_sum(g, x, w)\n"
        "print('sympy' in sys.modules)\n")
    env = {**__import__("os").environ, "PYTHONPATH": f"{tests.parent / 'src'}:{tests}"}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert run.stdout.strip().splitlines()[-1] == "False"


def test_each_resolved_call_allocates_fresh_outputs_of_its_own_graph_and_dtype():
    """A resolved call keeps how it allocates its outputs (shape, dtype, device): calls that
    differ in any of them resolve their own, and each call gets new storage, the one its
    launch writes."""
    g, h = named_graph("short_rows"), named_graph("square")
    x = torch.randn(g.num_src, 16)
    with cuda_path_on_cpu() as loader:

        def launched(name: str = "out"):
            return loader.launches[loader.order[-1]][-1].args[name]

        outs = []
        for graph, lhs in ((g, x), (g, x), (g, x.double()), (h, torch.randn(h.num_src, 16))):
            outs.append(gsparse.gspmm(graph, "copy_lhs", "sum", lhs))
            assert launched() is outs[-1]
        assert [(tuple(o.shape), o.dtype) for o in outs] == [
            ((g.num_dst, 16), torch.float32), ((g.num_dst, 16), torch.float32),
            ((g.num_dst, 16), torch.float64), ((h.num_dst, 16), torch.float32)]
        assert len({o.data_ptr() for o in outs}) == 4
        xg = x.clone().requires_grad_()
        winners = set()
        for _ in range(2):  # max records autograd with its winners: three outputs a call
            out = gsparse.gspmm(g, "copy_lhs", "max", xg)
            assert out.shape == (g.num_dst, 16) and launched().data_ptr() == out.data_ptr()
            assert [launched(name).dtype for name in ("out", "arg_u", "arg_e")] == [
                torch.float32, torch.int64, torch.int64]
            winners |= {launched("arg_u").data_ptr(), launched("arg_e").data_ptr()}
        assert len(winners) == 4
        e = gsparse.gsddmm(g, "dot", x, torch.randn(g.num_dst, 16), "u", "v")
        a = gsparse.edge_softmax(h, torch.randn(h.num_edges, 2, 1, dtype=torch.float64))
        assert (tuple(e.shape), e.dtype, tuple(a.shape), a.dtype) == (
            (g.num_edges, 1), torch.float32, (h.num_edges, 2, 1), torch.float64)
        with memory.poisoned() as allocated:  # resolved before: still poisoned inside
            out = gsparse.gspmm(g, "copy_lhs", "sum", x)
        assert torch.isnan(out).all() and allocated == [(g.num_dst, 16)]


class _NoLaunch:
    """A kernel loader whose launches do nothing (no recording: the host steps of a call)."""

    def kernel(self, program, name, device_index):
        return self

    def prepare(self, grid, block, args, *, shared_bytes=0, context=""):
        return lambda *operands: None


# gsparse's host steps per resolved call without autograd on the CUDA host path, up to the
# launch (gsparse functions run, C functions they call); the launch's own are bounded in
# test_runtime. Bounds to lower, never to raise without a reason.
RESOLVED_CALL_STEPS = {"gspmm": (9, 9), "gsddmm": (9, 12), "edge_softmax": (7, 9)}


@pytest.mark.parametrize("name", sorted(RESOLVED_CALL_STEPS))
def test_a_resolved_call_costs_a_bounded_number_of_host_steps(name):
    from host_steps import host_steps

    g = named_graph("short_rows")
    x, y, logits = torch.randn(g.num_src, 16), torch.randn(g.num_dst, 16), torch.randn(g.num_edges, 2)
    call = {"gspmm": lambda: gsparse.gspmm(g, "copy_lhs", "sum", x),
            "gsddmm": lambda: gsparse.gsddmm(g, "dot", x, y, "u", "v"),
            "edge_softmax": lambda: gsparse.edge_softmax(g, logits)}[name]
    with cuda_path_on_cpu(_NoLaunch()):
        for _ in range(3):  # resolved, then its outputs' template built (memory.allocator)
            call()
        steps = host_steps(call)
    python, c = RESOLVED_CALL_STEPS[name]
    assert steps["python"] <= python and steps["c"] <= c, steps["names"]
