r"""Fused edge softmax on CUDA, forward and backward, one warp per row.

Forward, for each row ``v`` (a destination, or a source with ``norm_by="src"``) and head
``h``:

.. math::  y_e = \frac{\exp(z_e - m)}{s},\quad m = \max_{e \in v} z_e,\quad
           s = \sum_{e \in v} \exp(z_e - m)

Backward, from ``y`` and ``dy``:  ``dz_e = y_e (dy_e - \sum_{e' \in v} dy_{e'} y_{e'})``.

A warp owns a row. Its lanes split the heads (``HL`` lanes, the heads rounded up to a
power of two, at most 32) and the row's edges (the other ``32 / HL``). The forward pass
reads the logits twice: once for the running maximum and rescaled sum (the online
softmax recurrence; the lanes' partial ``(m, s)`` pairs then merge through warp
shuffles), once to write the normalised values. Everything accumulates in fp32 (fp64 for
fp64), and no temporary is allocated: the output is the only write. ``norm_by="src"``
runs the same kernel over the reverse graph, whose CSR positions map to the same edge ids.

Public entry points: :func:`generate` (pure), :func:`run_edge_softmax` (the CUDA
backend's ``edge_softmax``) and :func:`run_edge_softmax_backward`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from .. import runtime
from ..graph import Graph
from .common import ACCUMULATOR_TYPES, INDEX_TYPES, PRELUDE, SCALAR_TYPES, indent

__all__ = ["SoftmaxProgram", "generate", "run_edge_softmax", "run_edge_softmax_backward"]

_WARP = 32
ROWS_PER_BLOCK = 8  # warps per block
DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True)
class SoftmaxProgram:
    """Generated source and how to launch it.

    Kernel signatures (``eid`` null when CSR positions are edge ids)::

        edge_softmax_forward(rowptr, eid, z, y, num_rows, num_heads)
        edge_softmax_backward(rowptr, eid, y, dy, dz, num_rows, num_heads)
    """

    source: str
    kernel_name: str

    @property
    def block(self) -> int:
        return ROWS_PER_BLOCK * _WARP

    def grid(self, num_rows: int) -> int:
        return -(-num_rows // ROWS_PER_BLOCK)


def head_lanes(num_heads: int) -> int:
    """Lanes of a warp that split the heads: ``num_heads`` rounded up to a power of two, at
    most 32 (more heads are walked 32 at a time)."""
    return min(_WARP, 1 << max(0, math.ceil(math.log2(max(num_heads, 1)))))


_FORWARD = """\
// Pass 1: running maximum m and sum s of exp(z - m) over this lane's edges.
A m = NEG_INF, s = 0;
for (long long p = start + e_lane; active && p < end; p += EL) {
    const A z = gs::to_acc(x[edge(p) * num_heads + h]);
    if (z > m) {
        s = s * exp_acc(m - z) + A(1);
        m = z;
    } else if (m != NEG_INF) {  // an all -inf prefix contributes nothing yet
        s += exp_acc(z - m);
    }
}
// Merge the (m, s) pairs of the lanes that share this head.
#pragma unroll
for (int offset = HL; offset < 32; offset *= 2) {
    const A other_m = __shfl_xor_sync(0xffffffffu, m, offset);
    const A other_s = __shfl_xor_sync(0xffffffffu, s, offset);
    const A top = other_m > m ? other_m : m;
    s = (m == NEG_INF ? A(0) : s * exp_acc(m - top)) + (other_m == NEG_INF ? A(0) : other_s * exp_acc(other_m - top));
    m = top;
}
// Pass 2: normalise.
for (long long p = start + e_lane; active && p < end; p += EL) {
    const long long i = edge(p) * num_heads + h;
    y[i] = gs::from_acc<T>(exp_acc(gs::to_acc(x[i]) - m) / s);
}"""

_BACKWARD = """\
// Pass 1: this lane's share of sum(dy * y).
A s = 0;
for (long long p = start + e_lane; active && p < end; p += EL) {
    const long long i = edge(p) * num_heads + h;
    s += gs::to_acc(dy[i]) * gs::to_acc(y[i]);
}
#pragma unroll
for (int offset = HL; offset < 32; offset *= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
// Pass 2: dz = y * (dy - sum).
for (long long p = start + e_lane; active && p < end; p += EL) {
    const long long i = edge(p) * num_heads + h;
    const A yi = gs::to_acc(y[i]);
    dz[i] = gs::from_acc<T>(yi * (gs::to_acc(dy[i]) - s));
}"""


@functools.lru_cache(maxsize=256)
def generate(direction: str, dtype: torch.dtype, index_dtype: torch.dtype, has_eid: bool,
             heads_lanes: int) -> SoftmaxProgram:
    """The edge softmax ``direction`` program. Pure; no GPU needed.

    ``heads_lanes`` is :func:`head_lanes` of the head count: lanes per edge.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if heads_lanes not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"heads_lanes must be a power of two from 1 to 32, got {heads_lanes}")
    scalar = SCALAR_TYPES[dtype]
    name = f"edge_softmax_{direction}"
    if direction == "forward":
        params = f"const {scalar}* __restrict__ x, {scalar}* __restrict__ y"
        passes = _FORWARD
    else:
        params = (f"const {scalar}* __restrict__ y, const {scalar}* __restrict__ dy, "
                  f"{scalar}* __restrict__ dz")
        passes = _BACKWARD
    edge = "(long long)eid[p]" if has_eid else "p"
    body = f"""\
using T = {scalar};
using A = {ACCUMULATOR_TYPES[dtype]};
constexpr int HL = {heads_lanes};  // lanes per edge, one head each
constexpr int EL = 32 / HL;  // edges a warp reads at a time
const A NEG_INF = -A(__int_as_float(0x7f800000));
const auto edge = [&](long long p) -> long long {{ return {edge}; }};
const long long row = (long long)blockIdx.x * {ROWS_PER_BLOCK} + threadIdx.x / 32;
if (row >= num_rows) return;  // whole warps leave together
const long long start = rowptr[row];
const long long end = rowptr[row + 1];
const int e_lane = (threadIdx.x % 32) / HL;
// Every lane reaches each shuffle: lanes past the last head walk no edges instead of leaving.
for (long long h0 = 0; h0 < num_heads; h0 += HL) {{
    const long long h = h0 + threadIdx.x % HL;
    const bool active = h < num_heads;
{indent(passes, 4)}
}}"""
    source = f"""// gsparse edge softmax, {direction}: {str(dtype).removeprefix('torch.')} \
{str(index_dtype).removeprefix('torch.')}{' eid' if has_eid else ''}, {heads_lanes} lanes per edge
{PRELUDE}
using I = {INDEX_TYPES[index_dtype]};

// exp in the accumulator's precision (expf for float; never the double routine).
__device__ __forceinline__ float exp_acc(float x) {{ return expf(x); }}
__device__ __forceinline__ double exp_acc(double x) {{ return exp(x); }}

extern "C" __global__ void __launch_bounds__({ROWS_PER_BLOCK * _WARP})
{name}(const I* __restrict__ rowptr, const I* __restrict__ eid, {params},
        long long num_rows, long long num_heads)
{{
{indent(body, 4)}
}}
"""
    return SoftmaxProgram(source, name)


def _allocate(like: torch.Tensor) -> torch.Tensor:
    """Output storage; the kernel writes every element. Tests poison it through this hook."""
    return torch.empty_like(like, memory_format=torch.contiguous_format)


def _rows(g: Graph, norm_by: str) -> Graph:
    if norm_by not in ("dst", "src"):
        raise ValueError(f"norm_by must be 'dst' or 'src', got {norm_by!r}")
    return g if norm_by == "dst" else g.reverse()


@functools.lru_cache(maxsize=256)
def _kernel(direction: str, dtype: torch.dtype, index_dtype: torch.dtype, has_eid: bool,
            num_heads: int, norm_by: str, device_index: int) -> tuple[runtime.Kernel, SoftmaxProgram, str]:
    """The loaded kernel, its program and its description for errors, found without hashing
    the source again on every call (the hash costs about as much as the rest of a call)."""
    program = generate(direction, dtype, index_dtype, has_eid, head_lanes(num_heads))
    context = f"{program.kernel_name} norm_by={norm_by} heads={num_heads}"
    kernel = runtime.get_kernel(program.source, program.kernel_name, context=context,
                                device=device_index)
    return kernel, program, context


def _launch(direction: str, g: Graph, tensors: list[torch.Tensor], out: torch.Tensor,
            norm_by: str) -> torch.Tensor:
    rows = _rows(g, norm_by)
    if out.numel() == 0:
        return out
    num_heads = out.numel() // g.num_edges

    def plan(rows: Graph) -> runtime.PreparedLaunch:
        """The launch on ``rows``, kept with it: a repeated call only passes new pointers."""
        kernel, program, context = _kernel(direction, out.dtype, rows.index_dtype,
                                           rows.eid is not None, num_heads, norm_by,
                                           out.device.index)
        operands = [runtime.OPERAND] * (len(tensors) + 1)
        return kernel.prepare(program.grid(rows.num_dst), program.block,
                              [rows.rowptr, rows.eid, *operands, runtime.i64(rows.num_dst),
                               runtime.i64(num_heads)],
                              context=context)

    key = ("gsparse.kernels.softmax.plan", direction, out.dtype, num_heads, out.device)
    rows.derived(key, plan)(*tensors, out)
    return out


def run_edge_softmax(g: Graph, logits: torch.Tensor, norm_by: str = "dst") -> torch.Tensor:
    """Edge softmax of ``logits`` ``[E, *shape]`` (user edge order) over each destination's
    (``"dst"``) or source's (``"src"``) edges; returns ``[E, *shape]``, same dtype."""
    logits = logits.contiguous()
    return _launch("forward", g, [logits], _allocate(logits), norm_by)


def run_edge_softmax_backward(g: Graph, y: torch.Tensor, dy: torch.Tensor,
                              norm_by: str = "dst") -> torch.Tensor:
    """Gradient of the edge softmax with respect to its logits: ``y * (dy - sum_row(dy * y))``.

    ``y`` is the forward's output and ``dy`` the gradient of ``y``, both ``[E, *shape]``.
    """
    if y.shape != dy.shape or y.dtype != dy.dtype:
        raise ValueError(f"y and dy must have the same shape and dtype, got {tuple(y.shape)} "
                         f"{y.dtype} and {tuple(dy.shape)} {dy.dtype}")
    y, dy = y.contiguous(), dy.contiguous()
    return _launch("backward", g, [y, dy], _allocate(y), norm_by)
