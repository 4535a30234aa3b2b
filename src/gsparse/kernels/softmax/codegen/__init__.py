r"""Edge softmax code generation: (task, schedule) -> a :class:`~gsparse.kernels.source.Program`.

Forward, for each row ``v`` and head ``h``:

.. math::  y_e = \frac{\exp(z_e - m)}{s},\quad m = \max_{e \in v} z_e,\quad
           s = \sum_{e \in v} \exp(z_e - m)

Backward, from ``y`` and ``dy``:  ``dz_e = y_e (dy_e - \sum_{e' \in v} dy_{e'} y_{e'})``.

GAT's attention (``logits="gat"``) computes each logit where the passes read it, from the
node scores: ``z_e = leaky_relu(src[u] + dst[v] (+ edge_scores[e]))``, ``-inf`` for a masked
edge, rounded to the values' dtype after each step as the separate operations would (the
g-SDDMM, the sum with the edge scores, the LeakyReLU). Its backward carries ``dz`` through
the LeakyReLU and the mask (``dz_pre``, written per edge: the gradient of ``edge_scores``,
and what a g-SpMM of the reverse graph sums into the sources' scores) and sums it over
each row into the destination's score gradient ``d_dst``. No logit outlives the kernel:
the forward leaves each in ``y`` between its passes, the backward computes them again.

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

import torch

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

__all__ = ["kernel_name", "program", "resident_threads", "signature"]


def kernel_name(direction: str, logits: str = "given") -> str:
    return f"edge_softmax_{direction}" if logits == "given" else f"gat_attention_{direction}"


# The second pass reads (or computes) each logit again; the first leaves nothing.
_READ_AGAIN = """\
const auto keep = [&](long long, A) {};
const auto relogit = logit;"""


def _logit(task: SoftmaxTask, schedule: WarpPerRow) -> str:
    """``logit(i, p)``: the logit of the edge at CSR position ``p``, whose value sits at
    ``i``; ``keep(i, z)`` and ``relogit(i, p)``: where the first pass leaves it and how the
    second reads it back. Given logits are read twice. GAT's are computed from a gathered
    source score (with the prologue that reads the row's destination score and the slope);
    with ``schedule.logits_in_output`` the first pass leaves them in ``y``, which the second
    streams back and overwrites (already rounded to ``T``, they come back exact), else the
    second computes them again."""
    if task.logits == "given":
        return f"""\
const auto logit = [&](long long i, long long) -> A {{ return gs::to_acc(x[i]); }};
{_READ_AGAIN}"""
    keep = """\
const auto keep = [&](long long i, A z) { y[i] = gs::from_acc<T>(z); };
const auto relogit = [&](long long i, long long) -> A { return gs::to_acc(y[i]); };""" \
        if schedule.logits_in_output else _READ_AGAIN
    return f"""\
{_gat_prologue(task)}
const auto logit = [&](long long, long long p) -> A {{
{"    if (masked[edge(p)]) return NEG_INF;" + chr(10) if task.masked else ""}\
    const A z = pre_activation(p);
    return gs::to_acc(gs::from_acc<T>(z > A(0) ? z : z * slope));
}};
{keep}"""


def _gat_prologue(task: SoftmaxTask) -> str:
    """The row's destination score for this lane's head, the slope, and ``pre_activation(p)``:
    the LeakyReLU's input at CSR position ``p``, rounded as the separate operations round it."""
    edge_term = ("\n    z = gs::to_acc(gs::from_acc<T>(z + gs::to_acc(edge_scores[edge(p) * num_heads + h])));"
                 if task.edge_scores else "")
    return f"""\
const A slope = A(negative_slope);
const A dst_score = active && row < num_rows ? gs::to_acc(score_dst[row * num_heads + h]) : A(0);
const auto pre_activation = [&](long long p) -> A {{
    A z = gs::to_acc(gs::from_acc<T>(gs::to_acc(score_src[(long long)col[p] * num_heads + h]) + dst_score));{edge_term}
    return z;
}};"""


def _store(task: SoftmaxTask) -> tuple[str, str]:
    """``factor(p)`` and ``store(i, dz, factor)`` of the backward pass, and what runs after
    its passes. GAT's factor is the LeakyReLU's slope at the logit (0 where masked)."""
    if task.logits == "given":
        return ("const auto factor = [&](long long) -> A { return A(1); };\n"
                "const auto store = [&](long long i, A v, A) { dz[i] = gs::from_acc<T>(v); };"), ""
    masked = "if (masked[edge(p)]) return A(0);\n    " if task.masked else ""
    store = f"""\
{_gat_prologue(task)}
const auto factor = [&](long long p) -> A {{
    {masked}return pre_activation(p) > A(0) ? A(1) : slope;
}};
A row_grad = 0;  // this lane's share of d_dst
const auto store = [&](long long i, A v, A f) {{
    // a masked edge's gradient is 0 whatever v holds, as the mask's own backward gives
    const A g = {"f == A(0) ? A(0) : " if task.masked else ""}\
gs::to_acc(gs::from_acc<T>(gs::to_acc(gs::from_acc<T>(v)) * f));
    dz[i] = gs::from_acc<T>(g);
    row_grad += g;
}};"""
    epilogue = """
// d_dst: the row's sum of dz over the lanes that share this head.
#pragma unroll
for (int offset = HL; offset < RL; offset *= 2) row_grad += __shfl_xor_sync(0xffffffffu, row_grad, offset);
if (active && e_lane == 0 && row < num_rows) d_dst[row * num_heads + h] = gs::from_acc<T>(row_grad);"""
    return store, epilogue


def signature(task: SoftmaxTask) -> Signature:
    """``edge_softmax_forward(rowptr, eid, x, y, num_rows, num_heads)`` or
    ``edge_softmax_backward(rowptr, eid, y, dy, dz, num_rows, num_heads)``; ``eid`` is null
    when CSR positions are edge ids. GAT's (``gat_attention_forward`` and ``_backward``)
    read ``col`` and the scores instead of ``x`` (``edge_scores`` and ``masked`` null where
    the task has none), the backward writes ``d_dst`` too, and both take ``negative_slope``."""
    scalar = SCALAR_TYPES[task.dtype]
    const, out = f"const {scalar}* __restrict__", f"{scalar}* __restrict__"
    if task.logits == "given":
        values = ([(const, "x"), (out, "y")] if task.direction == "forward"
                  else [(const, "y"), (const, "dy"), (out, "dz")])
        return Signature(kernel_name(task.direction), [
            ("const I* __restrict__", "rowptr"), ("const I* __restrict__", "eid"), *values,
            ("long long", "num_rows"), ("long long", "num_heads"),
        ])
    scores = [(const, "score_src"), (const, "score_dst"), (const, "edge_scores"),
              ("const unsigned char* __restrict__", "masked")]
    values = ([*scores, (out, "y")] if task.direction == "forward"
              else [(const, "y"), (const, "dy"), *scores, (out, "dz"), (out, "d_dst")])
    return Signature(kernel_name(task.direction, task.logits), [
        ("const I* __restrict__", "rowptr"), ("const I* __restrict__", "col"),
        ("const I* __restrict__", "eid"), *values,
        ("long long", "num_rows"), ("long long", "num_heads"), ("double", "negative_slope"),
    ])


def resident_threads(task: SoftmaxTask) -> int:
    """Threads an SM must be able to hold, which bounds the registers a thread: 64 registers
    a thread (80 for GAT's logits, 128 in float64). See :func:`_min_blocks`."""
    if task.logits == "given":
        return 1024
    return 512 if task.dtype == torch.float64 else 768


def _min_blocks(task: SoftmaxTask, schedule: WarpPerRow) -> int:
    """Blocks per SM the register allocation must allow (:func:`resident_threads`).

    Given only the block size, ptxas aims at full occupancy (32 registers a thread) and
    spills the online softmax's running state to get there; half occupancy keeps it in
    registers, and a row's two passes over its logits need loads in flight more than warps.
    GAT's logits hold each edge's gathered score and source index besides: at 64 registers
    8 edges in flight spilled with a mask, and in float64 at 80.
    """
    return max(1, resident_threads(task) // schedule.threads)


@functools.lru_cache(maxsize=256)
def program(task: SoftmaxTask, schedule: WarpPerRow) -> Program:
    """The program of ``task``'s direction under ``schedule``. Pure; no GPU needed."""
    schedule.validate()
    if schedule.logits_in_output and not task.computes_logits_once:
        raise ValueError(f"logits_in_output is a schedule of GAT's forward, not of a {task.logits!r} "
                         f"{task.direction} task")
    passes = device_code(__package__, f"{task.direction}_pass.cu")
    if task.direction == "forward":
        hook, epilogue = _logit(task, schedule), ""
    else:
        hook, epilogue = _store(task)
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
{indent(hook, 4)}
{indent(passes.rstrip() + epilogue, 4)}
}}"""
    kernel = signature(task)
    describe = (f"{str(task.dtype).removeprefix('torch.')} {str(task.index_dtype).removeprefix('torch.')}"
                f"{' eid' if task.has_eid else ''}, {head_lanes} lanes per edge")
    if task.logits == "gat":
        describe += (f", GAT's logits{' with edge scores' if task.edge_scores else ''}"
                     f"{', masked' if task.masked else ''}")
    source = f"""// gsparse edge softmax, {task.direction}: {describe}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {INDEX_TYPES[task.index_dtype]};

// exp in the accumulator's precision (expf for float; never the double routine).
__device__ __forceinline__ float exp_acc(float x) {{ return expf(x); }}
__device__ __forceinline__ double exp_acc(double x) {{ return exp(x); }}

{kernel.declaration(bounds=(schedule.threads, _min_blocks(task, schedule)))}
{{
{indent(body, 4)}
}}
"""
    return Program(source, {kernel.name: kernel},
                   f"{kernel.name} heads={task.num_heads} | schedule {schedule}")
