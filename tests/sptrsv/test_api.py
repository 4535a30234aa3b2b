"""gsparse.sptrsv and TriangularSolver: inputs, every solve variant, reuse, and every error."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import spsolve_triangular

import gsparse
from gsparse import TriangularSolver, sptrsv

from .factors import dense_system, hand_factor, relative_residual, torch_csr

TOLERANCE = {torch.float64: 1e-14, torch.float32: 1e-6}


def _rhs(n: int, k: int | None, dtype: torch.dtype = torch.float64, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    shape = (n,) if k is None else (n, k)
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)


def _arrays(matrix: sp.sparray, kind=np.asarray):
    csr = sp.csr_array(matrix)
    return (kind(csr.indptr.astype(np.int64)), kind(csr.indices.astype(np.int64)), kind(csr.data), csr.shape)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("k", [None, 1, 3])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit_diagonal", [False, True])
@pytest.mark.parametrize("lower", [True, False])
def test_every_variant_matches_the_dense_solve(lower, unit_diagonal, transpose, k, dtype):
    matrix = hand_factor() if lower else sp.csr_array(hand_factor().T)
    b = _rhs(5, k, dtype)
    x = sptrsv(torch_csr(matrix, dtype), b, lower=lower, unit_diagonal=unit_diagonal, transpose=transpose)
    assert x.shape == b.shape and x.dtype == dtype
    dense = dense_system(matrix, unit_diagonal, transpose)
    want = np.linalg.solve(dense, b.double().numpy())
    np.testing.assert_allclose(x.double().numpy(), want, rtol=1e-5 if dtype == torch.float32 else 1e-13)
    assert relative_residual(dense, x, b) <= TOLERANCE[dtype]


def test_every_input_kind_gives_the_same_solution():
    matrix = hand_factor()
    b = _rhs(5, 2)
    want = sptrsv(torch_csr(matrix), b)
    crow, col, values, shape = _arrays(matrix)
    inputs = {
        "csr int32": torch.sparse_csr_tensor(torch.from_numpy(crow.astype(np.int32)),
                                             torch.from_numpy(col.astype(np.int32)), torch.from_numpy(values), shape),
        "numpy arrays": (crow, col, values, shape),
        "torch arrays": tuple(torch.from_numpy(a) for a in (crow, col, values)) + (list(shape),),
        "list": [crow, col, values, shape],
        **{f"scipy {fmt}": getattr(sp.csr_array(matrix), f"to{fmt}")() for fmt in ("csr", "csc", "coo", "lil", "dok", "bsr")},
        "scipy matrix": sp.csr_matrix(matrix),
    }
    for name, A in inputs.items():
        torch.testing.assert_close(sptrsv(A, b), want, rtol=0, atol=1e-15, msg=name)


def test_unsorted_rows_are_accepted_and_values_stay_in_their_order():
    # Row 3 stored as (3, 3), (3, 0), (3, 1): diagonal first.
    crow = torch.tensor([0, 1, 3, 4, 7])
    col = torch.tensor([0, 1, 0, 2, 3, 0, 1])
    values = torch.tensor([2.0, 3.0, 1.0, 4.0, 5.0, 1.0, 2.0], dtype=torch.float64)
    solver = TriangularSolver((crow, col, values, (4, 4)))
    assert solver.values is values
    dense = torch.sparse_csr_tensor(crow, col, values, (4, 4)).to_dense()
    b = _rhs(4, None)
    torch.testing.assert_close(solver.solve(b), torch.linalg.solve_triangular(dense, b[:, None], upper=False)[:, 0])


def test_scipy_duplicates_add_up_as_in_scipy():
    coo = sp.coo_array(([1.0, 1.0, 3.0, 0.5], ([0, 0, 1, 1], [0, 0, 1, 0])), shape=(2, 2))
    x = sptrsv(coo, torch.tensor([2.0, 3.5], dtype=torch.float64))
    torch.testing.assert_close(x, torch.tensor([1.0, 1.0], dtype=torch.float64))


def test_the_solver_solves_many_times_and_takes_new_values():
    matrix = hand_factor()
    solver = TriangularSolver(matrix)
    b = _rhs(5, 4)
    torch.testing.assert_close(solver.solve(b), torch.from_numpy(spsolve_triangular(matrix, b.numpy())))
    torch.testing.assert_close(solver.solve(b, transpose=True),
                               torch.from_numpy(spsolve_triangular(matrix.T, b.numpy(), lower=False)))
    doubled = solver.values * 2
    solver.update_values(doubled)
    assert solver.values is doubled
    torch.testing.assert_close(solver.solve(b), torch.from_numpy(spsolve_triangular(matrix * 2, b.numpy())))
    solver.update_values(np.asarray(matrix.data) * 3)
    torch.testing.assert_close(solver.solve(b), torch.from_numpy(spsolve_triangular(matrix * 3, b.numpy())))


def test_solver_properties():
    solver = TriangularSolver(sp.csr_array(hand_factor().T), lower=False, unit_diagonal=True)
    assert solver.shape == (5, 5) and solver.nnz == 11 and solver.dtype == torch.float64
    assert solver.device == torch.device("cpu") and not solver.lower and solver.unit_diagonal
    assert repr(solver) == ("TriangularSolver(n=5, nnz=11, upper, unit diagonal, dtype=torch.float64, "
                            "device=cpu)")
    assert gsparse.sptrsv is sptrsv and "TriangularSolver" in gsparse.__all__


def test_unit_diagonal_needs_no_stored_diagonal():
    strictly_lower = sp.csr_array(np.tril(hand_factor().toarray(), -1))
    b = _rhs(5, None)
    x = sptrsv(strictly_lower, b, unit_diagonal=True)
    dense = strictly_lower.toarray() + np.eye(5)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(dense, b.numpy()), rtol=1e-13)


def test_an_empty_system_and_no_right_hand_sides():
    empty = sp.csr_array((0, 0))
    assert sptrsv(empty, torch.zeros(0, dtype=torch.float64)).shape == (0,)
    assert sptrsv(hand_factor(), torch.zeros(5, 0, dtype=torch.float64)).shape == (5, 0)


def test_the_result_is_a_new_tensor():
    identity = sp.eye_array(3, format="csr")
    b = _rhs(3, None)
    x = sptrsv(identity, b)
    torch.testing.assert_close(x, b)
    assert x.data_ptr() != b.data_ptr()


# ---------------------------------------------------------------------- errors

def _raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


def test_errors_about_the_kind_of_matrix():
    b = _rhs(5, None)
    _raises(TypeError, r"A must be a torch.sparse_csr tensor .* got a tensor of layout torch.strided",
            sptrsv, torch.eye(5, dtype=torch.float64), b)
    _raises(TypeError, r"got a tensor of layout torch.sparse_coo",
            sptrsv, torch.eye(5, dtype=torch.float64).to_sparse(), b)
    _raises(TypeError, r"A must be a torch.sparse_csr tensor, a SciPy sparse matrix, or CSR arrays .*got int",
            sptrsv, 5, b)
    _raises(TypeError, r"the shape in A = \(crow, col, values, shape\) must be a pair of ints, got \(5,\)",
            sptrsv, (*_arrays(hand_factor())[:3], (5,)), b)
    _raises(ValueError, r"A must be square, got shape \(3, 4\)", sptrsv, sp.csr_array((3, 4)), b)
    _raises(ValueError, r"A must be a 2-D matrix, got a sparse CSR tensor of shape \(2, 5, 5\)",
            sptrsv, torch.stack([torch.eye(5, dtype=torch.float64)] * 2).to_sparse_csr(), b)


@pytest.mark.parametrize("dtype,problem", [(np.int64, "integer"), (np.longdouble, "extended precision"),
                                           (np.complex128, "complex"), (np.bool_, "integer and boolean")])
def test_unsupported_scipy_dtypes_are_named(dtype, problem):
    matrix = sp.csr_array(np.eye(3).astype(dtype))
    _raises(TypeError, rf"A's values must be float32 or float64, got {np.dtype(dtype)} \({problem}",
            sptrsv, matrix, _rhs(3, None))


@pytest.mark.parametrize("dtype,problem", [(torch.int32, "integer"), (torch.float16, "half precision"),
                                           (torch.bfloat16, "half precision"), (torch.complex64, "complex")])
def test_unsupported_tensor_dtypes_are_named(dtype, problem):
    crow, col, _, shape = _arrays(sp.eye_array(3))
    values = torch.ones(3, dtype=dtype)
    _raises(TypeError, rf"A's values must have dtype float32 or float64, got {dtype} \({problem}",
            sptrsv, (crow, col, values, shape), _rhs(3, None))


def test_errors_about_the_csr_arrays():
    crow, col, values, shape = _arrays(hand_factor())
    b = _rhs(5, None)
    cases = [
        ((crow[:-1], col, values, shape), ValueError, r"crow must have 6 entries, got 5"),
        ((crow.astype(np.float64), col, values, shape), TypeError, r"crow must have dtype int32 or int64, got torch.float64"),
        ((crow, col[None], values, shape), ValueError, r"col must be 1-D, got shape \(1, 11\)"),
        ((crow, col, values[:-1], shape), ValueError, r"values must be 1-D with one entry per column index \(11\), got shape \(10,\)"),
        ((crow + 1, col, values, shape), ValueError, r"crow must start at 0 and end at the number of entries \(11\), got 1 and 12"),
        ((np.array([0, 1, 3, 2, 8, 11]), col, values, shape), ValueError, r"crow must be non-decreasing: crow\[3\] = 2 < crow\[2\] = 3"),
        ((crow, np.where(np.arange(11) == 4, 7, col), values, shape), ValueError, r"col\[4\] = 7 is out of range: A is 5 x 5"),
        ((crow, col, "values", shape), TypeError, r"values must be a torch.Tensor or a NumPy array, got str"),
        ((crow, col, np.array(["a"] * 11), shape), TypeError, r"values must be a numeric array, got dtype <U1"),
        ((torch.from_numpy(crow), torch.from_numpy(col), torch.from_numpy(values).to("meta"), shape), ValueError,
         r"crow, col and values must be on one device, got cpu, cpu and meta"),
    ]
    for A, exc, match in cases:
        _raises(exc, match, sptrsv, A, b)


def test_a_matrix_on_the_wrong_side_names_the_first_offending_entry():
    dense = hand_factor().toarray()
    dense[1, 3] = 7.0
    dense[4, 4] = 0.0  # a later problem must not be reported first
    dense[2, 4] = 1.0
    _raises(ValueError, r"A is not lower triangular: it has an entry at \(row 1, column 3\), above the diagonal",
            sptrsv, sp.csr_array(dense), _rhs(5, None))
    _raises(ValueError, r"A is not upper triangular: it has an entry at \(row 1, column 0\), below the diagonal",
            sptrsv, hand_factor(), _rhs(5, None), lower=False)


def test_duplicate_entries_name_their_position():
    crow = np.array([0, 1, 4])
    col = np.array([0, 1, 0, 1])
    _raises(ValueError, r"A has more than one entry at \(row 1, column 1\); duplicate entries are not supported",
            sptrsv, (crow, col, np.ones(4), (2, 2)), _rhs(2, None))


@pytest.mark.parametrize("value,what", [(0.0, r"zero \(A is singular\)"), (math.nan, r"nan \(not finite\)"),
                                        (math.inf, r"inf \(not finite\)"), (-math.inf, r"-inf \(not finite\)")])
def test_bad_diagonal_values_name_the_row(value, what):
    matrix = hand_factor()
    matrix.data[matrix.indptr[4] - 1] = value  # row 3's diagonal: the last entry of its row
    matrix.data[-1] = 0.0  # row 4's: a later problem is not the one reported
    _raises(ValueError, rf"A's diagonal entry in row 3 is {what}", sptrsv, matrix, _rhs(5, None))
    assert torch.isfinite(sptrsv(matrix, _rhs(5, None), unit_diagonal=True)).all()


def test_a_missing_diagonal_names_the_row():
    dense = hand_factor().toarray()
    dense[2, 2] = 0.0
    _raises(ValueError, r"A has no diagonal entry in row 2; a solve with unit_diagonal=False divides by it",
            sptrsv, sp.csr_array(dense), _rhs(5, None))


def test_errors_about_the_right_hand_side():
    solver = TriangularSolver(hand_factor())
    _raises(TypeError, r"b must be a torch.Tensor, got ndarray", solver.solve, np.ones(5))
    _raises(TypeError, r"b must have dtype float32 or float64, got torch.int64 \(integer", solver.solve,
            torch.ones(5, dtype=torch.int64))
    _raises(TypeError, r"b has dtype torch.float32 but the factor's values are torch.float64", solver.solve,
            torch.ones(5))
    _raises(ValueError, r"b is on meta but the factor is on cpu", solver.solve,
            torch.ones(5, dtype=torch.float64, device="meta"))
    _raises(ValueError, r"b must have shape \[n\] or \[n, k\] with n = 5 \(A is 5 x 5\), got \[4\]", solver.solve,
            torch.ones(4, dtype=torch.float64))
    _raises(ValueError, r"got \[5, 2, 1\]", solver.solve, torch.ones(5, 2, 1, dtype=torch.float64))
    _raises(TypeError, r"transpose must be a bool, got int", solver.solve, torch.ones(5, dtype=torch.float64), 1)


def test_errors_about_flags():
    _raises(TypeError, r"lower must be a bool, got str", TriangularSolver, hand_factor(), "yes")
    _raises(TypeError, r"unit_diagonal must be a bool, got int", TriangularSolver, hand_factor(), True, 0)


def test_errors_about_new_values():
    solver = TriangularSolver(hand_factor())
    values = solver.values
    _raises(TypeError, r"values must be a torch.Tensor or a NumPy array, got list", solver.update_values, [1.0])
    _raises(TypeError, r"values has dtype torch.float32 but the factor's values are torch.float64",
            solver.update_values, values.float())
    _raises(ValueError, r"values is on meta but the factor is on cpu", solver.update_values, values.to("meta"))
    _raises(ValueError, r"values must have shape \[11\] \(one per stored entry\), got \[10\]",
            solver.update_values, values[:-1])
    zeroed = values.clone()
    zeroed[hand_factor().indptr[3] - 1] = 0.0  # row 2's only entry: its diagonal
    _raises(ValueError, r"A's diagonal entry in row 2 is zero", solver.update_values, zeroed)
    assert solver.values is values  # a refused update leaves the solver as it was
