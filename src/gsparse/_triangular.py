"""Triangular factors: reading the accepted inputs, validating them, their canonical pattern.

A factor is held as a canonical CSR: each row's columns strictly increasing (sorted, no
duplicates), int64 indices, on the input's device. Inputs whose rows are not sorted are
accepted; the permutation from the input's storage order to the canonical one is kept, so
that values (and their gradients) stay in the user's order. The :class:`Pattern` owns what
is derived from the structure alone (the level-set plans), and is found again by the
custom op (``gsparse::sptrsv`` takes tensors, not objects) through its index tensors'
addresses, as :class:`~gsparse.Graph` is.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from ._live import LiveRegistry
from .kernels.sptrsv import FactorPlans
from .kernels.sptrsv import checks as factor_checks
from .kernels.sptrsv.checks import FactorReport
from .kernels.sptrsv.levelset import LevelSetPlan, levelset_plan
from .kernels.sptrsv.natural import entry_rows
from .kernels.sptrsv.stats import PatternStats

__all__ = ["Pattern", "read_factor", "check_values", "check_diagonal", "SUPPORTED_DTYPES"]

SUPPORTED_DTYPES = (torch.float32, torch.float64)

_LIVE: LiveRegistry[Pattern] = LiveRegistry()


class Pattern:
    """The canonical, validated pattern of an ``n x n`` triangular factor.

    Attributes:
        crow: ``[n + 1]`` int64 row offsets.
        col: ``[nnz]`` int64 columns, increasing within each row.
        lower: lower (else upper) triangular.
        order: ``[nnz]`` int64 or None: canonical entry ``p`` is the input's entry
            ``order[p]`` (None when the input was canonical already).
        stats: the pattern's statistics where the checks measured them (on a GPU), else
            None (the device plans measure them if a scheme needs them).
    """

    def __init__(self, crow: torch.Tensor, col: torch.Tensor, lower: bool,
                 order: torch.Tensor | None, register: bool = True, stats: PatternStats | None = None) -> None:
        self.crow, self.col, self.lower, self.order, self.stats = crow, col, lower, order, stats
        self._levelset: dict[bool, LevelSetPlan] = {}
        self._device_plans: FactorPlans | None = None
        if register:
            _LIVE.add(crow, col, self)

    @property
    def n(self) -> int:
        return self.crow.numel() - 1

    @property
    def nnz(self) -> int:
        return self.col.numel()

    @property
    def device(self) -> torch.device:
        return self.crow.device

    @classmethod
    def find(cls, crow: torch.Tensor, col: torch.Tensor, lower: bool) -> Pattern:
        """The live pattern over these index tensors, else an unregistered one (empty caches)."""
        found = _LIVE.get(crow, col)
        if found is not None and found.lower == lower and found.crow.shape == crow.shape \
                and found.col.shape == col.shape:
            return found
        return cls(crow, col, lower, None, register=False)

    @property
    def device_plans(self) -> FactorPlans:
        """The analyses, chosen schemes and launch plans of the generated CUDA kernels,
        made on first use."""
        if self._device_plans is None:
            # Imported here: the tuner's layer sits above this one.
            from .tune.sptrsv import recorded_scheme

            self._device_plans = FactorPlans(self.crow, self.col, self.lower, self.stats)
            self._device_plans.recorded = recorded_scheme
        return self._device_plans

    def levelset_plan(self, transpose: bool) -> LevelSetPlan:
        """The level-set plan of ``A x = b`` (``transpose``: ``A^T x = b``), built on first use."""
        if transpose not in self._levelset:
            self._levelset[transpose] = levelset_plan(self.crow.cpu().numpy(), self.col.cpu().numpy(),
                                                      self.lower, transpose, self.device)
        return self._levelset[transpose]

    def rows(self) -> torch.Tensor:
        """``[nnz]`` int64 row of each entry (traceable: its size is the pattern's)."""
        return entry_rows(self.crow, self.nnz)


def _dtype_problem(kind: str, itemsize: int) -> str:
    """Why values of a dtype of this NumPy kind (``"f"``, ``"c"``, ...) and size are refused."""
    if kind == "f":
        return ("half precision is not supported: convert to float32" if itemsize < 4 else
                "extended precision is not supported: convert to float64")
    if kind == "c":
        return "complex values are not supported"
    return "integer and boolean values are not supported: convert to float32 or float64"


def check_values(name: str, values: torch.Tensor) -> torch.Tensor:
    """A floating tensor of a supported dtype."""
    if values.dtype not in SUPPORTED_DTYPES:
        kind = "f" if values.dtype.is_floating_point else "c" if values.dtype.is_complex else "i"
        raise TypeError(f"{name} must have dtype float32 or float64, got {values.dtype} "
                        f"({_dtype_problem(kind, values.dtype.itemsize)})")
    return values


def _as_tensor(name: str, a: Any) -> torch.Tensor:
    if isinstance(a, np.ndarray):
        if a.dtype.kind not in "biufc":
            raise TypeError(f"{name} must be a numeric array, got dtype {a.dtype}")
        return torch.from_numpy(np.ascontiguousarray(a))
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or a NumPy array, got {type(a).__name__}")
    return a


def _from_scipy(A: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[int, ...]]:
    dtype = np.dtype(A.dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"A's values must be float32 or float64, got {dtype} ({_dtype_problem(dtype.kind, dtype.itemsize)})")
    csr = A.tocsr(copy=True)
    csr.sum_duplicates()  # SciPy's meaning of duplicates: they add up (this also sorts rows)
    return (torch.from_numpy(csr.indptr.astype(np.int64)), torch.from_numpy(csr.indices.astype(np.int64)),
            torch.from_numpy(np.ascontiguousarray(csr.data)), tuple(csr.shape))


def _parts(A: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[int, ...]]:
    """``(crow, col, values, shape)`` of any accepted input, unchecked."""
    if isinstance(A, torch.Tensor):
        if A.layout != torch.sparse_csr:
            raise TypeError(f"A must be a torch.sparse_csr tensor (or a SciPy sparse matrix, or CSR "
                            f"arrays (crow, col, values, shape)), got a tensor of layout {A.layout}")
        if A.dim() != 2:
            raise ValueError(f"A must be a 2-D matrix, got a sparse CSR tensor of shape {tuple(A.shape)}")
        return A.crow_indices(), A.col_indices(), A.values(), tuple(A.shape)
    import scipy.sparse as sp

    if sp.issparse(A):
        return _from_scipy(A)
    if isinstance(A, (tuple, list)) and len(A) == 4:
        crow, col, values, shape = A
        if not (isinstance(shape, (tuple, list, torch.Size)) and len(shape) == 2
                and all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in shape)):
            raise TypeError(f"the shape in A = (crow, col, values, shape) must be a pair of ints, got {shape!r}")
        return (_as_tensor("crow", crow), _as_tensor("col", col), _as_tensor("values", values),
                tuple(int(s) for s in shape))
    raise TypeError("A must be a torch.sparse_csr tensor, a SciPy sparse matrix, or CSR arrays "
                    f"(crow, col, values, shape); got {type(A).__name__}")


def _first(mask: torch.Tensor) -> int | None:
    """The first True position of ``mask``, None if there is none."""
    return int(torch.nonzero(mask)[0, 0]) if bool(mask.any()) else None


def _check_index(name: str, t: torch.Tensor, length: int | None) -> torch.Tensor:
    if t.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{name} must have dtype int32 or int64, got {t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
    if length is not None and t.numel() != length:
        raise ValueError(f"{name} must have {length} entries, got {t.numel()}")
    return t.long()


def read_factor(A: Any, lower: bool, unit_diagonal: bool = False) -> tuple[Pattern, torch.Tensor]:
    """The canonical pattern of ``A`` and its values in the input's storage order.

    Checks everything about ``A``: a square 2-D shape, a supported dtype, CSR indices that
    are consistent and in range, all on one device, no duplicate entries, every entry on the
    diagonal or the ``lower`` (else upper) side of it, and unless ``unit_diagonal``, a
    finite nonzero diagonal entry in every row. On a GPU the rules are checked by one
    kernel launch and one read-back (:mod:`gsparse.kernels.sptrsv.checks`), plus a sort
    and one more read-back when some row's columns are not in order.
    """
    if not isinstance(lower, bool):
        raise TypeError(f"lower must be a bool, got {type(lower).__name__}")
    crow, col, values, shape = _parts(A)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"A must be square, got shape {tuple(shape)}")
    n = shape[0]
    check_values("A's values", values)
    crow = _check_index("crow", crow, n + 1).contiguous()
    col = _check_index("col", col, None).contiguous()
    if values.dim() != 1 or values.numel() != col.numel():
        raise ValueError(f"values must be 1-D with one entry per column index ({col.numel()}), "
                         f"got shape {tuple(values.shape)}")
    if not (crow.device == col.device == values.device):
        raise ValueError(f"crow, col and values must be on one device, got {crow.device}, "
                         f"{col.device} and {values.device}")
    diagonal = None if unit_diagonal else values.detach().contiguous()
    found = _find(crow, col, diagonal, values.dtype, lower)
    if found.crow_ends:
        raise ValueError(f"crow must start at 0 and end at the number of entries ({col.numel()}), "
                         f"got {int(crow[0])} and {int(crow[-1])}")
    if (i := found.decrease) is not None:
        raise ValueError(f"crow must be non-decreasing: crow[{i + 1}] = {int(crow[i + 1])} < "
                         f"crow[{i}] = {int(crow[i])}")
    if (i := found.out_of_range) is not None:
        raise ValueError(f"col[{i}] = {int(col[i])} is out of range: A is {n} x {n}")
    order = None if found.unsorted is None else _canonical_order(crow, col)
    if found.wrong_side is not None:
        row, column = found.wrong_side
        side, kind = ("above", "lower") if lower else ("below", "upper")
        raise ValueError(f"A is not {kind} triangular: it has an entry at (row {row}, column {column}), "
                         f"{side} the diagonal")
    if diagonal is not None:
        _raise_diagonal(found, crow, col, diagonal)
    return Pattern(crow, col if order is None else col[order], lower, order, stats=found.stats), values


def check_diagonal(pattern: Pattern, values: torch.Tensor) -> None:
    """Every row has a finite, nonzero diagonal entry (``values`` in canonical order); on a
    GPU, one kernel launch and one read-back."""
    values = values.detach().contiguous()
    _raise_diagonal(_find(pattern.crow, pattern.col, values, values.dtype, pattern.lower),
                    pattern.crow, pattern.col, values)


def _raise_diagonal(found: FactorReport | _TorchChecks, crow: torch.Tensor, col: torch.Tensor,
                    values: torch.Tensor) -> None:
    """ValueError naming the first row without a diagonal entry, else the first with a zero or
    non-finite one (``values`` in ``col``'s order, which need not be canonical)."""
    if (i := found.no_diagonal) is not None:
        raise ValueError(f"A has no diagonal entry in row {i}; a solve with unit_diagonal=False "
                         f"divides by it (pass unit_diagonal=True if the diagonal is implicitly 1)")
    if (i := found.bad_diagonal) is not None:
        begin, end = int(crow[i]), int(crow[i + 1])
        value = float(values[begin:end][col[begin:end] == i][0])
        what = "zero (A is singular)" if value == 0 else f"{value} (not finite)"
        raise ValueError(f"A's diagonal entry in row {i} is {what}")


def _find(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor | None, dtype: torch.dtype,
          lower: bool) -> FactorReport | _TorchChecks:
    """The first violation of each rule: on a GPU, the check kernel's report; elsewhere, the
    rules checked with PyTorch operations as they are asked for."""
    if factor_checks.on_gpu(crow):
        return factor_checks.check_factor(crow, col, values, dtype, lower)
    return _TorchChecks(crow, col, values, lower)


class _TorchChecks:
    """The fields of :class:`~gsparse.kernels.sptrsv.checks.FactorReport`, computed with
    PyTorch operations when read (a host wait or two each: off the GPU that is cheap). They
    are read in the order of the class's fields, and a field may assume that the rules
    before it hold: the first violation raises before the next field is read."""

    stats = None  # not measured here: what needs them measures them (kernels.sptrsv.stats)

    def __init__(self, crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor | None, lower: bool) -> None:
        self._crow, self._col, self._values, self._lower = crow, col, values, lower
        self._n = crow.numel() - 1

    @functools.cached_property
    def crow_ends(self) -> bool | None:
        return True if (int(self._crow[0]), int(self._crow[-1])) != (0, self._col.numel()) else None

    @functools.cached_property
    def decrease(self) -> int | None:
        return _first(self._crow[1:] < self._crow[:-1])

    @functools.cached_property
    def out_of_range(self) -> int | None:
        return _first((self._col < 0) | (self._col >= self._n))

    @functools.cached_property
    def _rows(self) -> torch.Tensor:
        return entry_rows(self._crow, self._col.numel())

    @functools.cached_property
    def _key(self) -> torch.Tensor:
        return self._rows * max(self._n, 1) + self._col

    @functools.cached_property
    def unsorted(self) -> int | None:
        # Keys rise from one row to the next: a key that does not rise is inside a row.
        i = _first(self._key[1:] <= self._key[:-1])
        return None if i is None else int(self._rows[i])

    @functools.cached_property
    def wrong_side(self) -> tuple[int, int] | None:
        wrong = self._col > self._rows if self._lower else self._col < self._rows
        if not bool(wrong.any()):
            return None
        return divmod(int(self._key[wrong].min()), max(self._n, 1))

    @functools.cached_property
    def no_diagonal(self) -> int | None:
        present = torch.zeros(self._n, dtype=torch.bool, device=self._crow.device)
        present[self._rows[self._col == self._rows]] = True
        return _first(~present)

    @functools.cached_property
    def bad_diagonal(self) -> int | None:
        on_diagonal = self._col == self._rows
        diagonal = torch.empty(self._n, dtype=self._values.dtype, device=self._values.device)
        diagonal[self._rows[on_diagonal]] = self._values[on_diagonal]
        return _first((diagonal == 0) | ~torch.isfinite(diagonal))


def _canonical_order(crow: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
    """The entries' stable order by (row, column), where some row's columns are not
    increasing; ValueError naming the first entry given twice."""
    width = max(crow.numel() - 1, 1)
    key = entry_rows(crow, col.numel()) * width + col
    order = torch.argsort(key, stable=True)
    key = key[order]
    if (i := _first(key[1:] == key[:-1])) is not None:
        row, column = divmod(int(key[i]), width)
        raise ValueError(f"A has more than one entry at (row {row}, column {column}); "
                         f"duplicate entries are not supported: sum them first")
    return order
