"""Storage the generated kernels write: outputs and partial results.

Every element of such a tensor is written by a kernel before anything reads it, so it is
allocated uninitialised. Tests check that promise with :func:`poisoned`, under which new
storage starts as NaN (floats) or -7 (integers).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

__all__ = ["allocate", "allocator", "filled_bits", "poisoned"]

_poison: list[list[tuple[int, ...]]] = []  # the allocation logs of the active poisoned() blocks


def allocate(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Uninitialised storage for kernel outputs (poisoned inside :func:`poisoned`)."""
    if not _poison:
        return torch.empty(shape, dtype=dtype, device=device)
    for log in _poison:
        log.append(tuple(shape))
    fill = float("nan") if dtype.is_floating_point else -7
    return torch.full(shape, fill, dtype=dtype, device=device)


def filled_bits(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, bits: int) -> torch.Tensor:
    """Storage of ``dtype`` whose every element has the bit pattern ``bits`` (a signalling
    NaN, which a floating-point fill could quiet): one fill of the integer type of the same
    width, viewed as ``dtype``."""
    integer = {8: torch.int64, 4: torch.int32, 2: torch.int16}[dtype.itemsize]
    return torch.full(shape, bits, dtype=integer, device=device).view(dtype)


def allocator(shape: tuple[int, ...], dtype: torch.dtype,
              device: torch.device) -> Callable[[], torch.Tensor]:
    """``allocate(shape, dtype, device)`` as a function of no arguments, for the per-call
    paths of resolved calls, which allocate the same outputs every time.

    From its third call on, it allocates with ``torch.empty_like`` (contiguous) of a
    one-element tensor expanded to ``shape``: ``torch.empty`` parses its shape, dtype and
    device arguments on every call, which costs more host time than the allocation. The
    first calls allocate as :func:`allocate` does, so that a graph whose calls run once or
    twice (a sampled block, in a training step) pays nothing for the template.
    """
    shape = tuple(shape)
    template: torch.Tensor | None = None
    before_template = 2  # calls left before the template is built

    def new() -> torch.Tensor:
        nonlocal template, before_template
        if template is not None and not _poison:
            return _empty_like(template, memory_format=_CONTIGUOUS)
        if template is None:
            if before_template:
                before_template -= 1
            else:
                template = torch.empty((), dtype=dtype, device=device).expand(shape)
        return allocate(shape, dtype, device)

    return new


_empty_like = torch.empty_like
_CONTIGUOUS = torch.contiguous_format


@contextlib.contextmanager
def poisoned() -> Iterator[list[tuple[int, ...]]]:
    """Within the block, kernel storage starts as NaN or -7, so that an element a kernel
    fails to write shows; yields the list of the shapes allocated meanwhile."""
    log: list[tuple[int, ...]] = []
    _poison.append(log)
    try:
        yield log
    finally:
        _poison.remove(log)
