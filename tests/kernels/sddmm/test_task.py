"""What a g-SDDMM call computes: its task (a plan's key), heads, and the algorithm codegen sees."""

from __future__ import annotations

import pytest
import torch

from gsparse.kernels import sddmm as sddmm_kernels
from gsparse.kernels.operands import Layout
from gsparse.kernels.sddmm import SddmmAlgorithm

from graphs import named_graph


def test_algorithm_rejects_operands_the_op_does_not_read() -> None:
    with pytest.raises(ValueError, match="ignores rhs"):
        SddmmAlgorithm("copy_lhs", "u", "v", Layout.FULL, Layout.FULL, torch.float32,
                       torch.int32, False)
    with pytest.raises(ValueError, match="reads lhs"):
        SddmmAlgorithm("add", None, "v", None, Layout.FULL, torch.float32, torch.int32, False)
    with pytest.raises(ValueError, match="give both its target and layout, or neither"):
        SddmmAlgorithm("add", "u", "v", None, Layout.FULL, torch.float32, torch.int32, False)
    with pytest.raises(ValueError, match="lhs_target must be one of"):
        SddmmAlgorithm("add", "w", "v", Layout.FULL, Layout.FULL, torch.float32, torch.int32, False)


def test_a_dot_reduces_its_heads_last_dimension() -> None:
    g = named_graph("random")
    x, y = torch.randn(g.num_src, 4, 16), torch.randn(g.num_dst, 1, 16)
    dot = sddmm_kernels.task_for(g, "dot", x, y, "u", "v", (4, 1))
    assert (dot.num_heads, dot.head_len, dot.full_shape) == (4, 16, (4, 16))
    assert dot.algorithm.rhs_layout is Layout.INDEXED and dot.is_dot
    assert str(dot) == "dot lhs:u:full/rhs:v:indexed float32 int32 eid [4 x 16 features]"
    # element-wise operators are the one-head case: every output feature is the head's
    add = sddmm_kernels.task_for(g, "add", x, y, "u", "v", (4, 16))
    assert (add.num_heads, add.head_len, add.full_shape) == (1, 64, (4, 16))
    assert (add.lhs_len, add.rhs_len) == (64, 16)


def test_targets_are_kept_only_for_the_operands_the_op_reads() -> None:
    g = named_graph("sorted")
    t = sddmm_kernels.task_for(g, "copy_rhs", None, torch.randn(g.num_edges, 6), "u", "e", (6,))
    assert (t.lhs_target, t.rhs_target, t.lhs_shape) == (None, "e", None)
    assert not t.has_eid and t.algorithm.targets() == {"e"}


def test_vectors_are_as_wide_as_the_head_and_the_operands_alignment_allow() -> None:
    g = named_graph("sorted")
    y = torch.randn(g.num_dst, 8)
    assert sddmm_kernels.task_for(g, "dot", torch.randn(g.num_src, 8), y, "u", "v", (1,)).vector_ok == 4
    assert sddmm_kernels.task_for(g, "add", torch.randn(g.num_src, 6), torch.randn(g.num_dst, 6),
                                  "u", "v", (6,)).vector_ok == 2
    # one element past an aligned allocation: rows of 8 floats start 4 bytes off 16
    shifted = torch.randn(g.num_src * 8 + 1)[1:].view(g.num_src, 8)
    assert sddmm_kernels.task_for(g, "dot", shifted, y, "u", "v", (1,)).vector_ok == 1


def test_a_repeated_call_has_the_same_task_and_a_new_head_length_another() -> None:
    g = named_graph("random")

    def task(features: int, dtype=torch.float32):
        x = torch.randn(g.num_src, features, dtype=dtype)
        y = torch.randn(g.num_dst, features, dtype=dtype)
        return sddmm_kernels.task_for(g, "dot", x, y, "u", "v", (1,))

    assert task(64) == task(64)
    assert len({task(64), task(32), task(64, torch.float64)}) == 3
