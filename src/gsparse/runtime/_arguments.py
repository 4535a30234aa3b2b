"""Kernel arguments: tensors become device pointers, scalars carry an explicit C type.

A bare Python ``int`` could be an ``int32_t`` or an ``int64_t`` parameter, and passing the
wrong width reads garbage on the GPU without any error, so launches accept only scalars
whose type is spelled out: :func:`i32`, :func:`i64`, :func:`f32`, :func:`f64`, or NumPy
scalars (``np.int32(5)``), whose dtype says it.
"""

from __future__ import annotations

import numbers
import operator
from dataclasses import dataclass
from typing import SupportsIndex

import numpy as np
import torch

# How each kind of argument is stored: a struct format character. A launch keeps every
# parameter in an 8-byte word of its own (see _driver.PreparedLaunch), so that one
# struct.pack_into writes them all and refilling one is an item assignment.
POINTER = "Q"
_SCALAR_FORMATS: dict[str, str] = {"int32_t": "i", "int64_t": "q", "float": "f", "double": "d"}
_NUMPY_FORMATS: dict[np.dtype, str] = {
    np.dtype(np.bool_): "?",
    np.dtype(np.int8): "b",
    np.dtype(np.int16): "h",
    np.dtype(np.int32): "i",
    np.dtype(np.int64): "q",
    np.dtype(np.uint8): "B",
    np.dtype(np.uint16): "H",
    np.dtype(np.uint32): "I",
    np.dtype(np.uint64): "Q",
    np.dtype(np.float32): "f",
    np.dtype(np.float64): "d",
}


@dataclass(frozen=True)
class Scalar:
    """A kernel argument passed by value, with its C type. Made by i32/i64/f32/f64."""

    c_type: str
    value: int | float


@dataclass(frozen=True)
class ScalarOperand:
    """Marks a by-value parameter of :meth:`~gsparse.runtime.Kernel.prepare` that each call
    of the launch fills in, as :data:`~gsparse.runtime.OPERAND` marks a pointer: a plain
    number of the C type ``c_type`` (``int32_t``, ``int64_t``, ``float`` or ``double``)."""

    c_type: str

    def __post_init__(self) -> None:
        if self.c_type not in _SCALAR_FORMATS:
            raise ValueError(f"a scalar operand's C type is one of {sorted(_SCALAR_FORMATS)}, "
                             f"got {self.c_type!r}")

    @property
    def format(self) -> str:
        return _SCALAR_FORMATS[self.c_type]


_INTEGER_RANGES = {32: (-(2**31), 2**31 - 1), 64: (-(2**63), 2**63 - 1)}


def _integer(value: SupportsIndex, c_type: str, bits: int) -> Scalar:
    if type(value) is int:  # the common case, first: every launch plan converts several
        integer = value
    elif isinstance(value, bool):
        raise TypeError(f"{c_type} argument must be an integer, got bool {value}")
    else:
        integer = operator.index(value)  # rejects floats instead of truncating them
    low, high = _INTEGER_RANGES[bits]
    if not low <= integer <= high:
        raise ValueError(f"{c_type} argument must be in [{low}, {high}], got {integer}")
    return Scalar(c_type, integer)


def i32(value: SupportsIndex) -> Scalar:
    """``value`` as a C ``int32_t`` kernel argument (ValueError when out of range)."""
    return _integer(value, "int32_t", 32)


def i64(value: SupportsIndex) -> Scalar:
    """``value`` as a C ``int64_t`` kernel argument (ValueError when out of range)."""
    return _integer(value, "int64_t", 64)


def _real(value: object, c_type: str) -> Scalar:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{c_type} argument must be a real number, got {value!r}")
    return Scalar(c_type, float(value))


def f32(value: float) -> Scalar:
    """``value`` as a C ``float`` kernel argument (rounded to single precision)."""
    return _real(value, "float")


def f64(value: float) -> Scalar:
    """``value`` as a C ``double`` kernel argument."""
    return _real(value, "double")


KernelArgument = torch.Tensor | Scalar | np.generic | None


def to_value(arg: KernelArgument, position: int, device_index: int) -> tuple[str, int | float]:
    """How argument ``position`` of a kernel loaded on ``cuda:<device_index>`` is stored: its
    struct format character (:data:`POINTER` for tensors and None) and its value.

    Tensors are passed as their data pointer and must live on that device; None is a null
    pointer (for an optional operand). Raises TypeError for an argument of no explicit C
    type, ValueError for a tensor elsewhere, each naming the argument's position.
    """
    # The common kinds first, by exact type: this runs for every argument a launch prepares.
    kind = type(arg)
    if kind is torch.Tensor and arg.get_device() == device_index:  # -1 off CUDA
        return POINTER, arg.data_ptr()
    if kind is Scalar:
        return _SCALAR_FORMATS[arg.c_type], arg.value
    if arg is None:
        return POINTER, 0
    if isinstance(arg, torch.Tensor):
        if arg.device.type != "cuda" or arg.device.index != device_index:
            raise ValueError(
                f"argument {position} is a tensor on {arg.device}, but the kernel is loaded "
                f"on cuda:{device_index}"
            )
        return POINTER, arg.data_ptr()
    if isinstance(arg, Scalar):
        return _SCALAR_FORMATS[arg.c_type], arg.value
    if isinstance(arg, np.generic) and arg.dtype in _NUMPY_FORMATS:
        return _NUMPY_FORMATS[arg.dtype], arg.item()
    if isinstance(arg, (bool, int)):
        raise TypeError(
            f"argument {position} is a bare Python {type(arg).__name__} ({arg!r}), whose C "
            f"type is ambiguous; wrap it as i32(...) or i64(...)"
        )
    if isinstance(arg, float):
        raise TypeError(
            f"argument {position} is a bare Python float ({arg!r}), whose C type is "
            f"ambiguous; wrap it as f32(...) or f64(...)"
        )
    raise TypeError(
        f"argument {position} has type {type(arg).__name__}; expected a CUDA tensor, None "
        f"(null pointer), i32/i64/f32/f64(...) or a NumPy scalar of a fixed-width type"
    )


def operand_pointer(arg: torch.Tensor | None, position: int, device_index: int) -> int:
    """The data pointer of a tensor argument on ``cuda:<device_index>`` (None: 0, null).

    Raises ValueError for a tensor elsewhere and TypeError for anything but a tensor or
    None, naming the argument's position.
    """
    if arg is None:
        return 0
    if not isinstance(arg, torch.Tensor):
        raise TypeError(f"argument {position} is an operand slot: it takes a CUDA tensor or "
                        f"None, got {type(arg).__name__}")
    return to_value(arg, position, device_index)[1]
