"""The CPU triangular solve: MKL's sparse triangular solver where PyTorch ships it, else SciPy.

PyTorch's ``torch.triangular_solve`` on a sparse CSR matrix calls MKL on CPU builds that
include it (x86-64 wheels). It is several times faster than SciPy's
``spsolve_triangular``, which copies, rescales and re-sorts the matrix on every call
before SuperLU's solve (figures in docs/sptrsv.md). Builds without MKL (e.g. aarch64) use
SciPy; both give the exact solution up to rounding.

Both take the canonical pattern (columns increasing within rows, no duplicates): MKL needs
sorted rows and silently returns a wrong solution for unsorted ones.
"""

from __future__ import annotations

import torch

from .cpu import unchecked_csr

__all__ = ["HAS_MKL", "solve"]

HAS_MKL = torch.backends.mkl.is_available()


def solve(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, b: torch.Tensor, lower: bool,
          unit_diagonal: bool, transpose: bool, use_mkl: bool = HAS_MKL) -> torch.Tensor:
    """``x`` of ``b``'s shape (``[n]`` or ``[n, k]``) with ``op(A) x = b``, ``op(A) = A^T`` when
    ``transpose``; ``A`` the ``n x n`` CSR ``(crow, col, values)``, lower or upper
    triangular. ``unit_diagonal`` ignores stored diagonal entries and takes ones. The
    result is a new tensor of ``values``' dtype."""
    n = crow.numel() - 1
    rhs = b.unsqueeze(1) if b.dim() == 1 else b
    if use_mkl:
        matrix = unchecked_csr(crow, col, values, (n, n))
        x = torch.triangular_solve(rhs, matrix, upper=not lower, transpose=transpose,
                                   unitriangular=unit_diagonal).solution
        return x.reshape(b.shape)
    return _scipy_solve(crow, col, values, rhs, lower, unit_diagonal, transpose).reshape(b.shape)


def _scipy_solve(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, rhs: torch.Tensor,
                 lower: bool, unit_diagonal: bool, transpose: bool) -> torch.Tensor:
    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve_triangular

    n = crow.numel() - 1
    matrix = sp.csr_array((values.numpy(), col.numpy(), crow.numpy()), shape=(n, n))
    if transpose:  # A^T in CSC costs nothing and SciPy solves CSC directly
        matrix, lower = matrix.T, not lower
    x = spsolve_triangular(matrix, rhs.numpy(), lower=lower, unit_diagonal=unit_diagonal)
    return torch.from_numpy(x)
