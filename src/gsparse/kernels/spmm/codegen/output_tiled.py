"""The output-tiled g-SpMM skeleton: a block's output rows and a tile of ``lhs``, both on chip.

For copy_lhs with up to a few features on graphs with millions of short rows
(products-like: 2.45 M rows of about 51 edges), every gather of the one-pass kernels (and
cuSPARSE's) is a random 32-byte L2 sector for a 4-byte value, and the column-tiled
skeleton needs a row pointer per (column tile, row): 44 tiles x 2.45 M rows outweigh the
edges. Here a block owns a contiguous range of output rows (about equal edges) and keeps
their running results in shared memory while it stages the column tiles of ``lhs`` in
turn, double-buffered (on sm_90 one bulk copy per tile completing on an mbarrier, on
sm_80 16-byte asynchronous copies). With ``column_groups`` > 1 the tiles are cut into
that many groups: block (r, c) walks the tiles of group c for row range r, each block
stages only its group's part of ``lhs`` (staging is what bounds the kernel: every block
copies its share of ``lhs`` through L2), and a second kernel folds each row's group
results in group order. No per-(tile, row) structure exists: the edges of a row range and
a tile are a list of 32-bit words, the local row in the high 16 bits, the local column in
the low 16.

Within (row range, tile) the edges are sorted by row (CSR order within a row) and cut
into one chunk per warp at row boundaries near equal edge counts, so no row has two warps
in one tile, and warps of the next tile start only after a barrier. A warp's chunk of
``n`` edges is cut exactly into 32 lane segments (the first ``n - 32 * (s - 1)`` lanes walk
``s = ceil(n / 32)`` edges, the rest ``s - 1``) and stored lane-interleaved: word ``k * 32 +
lane`` is the lane's ``k``-th edge, so every step is one coalesced 128-byte load. A lane
folds runs of equal rows in registers. Its runs after the first belong to it alone and go
straight to shared memory; its first run may continue the previous lane's last one, so
it is a *carry*, and a segmented warp scan over the 32 carries folds equal rows and
writes each once. Every result is folded in an order fixed by the layout: deterministic,
with no atomics.

Runs copy_lhs with sum, mean, max and min (no arg index). The layout is built by
:mod:`gsparse.kernels.spmm.structures`, once per graph and tiling.
"""

from __future__ import annotations

import torch

from ....algebra import Reducer
from ...source import (
    ACCUMULATOR_TYPES,
    INDEX_TYPES,
    PRELUDE,
    SCALAR_TYPES,
    Program,
    Signature,
    device_code,
    identity_expr,
    indent,
)
from ..schedule import OutputTiled
from ..task import SpmmAlgorithm
from .walk import tile_merge_kernel, tile_merge_signature

KERNEL = "gspmm_output_tiled"
MERGE = "gspmm_output_tiled_merge"
# Shared memory before the result rows: the two tile buffers' barriers (sm_90).
BARRIER_BYTES = 16
# Edge words a lane holds per round (the round it walks and the next one, loaded ahead),
# for 4-byte messages; fewer for wider ones, whose registers a round of 8 would spill at
# 1,024 threads.
_ROUND = 8
_HELPERS = device_code(__package__, "output_tiled.cuh")

FIRST_PASS = Signature(KERNEL, [
    ("const unsigned* __restrict__", "words"), ("const I* __restrict__", "chunk_ptr"),
    ("const I* __restrict__", "block_rows"), ("const I* __restrict__", "rowptr"),
    ("const T* __restrict__", "lhs"), ("T* __restrict__", "out"), ("A* __restrict__", "partial"),
    ("long long", "num_rows"), ("long long", "num_src"), ("long long", "num_tiles"),
    ("long long", "group_tiles"), ("int", "tile_cols"), ("int", "rows_bytes"),
])
MERGE_PASS = tile_merge_signature(MERGE)


def _fold_into(reducer: Reducer, into: str, value: str) -> str:
    """The statement that folds ``value`` into ``into`` (max/min: NaN never wins, as in the
    one-pass kernels)."""
    return f"{into} = {reducer.fold(into, value)};"


def _each_feature(body: str) -> str:
    """``body`` for every feature ``f = o * V + i`` of an edge that exists."""
    return (
        "#pragma unroll\n"
        "for (int o = 0; o < O; ++o) {\n"
        "#pragma unroll\n"
        "    for (int i = 0; i < V; ++i) {\n"
        "        const int f = o * V + i;\n"
        "        if (f < num_features) {\n"
        f"{indent(body, 12)}\n"
        "        }\n"
        "    }\n"
        "}"
    )


def _round(algorithm: SpmmAlgorithm, schedule: OutputTiled) -> int:
    """Steps per round: :data:`_ROUND` for 4-byte messages, halved for each doubling
    beyond (a round holds each step's message and the prior sum of its row)."""
    acc_bytes = 8 if algorithm.dtype == torch.float64 else 4
    message = schedule.features_covered * acc_bytes
    return max(2, _ROUND * 4 // max(4, message))


def _end_run(reducer: Reducer) -> str:
    """Code that ends run ``run_row``: the run that began the lane's segment (its first
    row) is the lane's carry; any later run's row is the lane's alone, folded straight
    into shared memory."""
    return "\n".join([
        "if (run_row == first_row) {",
        indent(_each_feature("carry[o][i] = run[o][i];"), 4),
        "} else {",
        indent(_each_feature(_fold_into(reducer, "sums[run_row * num_features + f]", "run[o][i]")), 4),
        "}",
    ])


def generate(algorithm: SpmmAlgorithm, schedule: OutputTiled, num_features: int) -> Program:
    """The program of the output-tiled kernel ``gspmm_output_tiled`` for ``num_features``
    features (a constant of the program: every shared-memory address
    and feature loop is resolved at compile time) and, for ``column_groups`` > 1, the merge
    ``gspmm_output_tiled_merge``.

    Block ``(r, c)`` (``blockIdx.x = r * column_groups + c``) owns output rows
    ``block_rows[r] ..`` and walks the tiles of column group c, in each the chunks of edge
    words of (r, tile); see the module docstring.
    """
    if not algorithm.message_is_lhs:
        raise ValueError(f"the output-tiled skeleton runs copy_lhs of full-shape features "
                         f"without arg indices, not {algorithm}")
    if not 0 < num_features <= schedule.features_covered:
        raise ValueError(f"schedule {schedule} carries {schedule.features_covered} features per "
                         f"edge (vector_width * outputs_per_thread), not {num_features}")
    reducer = algorithm.reducer
    identity = identity_expr(reducer.identity)
    finish = reducer.finish("acc", "degree")
    # A round first reads what it needs from shared memory, all loads in flight at once:
    # its messages, and the sums of the rows whose runs end in it (a run ends where the
    # row changes; runs of one lane have distinct rows, which no other lane writes, so
    # these reads cannot see this round's stores). Then it folds in order with register
    # arithmetic: each step either ends the run before it (the lane's carry when that run
    # began the lane's segment, else its row's sum plus the run, stored) or folds into it.
    # A step past the lane's edges continues the run with the identity (its word is 0:
    # column 0 is always staged).
    gather = "\n".join([
        "const int column = static_cast<int>(cur[j] & 0xffffu);",
        "#pragma unroll",
        "for (int o = 0; o < O; ++o) {",
        "    if (o * V < num_features) gs::load<V>(x + column * num_features + o * V, m[j][o]);",
        "}",
        "row[j] = k0 + j < mine ? static_cast<int>(cur[j] >> 16) : (j == 0 ? run_row : row[j - 1]);",
        "const int ending = j == 0 ? run_row : row[j - 1];",
        "if (row[j] != ending && ending != first_row) {",
        indent(_each_feature("prior[j][o][i] = sums[ending * num_features + f];"), 4),
        "}",
    ])
    step = "\n".join([
        "const int ending = j == 0 ? run_row : row[j - 1];",
        "const bool ends = row[j] != ending;",
        "const bool to_carry = ends && ending == first_row;",
        _each_feature("carry[o][i] = to_carry ? run[o][i] : carry[o][i];"),
        "if (ends && !to_carry) {",
        indent(_each_feature(f"sums[ending * num_features + f] = {reducer.fold('prior[j][o][i]', 'run[o][i]')};"), 4),
        "}",
        _each_feature(f"const A message = k0 + j < mine ? m[j][o][i] : {identity};\n"
                      f"run[o][i] = ends ? message : {reducer.fold('run[o][i]', 'message')};"),
    ])
    scan_step = "\n".join([
        "const A other = __shfl_up_sync(FULL, carry[o][i], d);",
        f"if (lane - d >= first_lane) {{ {_fold_into(reducer, 'carry[o][i]', 'other')} }}",
    ])
    if schedule.column_groups == 1:
        write_back = f"""for (int i = threadIdx.x; i < rows * num_features; i += blockDim.x) {{
    const long long row = row0 + i / num_features;
    const long long degree = (long long)rowptr[row + 1] - rowptr[row];
    const A acc = sums[i];
    out[row0 * num_features + i] = gs::from_acc<T>(degree == 0 ? A(0) : {finish});
}}"""
    else:
        write_back = """// This group's partial rows; the merge folds the groups in order.
A* __restrict__ mine_partial = partial + group * num_rows * num_features + row0 * num_features;
for (int i = threadIdx.x; i < rows * num_features; i += blockDim.x) mine_partial[i] = sums[i];"""
    body = f"""constexpr int num_features = {num_features};
constexpr int W = {schedule.warps_per_block};  // warps per block: chunks per (row range, tile)
constexpr int V = {schedule.vector_width};  // features per shared-memory access
constexpr int O = {schedule.outputs_per_thread};  // accesses per edge
constexpr int GROUPS = {schedule.column_groups};  // column groups: blocks per row range
constexpr int ROUND = {_round(algorithm, schedule)};  // edge words a lane holds per round
constexpr unsigned FULL = 0xffffffffu;
extern __shared__ __align__(16) unsigned char smem[];
const int lane = threadIdx.x % 32;
const int warp = threadIdx.x / 32;
const long long range = blockIdx.x / GROUPS;
const long long group = blockIdx.x % GROUPS;
const long long row0 = block_rows[range];
const int rows = static_cast<int>(block_rows[range + 1] - row0);
// This group's tiles, walked in order: step t is tile first_tile + t.
const long long first_tile = min(group * group_tiles, num_tiles);
const long long walk = min(group_tiles, num_tiles - first_tile);
unsigned long long* barriers = reinterpret_cast<unsigned long long*>(smem);  // one per buffer
A* __restrict__ sums = reinterpret_cast<A*>(smem + {BARRIER_BYTES});  // [rows][num_features]
T* __restrict__ tiles = reinterpret_cast<T*>(smem + {BARRIER_BYTES} + rows_bytes);  // 2 x [tile_cols][num_features]
const long long tile_elems = (long long)tile_cols * num_features;
for (int i = threadIdx.x; i < rows * num_features; i += blockDim.x) sums[i] = {identity};
ot::start(barriers);
if (walk > 0) {{
    const long long first = first_tile * tile_cols;
    ot::stage(tiles, lhs + first * num_features, min((long long)tile_cols, num_src - first) * num_features,
              barriers);
}}

// The chunk bounds of 32 steps at a time, a lane each, broadcast by shuffles: this warp's
// chunks of the step it walks and of the next are known before the step begins.
const I* __restrict__ chunks = chunk_ptr + range * num_tiles * W + warp;
long long batch_lo, batch_hi;
ot::bounds_batch(chunks, 0, first_tile, walk, W, lane, batch_lo, batch_hi);
long long base, next_base = 0;
int steps, mine, next_steps = 0, next_mine = 0;
ot::split(__shfl_sync(FULL, batch_lo, 0), __shfl_sync(FULL, batch_hi, 0), lane, base, steps, mine);
ot::split(__shfl_sync(FULL, batch_lo, 1), __shfl_sync(FULL, batch_hi, 1), lane, next_base,
          next_steps, next_mine);
unsigned cur[ROUND];
#pragma unroll
for (int j = 0; j < ROUND; ++j) cur[j] = j < mine ? words[base + j * 32 + lane] : 0u;

for (long long t = 0; t < walk; ++t) {{
    ot::landed(barriers, t);
    __syncthreads();  // step t's tile is staged; every warp is done with step t - 1, its buffer and rows
    if (t + 1 < walk) {{
        const long long first = (first_tile + t + 1) * tile_cols;
        ot::stage(tiles + ((t + 1) & 1) * tile_elems, lhs + first * num_features,
                  min((long long)tile_cols, num_src - first) * num_features, barriers + ((t + 1) & 1));
    }}
    if ((t + 2) % 32 == 0 && t + 2 < walk) {{  // steps t + 1 and t are located already
        ot::bounds_batch(chunks, t + 2, first_tile, walk, W, lane, batch_lo, batch_hi);
    }}
    const int after = static_cast<int>((t + 2) % 32);  // this warp's chunk two steps on
    const long long after_lo = __shfl_sync(FULL, batch_lo, after);
    const long long after_hi = __shfl_sync(FULL, batch_hi, after);
    const T* __restrict__ x = tiles + (t & 1) * tile_elems;
    // The lane's first row in this tile: its carry's row (-1: no edges here).
    const int first_row = mine > 0 ? static_cast<int>(cur[0] >> 16) : -1;
    const int carry_row = first_row;
    int run_row = first_row;
    A run[O][V], carry[O][V];
{indent(_each_feature(f"carry[o][i] = {identity};"), 4)}
{indent(_each_feature(f"run[o][i] = {identity};"), 4)}
    // Rounds of ROUND steps; the last one (at least one, even for an empty chunk) loads
    // the next step's first round, so its words are in flight across the barrier.
    for (int k0 = 0; k0 < max(steps, 1); k0 += ROUND) {{
        unsigned next[ROUND];
        const bool more = k0 + ROUND < steps;
        const long long from = more ? base + (long long)(k0 + ROUND) * 32 : next_base;
        const int limit = more ? mine - (k0 + ROUND) : next_mine;
#pragma unroll
        for (int j = 0; j < ROUND; ++j) next[j] = j < limit ? words[from + j * 32 + lane] : 0u;
        A m[ROUND][O][V], prior[ROUND][O][V];
        int row[ROUND];
#pragma unroll
        for (int j = 0; j < ROUND; ++j) {{
{indent(gather, 12)}
        }}
#pragma unroll
        for (int j = 0; j < ROUND; ++j) {{
{indent(step, 12)}
        }}
        run_row = row[ROUND - 1];
#pragma unroll
        for (int j = 0; j < ROUND; ++j) cur[j] = next[j];
    }}
    if (run_row >= 0) {{
{indent(_end_run(reducer), 8)}
    }}
    __syncwarp();  // this warp's direct writes land before the carries that may share their rows
    // Carries: rows non-decreasing over the lanes that have one; fold equal neighbours.
    const int prev_row = __shfl_up_sync(FULL, carry_row, 1);
    const unsigned heads = __ballot_sync(FULL, lane == 0 || prev_row != carry_row);
    const int first_lane = 31 - __clz(heads & (FULL >> (31 - lane)));
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {{
{indent(_each_feature(scan_step), 8)}
    }}
    if (carry_row >= 0 && (lane == 31 || ((heads >> (lane + 1)) & 1u))) {{
{indent(_each_feature(_fold_into(reducer, "sums[carry_row * num_features + f]", "carry[o][i]")), 8)}
    }}
    base = next_base;
    steps = next_steps;
    mine = next_mine;
    next_base = 0;
    next_steps = next_mine = 0;
    if (t + 2 < walk) ot::split(after_lo, after_hi, lane, next_base, next_steps, next_mine);
}}
__syncthreads();
{write_back}"""
    kernels = {KERNEL: FIRST_PASS}
    merge = ""
    if schedule.column_groups > 1:
        kernels[MERGE] = MERGE_PASS
        merge = tile_merge_kernel(algorithm, MERGE_PASS)
    source = f"""// gsparse g-SpMM, output-tiled: {algorithm}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {INDEX_TYPES[algorithm.index_dtype]};
using T = {SCALAR_TYPES[algorithm.dtype]};
using A = {ACCUMULATOR_TYPES[algorithm.dtype]};
{_HELPERS}
// One block per SM: result rows and the two tile buffers fill shared memory.
{FIRST_PASS.declaration(bounds=(schedule.threads, 1))}
{{
{indent(body, 4)}
}}
{merge}"""
    return Program(source, kernels, f"{algorithm} | schedule {schedule} | {num_features} features")
