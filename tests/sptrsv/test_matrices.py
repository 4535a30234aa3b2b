"""The triangular matrix families, and the accuracy of every solve path on each of them."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import spsolve_triangular

import gsparse
from gsparse.backends import cpu_triangular
from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.levelset import levelset_plan, levelset_solve

from .factors import dense_system, family_factor, relative_residual

TOLERANCE = {torch.float64: 1e-14, torch.float32: 1e-6}


def _is_canonical_triangle(matrix: sp.csr_array, lower: bool) -> bool:
    other_side = sp.triu(matrix, 1) if lower else sp.tril(matrix, -1)
    return matrix.has_canonical_format and other_side.nnz == 0 and matrix.format == "csr"


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_every_family_gives_a_seeded_canonical_triangle_with_a_safe_diagonal(family, upper):
    matrix = family_factor(family, seed=7, upper=upper)
    assert _is_canonical_triangle(matrix, lower=not upper) and matrix.dtype == np.float64
    np.testing.assert_array_equal(matrix.toarray(), family_factor(family, seed=7, upper=upper).toarray())
    assert (matrix.diagonal() > 0).all()
    if not family.startswith("laplacian"):
        off = abs(matrix - sp.diags_array(matrix.diagonal())).toarray()
        assert (off[off > 0] >= 1).all() and (off < 2).all()
        np.testing.assert_allclose(matrix.diagonal(), 1 + np.maximum(off.sum(0), off.sum(1)), rtol=1e-14)
        other = family_factor(family, seed=8, upper=upper)
        assert other.shape != matrix.shape or (other != matrix).nnz


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_solves_are_accurate_and_match_scipy_on_every_family(family, dtype):
    for upper in (False, True):
        matrix = family_factor(family, seed=1, upper=upper)
        n = matrix.shape[0]
        solver = gsparse.TriangularSolver(matrix.astype(np.float32 if dtype == torch.float32 else np.float64),
                                          lower=not upper)
        b = torch.randn(n, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).to(dtype)
        stored = sp.csr_array((solver.values.double().numpy(), matrix.indices, matrix.indptr), shape=matrix.shape)
        for transpose in (False, True):
            x = solver.solve(b, transpose=transpose)
            assert relative_residual(dense_system(stored, False, transpose), x, b) <= TOLERANCE[dtype]
            want = spsolve_triangular(stored.T if transpose else stored, b.double().numpy(),
                                      lower=upper == transpose)
            np.testing.assert_allclose(x.double().numpy(), want, rtol=1e-4 if dtype == torch.float32 else 1e-11,
                                       atol=1e-5 if dtype == torch.float32 else 1e-12)


@pytest.mark.parametrize("path", ["mkl", "scipy", "levelset"])
@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_every_solve_path_is_accurate_on_every_family(family, path):
    if path == "mkl" and not cpu_triangular.HAS_MKL:
        pytest.skip("this PyTorch has no MKL")
    for upper in (False, True):
        matrix = family_factor(family, seed=3, upper=upper)
        crow, col = torch.from_numpy(matrix.indptr.astype(np.int64)), torch.from_numpy(matrix.indices.astype(np.int64))
        values = torch.from_numpy(matrix.data)
        b = torch.randn(matrix.shape[0], 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
        for unit_diagonal in (False, True):
            for transpose in (False, True):
                if path == "levelset":
                    plan = levelset_plan(matrix.indptr, matrix.indices, not upper, transpose, torch.device("cpu"))
                    x = levelset_solve(plan, values, b, unit_diagonal)
                else:
                    x = cpu_triangular.solve(crow, col, values, b, not upper, unit_diagonal, transpose,
                                             use_mkl=path == "mkl")
                dense = dense_system(matrix, unit_diagonal, transpose)
                assert relative_residual(dense, x, b) <= 1e-14, (upper, unit_diagonal, transpose)


@pytest.mark.slow
@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_every_family_builds_4m_rows_in_seconds(family):
    start = time.process_time()  # CPU seconds: other processes on the machine slow the wall clock
    matrix = triangular.generate(family, 4_000_000, 0)
    seconds = time.process_time() - start
    assert abs(matrix.shape[0] - 4_000_000) < 200_000 and matrix.has_canonical_format
    assert seconds < 45, f"{family}: {seconds:.1f} s"  # 0.4-15 s measured on a 2-core VM


def test_the_level_set_plan_has_one_step_per_level():
    plan = levelset_plan(*(lambda m: (m.indptr, m.indices))(triangular.laplacian((6, 5))), True, False,
                         torch.device("cpu"))
    assert plan.num_levels == 6 + 5 - 1 and plan.level_ptr[-1] == 30


def _ic0_reference(a: np.ndarray) -> np.ndarray:
    """IC(0) by the textbook loop, updates restricted to the pattern of ``tril(a)``."""
    pattern = a != 0
    n = len(a)
    low = np.tril(a).astype(np.float64)
    for k in range(n):
        low[k, k] = np.sqrt(low[k, k])
        for i in range(k + 1, n):
            if pattern[i, k]:
                low[i, k] /= low[k, k]
        for j in range(k + 1, n):
            for i in range(j, n):
                if pattern[i, j] and pattern[i, k] and pattern[j, k]:
                    low[i, j] -= low[i, k] * low[j, k]
    return low


def _ilu0_reference(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pattern = a != 0
    work = a.astype(np.float64).copy()
    n = len(a)
    for i in range(1, n):
        for k in range(i):
            if pattern[i, k]:
                work[i, k] /= work[k, k]
                for j in range(k + 1, n):
                    if pattern[i, j]:
                        work[i, j] -= work[i, k] * work[k, j]
    return np.tril(work, -1) + np.eye(n), np.triu(work)


@pytest.mark.parametrize("shape", [(3, 4), (4, 3, 3)])
@pytest.mark.parametrize("seed", [None, 5])
def test_laplacian_factors_match_the_textbook_ic0_and_ilu0(shape, seed):
    lower = triangular.laplacian(shape, "lower", seed=seed)
    a = (lower + sp.csr_array(lower.T)).toarray() - np.diag(lower.diagonal())
    assert np.linalg.eigvalsh(a).min() > 0 and (a - np.diag(np.diag(a)) <= 0).all()  # an SPD M-matrix
    np.testing.assert_allclose(triangular.laplacian(shape, "ic0", seed=seed).toarray(), _ic0_reference(a), atol=1e-14)
    np.testing.assert_allclose(triangular.laplacian(shape, "ic0", seed=seed, upper=True).toarray(),
                               _ic0_reference(a).T, atol=1e-14)
    unit_lower, upper = _ilu0_reference(a)
    np.testing.assert_allclose(triangular.laplacian(shape, "ilu0", seed=seed).toarray(), unit_lower, atol=1e-14)
    np.testing.assert_allclose(triangular.laplacian(shape, "ilu0", seed=seed, upper=True).toarray(), upper,
                               atol=1e-14)
    np.testing.assert_array_equal(triangular.laplacian(shape, "lower", seed=seed, upper=True).toarray(), np.triu(a))


def test_the_lower_triangle_of_a_graph_from_any_form():
    edges = np.array([[0, 1, 2, 3, 3], [1, 2, 0, 1, 3]])
    from_edges = triangular.graph_lower(edges, seed=1)
    from_scipy = triangular.graph_lower(sp.coo_array((np.ones(5), (edges[0], edges[1])), shape=(4, 4)), seed=1)
    from_graph = triangular.graph_lower(gsparse.Graph.from_edge_index(torch.from_numpy(edges), num_nodes=4), seed=1)
    for other in (from_scipy, from_graph):
        np.testing.assert_array_equal(other.toarray(), from_edges.toarray())
    pattern = (from_edges.toarray() != 0).astype(int)
    np.testing.assert_array_equal(pattern, np.eye(4, dtype=int) + np.array([[0, 0, 0, 0], [1, 0, 0, 0],
                                                                           [1, 1, 0, 0], [0, 1, 0, 0]]))


@pytest.mark.parametrize("shape", [(4, 3), (3, 4, 5)])
def test_a_stencil_joins_each_node_to_every_neighbour_of_its_square_or_cube(shape):
    pattern = (triangular.stencil(shape).toarray() != 0).astype(int)
    coords = np.stack(np.unravel_index(np.arange(len(pattern)), shape, order="F"), axis=1)
    near = (np.abs(coords[:, None, :] - coords[None, :, :]).max(axis=2) <= 1).astype(int)
    np.testing.assert_array_equal(pattern, np.tril(near))


def test_a_shuffled_factor_is_the_symmetrised_pattern_renumbered():
    mesh = triangular.laplacian((6, 5))
    factor = triangular.shuffled(mesh, seed=3)
    symmetric = (mesh + sp.csr_array(mesh.T)).toarray() != 0
    relabel = np.random.default_rng(3).permutation(30)  # the generator's first draw
    moved = np.zeros_like(symmetric)
    moved[np.ix_(relabel, relabel)] = symmetric
    np.testing.assert_array_equal(factor.toarray() != 0, np.tril(moved))


def test_corpus_sizes_are_log_uniform_in_the_range_and_fixed_by_family_and_seed():
    sizes = [triangular.corpus_rows("road", 1000, 64000, seed) for seed in range(400)]
    assert min(sizes) >= 1000 and max(sizes) <= 64000
    assert 0.4 < np.mean(np.array(sizes) < 8000) < 0.6  # the geometric middle of the range
    assert triangular.corpus_rows("road", 1000, 64000, 7) == sizes[7] != triangular.corpus_rows("rmat", 1000, 64000, 7)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: triangular.laplacian((2, 5)), ValueError, r"shape\[0\] must be >= 3, got 2"),
    (lambda: triangular.laplacian((5,)), ValueError, r"shape must be \(nx, ny\) or \(nx, ny, nz\), got \(5,\)"),
    (lambda: triangular.laplacian((4, 4), "ilu1"), ValueError, r"factor must be one of \('lower', 'ic0', 'ilu0'\)"),
    (lambda: triangular.laplacian((4, 4.0)), TypeError, r"shape\[1\] must be an int, got float"),
    (lambda: triangular.banded(0, 2, 0.5), ValueError, r"n must be >= 1, got 0"),
    (lambda: triangular.banded(10, 2, 1.5), ValueError, r"density must lie in \[0.0, 1.0\], got 1.5"),
    (lambda: triangular.power_law(10, 2.0, 2.0), ValueError, r"exponent must lie in"),
    (lambda: triangular.rmat(4, 2, probabilities=(0.5, 0.5, 0.5, 0.5)), ValueError,
     r"probabilities must be four non-negative numbers summing to 1"),
    (lambda: triangular.road_grid(10, 10, keep="a"), TypeError, r"keep must be a real number, got str"),
    (lambda: triangular.graph_lower(sp.csr_array((2, 3))), ValueError, r"graph must be a square matrix, got shape \(2, 3\)"),
    (lambda: triangular.graph_lower(np.zeros((3, 2), dtype=np.int64)), ValueError,
     r"graph as an edge list must be an integer array \[2, E\], got int64 of shape \(3, 2\)"),
    (lambda: triangular.graph_lower(gsparse.Graph.from_edge_index(torch.tensor([[0], [1]]), num_src=1, num_dst=2)), ValueError,
     r"graph must be square, got 1 sources and 2 destinations"),
    (lambda: triangular.generate("grid", 100, 0), ValueError, r"family must be one of"),
    (lambda: triangular.generate("banded", 10, 0), ValueError, r"rows must be >= 27, got 10"),
    (lambda: triangular.stencil((1, 5)), ValueError, r"shape\[0\] must be >= 2, got 1"),
    (lambda: triangular.shuffled(sp.csr_array((2, 3))), ValueError, r"matrix must be a square SciPy sparse matrix"),
    (lambda: triangular.corpus_rows("road", 100, 50, 0), ValueError, r"high must be >= 100, got 50"),
])
def test_generator_errors_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
