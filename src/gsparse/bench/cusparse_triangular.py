"""cuSPARSE's triangular solve with its analysis done once: SpSM through CuPy's bindings.

CuPy's ``cupyx.cusparse.spsm`` (and ``cupyx.scipy.sparse.linalg.spsolve_triangular``) runs
the analysis on every call; :class:`CuSparseSpSM` makes the same calls (``spSM_bufferSize``,
``spSM_analysis``, ``spSM_solve``) but keeps the analysis, so that a benchmark can time
the analysis and the solve apart. CuPy binds SpSM but not SpSV, so a vector is solved as one
column (cuSPARSE's SpSM over one column is its SpSV algorithm applied per column).
Right-hand sides are column-major (CuPy's order for SpSM), copied in once outside the
timed solves; the output is zeroed before each solve, as CuPy notes SpSM requires.

CuPy is imported on use: it exists on the GPU machines only. :func:`available` says
whether it imports and binds SpSM. Both CuPy and PyTorch launch on the legacy default
stream unless told otherwise, so PyTorch's CUDA events time these calls correctly.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import torch

__all__ = ["CuSparseSpSM", "available"]


def available() -> bool:
    """Whether CuPy is installed and its cuSPARSE bindings have SpSM."""
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        from cupy_backends.cuda.libs import cusparse as lib
        from cupyx import cusparse
    except Exception:  # noqa: BLE001 - a broken CuPy install is "not available"
        return False
    return hasattr(lib, "spSM_analysis") and cusparse.check_availability("spsm")


class CuSparseSpSM:
    """``op(A) X = B`` with cuSPARSE SpSM for one factor and one shape of ``B``.

    Args:
        crow, col, values: ``A``'s CSR on a CUDA device (int32 indices, columns sorted).
        n: rows of ``A``.
        lower, unit_diagonal, transpose: as :func:`gsparse.sptrsv`.
        k: right-hand sides.

    :meth:`analyse` (re)does the analysis, :meth:`load` copies the right-hand sides in,
    :meth:`solve` solves (what a benchmark times), :meth:`result` returns ``X``.
    """

    def __init__(self, crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, n: int, lower: bool,
                 unit_diagonal: bool, transpose: bool, k: int) -> None:
        import cupy
        import cupyx.scipy.sparse as csp
        from cupy._core import _dtype
        from cupy_backends.cuda.libs import cusparse as lib
        from cupyx import cusparse

        self._cupy, self._lib = cupy, lib
        dtype = np.dtype(str(values.dtype).removeprefix("torch."))
        self.a = csp.csr_matrix((cupy.asarray(values), cupy.asarray(col), cupy.asarray(crow)), shape=(n, n))
        self.b = cupy.zeros((n, k), dtype=dtype, order="F")
        self.c = cupy.zeros((n, k), dtype=dtype, order="F")
        self._mat_a = cusparse.SpMatDescriptor.create(self.a)
        self._mat_a.set_attribute(lib.CUSPARSE_SPMAT_FILL_MODE,
                                  lib.CUSPARSE_FILL_MODE_LOWER if lower else lib.CUSPARSE_FILL_MODE_UPPER)
        self._mat_a.set_attribute(lib.CUSPARSE_SPMAT_DIAG_TYPE,
                                  lib.CUSPARSE_DIAG_TYPE_UNIT if unit_diagonal else lib.CUSPARSE_DIAG_TYPE_NON_UNIT)
        self._mat_b = cusparse.DnMatDescriptor.create(self.b)
        self._mat_c = cusparse.DnMatDescriptor.create(self.c)
        self._op_a = lib.CUSPARSE_OPERATION_TRANSPOSE if transpose else lib.CUSPARSE_OPERATION_NON_TRANSPOSE
        self._op_b = lib.CUSPARSE_OPERATION_NON_TRANSPOSE
        self._alpha = np.array(1, dtype=dtype)
        self._compute = _dtype.to_cuda_dtype(dtype)
        self._algo = lib.CUSPARSE_SPSM_ALG_DEFAULT
        self._handle = self._device_handle()
        self._descr: Any = None
        self._buffer: Any = None

    @staticmethod
    def _device_handle() -> Any:
        from cupy.cuda import device

        return device.get_cusparse_handle()

    def _args(self, descr: Any) -> tuple:
        return (self._handle, self._op_a, self._op_b, self._alpha.ctypes.data, self._mat_a.desc,
                self._mat_b.desc, self._mat_c.desc, self._compute, self._algo, descr)

    def analyse(self) -> None:
        """The buffer and the analysis (a new SpSM descriptor each time)."""
        lib = self._lib
        if self._descr is not None:
            lib.spSM_destroyDescr(self._descr)
        self._descr = lib.spSM_createDescr()
        size = lib.spSM_bufferSize(*self._args(self._descr))
        self._buffer = self._cupy.empty(max(int(size), 1), dtype=self._cupy.int8)
        lib.spSM_analysis(*self._args(self._descr), self._buffer.data.ptr)

    def load(self, b: torch.Tensor) -> None:
        """Copy ``b`` (``[n]`` or ``[n, k]``) into the column-major input: once, outside the
        timed solves (a caller whose data is column-major already pays nothing)."""
        self.b[...] = self._cupy.asarray(b.unsqueeze(1) if b.dim() == 1 else b)

    def solve(self) -> None:
        """Solve for the loaded right-hand sides into :meth:`result`."""
        if self._descr is None:
            raise RuntimeError("CuSparseSpSM.solve before analyse()")
        self._lib.spSM_solve(*self._args(self._descr), self._buffer.data.ptr)

    def result(self, vector: bool) -> torch.Tensor:
        """The last solution, ``[n]`` when ``vector`` else ``[n, k]`` (a view of cuSPARSE's
        column-major output)."""
        out = torch.as_tensor(self.c, device=torch.device("cuda", self.c.device.id))
        return out[:, 0] if vector else out

    def __del__(self) -> None:
        if getattr(self, "_descr", None) is not None:
            try:
                self._lib.spSM_destroyDescr(self._descr)
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass
