"""Edge softmax code generation: sources that read well, and NVRTC builds for sm_80 and
sm_90 without spills (no GPU needed)."""

from __future__ import annotations

import itertools

import pytest
import torch

from gsparse.kernels.softmax import SoftmaxTask, WarpPerRow, codegen, schedule_space
from gsparse.runtime import compile_cuda

from kernels.support import DTYPES, assert_no_spills, needs_nvrtc


def _variants() -> list[tuple]:
    every = list(itertools.product(("forward", "backward"), DTYPES, (torch.int32, torch.int64),
                                   (False, True), (1, 2, 4, 8, 16, 32)))
    return every[::7]  # a spread over every axis


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(("direction", "dtype", "index_dtype", "has_eid", "lanes"), _variants(),
                         ids=str)
def test_kernels_compile_without_spills(arch, direction, dtype, index_dtype, has_eid, lanes) -> None:
    task = SoftmaxTask(direction, dtype, index_dtype, has_eid, num_heads=lanes)
    assert task.lanes == lanes
    schedule = WarpPerRow()
    program = codegen.program(task, schedule)
    binary = compile_cuda(program.source, arch=arch, cache=None)
    assert_no_spills(binary, codegen.kernel_name(direction), schedule.threads)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("warps", [4, 8, 16, 32])
@pytest.mark.parametrize("flight", [1, 2, 4, 8])
@pytest.mark.parametrize("num_heads", [1, 8])
@pytest.mark.parametrize("logits", ["given", "gat"])
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_every_schedule_of_the_space_compiles_without_spills(direction, logits, num_heads, flight, warps,
                                                             arch) -> None:
    # a single head (the running state alone spilled without a register budget) and GAT's
    # case: 8 heads, edge ids, int64 indices; fp64 holds twice the registers in flight; the
    # lanes a row vary with the other knobs (a group narrower than the heads walks them in turn)
    dtype = torch.float64 if flight == 8 and warps == 32 else torch.float32
    gat = logits == "gat"
    task = SoftmaxTask(direction, dtype, torch.int64, True, num_heads, logits, gat, gat)
    lanes = (1, 2, 4, 8, 16, 32)[(warps.bit_length() + flight.bit_length() + num_heads) % 6]
    schedule = WarpPerRow(warps_per_block=warps, edges_in_flight=flight, lanes_per_row=lanes)
    if schedule not in schedule_space(task, None, None):  # pruned: its registers cannot fit
        assert gat and dtype == torch.float64 and warps == 32
        schedule = WarpPerRow(warps_per_block=16, edges_in_flight=flight, lanes_per_row=lanes)
    binary = compile_cuda(codegen.program(task, schedule).source, arch=arch, cache=None)
    assert_no_spills(binary, codegen.kernel_name(direction, logits), schedule.threads)


def test_generated_source_reads_well() -> None:
    forward = codegen.program(SoftmaxTask("forward", torch.bfloat16, torch.int64, True, 8), WarpPerRow())
    assert list(forward.kernels) == [codegen.kernel_name("forward")] == ["edge_softmax_forward"]
    assert forward.source.startswith(
        "// gsparse edge softmax, forward: bfloat16 int64 eid, 8 lanes per edge")
    assert f"// schedule warp_per_row.w8: {WarpPerRow().to_json()}" in forward.source
    assert "return (long long)eid[p];" in forward.source
    # 256 threads, 4 blocks per SM: a budget of 64 registers a thread
    assert "__launch_bounds__(256, 4)" in forward.source
    backward = codegen.program(SoftmaxTask("backward", torch.float32, torch.int32, False, 1),
                               WarpPerRow(warps_per_block=4)).source
    assert "return p;" in backward and "__launch_bounds__(128, 8)" in backward
    assert "store(i_u[u], y_u[u] * (dy_u[u] - s), f_u[u]);" in backward
    assert "dz[i] = gs::from_acc<T>(v);" in backward and "d_dst" not in backward
    assert "constexpr int U = 1;" in backward
    flight = codegen.program(SoftmaxTask("backward", torch.float32, torch.int32, False, 1),
                             WarpPerRow(edges_in_flight=4)).source
    assert "constexpr int U = 4;" in flight and "// schedule warp_per_row.w8.f4:" in flight


def _gat_variants() -> list[tuple]:
    every = list(itertools.product(("forward", "backward"), DTYPES, (torch.int32, torch.int64),
                                   (False, True), (False, True), (False, True), (1, 8, 32)))
    return every[::5]


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(("direction", "dtype", "index_dtype", "has_eid", "edge_scores", "masked", "heads"),
                         _gat_variants(), ids=str)
def test_gat_attention_kernels_compile_without_spills(arch, direction, dtype, index_dtype, has_eid,
                                                      edge_scores, masked, heads) -> None:
    task = SoftmaxTask(direction, dtype, index_dtype, has_eid, heads, "gat", edge_scores, masked)
    for kept in (False, True) if direction == "forward" else (False,):
        schedule = WarpPerRow(edges_in_flight=8, lanes_per_row=(4, 16, 32)[heads % 3], logits_in_output=kept)
        binary = compile_cuda(codegen.program(task, schedule).source, arch=arch, cache=None)
        assert_no_spills(binary, codegen.kernel_name(direction, "gat"), schedule.threads)


def test_gat_attention_source_computes_its_logits_where_it_reads_them() -> None:
    forward = codegen.program(SoftmaxTask("forward", torch.float32, torch.int32, False, 8, "gat"),
                              WarpPerRow()).source
    assert forward.startswith("// gsparse edge softmax, forward: float32 int32, 8 lanes per edge, GAT's logits\n")
    assert "score_src[(long long)col[p] * num_heads + h]" in forward
    assert "edge_scores[" not in forward.split("{", 1)[1].split("gat_attention_forward", 1)[-1].split(")", 1)[1]
    assert "masked[edge(p)]" not in forward and "x[" not in forward
    both = codegen.program(SoftmaxTask("backward", torch.bfloat16, torch.int64, True, 8, "gat", True, True),
                           WarpPerRow()).source
    assert "edge_scores[edge(p) * num_heads + h]" in both and "if (masked[edge(p)])" in both
    assert "d_dst[row * num_heads + h] = gs::from_acc<T>(row_grad);" in both


def test_gat_forward_keeps_its_logits_in_the_output_when_told() -> None:
    task = SoftmaxTask("forward", torch.bfloat16, torch.int32, False, 8, "gat", False, True)
    kept = codegen.program(task, WarpPerRow(edges_in_flight=4, logits_in_output=True)).source
    again = codegen.program(task, WarpPerRow(edges_in_flight=4)).source
    # the first pass writes each logit where the second reads it back instead of gathering
    assert "const auto keep = [&](long long i, A z) { y[i] = gs::from_acc<T>(z); };" in kept
    assert "const auto relogit = [&](long long i, long long) -> A { return gs::to_acc(y[i]); };" in kept
    assert "const auto relogit = logit;" in again and "y[i] = gs::from_acc<T>(z);" not in again
    assert "// schedule warp_per_row.w8.f4.lo:" in kept
    for other in (SoftmaxTask("backward", torch.float32, torch.int32, False, 1, "gat"),
                  SoftmaxTask("forward", torch.float32, torch.int32, False, 1)):
        with pytest.raises(ValueError, match="logits_in_output is a schedule of GAT's forward"):
            codegen.program(other, WarpPerRow(logits_in_output=True))


def test_gat_tasks_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="logits must be one of"):
        SoftmaxTask("forward", torch.float32, torch.int32, False, 1, "relu")
    with pytest.raises(ValueError, match="belong to GAT's logits"):
        SoftmaxTask("forward", torch.float32, torch.int32, False, 1, masked=True)


def test_signatures_name_each_directions_values() -> None:
    forward = codegen.signature(SoftmaxTask("forward", torch.float32, torch.int32, False, 1))
    backward = codegen.signature(SoftmaxTask("backward", torch.float32, torch.int32, False, 1))
    assert [p for _, p in forward.params] == ["rowptr", "eid", "x", "y", "num_rows", "num_heads"]
    assert [p for _, p in backward.params] == ["rowptr", "eid", "y", "dy", "dz", "num_rows",
                                               "num_heads"]
    gat = codegen.signature(SoftmaxTask("forward", torch.float32, torch.int32, False, 1, "gat"))
    assert gat.name == "gat_attention_forward"
    assert [p for _, p in gat.params] == ["rowptr", "col", "eid", "score_src", "score_dst", "edge_scores",
                                          "masked", "y", "num_rows", "num_heads", "negative_slope"]
    gat_back = codegen.signature(SoftmaxTask("backward", torch.float32, torch.int32, False, 1, "gat"))
    assert [p for _, p in gat_back.params] == ["rowptr", "col", "eid", "y", "dy", "score_src", "score_dst",
                                               "edge_scores", "masked", "dz", "d_dst", "num_rows",
                                               "num_heads", "negative_slope"]


def test_programs_are_generated_once_per_task_and_schedule() -> None:
    task = SoftmaxTask("forward", torch.float32, torch.int32, False, 4)
    assert codegen.program(task, WarpPerRow()) is codegen.program(task, WarpPerRow())
    assert codegen.program(task, WarpPerRow()) is not codegen.program(task, WarpPerRow(warps_per_block=4))


def test_program_refuses_an_invalid_schedule() -> None:
    with pytest.raises(ValueError, match="warps_per_block must be one of"):
        codegen.program(SoftmaxTask("forward", torch.float32, torch.int32, False, 4),
                        WarpPerRow(warps_per_block=3))
