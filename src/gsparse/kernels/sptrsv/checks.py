"""The checks of a triangular factor on its GPU: one launch, one read-back.

:func:`gsparse._triangular.read_factor` validates a factor's CSR (offsets, column range,
row order, side of the diagonal) and its diagonal. With PyTorch operations on a GPU that is
about twenty launches and eight host waits, and the first solver of a process also pays
PyTorch's lazy loading of each of those kernels (about 160 ms on an H100, the first factor's
"fast prep ms" in docs/performance.md, "Fast start"). :func:`check_factor` runs every rule
in one pass of the kernel in ``codegen/factor_checks.cu``, which records each rule's first
violation in a small report, with two statistics of the pattern that the fast start's rule
reads (:class:`~.stats.PatternStats`); the host reads it back once, as a
:class:`FactorReport`. The kernels are compiled once per GPU architecture through the disk
cache, like every generated kernel.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ..source import (INDEX_TYPES, RUNTIME_LOADER, SCALAR_TYPES, TYPE_SUFFIXES, KernelLoader, Program, Signature,
                      device_code, device_index)
from .stats import NEAR, PatternStats

__all__ = ["FactorReport", "check_factor", "checks_program", "kernel_name", "on_gpu"]

BLOCK = 256  # threads per block: 8 warps, a row each at a time
MAX_BLOCKS = 1024  # a grid-stride loop covers the rest
NONE = 2**63 - 1  # a slot without a violation (the kernel's NONE)
CONTEXT = "gsparse triangular factor checks"
_WARP = 32


@dataclass(frozen=True)
class FactorReport:
    """The first violation of each rule of a factor's CSR, None where there is none; the
    fields in the order the rules are reported (a rule's field is meaningful only when the
    rules before it hold).

    Attributes:
        crow_ends: ``crow[0] != 0`` or ``crow[n] != nnz`` (True), else None.
        decrease: the first ``i`` with ``crow[i + 1] < crow[i]``.
        out_of_range: the first entry ``e`` with ``col[e]`` outside ``[0, n)``.
        unsorted: the first row whose columns do not strictly increase.
        wrong_side: ``(row, column)`` of the first entry, in canonical order, on the wrong
            side of the diagonal.
        no_diagonal: the first row without a diagonal entry.
        bad_diagonal: the first row whose diagonal value is zero or not finite (only when
            the values were checked).
        stats: the pattern's statistics (meaningful only when every rule holds).
    """

    crow_ends: bool | None
    decrease: int | None
    out_of_range: int | None
    unsorted: int | None
    wrong_side: tuple[int, int] | None
    no_diagonal: int | None
    bad_diagonal: int | None
    stats: PatternStats

    @classmethod
    def read(cls, slots: list[int], n: int, nnz: int) -> FactorReport:
        """The report of the kernel's slots (NONE: no violation), the statistics' last."""
        found = [None if s == NONE else s for s in slots[:RULES]]
        ends, decrease, out_of_range, unsorted, wrong_side, no_diagonal, bad_diagonal = found
        longest_row, near_rows = slots[RULES:]
        return cls(None if ends is None else True, decrease, out_of_range, unsorted,
                   None if wrong_side is None else divmod(wrong_side, max(n, 1)), no_diagonal, bad_diagonal,
                   PatternStats(n, nnz, longest_row, near_rows))


RULES = len(FactorReport.__dataclass_fields__) - 1  # the slots of the rules; then the statistics'
SLOTS = RULES + 2


def kernel_name(dtype: torch.dtype) -> str:
    """The check kernel for values of ``dtype`` (float32 or float64)."""
    return f"check_factor_{TYPE_SUFFIXES[dtype]}"


def _signature(dtype: torch.dtype) -> Signature:
    index = f"const {INDEX_TYPES[torch.int64]}* __restrict__"
    return Signature(kernel_name(dtype), [
        (index, "crow"), (index, "col"), (f"const {SCALAR_TYPES[dtype]}* __restrict__", "val"),
        ("long long", "n"), ("long long", "nnz"), ("int", "lower"), ("long long* __restrict__", "report")])


@functools.cache
def checks_program(dtype: torch.dtype) -> Program:
    """The program of the check kernel for values of ``dtype`` (one program per dtype: a
    cold kernel cache compiles only the one a factor needs)."""
    signature = _signature(dtype)
    source = (f"// gsparse: the checks of a triangular factor with {SCALAR_TYPES[dtype]} values\n"
              f"namespace gs::checks {{ constexpr long long NEAR = {NEAR}; }}  // the statistics' near\n"
              f"{device_code('gsparse.kernels.sptrsv.codegen', 'factor_checks.cu')}\n"
              f"{signature.declaration((BLOCK, 1))}\n{{\n"
              f"    gs::checks::check_factor(crow, col, val, n, nnz, lower, report);\n}}\n")
    return Program(source, {signature.name: signature}, f"{CONTEXT} | {dtype}")


def on_gpu(tensor: torch.Tensor) -> bool:
    """Whether a factor on ``tensor``'s device is checked by :func:`check_factor` (else by
    PyTorch operations)."""
    return tensor.is_cuda


def check_factor(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor | None, dtype: torch.dtype,
                 lower: bool, loader: KernelLoader = RUNTIME_LOADER) -> FactorReport:
    """Every rule of the ``n x n`` factor with CSR ``(crow, col)`` (int64, contiguous, on one
    GPU; any values: the kernel reads nothing out of bounds) and, when ``values`` is given
    (``[nnz]`` contiguous, of ``dtype``, in ``col``'s order), of its diagonal values; one
    launch, then one read-back of the report."""
    n, nnz = crow.numel() - 1, col.numel()
    report = torch.full((SLOTS,), NONE, dtype=torch.int64, device=crow.device)
    report[RULES:] = 0  # the statistics' slots accumulate
    blocks = min(max(-(-max(_WARP * n, nnz) // BLOCK), 1), MAX_BLOCKS)
    checks_program(dtype).prepare(kernel_name(dtype), device_index(crow.device), blocks, BLOCK, loader=loader,
                             crow=crow, col=col, val=values, n=n, nnz=nnz, lower=int(lower), report=report)()
    return FactorReport.read(report.tolist(), n, nnz)
