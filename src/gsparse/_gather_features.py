"""The gather of a batch's feature rows with dropout in the same pass: the operator behind
:func:`gsparse.nn.gather_features`.

``out[i] = x[index[i]] * keep(seed, i) / (1 - p)``: the mask is Philox4x32-10 of the seed,
the output row and the feature's group of four (see :file:`kernels/gather_features.cu`),
so it is never stored. On a GPU that is one kernel (:func:`_launch`); on the CPU the same
random words are made with NumPy (:func:`random_words`), so both devices drop the same
elements for the same seed, and the CPU is the reference of the kernel to the bit.

The gradient of ``x`` is the output's gradient dropped out by the same mask and summed into
the rows it was gathered from: the same operator without an index, then ``index_add_``.
"""

from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from ._prepared import PreparedLaunches
from .kernels.operands import misalignment, vector_limit
from .kernels.source import INDEX_TYPES, PRELUDE, SCALAR_TYPES, TYPE_SUFFIXES, Signature, device_code

BLOCK = 256  # threads per block
MIN_BLOCKS = 4  # per SM: 32 warps, at most 64 registers a thread
MAX_BLOCKS = 8192  # a grid-stride loop covers the rest
CHUNK = 4  # features per thread: one Philox call makes their four random words
CONTEXT = "gsparse gather_features"


def vector_widths(dtype: torch.dtype) -> tuple[int, ...]:
    """The load widths (elements) the program has for ``dtype``: at most 16 bytes and at
    most a thread's chunk of four features."""
    return tuple(v for v in (4, 2, 1) if v * dtype.itemsize <= 16)


@functools.cache
def _signature(dtype: torch.dtype, index: torch.dtype, vector: int) -> Signature:
    element = SCALAR_TYPES[dtype]
    return Signature(f"gather_features_{TYPE_SUFFIXES[dtype]}_{TYPE_SUFFIXES[index]}_v{vector}", (
        (f"const {element}* __restrict__", "x"), ("long long", "row_stride"),
        (f"const {INDEX_TYPES[index]}* __restrict__", "index"), ("long long", "num_rows"),
        ("long long", "num_src"), ("long long", "features"),
        ("const long long* __restrict__", "seed"), ("long long", "threshold"), ("double", "scale"),
        (f"{element}* __restrict__", "out"), ("int", "lanes_log2")))


def _instantiations() -> list[tuple[torch.dtype, torch.dtype, int]]:
    return [(dtype, index, vector) for dtype in SCALAR_TYPES for index in INDEX_TYPES
            for vector in vector_widths(dtype)]


def source() -> str:
    """The program of every instantiation (``gsparse precompile`` builds it too)."""
    entries = []
    for dtype, index, vector in _instantiations():
        signature = _signature(dtype, index, vector)
        arguments = ", ".join(name for _, name in signature.params)
        entries.append(f"{signature.declaration((BLOCK, MIN_BLOCKS))}\n{{\n    gather_features<{SCALAR_TYPES[dtype]}, "
                       f"{INDEX_TYPES[index]}, {vector}>({arguments});\n}}")
    return "\n".join((PRELUDE, device_code("gsparse.kernels", "gather_features.cu"), "\n\n".join(entries), ""))


KERNELS = PreparedLaunches(source, CONTEXT, BLOCK)


def threshold_and_scale(p: float) -> tuple[int, float]:
    """The random word below which an element drops (probability ``p``, to 2**-32) and the
    factor of the kept ones, ``1 / (1 - p)``; ``p`` is below 1."""
    return min(round(p * 2**32), 2**32 - 1), 1.0 / (1.0 - p)


def _vector(x: Tensor, features: int) -> int:
    """The widest load every row of ``x`` allows: rows of whole vectors, each aligned (a
    vector divides both the row length and the row stride)."""
    return min(vector_limit(math.gcd(features, x.stride(0)), [misalignment(x)], x.dtype),
               vector_widths(x.dtype)[0])


def _launch(x: Tensor, index: Optional[Tensor], seed: Optional[Tensor], p: float, out: Tensor) -> None:
    num_rows, features = out.shape[0], feature_count(out)
    if num_rows == 0 or features == 0:
        return
    # a lane per chunk of the row, up to a warp (lanes for 4 chunks each, several narrow rows
    # a warp, were measured no faster: docs/performance.md)
    chunks = -(-features // CHUNK)
    lanes_log2 = min(5, (chunks - 1).bit_length())
    threads = num_rows << lanes_log2
    blocks = min(-(-threads // BLOCK), MAX_BLOCKS)
    threshold, scale = threshold_and_scale(p) if seed is not None else (0, 1.0)
    index_dtype = torch.int32 if index is None else index.dtype
    signature = _signature(x.dtype, index_dtype, _vector(x, features))
    KERNELS(signature, x.device.index)(
        x, x.stride(0), index, num_rows, x.shape[0], features, seed, threshold, scale, out, lanes_log2,
        grid=blocks)


# ---------------------------------------------------------------------- reference (CPU)

_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
_LOW = np.uint64(0xFFFFFFFF)


def _philox(counter: list[np.ndarray], key: tuple[int, int]) -> list[np.ndarray]:
    """Philox4x32-10 of ``counter`` (four arrays of 32-bit words held in uint64) under ``key``."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = np.uint64(_M0) * c0, np.uint64(_M1) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & _LOW,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & _LOW)
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return [c0, c1, c2, c3]


def random_words(seed: int, rows: int, features: int) -> np.ndarray:
    """``[rows, features]`` uint64: the random word of each output element under ``seed``
    (an int64), as the kernel makes it; an element drops when its word is below the
    threshold."""
    s = seed & 0xFFFFFFFFFFFFFFFF
    chunks = -(-features // CHUNK)
    row = np.repeat(np.arange(rows, dtype=np.uint64), chunks)
    chunk = np.tile(np.arange(chunks, dtype=np.uint64), rows)
    zero = np.zeros_like(row)
    words = _philox([chunk & _LOW, row & _LOW, row >> np.uint64(32), zero], (s & 0xFFFFFFFF, s >> 32))
    return np.stack(words, axis=1).reshape(rows, chunks * CHUNK)[:, :features]


def _reference(x: Tensor, index: Optional[Tensor], seed: Optional[Tensor], p: float) -> Tensor:
    rows = x if index is None else x.index_select(0, index)
    if seed is None:
        return rows.clone() if index is None else rows
    threshold, scale = threshold_and_scale(p)
    flat = rows.reshape(rows.shape[0], feature_count(rows))
    keep = torch.from_numpy(random_words(int(seed.item()), flat.shape[0], flat.shape[1]) >= threshold)
    # computed in the accumulator type, as the kernel does (float for 2-byte types)
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    kept = flat.to(acc) * torch.tensor(scale, dtype=acc)
    return torch.where(keep, kept, torch.zeros((), dtype=acc)).to(x.dtype).reshape(rows.shape)


# ---------------------------------------------------------------------- the operator


def gather(x: Tensor, index: Optional[Tensor], seed: Optional[Tensor], p: float) -> Tensor:
    """``x[index]`` (``x`` itself without an index) with the elements of ``seed``'s mask
    dropped (none without a seed); the inputs are checked by the caller, ``x``'s rows are
    dense (any row stride) and ``p`` is below 1."""
    if x.device.type != "cuda":
        return _reference(x, index, seed, p)
    rows = x.shape[0] if index is None else index.shape[0]
    out = torch.empty((rows, *x.shape[1:]), dtype=x.dtype, device=x.device)
    _launch(x, index, seed, p, out)
    return out


@torch.library.custom_op("gsparse::gather_features", mutates_args=())
def gather_op(x: Tensor, index: Optional[Tensor], seed: Optional[Tensor], p: float) -> Tensor:
    """:func:`gather` as a registered operator: differentiable, traceable by ``torch.compile``."""
    return gather(x, index, seed, p)


@gather_op.register_fake
def _gather_fake(x, index, seed, p):
    rows = x.shape[0] if index is None else index.shape[0]
    return x.new_empty((rows, *x.shape[1:]))


def _setup(ctx, inputs, output) -> None:
    x, index, seed, p = inputs
    ctx.save_for_backward(index, seed)
    ctx.p, ctx.shape = p, x.shape


def _backward(ctx, grad: Tensor):
    index, seed = ctx.saved_tensors
    dropped = grad if seed is None else gather_op(grad.contiguous(), None, seed, ctx.p)
    if index is None:
        return dropped, None, None, None
    return grad.new_zeros(ctx.shape).index_add_(0, index, dropped), None, None, None


gather_op.register_autograd(_backward, setup_context=_setup)


def rows_are_dense(x: Tensor) -> bool:
    """Whether each row of ``x`` (everything after dimension 0) is one dense run of elements,
    as the kernel reads it (the rows themselves may lie any stride apart)."""
    expected = 1
    for size, stride in zip(reversed(x.shape[1:]), reversed(x.stride()[1:])):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def feature_count(x: Tensor) -> int:
    """Elements per row of ``x``."""
    return math.prod(x.shape[1:])
