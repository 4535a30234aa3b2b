r"""Sparse triangular solve: :func:`sptrsv` and :class:`TriangularSolver`.

Solves :math:`\mathrm{op}(A)\, x = b` for a sparse triangular ``A`` (``n x n``) with
:math:`\mathrm{op}(A) = A` or :math:`A^T`, one right-hand side (``b`` ``[n]``) or many
(``[n, k]``), in float32 or float64; differentiable in ``b`` and in ``A``'s values. The
factor is validated once per :class:`TriangularSolver`, which then solves any number of
times. On the CPU the solve is MKL's (SciPy's where PyTorch has no MKL); on CUDA, the
generated AG-SpTRSV kernels of :mod:`gsparse.kernels.sptrsv`; on other devices, the
level-set solve in PyTorch ops (:mod:`gsparse.kernels.sptrsv.levelset`, also the CUDA
benchmark's baseline).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from . import _sptrsv_ops
from ._ops import direct_call_ok
from ._triangular import check_diagonal, check_values, read_factor
from .kernels.sptrsv.schedule import NaturalOrderSchedule, SptrsvSchedule

__all__ = ["sptrsv", "TriangularSolver"]


class TriangularSolver:
    r"""A sparse triangular factor, validated and analysed once, to solve with many times.

    Validation happens here; what a device needs is built at the first solve in each
    direction (and per number of right-hand sides) and kept with the solver. On CUDA that is
    either the *fast start*: the kernel solves rows in their natural dependency order, or
    by level where that order chains them (a mesh numbered along its grid), and needs no
    analysis, only the compiled kernel, the statistics the checks measure and, for
    ``transpose``, the transposed pattern (built on the GPU); or the AG-SpTRSV analysis (the
    dependency graph and levels, the scheme's schedule and launches, on the GPU), whose
    preparation costs 5-30 ms. By default the fast start runs except with several
    right-hand sides on a factor of 65,536 rows or more whose rows average under 4 entries,
    where the analysed solve is faster and pays for its preparation within about 100
    solves (docs/performance.md, "The fast start's rule").

    Args:
        A: the ``n x n`` factor, one of:

            - a ``torch.sparse_csr`` tensor (its device is the solver's);
            - a SciPy sparse matrix or array of any format (duplicate entries add up, as in
              SciPy; the solver is on the CPU);
            - CSR arrays ``(crow, col, values, shape)``: ``crow`` ``[n + 1]`` and ``col``
              ``[nnz]`` integer, ``values`` ``[nnz]``, torch tensors or NumPy arrays,
              ``shape`` ``(n, n)``; as ``torch.sparse_csr_tensor(crow, col, values, shape)``.

            Values are float32 or float64. Rows' columns need not be sorted; an entry may
            not appear twice in a tensor or arrays.
        lower: ``A`` is lower triangular (else upper): every entry lies on the diagonal or
            on that side of it.
        unit_diagonal: take the diagonal as ones; stored diagonal entries are then not
            read (and get no gradient) and may be missing. Otherwise every row needs a
            finite nonzero diagonal entry.
        schedule: on CUDA, the scheme every solve runs (for tuning and benchmarks): an
            AG-SpTRSV :class:`~gsparse.kernels.sptrsv.SptrsvSchedule` or a fast start's
            :class:`~gsparse.kernels.sptrsv.NaturalOrderSchedule`; None: the one chosen for
            the factor and the solve (see ``analysis``). Ignored on other devices.
        analysis: on CUDA without a ``schedule``: True: analyse the factor on the host and
            run the scheme of the MLP selector shipped with gsparse where it answers, else
            the hand rule's (``gsparse.kernels.sptrsv.analysed_schedule``;
            ``GSPARSE_SPTRSV_SELECTOR=off`` keeps to the hand rule); False: the fast start
            (``gsparse.kernels.sptrsv.default.natural_schedule``), no analysis; None: the
            fast start where it serves, else the analysis (see above). Ignored on other
            devices.

    Raises:
        TypeError: ``A`` of another kind, values of an unsupported dtype (integer, half,
            complex), index arrays that are not integers, a ``schedule`` that is not a
            scheme, a ``unit_diagonal`` that is not a bool, an ``analysis`` that is not a bool
            or None.
        ValueError: ``A`` not square, not triangular in the asked direction (naming the
            first entry on the wrong side), with a duplicate entry, a missing, zero or
            non-finite diagonal entry (naming the row), inconsistent or out-of-range CSR
            indices, parts on different devices, or an invalid ``schedule``.

    The values of a tensor or arrays input are used as given (not copied), in their own
    storage order, so gradients reach them: a ``values`` tensor with ``requires_grad``
    gets :math:`\partial A_{ij}` per entry. :meth:`update_values` swaps them.
    """

    def __init__(self, A: Any, lower: bool = True, unit_diagonal: bool = False,
                 schedule: SptrsvSchedule | NaturalOrderSchedule | None = None,
                 analysis: bool | None = None) -> None:
        if not isinstance(unit_diagonal, bool):
            raise TypeError(f"unit_diagonal must be a bool, got {type(unit_diagonal).__name__}")
        if analysis is not None and not isinstance(analysis, bool):
            raise TypeError(f"analysis must be a bool or None, got {type(analysis).__name__}")
        if schedule is not None:
            if not isinstance(schedule, (SptrsvSchedule, NaturalOrderSchedule)):
                raise TypeError(f"schedule must be a SptrsvSchedule, a NaturalOrderSchedule or None, "
                                f"got {type(schedule).__name__}")
            schedule.validate()
        self._pattern, values = read_factor(A, lower, unit_diagonal)
        self._pattern.device_plans.schedule = schedule
        self._pattern.device_plans.analyse = analysis
        self._unit_diagonal = unit_diagonal
        self._values = values
        self._canonical = self._canonical_values(values)

    # ------------------------------------------------------------------ properties

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, n)``, the factor's size."""
        return (self._pattern.n, self._pattern.n)

    @property
    def nnz(self) -> int:
        """Stored entries of the factor."""
        return self._pattern.nnz

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the factor's values, and of every solution."""
        return self._values.dtype

    @property
    def device(self) -> torch.device:
        """The device the factor lives on, where right-hand sides must live."""
        return self._pattern.device

    @property
    def lower(self) -> bool:
        """Whether the factor is lower triangular (else upper)."""
        return self._pattern.lower

    @property
    def unit_diagonal(self) -> bool:
        """Whether the diagonal is taken as all ones (the stored diagonal is ignored)."""
        return self._unit_diagonal

    @property
    def values(self) -> torch.Tensor:
        """``[nnz]`` the factor's values, in the input's storage order (for a SciPy input:
        the order of its canonical CSR, rows' columns sorted and duplicates summed)."""
        return self._values

    def __repr__(self) -> str:
        kind = ("lower" if self.lower else "upper") + (", unit diagonal" if self.unit_diagonal else "")
        return (f"TriangularSolver(n={self._pattern.n}, nnz={self.nnz}, {kind}, dtype={self.dtype}, "
                f"device={self.device})")

    # ------------------------------------------------------------------ solving

    def solve(self, b: torch.Tensor, transpose: bool = False) -> torch.Tensor:
        r"""``x`` with :math:`A x = b`, or :math:`A^T x = b` with ``transpose``.

        Args:
            b: ``[n]`` or ``[n, k]``, the factor's dtype and device.
            transpose: solve with the transposed factor (an upper system for a lower ``A``).

        Returns:
            ``x``, a new tensor of ``b``'s shape. Differentiable in ``b`` and in the
            factor's values (see :func:`sptrsv` for the gradients).
        """
        if not isinstance(transpose, bool):
            raise TypeError(f"transpose must be a bool, got {type(transpose).__name__}")
        self._check_rhs(b)
        p = self._pattern
        values = self._current_canonical()
        if direct_call_ok(values, b):
            return _sptrsv_ops.solve_now(p, values, b, self._unit_diagonal, transpose)
        return _sptrsv_ops.sptrsv(p.crow, p.col, values, b, p.lower, self._unit_diagonal, transpose)

    def _check_rhs(self, b: Any) -> None:
        if not isinstance(b, torch.Tensor):
            raise TypeError(f"b must be a torch.Tensor, got {type(b).__name__}")
        if b.dtype != self.dtype:
            check_values("b", b)  # says why an unsupported dtype is
            raise TypeError(f"b has dtype {b.dtype} but the factor's values are {self.dtype}")
        if b.device != self.device:
            raise ValueError(f"b is on {b.device} but the factor is on {self.device}")
        n = self._pattern.n
        if b.dim() not in (1, 2) or b.shape[0] != n:
            raise ValueError(f"b must have shape [n] or [n, k] with n = {n} (A is {n} x {n}), "
                             f"got {list(b.shape)}")

    # ------------------------------------------------------------------ tuning

    def tune(self, b: torch.Tensor, transpose: bool = False,
             schemes: str | Sequence[SptrsvSchedule] = "selection", progress: bool | None = None) -> SptrsvSchedule:
        """Measure every scheme of ``schemes`` on this factor and ``b`` on the GPU, keep them all
        in the tuning database, and solve with the fastest from now on: in this solver, and in
        any solver over the same pattern, task and GPU model that reads the same database
        (``$GSPARSE_TUNING_DB``, else the cache directory; :mod:`gsparse.tune.sptrsv`).

        Each scheme's output is checked against the CPU's float64 solve of this factor (MKL's
        or SciPy's) before it is timed (the median of repeats, CUDA events around its kernels); a scheme that fails
        is recorded with its error. The fastest few, within 10% of the fastest, are timed again
        side by side before one is chosen. Schemes measured before for the same key are not
        measured again.

        Args:
            b: ``[n]`` or ``[n, k]`` right-hand sides, as :meth:`solve` takes them; their
                number is part of the task.
            transpose: tune the transposed solve.
            schemes: ``"selection"`` (the selector's 54 schemes: tens of seconds at 500K
                rows), ``"reduced"`` (the reduced space's 1,680, the oracle of issue 20's
                bars: a long run) or a list of
                :class:`~gsparse.kernels.sptrsv.SptrsvSchedule`.
            progress: a progress bar on stderr; None: only when stderr is a terminal.

        Returns:
            The fastest scheme.

        Raises:
            ValueError: the solver is not on a CUDA device, or no scheme solved correctly.
        """
        if not isinstance(transpose, bool):
            raise TypeError(f"transpose must be a bool, got {type(transpose).__name__}")
        self._check_rhs(b)
        if self.device.type != "cuda":
            raise ValueError(f"tune measures the CUDA kernels, but this solver is on {self.device}")
        from .target import Target
        from .tune.select import open_database
        from .tune.sptrsv import tune_factor

        plans = self._pattern.device_plans
        b = b.detach().contiguous()
        task = plans.task(self.dtype, self._unit_diagonal, transpose, 1 if b.dim() == 1 else b.shape[1])
        result = tune_factor(plans, task, plans.target or Target.of(b.device), self._canonical, b,
                             self._reference(b, transpose), open_database(), schemes=schemes, progress=progress)
        if result.best is None:
            errors = sorted({r.error for r in (*result.results, *result.reused) if r.error})
            raise ValueError(f"no scheme solved this factor correctly; errors: {errors[:3]}")
        plans.forget_choices()
        return result.best

    def _reference(self, b: torch.Tensor, transpose: bool) -> torch.Tensor:
        """The CPU solve's float64 solution of this system for ``b`` (MKL's or SciPy's:
        :mod:`gsparse.backends.cpu_triangular`), in ``b``'s dtype and device."""
        from .backends import cpu_triangular

        p = self._pattern
        x = cpu_triangular.solve(p.crow.cpu(), p.col.cpu(), self._canonical.double().cpu(), b.double().cpu(),
                                 p.lower, self._unit_diagonal, transpose)
        return x.to(device=b.device, dtype=b.dtype)

    # ------------------------------------------------------------------ values

    def update_values(self, values: torch.Tensor | np.ndarray) -> None:
        """Take new values for the same pattern (e.g. a refactorisation), re-checking the diagonal.

        Args:
            values: ``[nnz]`` in the order of :attr:`values`, of the factor's dtype and
                device; a tensor is used as given (gradients reach it).
        """
        if isinstance(values, np.ndarray):
            values = torch.from_numpy(np.ascontiguousarray(values))
        if not isinstance(values, torch.Tensor):
            raise TypeError(f"values must be a torch.Tensor or a NumPy array, got {type(values).__name__}")
        check_values("values", values)
        if values.dtype != self.dtype:
            raise TypeError(f"values has dtype {values.dtype} but the factor's values are {self.dtype}")
        if values.device != self.device:
            raise ValueError(f"values is on {values.device} but the factor is on {self.device}")
        if values.shape != (self.nnz,):
            raise ValueError(f"values must have shape [{self.nnz}] (one per stored entry), "
                             f"got {list(values.shape)}")
        canonical = self._canonical_values(values)
        if not self._unit_diagonal:
            check_diagonal(self._pattern, canonical)
        self._values, self._canonical = values, canonical

    def _canonical_values(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` in canonical order (no autograd graph: see :meth:`_current_canonical`)."""
        order = self._pattern.order
        with torch.no_grad():
            return values.detach() if order is None else values.index_select(0, order)

    def _current_canonical(self) -> torch.Tensor:
        """The canonical values; while autograd records and :attr:`values` requires grad, taken
        from :attr:`values` in this call, so that each solve's graph reaches them."""
        if not (torch.is_grad_enabled() and self._values.requires_grad):
            return self._canonical
        order = self._pattern.order
        return self._values if order is None else self._values.index_select(0, order)


def sptrsv(A: Any, b: torch.Tensor, lower: bool = True, unit_diagonal: bool = False,
           transpose: bool = False) -> torch.Tensor:
    r"""Solve :math:`A x = b` (or :math:`A^T x = b`) for a sparse triangular ``A``.

    Args:
        A: the ``n x n`` factor: a ``torch.sparse_csr`` tensor, a SciPy sparse matrix, or
            CSR arrays ``(crow, col, values, shape)`` (see :class:`TriangularSolver`).
        b: ``[n]`` or ``[n, k]`` right-hand sides, float32 or float64 like ``A``'s values,
            on ``A``'s device.
        lower: ``A`` is lower (else upper) triangular.
        unit_diagonal: the diagonal is ones (stored diagonal entries are not read).
        transpose: solve with :math:`A^T`.

    Returns:
        ``x`` of ``b``'s shape.

    Gradients, with :math:`x = \mathrm{op}(A)^{-1} b`:

    - :math:`\partial b = \mathrm{op}(A)^{-T} \partial x` (a solve with the other transpose);
    - :math:`\partial A_{ij} = -\sum_c \partial b_{ic} x_{jc}` for each stored entry
      (:math:`-\sum_c \partial b_{jc} x_{ic}` with ``transpose``): :math:`-\partial b\, x^T`
      sampled at the pattern, summed over the ``k`` right-hand sides; 0 on a unit diagonal.

    Each call validates ``A`` again; to solve repeatedly with one factor, build a
    :class:`TriangularSolver` once. The errors are :class:`TriangularSolver`'s and
    :meth:`TriangularSolver.solve`'s.
    """
    return TriangularSolver(A, lower=lower, unit_diagonal=unit_diagonal).solve(b, transpose=transpose)
