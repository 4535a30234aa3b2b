"""How operands map onto a kernel's features: layouts, broadcast offsets, vector widths.

Generated programs are specialised on what is known at launch time and cheap to key on
(operand layouts, the widest vector the data allows), so that the inner loops carry no
run-time branches on them.
"""

from __future__ import annotations

import enum
import functools
import math

import torch

__all__ = [
    "VECTOR_BYTES",
    "Layout",
    "broadcast_offsets",
    "indexed_offsets",
    "misalignment",
    "operand_facts",
    "operand_layout",
    "pow2_at_least",
    "vector_limit",
    "widest_vector",
]

# The widest single memory access a thread makes: one 16-byte vector.
VECTOR_BYTES = 16


def pow2_at_least(n: float) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def widest_vector(length: int, vector_ok: int) -> int:
    """The widest of 8, 4, 2 elements that is at most ``vector_ok`` and divides ``length``."""
    for width in (8, 4, 2):
        if width <= vector_ok and length % width == 0:
            return width
    return 1


def misalignment(t: torch.Tensor) -> int:
    """``t``'s address modulo :data:`VECTOR_BYTES`: all that the vector widths read of it."""
    return t.data_ptr() % VECTOR_BYTES


def operand_facts(t: torch.Tensor | None) -> tuple[tuple[int, ...], int] | None:
    """What a task reads of an operand: its feature shape and its :func:`misalignment`; a
    non-contiguous operand is copied into fresh storage, aligned, before any launch. None
    for no operand."""
    return None if t is None else (tuple(t.shape[1:]), misalignment(t) if t.is_contiguous() else 0)


def vector_limit(length: int, misalignments: list[int], dtype: torch.dtype) -> int:
    """The widest vector (8, 4, 2 or 1 elements, at most 16 bytes) operands with these
    :func:`misalignment` values allow.

    A vector never straddles two rows (``length``, the row or head length, is a multiple
    of it) and its address is aligned to its size (every base pointer is, so row starts
    are too).
    """
    size = dtype.itemsize
    for width in (8, 4, 2):
        if width * size > VECTOR_BYTES or length % width:
            continue
        if all(offset % (width * size) == 0 for offset in misalignments):
            return width
    return 1


class Layout(enum.Enum):
    """How an operand's features map onto the output's flattened features ``f``.

    FULL: the operand has the output's shape, element ``f`` is at offset ``f``.
    SCALAR: the operand has one element per row, broadcast to every ``f``.
    INDEXED: any other DGL broadcast; the offset of ``f`` is read from a small table.
    """

    FULL = "full"
    SCALAR = "scalar"
    INDEXED = "indexed"


def operand_layout(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> Layout:
    """The layout of an operand of feature shape ``shape`` (padded to ``out_shape``'s rank)."""
    if tuple(shape) == tuple(out_shape):
        return Layout.FULL
    if math.prod(shape) == 1:
        return Layout.SCALAR
    return Layout.INDEXED


def broadcast_offsets(shape: tuple[int, ...], out_shape: tuple[int, ...],
                      device: torch.device | str = "cpu") -> torch.Tensor:
    """``[prod(out_shape)]`` int32 on ``device``: the offset inside an operand row of each
    output feature.

    ``shape`` has the rank of ``out_shape`` and each of its dimensions is 1 or equal to the
    output's (DGL / NumPy broadcasting). Built where it is used: a copy from the host would
    make the first call with these shapes wait for the device.
    """
    index = torch.arange(math.prod(shape), dtype=torch.int32, device=device).reshape(shape)
    return index.expand(out_shape).reshape(-1).contiguous()


@functools.lru_cache(maxsize=256)
def indexed_offsets(
    shape: tuple[int, ...] | None, out_shape: tuple[int, ...], device: torch.device
) -> torch.Tensor | None:
    """:func:`broadcast_offsets` on ``device`` for an operand of ``shape`` whose layout is
    INDEXED, None for any other (or no) operand. Built once per shapes and device."""
    if shape is None or operand_layout(shape, out_shape) is not Layout.INDEXED:
        return None
    return broadcast_offsets(shape, out_shape, device)
