"""Fused edge softmax kernels: code generation (NVRTC, no GPU) and GPU results."""

from __future__ import annotations

import itertools

import pytest
import torch

import gsparse
from gsparse.backends import cpu
from gsparse.kernels import softmax as softmax_kernels
from gsparse.kernels.softmax import (
    generate,
    head_lanes,
    run_edge_softmax,
    run_edge_softmax_backward,
)
from gsparse.runtime import compile_cuda, nvrtc_version
from gsparse.testing.reference import edge_softmax_ref

from graphs import named_graph, random_features
from recording import RecordingKernel

needs_nvrtc = pytest.mark.skipif(nvrtc_version() is None, reason="needs NVRTC")
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# --- code generation, compiled with NVRTC (no GPU) ----------------------------------------


@pytest.mark.parametrize(("heads", "lanes"), [(1, 1), (2, 2), (3, 4), (8, 8), (20, 32), (100, 32)])
def test_head_lanes(heads: int, lanes: int) -> None:
    assert head_lanes(heads) == lanes


def _variants() -> list[tuple]:
    every = list(itertools.product(("forward", "backward"), DTYPES, (torch.int32, torch.int64),
                                   (False, True), (1, 2, 4, 8, 16, 32)))
    return every[::7]  # a spread over every axis


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(("direction", "dtype", "index_dtype", "has_eid", "lanes"), _variants(),
                         ids=str)
def test_kernels_compile_without_spills(arch, direction, dtype, index_dtype, has_eid, lanes) -> None:
    program = generate(direction, dtype, index_dtype, has_eid, lanes)
    binary = compile_cuda(program.source, arch=arch, cache=None)
    resources = binary.resources[program.kernel_name]
    assert resources.spill_stores == 0 and resources.stack_bytes == 0, binary.log
    assert resources.registers * program.block <= 65536


def test_generated_source_reads_well() -> None:
    program = generate("forward", torch.bfloat16, torch.int64, True, 8)
    assert program.kernel_name == "edge_softmax_forward"
    assert program.source.startswith(
        "// gsparse edge softmax, forward: bfloat16 int64 eid, 8 lanes per edge")
    assert "return (long long)eid[p];" in program.source
    backward = generate("backward", torch.float32, torch.int32, False, 1).source
    assert "return p;" in backward
    assert "dz[i] = gs::from_acc<T>(yi * (gs::to_acc(dy[i]) - s));" in backward


def test_generate_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="direction must be one of"):
        generate("sideways", torch.float32, torch.int32, False, 1)
    with pytest.raises(ValueError, match="heads_lanes must be a power of two"):
        generate("forward", torch.float32, torch.int32, False, 3)


def test_no_edges_launch_nothing() -> None:
    g = named_graph("empty")  # on the CPU: a launch would fail, so none may happen
    assert run_edge_softmax(g, torch.randn(0, 8, 1)).shape == (0, 8, 1)
    assert run_edge_softmax(g, torch.randn(0), "src").shape == (0,)
    assert run_edge_softmax_backward(g, torch.randn(0, 4), torch.randn(0, 4)).shape == (0, 4)


def test_kernels_are_looked_up_once_per_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    # runtime.get_kernel hashes the whole source: a repeated call must not pay for it again.
    looked_up, kernel = [], RecordingKernel()

    def get_kernel(source, name, *, context="", device=None):
        looked_up.append(name)
        return kernel

    monkeypatch.setattr(softmax_kernels.runtime, "get_kernel", get_kernel)
    softmax_kernels._kernel.cache_clear()
    try:
        g = named_graph("random")
        z1, z2 = torch.randn(g.num_edges, 4), torch.randn(g.num_edges, 4)
        y1, y2 = run_edge_softmax(g, z1), run_edge_softmax(g, z2)
        run_edge_softmax(g, torch.randn(g.num_edges, 2))  # other head count: other kernel
        run_edge_softmax_backward(g, y1, z1)
    finally:
        softmax_kernels._kernel.cache_clear()
    assert looked_up == ["edge_softmax_forward"] * 2 + ["edge_softmax_backward"]
    (_, _, first), (_, _, second), *_ = kernel.launches
    assert first[2] is z1 and second[2] is z2 and first[3] is y1 and second[3] is y2


def test_backward_checks_its_operands_and_norm_by() -> None:
    g = named_graph("random")
    with pytest.raises(ValueError, match="same shape and dtype"):
        run_edge_softmax_backward(g, torch.randn(g.num_edges, 2), torch.randn(g.num_edges, 3))
    with pytest.raises(ValueError, match="norm_by must be 'dst' or 'src'"):
        run_edge_softmax(g, torch.randn(g.num_edges), "both")


# --- GPU: results against the float64 reference -------------------------------------------

gpu = pytest.mark.gpu


@pytest.fixture
def poisoned(monkeypatch: pytest.MonkeyPatch) -> list:
    """Outputs start as NaN: every element must be written. Records each allocation."""
    calls = []

    def allocate(like):
        calls.append(like.shape)
        return torch.full(like.shape, float("nan"), dtype=like.dtype, device=like.device)

    monkeypatch.setattr(softmax_kernels, "_allocate", allocate)
    return calls


def _tolerance(dtype: torch.dtype) -> dict:
    return {
        torch.float16: {"rtol": 2e-3, "atol": 1e-3},
        torch.bfloat16: {"rtol": 1.6e-2, "atol": 8e-3},
        torch.float32: {"rtol": 1e-5, "atol": 1e-6},
        torch.float64: {"rtol": 1e-12, "atol": 1e-13},
    }[dtype]


def _check_forward(g, logits, norm_by) -> None:
    out = run_edge_softmax(g.to("cuda"), logits.cuda(), norm_by)
    expected = edge_softmax_ref(g, logits, norm_by)
    torch.testing.assert_close(out.cpu().double(), expected.to(logits.dtype).double(),
                               **_tolerance(logits.dtype), msg=lambda m: f"{norm_by}: {m}")


def _check_backward(g, logits, norm_by) -> None:
    x = logits.double().requires_grad_()
    y64 = cpu.BACKEND.edge_softmax(g, x, norm_by)
    dy = random_features(tuple(logits.shape), torch.float64, 7)
    (expected,) = torch.autograd.grad(y64, x, dy)
    dtype = logits.dtype
    out = run_edge_softmax_backward(g.to("cuda"), y64.detach().to("cuda", dtype),
                                    dy.to("cuda", dtype), norm_by)
    torch.testing.assert_close(out.cpu().double(), expected.to(dtype).double(),
                               **_tolerance(dtype), msg=lambda m: f"backward {norm_by}: {m}")


SHAPES = [(), (8, 1), (3,), (40,)]  # one head, GAT's 8 heads, 3 heads, more heads than lanes


@gpu
@pytest.mark.parametrize("norm_by", ["dst", "src"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["random", "sorted", "int64"])
def test_forward_and_backward_match_reference(poisoned, kind, dtype, norm_by) -> None:
    g = named_graph(kind)
    for i, shape in enumerate(SHAPES):
        logits = random_features((g.num_edges, *shape), dtype, seed=i)
        _check_forward(g, logits, norm_by)
        _check_backward(g, logits, norm_by)
    assert len(poisoned) == 2 * len(SHAPES)


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_logits_stay_finite(poisoned, dtype) -> None:
    # exp(z) overflows for every one of these; exp(z - max) does not.
    g = named_graph("random")
    logits = random_features((g.num_edges, 8, 1), dtype, seed=3) * 1e3 + 5e4
    out = run_edge_softmax(g.to("cuda"), logits.cuda())
    assert torch.isfinite(out).all()
    _check_forward(g, logits, "dst")
    _check_forward(g, -logits, "src")


@gpu
@pytest.mark.parametrize("shape", [(), (8, 1)])
def test_hundred_thousand_edge_row(poisoned, shape) -> None:
    g = named_graph("long_row")
    logits = random_features((g.num_edges, *shape), torch.float32, seed=4)
    for norm_by in ("dst", "src"):
        _check_forward(g, logits, norm_by)
        _check_backward(g, logits, norm_by)


@gpu
def test_graph_without_edges(poisoned) -> None:
    g = named_graph("empty").to("cuda")
    assert run_edge_softmax(g, torch.randn(0, 8, 1, device="cuda")).shape == (0, 8, 1)
    y = torch.randn(0, 8, 1, device="cuda")
    assert run_edge_softmax_backward(g, y, y, "src").shape == (0, 8, 1)


@gpu
def test_front_end_runs_the_fused_kernel(poisoned) -> None:
    g = named_graph("random")
    logits = random_features((g.num_edges, 8, 1), torch.float32, seed=5)
    out = gsparse.edge_softmax(g.to("cuda"), logits.cuda())
    assert len(poisoned) == 1, "the CUDA backend did not run gsparse.kernels.softmax"
    torch.testing.assert_close(out.cpu().double(), edge_softmax_ref(g, logits),
                               **_tolerance(torch.float32))
