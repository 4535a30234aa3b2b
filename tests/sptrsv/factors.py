"""Named triangular factors for the SpTRSV tests, and the accuracy measure of the issue."""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp
import torch

from gsparse.datasets import triangular

# Small members of every generator family (about 300 rows: fast, yet tens of levels).
FAMILY_ROWS = 300


def family_factor(family: str, seed: int = 0, upper: bool = False) -> sp.csr_array:
    return triangular.generate(family, FAMILY_ROWS, seed, upper=upper)


def hand_factor() -> sp.csr_array:
    """5 x 5 lower factor with a row without off-diagonal entries, a long row and a negative
    diagonal entry::

        [ 2  .  .  .  . ]
        [ 1  3  .  .  . ]
        [ .  .  -4 .  . ]
        [ 1  2  1  5  . ]
        [ .  1  .  2  6 ]
    """
    dense = np.array([[2, 0, 0, 0, 0], [1, 3, 0, 0, 0], [0, 0, -4, 0, 0],
                      [1, 2, 1, 5, 0], [0, 1, 0, 2, 6]], dtype=np.float64)
    return sp.csr_array(dense)


def unit_factor(matrix: sp.sparray) -> sp.csr_array:
    """``matrix`` with its off-diagonal entries scaled so that every row and column sums to
    at most 1/2 in magnitude: a unit-diagonal solve with it, or with its transpose, stays
    well conditioned at any depth (the families' values in [1, 2) would grow like 2^depth)."""
    csr = sp.csr_array(matrix, dtype=np.float64)
    off = csr - sp.diags(csr.diagonal())
    sums = max(abs(off).sum(axis=0).max(initial=0.0), abs(off).sum(axis=1).max(initial=0.0))
    scaled = sp.csr_array(off * (0.5 / sums) + sp.diags(csr.diagonal())) if sums else csr
    scaled.sort_indices()
    return scaled


def torch_csr(matrix: sp.sparray, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    csr = sp.csr_array(matrix)
    with torch.sparse.check_sparse_tensor_invariants(True), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(torch.from_numpy(csr.indptr.astype(np.int64)),
                                   torch.from_numpy(csr.indices.astype(np.int64)),
                                       torch.from_numpy(csr.data).to(dtype), csr.shape)


def dense_system(matrix: sp.sparray, unit_diagonal: bool, transpose: bool) -> np.ndarray:
    """The dense matrix actually solved: diagonal replaced by ones when unit, transposed."""
    dense = matrix.toarray().astype(np.float64)
    if unit_diagonal:
        np.fill_diagonal(dense, 1.0)
    return dense.T if transpose else dense


def sparse_system(matrix: sp.sparray, unit_diagonal: bool, transpose: bool) -> sp.csr_array:
    """:func:`dense_system` as a sparse matrix, for factors too large to densify."""
    csr = sp.csr_array(matrix, dtype=np.float64)
    if unit_diagonal:
        csr = sp.csr_array(csr - sp.diags_array(csr.diagonal()) + sp.eye_array(csr.shape[0]))
    return sp.csr_array(csr.T) if transpose else csr


def relative_residual(system: np.ndarray | sp.sparray, x: torch.Tensor, b: torch.Tensor) -> float:
    """``||A x - b|| / (||A|| ||x|| + ||b||)`` in the infinity norms, worst column, for the
    system's matrix dense or sparse; infinite when ``x`` holds a NaN or an infinity (which
    the norms would otherwise pass over)."""
    if not bool(torch.isfinite(x).all()):
        return math.inf
    n = system.shape[0]
    x64 = x.detach().double().numpy().reshape(n, -1)
    b64 = b.detach().double().numpy().reshape(n, -1)
    norm_a = float(np.asarray(abs(system).sum(axis=1)).max(initial=0.0))
    worst = 0.0
    for c in range(x64.shape[1]):
        r = np.abs(system @ x64[:, c] - b64[:, c]).max(initial=0.0)
        denominator = norm_a * np.abs(x64[:, c]).max(initial=0.0) + np.abs(b64[:, c]).max(initial=0.0)
        worst = max(worst, r / denominator if denominator else r)
    return worst
