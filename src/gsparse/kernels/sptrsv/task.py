"""What one triangular solve computes, as the generated kernels see it.

A :class:`SptrsvTask` is built on every solve from what the host already knows (the
factor's dtype and orientation, the index type its plan uses, the solve's flags and the
number of right-hand sides): it is the key of a factor's launch plans. The kernels solve
the *system* ``T x = b`` with ``T = A`` or ``T = A^T``; :attr:`SptrsvTask.algorithm` is the
part the code is specialised on, where ``transpose`` has already been folded into the
system's orientation (a plan transposes the CSR once, so the kernel always walks rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["INT32_LIMIT", "SptrsvAlgorithm", "SptrsvTask", "index_dtype_for"]

# The largest count an int32 index may hold: row offsets reach nnz, positions reach n.
INT32_LIMIT = 2**31 - 1

_DTYPES = (torch.float32, torch.float64)
_INDEX_DTYPES = (torch.int32, torch.int64)


def index_dtype_for(n: int, nnz: int) -> torch.dtype:
    """int32 when every row offset and row index fits, else int64."""
    return torch.int32 if max(n, nnz) <= INT32_LIMIT else torch.int64


@dataclass(frozen=True)
class SptrsvAlgorithm:
    """What the solve kernel's code is specialised on.

    Attributes:
        dtype: float32 or float64 (values, right-hand sides and the accumulator).
        index_dtype: int32 or int64, of the system's CSR and of the plan's arrays.
        lower: the *system* ``T`` is lower triangular (solved top down), else upper.
        unit_diagonal: the diagonal is ones; stored diagonal entries are skipped.
        num_rhs: ``k``, right-hand sides per row (1 for a vector).
    """

    dtype: torch.dtype
    index_dtype: torch.dtype
    lower: bool
    unit_diagonal: bool
    num_rhs: int

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        if self.index_dtype not in _INDEX_DTYPES:
            raise ValueError(f"index_dtype must be int32 or int64, got {self.index_dtype}")
        if isinstance(self.num_rhs, bool) or not isinstance(self.num_rhs, int) or self.num_rhs < 1:
            raise ValueError(f"num_rhs must be an int >= 1, got {self.num_rhs!r}")

    def __str__(self) -> str:
        return (f"{'lower' if self.lower else 'upper'}{' unit' if self.unit_diagonal else ''} "
                f"{str(self.dtype).removeprefix('torch.')} {str(self.index_dtype).removeprefix('torch.')} "
                f"k={self.num_rhs}")


@dataclass(frozen=True)
class SptrsvTask:
    """One solve ``op(A) x = b`` as the kernels see it.

    Attributes:
        dtype: the factor's (and ``b``'s) dtype.
        index_dtype: the index type of the plan (``index_dtype_for`` the factor's size).
        lower: ``A`` is lower triangular (else upper).
        unit_diagonal: the diagonal is taken as ones.
        transpose: solve with ``A^T``.
        num_rhs: ``k``: 1 for ``b`` of shape ``[n]``, else ``b.shape[1]``.
    """

    dtype: torch.dtype
    index_dtype: torch.dtype
    lower: bool
    unit_diagonal: bool
    transpose: bool
    num_rhs: int

    @property
    def system_lower(self) -> bool:
        """Whether the system solved, ``A`` or ``A^T``, is lower triangular."""
        return self.lower != self.transpose

    @property
    def algorithm(self) -> SptrsvAlgorithm:
        return SptrsvAlgorithm(self.dtype, self.index_dtype, self.system_lower, self.unit_diagonal,
                               self.num_rhs)

    def __str__(self) -> str:
        kind = ("lower" if self.lower else "upper") + ("^T" if self.transpose else "")
        return f"{kind} {self.algorithm}"
