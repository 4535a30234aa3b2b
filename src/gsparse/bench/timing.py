"""Input rotation and bandwidth: what the benchmark suite adds to how calls are timed.

Calls are timed by :func:`gsparse.tune.measure.time_calls` (CUDA events after a warm-up,
the median of the repeats).

When one set of inputs fits in the L2 cache, repeated calls on it would measure the
cache rather than the memory system: the caller hands several independent input sets
(see :func:`rotation_count`) and consecutive calls cycle through them. Where even those
fit (a 10K-edge graph), the L2 is also overwritten before each timed call, outside its
events (:func:`needs_flush`).

:func:`measure_bandwidth` gives the two ceilings the memory floors are computed from: a
large device-to-device copy (bytes read plus bytes written, per second) and an
L2-resident gather (bytes of gathered rows per second, from a table that fits in L2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..backends.cpu import unchecked_csr
from ..kernels.source import Program, Signature
from ..tune.measure import time_calls

__all__ = [
    "Bandwidth",
    "l2_bytes",
    "measure_bandwidth",
    "needs_flush",
    "rotation_count",
]

# Without a device report (CPU), a typical server's last-level cache per socket.
_CPU_CACHE_BYTES = 32 << 20
# A GPU's L2 is flushed by rotation; a CPU's caches are too deep for that to be worth the
# extra checks and warm-up, so the CPU rotates a few sets only.
_MAX_ROTATION = {"cuda": 16, "cpu": 4}


def l2_bytes(device: torch.device) -> int:
    """Bytes of the L2 cache of ``device`` (a nominal 32 MiB last-level cache on the CPU)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).L2_cache_size)
    return _CPU_CACHE_BYTES


def needs_flush(working_set_bytes: int, device: torch.device) -> bool:
    """Whether even :func:`rotation_count` sets of this size fit in twice the L2 cache (GPU only)."""
    return device.type == "cuda" and working_set_bytes * rotation_count(working_set_bytes, device) \
        < 2 * l2_bytes(device)


def rotation_count(working_set_bytes: int, device: torch.device) -> int:
    """How many independent input sets to cycle through so that no call finds its inputs in L2.

    One set when the working set is at least twice the cache; otherwise enough sets to
    span four cache sizes, at most 16 on a GPU (4 on the CPU).
    """
    if working_set_bytes < 0:
        raise ValueError(f"working_set_bytes must be >= 0, got {working_set_bytes}")
    cache = l2_bytes(device)
    if working_set_bytes >= 2 * cache:
        return 1
    most = _MAX_ROTATION.get(device.type, _MAX_ROTATION["cpu"])
    return min(most, math.ceil(4 * cache / max(working_set_bytes, 1)))


# The gather probe's rows: 32 float32, one full 128-byte L2 line each.
_GATHER_ROW_BYTES = 128
# Rows summed into each output row by the probe: its writes are 1/32 of its reads.
_GATHER_FAN_IN = 32
_GATHER = Signature("gather_probe", [("const float4* __restrict__", "table"),
                                     ("const int* __restrict__", "index"),
                                     ("float4* __restrict__", "out"), ("long long", "outputs")])
_GATHER_BODY = r"""
    // Eight lanes move one 128-byte row as float4s, so a warp gathers four rows per load;
    // each group of eight lanes sums FAN_IN / 4 rows, then the four groups meet by shuffles.
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32, part = lane % 8, group = lane / 8;
    if (warp >= outputs) return;
    const int* rows = index + warp * FAN_IN;
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    #pragma unroll
    for (int j = group; j < FAN_IN; j += 4) {
        const float4 v = table[(long long)rows[j] * 8 + part];
        sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
    }
    #pragma unroll
    for (int offset = 8; offset < 32; offset *= 2) {
        sum.x += __shfl_xor_sync(0xffffffffu, sum.x, offset);
        sum.y += __shfl_xor_sync(0xffffffffu, sum.y, offset);
        sum.z += __shfl_xor_sync(0xffffffffu, sum.z, offset);
        sum.w += __shfl_xor_sync(0xffffffffu, sum.w, offset);
    }
    if (group == 0) out[warp * 8 + part] = sum;
"""
_GATHER_PROGRAM = Program(
    f"constexpr int FAN_IN = {_GATHER_FAN_IN};\n\n{_GATHER.declaration(bounds=(256,))}\n{{{_GATHER_BODY}}}\n",
    {"gather_probe": _GATHER}, "bandwidth probe")


def _gather_probe(table: torch.Tensor, index: torch.Tensor) -> Callable[[], Any]:
    """A call that gathers ``table[index]`` (rows of 128 bytes) and sums each 32 of them.

    On a GPU a dedicated kernel: the ceiling should be the L2's random-line rate, not
    the cost of writing every gathered row back out (which is what ``index_select``
    measures: about a tenth of the rate on an H100). Elsewhere the PyTorch equivalent.
    """
    outputs = index.numel() // _GATHER_FAN_IN
    index = index[: outputs * _GATHER_FAN_IN]
    if table.device.type != "cuda":
        # The same gather-and-sum as a sparse CSR product: PyTorch's own CPU kernel for it,
        # which (unlike index_select) does not write every gathered row back out.
        rowptr = torch.arange(0, index.numel() + 1, _GATHER_FAN_IN, dtype=torch.int64)
        pattern = unchecked_csr(rowptr, index.long(), torch.ones(index.numel()), (outputs, table.shape[0]))
        return lambda: torch.sparse.mm(pattern, table)
    out = torch.empty(outputs, table.shape[1], device=table.device)
    warps_per_block = 8
    launch = _GATHER_PROGRAM.prepare("gather_probe", table.device.index, -(-outputs // warps_per_block),
                                     32 * warps_per_block, table=table, index=index, out=out,
                                     outputs=outputs)

    def gather() -> torch.Tensor:
        launch()
        return out

    return gather


@dataclass(frozen=True)
class Bandwidth:
    """Measured memory ceilings of a device, in bytes per second.

    Attributes:
        copy: device-to-device copy of a buffer much larger than L2, bytes read + written.
        gather: row gather from a table that fits in L2 (bytes of the gathered rows per
            second); the rate at which a kernel can fetch neighbour features that hit L2.
        copy_bytes, gather_table_bytes: the sizes used.
    """

    copy: float
    gather: float
    copy_bytes: int
    gather_table_bytes: int

    def to_json(self) -> dict[str, float | int]:
        return {"copy_bytes_per_s": self.copy, "gather_bytes_per_s": self.gather,
                "copy_buffer_bytes": self.copy_bytes, "gather_table_bytes": self.gather_table_bytes}


def measure_bandwidth(device: torch.device, *, copy_bytes: int | None = None) -> Bandwidth:
    """Measure the copy and L2-gather ceilings of ``device`` (about a second on a GPU).

    The copy moves ``copy_bytes`` (default: 8 times L2, at least 256 MiB on a GPU and
    64 MiB on the CPU). The gather reads 128-byte rows (32 float32) of a table a quarter
    of the L2 size, at uniformly random row indices, 8M rows on a GPU (256K on the CPU),
    and sums every 32 of them into one output row (see :func:`_gather_probe`).
    """
    device = torch.device(device)
    cache = l2_bytes(device)
    on_gpu = device.type == "cuda"
    if copy_bytes is None:
        copy_bytes = max(8 * cache, (256 << 20) if on_gpu else (64 << 20))
    n = copy_bytes // 4
    src = torch.rand(n, device=device)
    dst = torch.empty_like(src)
    copy_time = time_calls(lambda dst=dst, src=src: dst.copy_(src), [()], device, budget_s=0.3, min_repeats=5).median_ms
    del src, dst

    rows = max(1, cache // 4 // _GATHER_ROW_BYTES)
    gen = torch.Generator(device=device).manual_seed(0)
    count = (8 << 20) if on_gpu else (256 << 10)
    table = torch.rand(rows, _GATHER_ROW_BYTES // 4, device=device)
    index = torch.randint(0, rows, (count,), device=device, generator=gen, dtype=torch.int32)
    gather = _gather_probe(table, index)
    gather_time = time_calls(gather, [()], device, budget_s=0.3, min_repeats=5).median_ms
    return Bandwidth(
        copy=2 * n * 4 / (copy_time * 1e-3),
        gather=count * _GATHER_ROW_BYTES / (gather_time * 1e-3),
        copy_bytes=n * 4,
        gather_table_bytes=rows * _GATHER_ROW_BYTES,
    )
