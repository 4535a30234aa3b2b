"""What a g-SpMM call computes: its task (a plan's key) and the algorithm codegen sees."""

from __future__ import annotations

import pytest
import torch

from gsparse import Graph
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels.operands import Layout
from gsparse.kernels.spmm import SpmmAlgorithm

from graphs import named_graph


def test_algorithm_rejects_operands_the_op_does_not_read() -> None:
    with pytest.raises(ValueError, match="ignores rhs"):
        SpmmAlgorithm("copy_lhs", "sum", Layout.FULL, Layout.FULL, torch.float32, torch.int32, False)
    with pytest.raises(ValueError, match="reads rhs"):
        SpmmAlgorithm("mul", "sum", Layout.FULL, None, torch.float32, torch.int32, False)
    with pytest.raises(ValueError, match="keeps no arg index"):
        SpmmAlgorithm("copy_lhs", "sum", Layout.FULL, None, torch.float32, torch.int32, False, True)


def test_task_holds_what_the_host_knows_of_a_call() -> None:
    g = named_graph("random")
    x, w = torch.randn(g.num_src, 3, 8), torch.randn(g.num_edges, 1, 1)
    task = spmm_kernels.task_for(g, "mul", "max", x, w, (3, 8), with_arg=True)
    assert (task.lhs_shape, task.rhs_shape, task.out_shape) == ((3, 8), (1, 1), (3, 8))
    assert (task.num_features, task.lhs_len, task.rhs_len) == (24, 24, 1)
    assert task.has_eid and task.with_arg and task.vector_ok == 4
    assert task.algorithm == SpmmAlgorithm("mul", "max", Layout.FULL, Layout.SCALAR, torch.float32,
                                           torch.int32, has_eid=True, with_arg=True)
    assert str(task) == "mul.max lhs:full/rhs:scalar float32 int32 eid arg [24 features]"


def test_edge_ids_are_read_only_where_a_kernel_needs_them() -> None:
    g, x = named_graph("random"), torch.randn(150, 8)
    assert g.eid is not None
    assert not spmm_kernels.task_for(g, "copy_lhs", "sum", x, None, (8,)).has_eid
    assert spmm_kernels.task_for(g, "copy_lhs", "max", x, None, (8,), with_arg=True).has_eid
    sorted_graph = named_graph("sorted")  # CSR order is edge order: no edge ids at all
    assert not spmm_kernels.task_for(sorted_graph, "copy_lhs", "max", x, None, (8,), True).has_eid


def test_vectors_are_as_wide_as_the_operands_alignment_and_row_length_allow() -> None:
    g = named_graph("random")
    # at most 16 bytes: 4 floats, 8 halves, 2 doubles
    assert spmm_kernels.task_for(g, "copy_lhs", "sum", torch.randn(150, 8), None, (8,)).vector_ok == 4
    assert spmm_kernels.task_for(g, "copy_lhs", "sum", torch.randn(150, 8).half(), None,
                                 (8,)).vector_ok == 8
    assert spmm_kernels.task_for(g, "copy_lhs", "sum", torch.randn(150, 6), None, (6,)).vector_ok == 2
    assert spmm_kernels.task_for(g, "copy_lhs", "sum", torch.randn(150, 8).double(), None,
                                 (8,)).vector_ok == 2
    # one element past an aligned allocation: rows of 8 floats start 4 bytes off 16
    shifted = torch.randn(150 * 8 + 1)[1:].view(150, 8)
    assert spmm_kernels.task_for(g, "copy_lhs", "sum", shifted, None, (8,)).vector_ok == 1
    # a broadcast operand (not of the output's shape) does not narrow the vectors
    w = torch.randn(g.num_edges * 1 + 1)[1:].view(g.num_edges, 1)
    assert spmm_kernels.task_for(g, "mul", "sum", torch.randn(150, 8), w, (8,)).vector_ok == 4


def test_a_repeated_call_has_the_same_task_and_a_new_shape_or_dtype_another() -> None:
    # The task is the key of the graph's plans: equal tasks share a plan.
    g = named_graph("random")

    def task(x):
        return spmm_kernels.task_for(g, "copy_lhs", "sum", x, None, tuple(x.shape[1:]))

    first = task(torch.randn(g.num_src, 8))
    assert task(torch.randn(g.num_src, 8)) == first and hash(task(torch.randn(g.num_src, 8))) == hash(first)
    others = [task(torch.randn(g.num_src, 16)), task(torch.randn(g.num_src, 16).double()),
              task(torch.randn(g.num_src, 2, 4)),
              spmm_kernels.task_for(g.with_index_dtype(torch.int64), "copy_lhs", "sum",
                                    torch.randn(g.num_src, 8), None, (8,)),
              spmm_kernels.task_for(g, "copy_lhs", "mean", torch.randn(g.num_src, 8), None, (8,))]
    assert len({first, *others}) == 6


def test_blocks_of_one_kind_share_one_task_object() -> None:
    # Equal facts give the same object: the caches keyed by tasks (schedules, plans, programs)
    # find it by identity, and its algorithm is derived once.
    def block(seed: int, nodes: int) -> Graph:
        gen = torch.Generator().manual_seed(seed)
        return Graph.from_block(torch.randint(0, nodes, (2, 3 * nodes), generator=gen),
                                num_src=nodes, num_dst=nodes)

    tasks = [spmm_kernels.task_for(g, "mul", "sum", torch.randn(g.num_src, 8), torch.randn(g.num_edges, 1),
                                   (8,)) for g in (block(0, 40), block(1, 57))]
    assert tasks[0] is tasks[1] and tasks[0].algorithm is tasks[1].algorithm
    x = torch.randn(57 * 8 + 1)[1:].view(57, 8)  # 4 bytes off a vector's alignment: another task
    other = spmm_kernels.task_for(block(1, 57), "mul", "sum", x, torch.randn(171, 1), (8,))
    assert other is not tasks[0] and other.vector_ok == 1
