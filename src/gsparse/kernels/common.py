"""What every generated kernel shares: C type names, the device prelude, operand layouts.

Generated programs are specialised on everything that is known at launch time and cheap to
key on (dtypes, index width, operand layouts, the schedule), so the inner loops carry no
run-time branches on them.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math

import torch

# C type of a feature element, and of its accumulator (half precision accumulates in fp32).
SCALAR_TYPES: dict[torch.dtype, str] = {
    torch.float16: "__half",
    torch.bfloat16: "__nv_bfloat16",
    torch.float32: "float",
    torch.float64: "double",
}
ACCUMULATOR_TYPES: dict[torch.dtype, str] = {
    torch.float16: "float",
    torch.bfloat16: "float",
    torch.float32: "float",
    torch.float64: "double",
}
INDEX_TYPES: dict[torch.dtype, str] = {torch.int32: "int", torch.int64: "long long"}


def element_size(dtype: torch.dtype) -> int:
    return dtype.itemsize


# The widest single memory access a thread makes: one 16-byte vector.
VECTOR_BYTES = 16


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def widest_vector(length: int, vector_ok: int) -> int:
    """The widest of 8, 4, 2 elements that is at most ``vector_ok`` and divides ``length``."""
    for width in (8, 4, 2):
        if width <= vector_ok and length % width == 0:
            return width
    return 1


def vector_limit(length: int, tensors: list[torch.Tensor], dtype: torch.dtype) -> int:
    """The widest vector (8, 4, 2 or 1 elements, at most 16 bytes) ``tensors`` allow.

    A vector never straddles two rows (``length``, the row or head length, is a multiple
    of it) and its address is aligned to its size (every base pointer is, so row starts
    are too).
    """
    size = element_size(dtype)
    for width in (8, 4, 2):
        if width * size > VECTOR_BYTES or length % width:
            continue
        if all(t.data_ptr() % (width * size) == 0 for t in tensors):
            return width
    return 1


def identity_expr(value: float) -> str:
    """A reducer's identity as an expression of the accumulator type ``A``."""
    return {
        0.0: "A(0)",
        float("-inf"): "A(-__int_as_float(0x7f800000))",
        float("inf"): "A(__int_as_float(0x7f800000))",
    }[value]


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


def broadcast_offsets(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> torch.Tensor:
    """``[prod(out_shape)]`` int32: the offset inside an operand row of each output feature.

    ``shape`` has the rank of ``out_shape`` and each of its dimensions is 1 or equal to the
    output's (DGL / NumPy broadcasting).
    """
    index = torch.arange(math.prod(shape), dtype=torch.int32).reshape(shape)
    return index.expand(out_shape).reshape(-1).contiguous()


_H100_L2_BYTES = 50 << 20


@functools.lru_cache(maxsize=64)
def l2_bytes(device: torch.device) -> int:
    """The L2 cache of a CUDA device in bytes. Any other device (the rules run for CPU
    tensors in tests) gets an H100's 50 MB: the GPU the default rules were fitted on."""
    if device.type != "cuda":
        return _H100_L2_BYTES
    return torch.cuda.get_device_properties(device).L2_cache_size or _H100_L2_BYTES


_H100_SMS = 132


@functools.lru_cache(maxsize=64)
def sm_count(device: torch.device) -> int:
    """The streaming multiprocessors of a CUDA device; any other device gets an H100's
    132, as :func:`l2_bytes` does."""
    if device.type != "cuda":
        return _H100_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


@functools.lru_cache(maxsize=256)
def indexed_offsets(
    shape: tuple[int, ...] | None, out_shape: tuple[int, ...], device: torch.device
) -> torch.Tensor | None:
    """:func:`broadcast_offsets` on ``device`` for an operand of ``shape`` whose layout is
    INDEXED, None for any other (or no) operand. Built once per shapes and device."""
    if shape is None or operand_layout(shape, out_shape) is not Layout.INDEXED:
        return None
    return broadcast_offsets(shape, out_shape).to(device)


# Device helpers spliced at the top of every program: conversions between the storage
# type and the accumulator, and vector loads/stores of 1, 2, 4 or 8 elements. A vector
# access of V elements is one aligned load of V * sizeof(T) bytes; callers guarantee the
# alignment (the backend checks pointers and row lengths before choosing V > 1).
PRELUDE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace gs {

__device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }

template <typename T> __device__ __forceinline__ T from_acc(float x);
template <> __device__ __forceinline__ __half from_acc<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ float from_acc<float>(float x) { return x; }
template <typename T> __device__ __forceinline__ T from_acc(double x) { return x; }

// An aligned bundle of V elements of T, moved with one memory instruction.
template <typename T, int V> struct alignas(sizeof(T) * V) Vec { T v[V]; };

template <int V, typename T, typename A>
__device__ __forceinline__ void load(const T* __restrict__ p, A (&out)[V]) {
    const Vec<T, V> bundle = *reinterpret_cast<const Vec<T, V>*>(p);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = to_acc(bundle.v[i]);
}

template <int V, typename T, typename A>
__device__ __forceinline__ void store(T* __restrict__ p, const A (&in)[V]) {
    Vec<T, V> bundle;
#pragma unroll
    for (int i = 0; i < V; ++i) bundle.v[i] = from_acc<T>(in[i]);
    *reinterpret_cast<Vec<T, V>*>(p) = bundle;
}

}  // namespace gs
"""


def indent(text: str, spaces: int) -> str:
    """``text`` with every non-empty line indented by ``spaces``."""
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())


def schedule_to_json(schedule: object) -> str:
    """A schedule dataclass as a JSON object of its knobs (sorted keys)."""
    return json.dumps(dataclasses.asdict(schedule), sort_keys=True)


def schedule_from_json(cls: type, text: str):
    """The ``cls`` schedule written by :func:`schedule_to_json`, validated; knobs missing
    from ``text`` take their defaults (records from before a knob existed still load).
    ValueError for text that is not a JSON object, unknown knobs or invalid values."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"an {cls.__name__} is a JSON object, got {text!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    if unknown := sorted(set(data) - known):
        raise ValueError(f"unknown {cls.__name__} knobs {unknown}; known: {sorted(known)}")
    return cls(**data).validate()
