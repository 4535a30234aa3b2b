"""The operator and reducer tables: each reducer's C snippets, and each binary operator's
gradient attributes checked against autograd of its PyTorch form."""

from __future__ import annotations

import pytest
import torch

from gsparse.algebra import BINARY_OPS, REDUCERS, SDDMM_OPS, SPMM_OPS

from graphs import random_features


def test_adding_reducers_fold_by_addition() -> None:
    total = REDUCERS["sum"]
    assert not total.keeps_arg and total.selects_by is None
    assert total.fold("acc", "m") == "acc + m"
    assert total.accumulate("acc", "m") == "acc += m;"
    assert total.finish("acc", "degree") == "acc"
    # mean: the sum over the in-degree
    assert REDUCERS["mean"].divides_by_degree and REDUCERS["mean"].scatter_reduce == "sum"
    assert REDUCERS["mean"].finish("acc", "degree") == "acc / A(degree)"
    assert REDUCERS["mean"].accumulate("acc", "m") == "acc += m;"


@pytest.mark.parametrize(("name", "compare"), [("max", ">"), ("min", "<")])
def test_selecting_reducers_keep_the_first_winner(name: str, compare: str) -> None:
    reducer = REDUCERS[name]
    assert reducer.keeps_arg and reducer.selects_by == compare
    # strict: of equal messages the first stays, and a NaN never wins (every comparison
    # with it is false)
    assert reducer.beats("m", "acc") == f"m {compare} acc"
    assert reducer.fold("acc", "m") == f"(m {compare} acc ? m : acc)"
    assert reducer.accumulate("acc", "m") == f"if (m {compare} acc) acc = m;"
    assert reducer.finish("acc", "degree") == "acc"


@pytest.mark.parametrize("name", list(REDUCERS))
def test_each_reducers_identity_leaves_its_scatter_reduce_unchanged(name: str) -> None:
    reducer = REDUCERS[name]
    values = random_features((6,), torch.float64, seed=1)
    index = torch.tensor([0, 0, 1, 1, 1, 0])
    seeded = torch.full((2,), reducer.identity, dtype=torch.float64)
    seeded.scatter_reduce_(0, index, values, reducer.scatter_reduce, include_self=True)
    alone = torch.zeros(2, dtype=torch.float64).scatter_reduce_(
        0, index, values, reducer.scatter_reduce, include_self=False)
    torch.testing.assert_close(seeded, alone)


def test_operator_tables() -> None:
    assert "dot" not in SPMM_OPS and "dot" in SDDMM_OPS
    assert set(SPMM_OPS) | set(SDDMM_OPS) == set(BINARY_OPS)
    assert {op.name: op.copies for op in BINARY_OPS.values() if op.copies} == {
        "copy_lhs": "lhs", "copy_rhs": "rhs"}
    assert {op.name for op in BINARY_OPS.values() if op.scales} == {"mul", "dot"}
    assert [op.name for op in BINARY_OPS.values() if op.reduces_last_dim] == ["dot"]
    for op in BINARY_OPS.values():
        assert op.uses_lhs == (op.copies != "rhs") and op.uses_rhs == (op.copies != "lhs")


def _factor(name: str | None, lhs: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor | float:
    return {None: 1.0, "rhs": rhs, "1/rhs": 1 / rhs, "lhs": lhs}[name]


@pytest.mark.parametrize("name", list(BINARY_OPS))
def test_gradient_attributes_match_autograd(name: str) -> None:
    # What the autograd formulas (gsparse._ops) multiply the output gradient by, per operand:
    # d lhs = factor(lhs_grad_factor); d rhs = sign * factor(rhs_grad_factor) [/ rhs²].
    op = BINARY_OPS[name]
    lhs = random_features((5, 4), torch.float64, seed=2, away_from_zero=True).requires_grad_()
    rhs = random_features((5, 4), torch.float64, seed=3, away_from_zero=True).requires_grad_()
    out = op.torch_fn(lhs if op.uses_lhs else None, rhs if op.uses_rhs else None)
    grad = random_features(tuple(out.shape), torch.float64, seed=4)
    used = [t for t, uses in ((lhs, op.uses_lhs), (rhs, op.uses_rhs)) if uses]
    grads = dict(zip((id(t) for t in used), torch.autograd.grad(out, used, grad)))
    # a dot's output gradient is the same for every element of the reduced dimension
    g = grad.expand_as(lhs) if op.reduces_last_dim else grad
    with torch.no_grad():
        if op.uses_lhs:
            torch.testing.assert_close(grads[id(lhs)], g * _factor(op.lhs_grad_factor, lhs, rhs))
        if op.uses_rhs:
            expected = op.rhs_grad_sign * g * _factor(op.rhs_grad_factor, lhs, rhs)
            if op.rhs_grad_over_rhs_squared:
                expected = expected / (rhs * rhs)
            torch.testing.assert_close(grads[id(rhs)], expected)
