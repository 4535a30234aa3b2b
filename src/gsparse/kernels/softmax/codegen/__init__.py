r"""Edge softmax code generation: (task, schedule) -> a :class:`~gsparse.kernels.source.Program`.

Forward, for each row ``v`` and head ``h``:

.. math::  y_e = \frac{\exp(z_e - m)}{s},\quad m = \max_{e \in v} z_e,\quad
           s = \sum_{e \in v} \exp(z_e - m)

Backward, from ``y`` and ``dy``:  ``dz_e = y_e (dy_e - \sum_{e' \in v} dy_{e'} y_{e'})``.

The forward pass reads the logits twice: once for the running maximum and rescaled sum
(the online softmax recurrence; the lanes' partial ``(m, s)`` pairs then merge through
warp shuffles), once to write the normalised values. Each lane loads the values of
``edges_in_flight`` edges before it folds them, in edge order, so the result does not
depend on it; a row's lanes (``lanes_per_row``) split its heads first, then its edges.
Everything accumulates in fp32 (fp64 for fp64), and no temporary is allocated: the output
is the only write. The two passes of
each direction are fixed device code (``forward_pass.cu``, ``backward_pass.cu``).
"""

from __future__ import annotations

import functools

from ...source import (
    ACCUMULATOR_TYPES,
    INDEX_TYPES,
    PRELUDE,
    SCALAR_TYPES,
    Program,
    Signature,
    device_code,
    indent,
)
from ..schedule import WarpPerRow
from ..task import SoftmaxTask

__all__ = ["kernel_name", "program", "signature"]


def kernel_name(direction: str) -> str:
    return f"edge_softmax_{direction}"


def signature(task: SoftmaxTask) -> Signature:
    """``edge_softmax_forward(rowptr, eid, x, y, num_rows, num_heads)`` or
    ``edge_softmax_backward(rowptr, eid, y, dy, dz, num_rows, num_heads)``; ``eid`` is null
    when CSR positions are edge ids."""
    scalar = SCALAR_TYPES[task.dtype]
    if task.direction == "forward":
        values = [(f"const {scalar}* __restrict__", "x"), (f"{scalar}* __restrict__", "y")]
    else:
        values = [(f"const {scalar}* __restrict__", "y"), (f"const {scalar}* __restrict__", "dy"),
                  (f"{scalar}* __restrict__", "dz")]
    return Signature(kernel_name(task.direction), [
        ("const I* __restrict__", "rowptr"), ("const I* __restrict__", "eid"), *values,
        ("long long", "num_rows"), ("long long", "num_heads"),
    ])


def _min_blocks(schedule: WarpPerRow) -> int:
    """Blocks per SM the register allocation must allow: enough for 64 registers a thread.

    Given only the block size, ptxas aims at full occupancy (32 registers a thread) and
    spills the online softmax's running state to get there; half occupancy keeps it in
    registers, and a row's two passes over its logits need loads in flight more than warps.
    """
    return max(1, 1024 // schedule.threads)


@functools.lru_cache(maxsize=256)
def program(task: SoftmaxTask, schedule: WarpPerRow) -> Program:
    """The program of ``task``'s direction under ``schedule``. Pure; no GPU needed."""
    schedule.validate()
    passes = device_code(__package__, f"{task.direction}_pass.cu")
    edge = "(long long)eid[p]" if task.has_eid else "p"
    group = schedule.lanes_per_row
    head_lanes = min(task.lanes, group)
    body = f"""\
using T = {SCALAR_TYPES[task.dtype]};
using A = {ACCUMULATOR_TYPES[task.dtype]};
constexpr int RL = {group};  // lanes a row
constexpr int HL = {head_lanes};  // lanes per edge, one head each
constexpr int EL = RL / HL;  // edges a row's lanes read at a time
constexpr int U = {schedule.edges_in_flight};  // edges' loads each lane issues before it folds them
const A NEG_INF = -A(__int_as_float(0x7f800000));
const auto edge = [&](long long p) -> long long {{ return {edge}; }};
const long long warp_row = ((long long)blockIdx.x * {schedule.warps_per_block} + threadIdx.x / 32) * (32 / RL);
if (warp_row >= num_rows) return;  // whole warps leave together
// Every lane reaches each shuffle: lanes past the last row or head walk no edges instead of leaving.
const long long row = warp_row + (threadIdx.x % 32) / RL;
const long long start = row < num_rows ? (long long)rowptr[row] : 0;
const long long end = row < num_rows ? (long long)rowptr[row + 1] : 0;
const int e_lane = (threadIdx.x % RL) / HL;
for (long long h0 = 0; h0 < num_heads; h0 += HL) {{
    const long long h = h0 + threadIdx.x % HL;
    const bool active = h < num_heads;
{indent(passes.rstrip(), 4)}
}}"""
    kernel = signature(task)
    describe = (f"{str(task.dtype).removeprefix('torch.')} {str(task.index_dtype).removeprefix('torch.')}"
                f"{' eid' if task.has_eid else ''}, {head_lanes} lanes per edge")
    source = f"""// gsparse edge softmax, {task.direction}: {describe}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {INDEX_TYPES[task.index_dtype]};

// exp in the accumulator's precision (expf for float; never the double routine).
__device__ __forceinline__ float exp_acc(float x) {{ return expf(x); }}
__device__ __forceinline__ double exp_acc(double x) {{ return exp(x); }}

{kernel.declaration(bounds=(schedule.threads, _min_blocks(schedule)))}
{{
{indent(body, 4)}
}}
"""
    return Program(source, {kernel.name: kernel},
                   f"{kernel.name} heads={task.num_heads} | schedule {schedule}")
