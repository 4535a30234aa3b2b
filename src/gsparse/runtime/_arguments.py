"""Kernel arguments: tensors become device pointers, scalars carry an explicit C type.

A bare Python ``int`` could be an ``int32_t`` or an ``int64_t`` parameter, and passing the
wrong width reads garbage on the GPU without any error, so launches accept only scalars
whose type is spelled out: :func:`i32`, :func:`i64`, :func:`f32`, :func:`f64`, or NumPy
scalars (``np.int32(5)``), whose dtype says it.
"""

from __future__ import annotations

import ctypes
import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import SupportsIndex

import numpy as np
import torch

_C_TYPES: dict[str, type[ctypes._SimpleCData]] = {
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}

_NUMPY_C_TYPES: dict[np.dtype, type[ctypes._SimpleCData]] = {
    np.dtype(np.bool_): ctypes.c_bool,
    np.dtype(np.int8): ctypes.c_int8,
    np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint8): ctypes.c_uint8,
    np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
}


@dataclass(frozen=True)
class Scalar:
    """A kernel argument passed by value, with its C type. Made by i32/i64/f32/f64."""

    c_type: str
    value: int | float

    def as_ctypes(self) -> ctypes._SimpleCData:
        return _C_TYPES[self.c_type](self.value)


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


def to_ctypes(args: Sequence[KernelArgument], device_index: int) -> list[ctypes._SimpleCData]:
    """The C value of each argument, in order, for a kernel loaded on ``cuda:<device_index>``.

    Tensors are passed as their data pointer and must live on that device; None is a null
    pointer (for an optional operand). Raises TypeError for an argument of no explicit C
    type, ValueError for a tensor elsewhere, each naming the argument's position.
    """
    return [_to_ctypes(arg, position, device_index) for position, arg in enumerate(args)]


def operand_pointer(arg: torch.Tensor | None, position: int, device_index: int) -> int | None:
    """The data pointer of a tensor argument on ``cuda:<device_index>`` (None: null).

    Raises ValueError for a tensor elsewhere and TypeError for anything but a tensor or
    None, naming the argument's position.
    """
    if arg is None:
        return None
    # get_device() is -1 off CUDA, and device_index is never negative.
    if type(arg) is torch.Tensor and arg.get_device() == device_index:
        return arg.data_ptr()
    if not isinstance(arg, torch.Tensor):
        raise TypeError(f"argument {position} is an operand slot: it takes a CUDA tensor or "
                        f"None, got {type(arg).__name__}")
    return _to_ctypes(arg, position, device_index).value


def _to_ctypes(arg: KernelArgument, position: int, device_index: int) -> ctypes._SimpleCData:
    # The common kinds first, by exact type: this runs for every argument of every one-off
    # launch (prepared launches convert theirs once).
    kind = type(arg)
    if kind is torch.Tensor and arg.is_cuda and arg.get_device() == device_index:
        return ctypes.c_void_p(arg.data_ptr())
    if kind is Scalar:
        return _C_TYPES[arg.c_type](arg.value)
    if isinstance(arg, torch.Tensor):
        if arg.device.type != "cuda" or arg.device.index != device_index:
            raise ValueError(
                f"argument {position} is a tensor on {arg.device}, but the kernel is loaded "
                f"on cuda:{device_index}"
            )
        return ctypes.c_void_p(arg.data_ptr())
    if isinstance(arg, Scalar):
        return arg.as_ctypes()
    if arg is None:
        return ctypes.c_void_p(None)
    if isinstance(arg, np.generic) and arg.dtype in _NUMPY_C_TYPES:
        return _NUMPY_C_TYPES[arg.dtype](arg.item())
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
