"""Generated g-SDDMM kernels on the GPU: results against the float64 reference, with every
output element poisoned until a kernel writes it."""

from __future__ import annotations

import itertools

import pytest
import torch

import gsparse
from gsparse.algebra import SDDMM_OPS, TARGETS
from gsparse.kernels import sddmm as sddmm_kernels
from gsparse.kernels.sddmm import Edge, EdgeTransposed, Row, RowTransposed
from gsparse.tune import select
from gsparse.target import Target

from graphs import named_graph, random_features
from kernels.sddmm.support import DOT_SHAPES, SHAPES, check, operand_task, operands
from kernels.support import gpu, sample

pytestmark = gpu


def _space(g: gsparse.Graph, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> list:
    """The space of the task a call on these operands runs, on this GPU."""
    task = operand_task(g, op, lhs, rhs, lhs_target, rhs_target)
    return list(sddmm_kernels.schedule_space(task, g.stats, Target.of("cuda")))


def _of(candidates: list, skeleton: type) -> list:
    return [s for s in candidates if type(s) is skeleton]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("op", SDDMM_OPS)
def test_every_operator_target_and_dtype_matches_reference(poisoned, op, dtype) -> None:
    g = named_graph("random")
    shapes = DOT_SHAPES if op == "dot" else SHAPES
    # every pair of targets on full operands; broadcasting on a spread of pairs
    cases = [(pair, "full") for pair in itertools.product(TARGETS, TARGETS)]
    cases += [(("u", "v"), "scalar"), (("e", "u"), "scalar"), (("v", "e"), "indexed"),
              (("u", "u"), "indexed")]
    for i, ((lhs_target, rhs_target), shape) in enumerate(cases):
        lhs_shape, rhs_shape = shapes[shape]
        lhs, rhs = operands(g, op, lhs_target, rhs_target, lhs_shape, rhs_shape, dtype, seed=i)
        check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target)


@pytest.mark.parametrize("kind", ["random", "sorted", "square", "int64"])
@pytest.mark.parametrize("feature_len", [1, 3, 16, 64, 100, 256])
def test_sampled_schedules_match_reference(poisoned, kind, feature_len) -> None:
    g = named_graph(kind)
    cases = [("dot", "u", "v", (feature_len,), (feature_len,)),
             ("dot", "e", "u", (2, feature_len), (1, feature_len)),  # two heads
             ("add", "u", "v", (feature_len,), (feature_len,)),
             ("mul", "u", "e", (feature_len,), (1,)),
             ("sub", "v", "e", (feature_len,), (feature_len,)),
             ("copy_rhs", "u", "v", (feature_len,), (feature_len,))]
    for op, lhs_target, rhs_target, lhs_shape, rhs_shape in cases:
        lhs, rhs = operands(g, op, lhs_target, rhs_target, lhs_shape, rhs_shape, torch.float32, seed=0)
        # each task's own space: element-wise operators have no row_transposed schedules
        space = _space(g, op, lhs, rhs, lhs_target, rhs_target)
        launches = [s for s in space if s.features_per_launch]
        schedules = [*sample(_of(space, Edge), 3, seed=feature_len),
                     *sample(launches, 1, seed=feature_len),
                     *sample(_of(launches, RowTransposed), 1, seed=feature_len),
                     *sample(_of(space, Row), 2, seed=feature_len),
                     *sample(_of(space, EdgeTransposed), 2, seed=feature_len)]
        for i, schedule in enumerate(schedules):
            lhs, rhs = operands(g, op, lhs_target, rhs_target, lhs_shape, rhs_shape,
                                torch.float32, seed=i)
            check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target, schedule)


def test_hundred_thousand_edge_row(poisoned) -> None:
    g = named_graph("long_row")
    for op, lhs_target, rhs_target, rhs_shape in (("dot", "u", "v", (64,)),
                                                  ("mul", "u", "e", (1,))):
        lhs, rhs = operands(g, op, lhs_target, rhs_target, (64,), rhs_shape, torch.float32, 3)
        space = _space(g, op, lhs, rhs, lhs_target, rhs_target)
        schedules = [None, *sample(_of(space, Row), 3, seed=1), *sample(_of(space, Edge), 3, seed=1),
                     *sample(_of(space, EdgeTransposed), 3, seed=1)]
        expected = gsparse.gsddmm(g, op, lhs.double(), rhs.double(), lhs_target, rhs_target)
        for schedule in schedules:
            check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target, schedule, expected=expected)


def test_graph_without_edges(poisoned) -> None:
    g = named_graph("empty").to("cuda")
    x = torch.randn(g.num_src, 16, device="cuda")
    y = torch.randn(g.num_dst, 16, device="cuda")
    calls = 0
    for op in ("dot", "add"):
        for schedule in [None, *sample(_space(g, op, x, y, "u", "v"), 4, seed=2)]:
            out = gsparse.gsddmm(g, op, x, y, "u", "v", schedule=schedule)
            assert out.shape == (0, 1 if op == "dot" else 16)
            calls += 1
    assert len(poisoned) == calls


def test_multi_head_attention_shapes(poisoned) -> None:
    # GAT: [N, 8, 16] features; per-head scores u_dot_v -> [E, 8, 1], u_add_v -> [E, 8, 16].
    g = named_graph("random")
    for op in ("dot", "add"):
        lhs, rhs = operands(g, op, "u", "v", (8, 16), (8, 16), torch.float32, seed=5)
        for schedule in [None, *sample(_space(g, op, lhs, rhs, "u", "v"), 6, seed=5)]:
            check(poisoned, g, op, lhs, rhs, "u", "v", schedule)


def test_misaligned_operands_fall_back_to_scalar_loads(poisoned) -> None:
    g = named_graph("random")
    base = random_features((g.num_src * 8 + 1,), torch.float32, 0)
    x = base[1:].view(g.num_src, 8)  # 4 bytes past a 16-byte boundary
    y = random_features((g.num_dst, 8), torch.float32, 1)
    for op in ("dot", "mul"):
        check(poisoned, g, op, x, y, "u", "v")
    with pytest.raises(ValueError, match="allow at most 1"):
        gsparse.gsddmm(g.to("cuda"), "mul", base.cuda()[1:].view(g.num_src, 8), y.cuda(),
                       "u", "v", schedule=Edge(groups_per_block=32, lanes=8, vector_width=4))


def test_a_call_runs_the_chosen_schedule_and_a_repeated_call_reuses_its_plan(poisoned) -> None:
    g = named_graph("random").to("cuda")
    x, y = torch.randn(g.num_src, 64, device="cuda"), torch.randn(g.num_dst, 64, device="cuda")
    task = sddmm_kernels.task_for(g, "dot", x, y, "u", "v", (1,))
    for _ in range(2):
        gsparse.gsddmm(g, "dot", x, y, "u", "v")
    chosen = select.choose("sddmm", g, task, call=None)  # the call's choice, made once: found
    assert len(g.schedules) == 1 and len(g.plans) == 1 and (task, chosen) in g.plans
    assert len(poisoned) == 2


def _transposed(g: gsparse.Graph, feature_len: int, dtype: torch.dtype,
                skeleton: type = RowTransposed) -> list:
    """Every ``RowTransposed`` schedule of a dot's space, or 3 sampled ``EdgeTransposed``
    ones (a larger space: batches of 4 too, from 4 lanes)."""
    x = torch.empty(1, feature_len, dtype=dtype)
    task = sddmm_kernels.task_for(g, "dot", x, x, "u", "v", (1,))
    space = _of(sddmm_kernels.schedule_space(task, g.stats, Target.of("cuda")), skeleton)
    return space if skeleton is RowTransposed else sample(space, 3, seed=feature_len)


@pytest.mark.parametrize("skeleton", [RowTransposed, EdgeTransposed], ids=lambda c: c.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["random", "sorted", "int64"])
@pytest.mark.parametrize("feature_len", [8, 16, 32, 100, 128, 512])
def test_transposed_dot_matches_reference(poisoned, kind, feature_len, dtype, skeleton) -> None:
    # "random" and "int64" have empty rows, rows shorter than a batch and edge ids unlike
    # CSR positions; "sorted" writes edges in CSR order. Half dtypes accumulate in fp32.
    # edge_transposed ranges end inside batches and rows run across ranges.
    g = named_graph(kind)
    cases = [("u", "v", (feature_len,), (feature_len,)),
             ("u", "v", (4, feature_len), (4, feature_len)),  # heads: out [E, 4, 1]
             ("v", "u", (1, feature_len), (3, feature_len)),  # lhs broadcast over heads
             ("e", "v", (2, feature_len), (2, feature_len)),
             ("u", "e", (feature_len,), (feature_len,))]
    for i, schedule in enumerate(_transposed(g, feature_len, dtype, skeleton)):
        for lhs_target, rhs_target, lhs_shape, rhs_shape in cases:
            lhs, rhs = operands(g, "dot", lhs_target, rhs_target, lhs_shape, rhs_shape, dtype, i)
            check(poisoned, g, "dot", lhs, rhs, lhs_target, rhs_target, schedule)


def test_transposed_dot_on_a_hundred_thousand_edge_row(poisoned) -> None:
    g = named_graph("long_row")
    lhs, rhs = operands(g, "dot", "u", "v", (64,), (64,), torch.float32, 4)
    expected = gsparse.gsddmm(g, "dot", lhs.double(), rhs.double(), "u", "v")
    for schedule in [*_transposed(g, 64, torch.float32),
                     *_transposed(g, 64, torch.float32, EdgeTransposed)]:
        check(poisoned, g, "dot", lhs, rhs, "u", "v", schedule, expected=expected)


def test_transposed_skeleton_without_edges_and_for_other_operators(poisoned) -> None:
    empty = named_graph("empty").to("cuda")
    x = torch.randn(empty.num_src, 32, device="cuda")
    y = torch.randn(empty.num_dst, 32, device="cuda")
    transposed = [*_transposed(empty, 32, torch.float32),
                  *_transposed(empty, 32, torch.float32, EdgeTransposed)]
    for schedule in transposed:
        assert gsparse.gsddmm(empty, "dot", x, y, "u", "v", schedule=schedule).shape == (0, 1)
    # element-wise operators have no reduction to transpose: a forced row_transposed
    # schedule is refused (their space holds the row schedules instead); they walk
    # edge_transposed's batches without it
    g = named_graph("random")
    for op, lhs_target, rhs_target, rhs_shape in (("add", "u", "v", (32,)), ("mul", "e", "u", (1,))):
        lhs, rhs = operands(g, op, lhs_target, rhs_target, (32,), rhs_shape, torch.float32, seed=7)
        with pytest.raises(ValueError, match="transposes a dot's reduction"):
            gsparse.gsddmm(g.to("cuda"), op, lhs.cuda(), rhs.cuda(), lhs_target, rhs_target,
                           schedule=_transposed(g, 32, torch.float32)[0])
        space = _space(g, op, lhs, rhs, lhs_target, rhs_target)
        rows = [s for s in _of(space, Row) if s.groups_per_block == 4]  # in place of row_transposed
        for schedule in [*sample(rows, 3, seed=7), *_of(space, EdgeTransposed)]:
            check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target, schedule)
