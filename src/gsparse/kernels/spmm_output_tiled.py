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

Runs copy_lhs with sum, mean, max and min (no arg index). The layout is built once per
graph and tiling, on the graph's device, and kept with the graph.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ..algebra import REDUCERS
from ..graph import Graph
from .common import (
    ACCUMULATOR_TYPES,
    INDEX_TYPES,
    PRELUDE,
    SCALAR_TYPES,
    VECTOR_BYTES,
    Layout,
    identity_expr,
    indent,
    pow2_at_least,
)
from .spmm_codegen import SpmmAlgorithm, tile_merge_kernel
from .spmm_schedule import SpmmSchedule

KERNEL_NAME = "gspmm_output_tiled"
MERGE_KERNEL_NAME = "gspmm_output_tiled_merge"
WARP = 32
# Output rows and tile columns are 16-bit fields of an edge word.
_FIELD = 1 << 16
# Tile widths are multiples of this many rows of lhs, so every tile starts 16-byte
# aligned when lhs does.
_TILE_ALIGN = 256
# Output rows take at most this share of shared memory; the two tile buffers the rest.
_ROWS_SHARE = 0.75
# Edge words a lane holds per round (the round it walks and the next one, loaded ahead),
# for 4-byte messages; fewer for wider ones, whose registers a round of 8 would spill at
# 1,024 threads.
_ROUND = 8
# The most features the space and the default rule offer the skeleton (wider ones stage
# too much of lhs per edge; any count runs when forced).
MAX_FEATURES = 4
# Shared memory before the result rows: the two tile buffers' barriers (sm_90).
_BARRIER_BYTES = 16


def supports(algorithm: SpmmAlgorithm) -> bool:
    """Whether the skeleton runs ``algorithm``: copy_lhs of full-shape features, any
    reducer, no arg index (it keeps no edge positions)."""
    return (algorithm.op == "copy_lhs" and algorithm.lhs_layout is Layout.FULL
            and not algorithm.with_arg)


@dataclass(frozen=True)
class Tiling:
    """How a graph's rows and source columns are cut for one feature length and dtype.

    Attributes:
        block_rows: ``[row_ranges + 1]`` int64 on the CPU: row range ``r`` is output rows
            ``block_rows[r] .. block_rows[r + 1] - 1``.
        row_capacity: the most rows a range holds (a block's shared-memory result rows).
        tile_cols: rows of ``lhs`` per staged tile (a multiple of 256, at most 65536).
        tiles: staged tiles, ``ceil(num_src / tile_cols)``.
        column_groups: groups the tiles are cut into (the grid's blocks per row range).
        shared_bytes: dynamic shared memory per block: the tile buffers' barriers, the
            result rows, then two tile buffers.
        rows_bytes: the result rows' bytes, rounded up to 16.
    """

    block_rows: torch.Tensor
    row_capacity: int
    tile_cols: int
    tiles: int
    column_groups: int
    shared_bytes: int
    rows_bytes: int

    @property
    def row_ranges(self) -> int:
        return self.block_rows.numel() - 1

    @property
    def blocks(self) -> int:
        """The grid: every row range with every column group."""
        return self.row_ranges * self.column_groups

    @property
    def group_tiles(self) -> int:
        """Tiles of a column group (the last group may hold fewer, or none)."""
        return -(-self.tiles // self.column_groups)


def tiling_for(g: Graph, num_features: int, dtype: torch.dtype, sms: int,
               shared_limit: int, column_groups: int = 1) -> Tiling:
    """The tiling of ``g`` for ``num_features`` features of ``dtype``.

    Row ranges: ``ceil(sms / column_groups)`` of them, so that the grid has a block per
    SM, cut at equal edge counts; a range with more rows than 3/4 of shared memory holds
    is cut further into equal row ranges (then the grid takes more than one wave). Tiles:
    as wide as the shared memory the rows leave allows, for two buffers. ValueError when
    not even one row and two tiles of 256 rows fit.
    """
    acc_bytes = 8 if dtype == torch.float64 else 4
    row_bytes = num_features * acc_bytes
    tile_row_bytes = num_features * dtype.itemsize
    room = shared_limit - _BARRIER_BYTES
    least_tiles = 2 * _TILE_ALIGN * tile_row_bytes + 16  # and rows rounded up to 16 bytes
    capacity = min(_FIELD - 1, int(room * _ROWS_SHARE) // row_bytes, (room - least_tiles) // row_bytes)
    if capacity < 1:
        raise ValueError(f"the output-tiled skeleton cannot hold a row of {num_features} "
                         f"{dtype} features and two tiles in {shared_limit} bytes of shared memory")
    rowptr = g.rowptr.long().cpu()
    bounds = _capped(_equal_edge_bounds(rowptr, max(1, -(-sms // column_groups))), capacity)
    row_capacity = max(1, int((bounds[1:] - bounds[:-1]).max()))
    rows_bytes = -(-row_capacity * row_bytes // 16) * 16
    fit = (room - rows_bytes) // (2 * tile_row_bytes) // _TILE_ALIGN * _TILE_ALIGN
    padded_src = -(-max(1, g.num_src) // _TILE_ALIGN) * _TILE_ALIGN
    tile_cols = min(fit, _FIELD, padded_src)
    return Tiling(block_rows=bounds, row_capacity=row_capacity, tile_cols=tile_cols,
                  tiles=-(-max(1, g.num_src) // tile_cols), column_groups=column_groups,
                  shared_bytes=_BARRIER_BYTES + rows_bytes + 2 * tile_cols * tile_row_bytes,
                  rows_bytes=rows_bytes)


def _equal_edge_bounds(rowptr: torch.Tensor, blocks: int) -> torch.Tensor:
    """``[blocks + 1]`` row bounds that cut the CSR into ranges of about equal edges
    (rows with no edges, too, when there are no edges at all)."""
    num_rows, num_edges = rowptr.numel() - 1, int(rowptr[-1])
    blocks = min(blocks, max(1, num_rows))
    if num_edges == 0:
        return torch.arange(blocks + 1, dtype=torch.int64) * num_rows // blocks
    targets = torch.arange(blocks + 1, dtype=torch.int64) * num_edges // blocks
    bounds = torch.searchsorted(rowptr, targets)
    bounds[0], bounds[-1] = 0, num_rows
    return bounds


def _capped(bounds: torch.Tensor, capacity: int) -> torch.Tensor:
    """``bounds`` with every range of more than ``capacity`` rows cut into equal parts."""
    rows = bounds[1:] - bounds[:-1]
    parts = torch.clamp(-(-rows // capacity), min=1)
    if int(parts.max()) == 1:
        return bounds
    pieces = [bounds[:1]]
    for start, count, k in zip(bounds[:-1].tolist(), rows.tolist(), parts.tolist()):
        pieces.append(start + (torch.arange(1, k + 1, dtype=torch.int64) * count) // k)
    return torch.cat(pieces)


@dataclass(frozen=True)
class EdgeLayout:
    """The edges of a graph in the order the output-tiled kernel walks them.

    Attributes:
        words: ``[num_edges]`` int32 (read as uint32): ``(local row << 16) | local column``,
            lane-interleaved within each chunk.
        chunk_ptr: ``[row_ranges * tiles * warps + 1]`` (the graph's index dtype): chunk
            ``(r * tiles + t) * warps + w`` is ``words[chunk_ptr[i] : chunk_ptr[i + 1]]``.
        block_rows: the tiling's row bounds on the graph's device (index dtype).
    """

    words: torch.Tensor
    chunk_ptr: torch.Tensor
    block_rows: torch.Tensor


def build_layout(g: Graph, tiling: Tiling, warps: int) -> EdgeLayout:
    """Group the edges of ``g`` by (row range, tile, warp chunk) and interleave each
    chunk's lane segments (see the module docstring). Pure PyTorch on the graph's device;
    the same for any number of column groups."""
    device, index = g.device, g.index_dtype
    bounds = tiling.block_rows.to(device)
    row = g.csr_dst.long()
    col = g.col.long()
    block = torch.searchsorted(bounds, row, right=True) - 1
    local_row = row - bounds[block]
    tile = col // tiling.tile_cols
    segment = block * tiling.tiles + tile
    num_segments = tiling.row_ranges * tiling.tiles
    # Stable: a row's edges keep their CSR order, the order each run folds them in.
    order = torch.sort(segment * tiling.row_capacity + local_row, stable=True).indices
    seg_sorted, row_sorted = segment[order], local_row[order]
    seg_start = torch.zeros(num_segments + 1, dtype=torch.int64, device=device)
    torch.cumsum(torch.bincount(segment, minlength=num_segments), 0, out=seg_start[1:])
    chunk_start = _warp_chunks(seg_start, seg_sorted, row_sorted, warps)
    chunk_ptr = torch.cat([chunk_start.flatten(), seg_start[-1:]])
    sizes = chunk_ptr[1:] - chunk_ptr[:-1]
    if g.num_edges and int(sizes.max()) >= 2 ** 31:
        raise ValueError("a warp's chunk of the output-tiled layout holds 2**31 edges or more")
    position = _interleaved_positions(chunk_ptr, sizes)
    word = (row_sorted << 16) | (col[order] - tile[order] * tiling.tile_cols)
    words = torch.empty(g.num_edges, dtype=torch.int32, device=device)
    # the uint32 bit pattern in int32 storage
    words[position] = torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)
    return EdgeLayout(words=words, chunk_ptr=chunk_ptr.to(index), block_rows=bounds.to(index))


def _warp_chunks(seg_start: torch.Tensor, seg_sorted: torch.Tensor, row_sorted: torch.Tensor,
                 warps: int) -> torch.Tensor:
    """``[segments, warps]`` first sorted positions of each segment's warp chunks: the
    first row start at or after each ``w / warps`` share of the segment's edges."""
    num_edges = row_sorted.numel()
    device = row_sorted.device
    starts = seg_start[:-1]
    if num_edges == 0:
        return starts[:, None].expand(-1, warps).clone()
    is_start = torch.ones(num_edges, dtype=torch.bool, device=device)
    is_start[1:] = (row_sorted[1:] != row_sorted[:-1]) | (seg_sorted[1:] != seg_sorted[:-1])
    row_starts = torch.nonzero(is_start).flatten()
    counts = seg_start[1:] - starts
    shares = torch.arange(warps, device=device)
    targets = starts[:, None] + counts[:, None] * shares[None, :] // warps
    at = torch.searchsorted(row_starts, targets.flatten()).view(-1, warps)
    found = row_starts[at.clamp(max=row_starts.numel() - 1)]
    # No row starts between the target and the segment's end: the chunk is empty there.
    ends = seg_start[1:, None].expand(-1, warps)
    chunk = torch.where(at < row_starts.numel(), torch.minimum(found, ends), ends)
    chunk[:, 0] = starts
    return chunk


def _interleaved_positions(chunk_ptr: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """Where each sorted position goes: in a chunk of ``n`` edges the first ``r = n - 32(s
    - 1)`` lanes take ``s = ceil(n / 32)`` consecutive edges and the rest ``s - 1``, and
    lane ``l``'s ``k``-th edge is stored at ``k * 32 + l``."""
    num_edges = int(chunk_ptr[-1])
    device = chunk_ptr.device
    chunk = torch.repeat_interleave(torch.arange(sizes.numel(), device=device), sizes,
                                    output_size=num_edges)
    q = torch.arange(num_edges, device=device) - chunk_ptr[:-1][chunk]
    n = sizes[chunk]
    steps = (n + WARP - 1) // WARP
    full = n - WARP * (steps - 1)  # lanes that walk `steps` edges
    long_part = q < full * steps
    rest = q - full * steps
    shorter = torch.clamp(steps - 1, min=1)
    lane = torch.where(long_part, q // steps, full + rest // shorter)
    k = torch.where(long_part, q % steps, rest % shorter)
    return chunk_ptr[:-1][chunk] + k * WARP + lane


def _fold(reduce: str, into: str, value: str) -> str:
    """``into`` folded with ``value`` by the reducer, as an expression (max/min: NaN never
    wins, as in the one-pass kernels)."""
    if not REDUCERS[reduce].keeps_arg:
        return f"{into} + {value}"
    better = ">" if reduce == "max" else "<"
    return f"({value} {better} {into} ? {value} : {into})"


def _fold_into(reduce: str, into: str, value: str) -> str:
    """The statement that folds ``value`` into ``into``."""
    return f"{into} = {_fold(reduce, into, value)};"


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


def _round(algorithm: SpmmAlgorithm, schedule: SpmmSchedule) -> int:
    """Steps per round: :data:`_ROUND` for 4-byte messages, halved for each doubling
    beyond (a round holds each step's message and the prior sum of its row)."""
    acc_bytes = 8 if algorithm.dtype == torch.float64 else 4
    message = features_covered(schedule) * acc_bytes
    return max(2, _ROUND * 4 // max(4, message))


def _end_run(reduce: str) -> str:
    """Code that ends run ``run_row``: the run that began the lane's segment (its first
    row) is the lane's carry; any later run's row is the lane's alone, folded straight
    into shared memory."""
    return "\n".join([
        "if (run_row == first_row) {",
        indent(_each_feature("carry[o][i] = run[o][i];"), 4),
        "} else {",
        indent(_each_feature(_fold_into(reduce, "sums[run_row * num_features + f]", "run[o][i]")), 4),
        "}",
    ])


_HELPERS = r"""
namespace ot {

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Before the first tile: the two tile buffers' barriers (sm_90), visible to the copy engine.
__device__ __forceinline__ void start(unsigned long long* barriers) {
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n"
                     :: "r"(shared_address(barriers)) : "memory");
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n"
                     :: "r"(shared_address(barriers + 1)) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#endif
    __syncthreads();
}

// Copies `count` elements of lhs into a tile buffer. sm_90: one thread hands the whole
// aligned part to the bulk-copy engine, which signals the buffer's barrier as the bytes
// land; sm_80: every thread issues 16-byte asynchronous copies. Elements past the last
// whole 16 bytes (all of them when lhs is not 16-byte aligned) are copied by the threads
// one by one, visible after the next barrier.
template <typename T>
__device__ __forceinline__ void stage(T* __restrict__ to, const T* __restrict__ from, long long count,
                                      unsigned long long* barrier) {
    const bool aligned = (reinterpret_cast<unsigned long long>(from) & 15) == 0;
    const long long bytes = aligned ? count * (long long)sizeof(T) / 16 * 16 : 0;
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                     :: "r"(shared_address(barrier)), "r"(static_cast<unsigned>(bytes)) : "memory");
        if (bytes > 0) {
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                :: "r"(shared_address(to)), "l"(from), "r"(static_cast<unsigned>(bytes)),
                   "r"(shared_address(barrier))
                : "memory");
        }
    }
#else
    for (long long i = threadIdx.x; i < bytes / 16; i += blockDim.x) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                     :: "r"(shared_address(reinterpret_cast<unsigned char*>(to) + i * 16)),
                        "l"(reinterpret_cast<const unsigned char*>(from) + i * 16)
                     : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
    for (long long i = bytes / (long long)sizeof(T) + threadIdx.x; i < count; i += blockDim.x) {
        to[i] = from[i];
    }
}

// Waits until walk step t's tile has landed in this thread's view: its buffer's barrier
// is past the phase of that step (sm_90), or this thread's copies are done (sm_80; the
// next tile's are issued after the barrier that follows).
__device__ __forceinline__ void landed(unsigned long long* barriers, long long t) {
#if __CUDA_ARCH__ >= 900
    const unsigned address = shared_address(barriers + (t & 1));
    const unsigned parity = static_cast<unsigned>((t >> 1) & 1);
    unsigned done = 0;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(address), "r"(parity) : "memory");
    } while (!done);
#else
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Lane i loads the bounds of this warp's chunk at walk step first + i (0 past the last):
// the chunk of tile `first_tile + step` is at chunks[tile * warps].
template <typename I>
__device__ __forceinline__ void bounds_batch(const I* __restrict__ chunks, long long first,
                                             long long first_tile, long long steps, int warps,
                                             int lane, long long& lo, long long& hi) {
    lo = hi = 0;
    if (first + lane < steps) {
        const long long at = (first_tile + first + lane) * warps;
        lo = chunks[at];
        hi = chunks[at + 1];
    }
}

// This lane's part of the chunk at words[lo, hi): its first word, the warp's steps, the
// lane's edges (the first n - 32 (steps - 1) lanes walk `steps` edges, the rest one fewer).
__device__ __forceinline__ void split(long long lo, long long hi, int lane,
                                      long long& base, int& steps, int& mine) {
    base = lo;
    const int n = static_cast<int>(hi - lo);
    steps = (n + 31) / 32;
    mine = lane < n - 32 * (steps - 1) ? steps : steps - 1;
}

}  // namespace ot
"""


@functools.lru_cache(maxsize=256)
def generate(algorithm: SpmmAlgorithm, schedule: SpmmSchedule, num_features: int) -> str:
    """CUDA C++ of the output-tiled kernel ``gspmm_output_tiled`` (``schedule.output_tile``)
    for ``num_features`` features (a constant of the program: every shared-memory address
    and feature loop is resolved at compile time) and, for ``column_groups`` > 1, the merge
    ``gspmm_output_tiled_merge``.

    Block ``(r, c)`` (``blockIdx.x = r * column_groups + c``) owns output rows
    ``block_rows[r] ..`` and walks the tiles of column group c, in each the chunks of edge
    words of (r, tile); see the module docstring.
    """
    schedule.validate()
    if not schedule.output_tile:
        raise ValueError(f"schedule {schedule} is not output-tiled")
    if not supports(algorithm):
        raise ValueError(f"the output-tiled skeleton runs copy_lhs of full-shape features "
                         f"without arg indices, not {algorithm}")
    if not 0 < num_features <= features_covered(schedule):
        raise ValueError(f"schedule {schedule} carries {features_covered(schedule)} features per "
                         f"edge (vector_width * outputs_per_thread), not {num_features}")
    identity = identity_expr(REDUCERS[algorithm.reduce].identity)
    finish = "acc / A(degree)" if algorithm.reduce == "mean" else "acc"
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
        indent(_each_feature(f"sums[ending * num_features + f] = {_fold(algorithm.reduce, 'prior[j][o][i]', 'run[o][i]')};"), 4),
        "}",
        _each_feature(f"const A message = k0 + j < mine ? m[j][o][i] : {identity};\n"
                      f"run[o][i] = ends ? message : {_fold(algorithm.reduce, 'run[o][i]', 'message')};"),
    ])
    scan_step = "\n".join([
        "const A other = __shfl_up_sync(FULL, carry[o][i], d);",
        f"if (lane - d >= first_lane) {{ {_fold_into(algorithm.reduce, 'carry[o][i]', 'other')} }}",
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
constexpr int W = {schedule.rows_per_block};  // warps per block: chunks per (row range, tile)
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
A* __restrict__ sums = reinterpret_cast<A*>(smem + {_BARRIER_BYTES});  // [rows][num_features]
T* __restrict__ tiles = reinterpret_cast<T*>(smem + {_BARRIER_BYTES} + rows_bytes);  // 2 x [tile_cols][num_features]
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
{indent(_end_run(algorithm.reduce), 8)}
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
{indent(_each_feature(_fold_into(algorithm.reduce, "sums[carry_row * num_features + f]", "carry[o][i]")), 8)}
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
    merge = tile_merge_kernel(algorithm, MERGE_KERNEL_NAME) if schedule.column_groups > 1 else ""
    return f"""// gsparse g-SpMM, output-tiled: {algorithm}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {INDEX_TYPES[algorithm.index_dtype]};
using T = {SCALAR_TYPES[algorithm.dtype]};
using A = {ACCUMULATOR_TYPES[algorithm.dtype]};
{_HELPERS}
// One block per SM: result rows and the two tile buffers fill shared memory.
extern "C" __global__ void __launch_bounds__({schedule.threads}, 1)
{KERNEL_NAME}(const unsigned* __restrict__ words, const I* __restrict__ chunk_ptr,
      const I* __restrict__ block_rows, const I* __restrict__ rowptr,
      const T* __restrict__ lhs, T* __restrict__ out, A* __restrict__ partial,
      long long num_rows, long long num_src, long long num_tiles, long long group_tiles,
      int tile_cols, int rows_bytes)
{{
{indent(body, 4)}
}}
{merge}"""


def features_covered(schedule: SpmmSchedule) -> int:
    """Features one lane carries per edge."""
    return schedule.vector_width * schedule.outputs_per_thread


def warps_for(dtype: torch.dtype) -> tuple[int, int]:
    """Warps per block worth running for ``dtype``: 16 and 32 (8 and 16 for float64, whose
    wider registers would spill at 1,024 threads). The default takes the first for short
    rows, the second for long ones."""
    return (8, 16) if dtype == torch.float64 else (16, 32)


def schedule_for(num_features: int, dtype: torch.dtype, warps: int, column_groups: int,
                 vector_ok: int = 8) -> SpmmSchedule:
    """The output-tiled schedule of ``warps`` warps and ``column_groups`` groups for
    ``num_features`` features: vectors as wide as 16 bytes, ``vector_ok`` and the
    feature count allow, and enough of them (a power of two) to cover every feature."""
    widest = min(vector_ok, VECTOR_BYTES // dtype.itemsize)
    vector = max(v for v in (1, 2, 4) if v <= widest and num_features % v == 0)
    return SpmmSchedule(rows_per_block=warps, feature_lanes=1, edge_lanes=WARP, vector_width=vector,
                        outputs_per_thread=pow2_at_least(math.ceil(num_features / vector)),
                        output_tile=True, column_groups=column_groups)


def schedules_for(num_features: int, dtype: torch.dtype) -> list[SpmmSchedule]:
    """The output-tiled schedules worth sweeping for ``num_features`` of ``dtype`` (none
    beyond :data:`MAX_FEATURES`): :func:`warps_for` x 1, 2 or 4 column groups."""
    if num_features > MAX_FEATURES:
        return []
    return [schedule_for(num_features, dtype, warps, groups)
            for warps in warps_for(dtype) for groups in (1, 2, 4)]
