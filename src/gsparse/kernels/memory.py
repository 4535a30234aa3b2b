"""Storage the generated kernels write: outputs and partial results.

Every element of such a tensor is written by a kernel before anything reads it, so it is
allocated uninitialised. Tests check that promise with :func:`poisoned`, under which new
storage starts as NaN (floats) or -7 (integers).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["allocate", "poisoned"]

_poison: list[list[tuple[int, ...]]] = []  # the allocation logs of the active poisoned() blocks


def allocate(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Uninitialised storage for kernel outputs (poisoned inside :func:`poisoned`)."""
    if not _poison:
        return torch.empty(shape, dtype=dtype, device=device)
    for log in _poison:
        log.append(tuple(shape))
    fill = float("nan") if dtype.is_floating_point else -7
    return torch.full(shape, fill, dtype=dtype, device=device)


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
