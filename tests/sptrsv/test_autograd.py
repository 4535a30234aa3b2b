"""Gradients of the triangular solve: gradcheck in b and in the values, the explicit formulas,
second order, and torch.compile."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gsparse import TriangularSolver, sptrsv

from .factors import hand_factor


def _arrays(lower: bool):
    matrix = hand_factor() if lower else sp.csr_array(hand_factor().T)
    crow = torch.from_numpy(matrix.indptr.astype(np.int64))
    col = torch.from_numpy(matrix.indices.astype(np.int64))
    values = torch.from_numpy(matrix.data.copy()).requires_grad_()
    return crow, col, values


@pytest.mark.parametrize("k", [None, 3])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit_diagonal", [False, True])
@pytest.mark.parametrize("lower", [True, False])
def test_gradcheck_in_b_and_values(lower, unit_diagonal, transpose, k):
    crow, col, values = _arrays(lower)
    b = torch.randn((5,) if k is None else (5, k), dtype=torch.float64,
                    generator=torch.Generator().manual_seed(1)).requires_grad_()

    def solve(v, rhs):
        return sptrsv((crow, col, v, (5, 5)), rhs, lower=lower, unit_diagonal=unit_diagonal, transpose=transpose)

    assert torch.autograd.gradcheck(solve, (values, b))


def test_gradients_follow_the_formulas():
    matrix = hand_factor()
    crow, col, values = _arrays(True)
    b = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(5, 2, dtype=torch.float64)
    x = sptrsv((crow, col, values, (5, 5)), b)
    (x * weight).sum().backward()
    dense = torch.from_numpy(matrix.toarray())
    grad_b = torch.linalg.solve(dense.T, weight)  # A^{-T} dx
    torch.testing.assert_close(b.grad, grad_b)
    rows = torch.repeat_interleave(torch.arange(5), torch.from_numpy(np.diff(matrix.indptr)))
    torch.testing.assert_close(values.grad, -(grad_b[rows] * x.detach()[col]).sum(1))


def test_a_unit_diagonal_gets_no_gradient():
    crow, col, values = _arrays(True)
    x = sptrsv((crow, col, values, (5, 5)), torch.ones(5, dtype=torch.float64), unit_diagonal=True)
    x.sum().backward()
    rows = torch.repeat_interleave(torch.arange(5), crow.diff())
    assert (values.grad[rows == col] == 0).all() and (values.grad[rows != col] != 0).any()


def test_gradients_reach_values_given_in_unsorted_order():
    # Row 2 stored as (2, 2), (2, 0): the gradient must come back in that order.
    crow, col = torch.tensor([0, 1, 2, 4]), torch.tensor([0, 1, 2, 0])
    values = torch.tensor([2.0, 3.0, 4.0, 1.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([2.0, 3.0, 5.0], dtype=torch.float64)
    sptrsv((crow, col, values, (3, 3)), b).sum().backward()
    # x = (1, 1, 1); db = A^{-T} 1 = (0.375, 1/3, 0.25); d values = -db_i x_j.
    torch.testing.assert_close(values.grad, -torch.tensor([0.375, 1 / 3, 0.25, 0.25], dtype=torch.float64))


def test_solver_keeps_differentiating_after_new_values():
    solver = TriangularSolver(hand_factor())
    first = solver.values.clone().requires_grad_()
    solver.update_values(first)
    solver.solve(torch.ones(5, dtype=torch.float64)).sum().backward()
    second = (solver.values.detach() * 2).requires_grad_()
    solver.update_values(second)
    for _ in range(2):  # each solve records its own graph
        solver.solve(torch.ones(5, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(second.grad, first.grad / 2)
    with torch.no_grad():
        assert not solver.solve(torch.ones(5, dtype=torch.float64)).requires_grad


def test_second_order_gradients():
    crow, col, values = _arrays(True)
    b = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda v, rhs: sptrsv((crow, col, v, (5, 5)), rhs, transpose=True),
                                        (values, b))


def test_the_solve_compiles_as_one_node_forward_and_backward():
    crow, col, values = _arrays(True)
    solver = TriangularSolver((crow, col, values, (5, 5)))

    def loss(rhs: torch.Tensor) -> torch.Tensor:
        return (solver.solve(rhs, transpose=True) ** 2).sum()

    b = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    eager = torch.autograd.grad(loss(b), [b, values])
    torch._dynamo.reset()
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    got = torch.autograd.grad(compiled(b), [b, values])
    for g, e in zip(got, eager):
        torch.testing.assert_close(g, e)
