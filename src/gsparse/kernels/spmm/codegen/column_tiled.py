"""The column-tiled g-SpMM skeleton: blocks stage a tile of ``lhs`` in shared memory and
fold the edges whose source falls in it into per-tile partial rows, which a second kernel
folds in tile order (see :class:`~gsparse.kernels.spmm.schedule.ColumnTiled`)."""

from __future__ import annotations

from ...source import Program, Signature, indent
from ..schedule import ColumnTiled
from ..task import SpmmAlgorithm
from .walk import (
    accumulators,
    edge_id,
    merge_lanes,
    message_body,
    partial_write_back,
    scalar_loads,
    tile_merge_kernel,
    tile_merge_signature,
    two_pass_header,
)

KERNEL = "gspmm_tiled"
MERGE = "gspmm_merge"

FIRST_PASS = Signature(KERNEL, [
    ("const I* __restrict__", "tile_rowptr"), ("const unsigned short* __restrict__", "local_col"),
    ("const I* __restrict__", "position"), ("const I* __restrict__", "eid"),
    ("const I* __restrict__", "row_order"),
    ("const T* __restrict__", "lhs_global"), ("const T* __restrict__", "rhs"),
    ("const int* __restrict__", "lhs_offset"), ("const int* __restrict__", "rhs_offset"),
    ("A* __restrict__", "partial"), ("long long* __restrict__", "partial_arg"),
    ("long long", "num_rows"), ("long long", "num_src"), ("int", "num_features"),
    ("long long", "lhs_len"), ("long long", "rhs_len"), ("long long", "num_tiles"),
    ("long long", "block_rows"),
])
MERGE_PASS = tile_merge_signature(MERGE)


# 16-byte copies each thread of the column-tiled skeleton has in flight while staging.
_STAGING_IN_FLIGHT = 4


def _staging() -> list[str]:
    """Code that copies the tile's ``count`` elements of ``lhs`` into shared memory.

    A copy that waits for each element before loading the next is bound by L2 latency,
    not bandwidth: 56 dependent loads per thread for a 224 KB fp32 tile. So each thread
    keeps several 16-byte loads in flight (64 KB per SM at 1,024 threads), when ``lhs``
    is 16-byte aligned (a tile begins a multiple of 1,024 rows in, so then the tile is
    too), and copies the elements a vector does not cover one by one.
    """
    return [
        "const T* tile_src = lhs_global + first * lhs_len;",
        "long long vector_elems = 0;",
        "if ((reinterpret_cast<unsigned long long>(tile_src) & 15) == 0) {",
        "    constexpr int PER = 16 / sizeof(T);",
        f"    constexpr int AHEAD = {_STAGING_IN_FLIGHT};",
        "    const long long vectors = count / PER;",
        "    const uint4* src = reinterpret_cast<const uint4*>(tile_src);",
        "    uint4* dst = reinterpret_cast<uint4*>(staged);",
        "    for (long long i0 = threadIdx.x; i0 < vectors; i0 += AHEAD * blockDim.x) {",
        "        uint4 v[AHEAD];",
        "#pragma unroll",
        "        for (int k = 0; k < AHEAD; ++k) {",
        "            const long long i = i0 + k * (long long)blockDim.x;",
        "            if (i < vectors) v[k] = src[i];",
        "        }",
        "#pragma unroll",
        "        for (int k = 0; k < AHEAD; ++k) {",
        "            const long long i = i0 + k * (long long)blockDim.x;",
        "            if (i < vectors) dst[i] = v[k];",
        "        }",
        "    }",
        "    vector_elems = vectors * PER;",
        "}",
        "for (long long i = vector_elems + threadIdx.x; i < count; i += blockDim.x) {",
        "    tile_lhs[i] = tile_src[i];",
        "}",
    ]


def generate(algorithm: SpmmAlgorithm, schedule: ColumnTiled) -> Program:
    """The program of ``gspmm_tiled`` and its merge ``gspmm_merge``.

    Block (x, y) stages rows ``[y * column_tile, (y + 1) * column_tile)`` of ``lhs`` in
    shared memory and folds, for ``block_rows`` output rows, the edges whose source falls
    in that tile; edges are pre-grouped by (tile, row) with 16-bit local source indices and
    their original CSR position (for ``rhs``, edge ids and arg). Per-tile partial rows are
    then folded by the merge in tile order.
    """
    if algorithm.lhs_layout is None:
        raise ValueError(f"the column-tiled skeleton stages lhs; {algorithm.op} reads none")
    keep_arg = algorithm.with_arg
    init = accumulators(algorithm)
    body = message_body(algorithm)
    walk = "\n".join([
        "for (long long q = start + e_lane; q < end; q += EL) {",
        "    const long long u = local_col[q];",
        "    const long long p = position[q];  // the edge's CSR position",
        f"    const long long e = {edge_id(algorithm, 'p')};",
        *("    " + line for line in scalar_loads(algorithm, "u", "e")),
        indent(body, 4),
        "}",
    ])
    row = "(long long)row_order[slot]" if schedule.degree_sorted else "slot"
    per_row = [
        f"const long long row = {row};",
        "const long long start = tile_rowptr[tile * num_rows + row];",
        "const long long end = tile_rowptr[tile * num_rows + row + 1];",
        *init,
        walk,
    ]
    if schedule.edge_lanes > 1:
        per_row.append(merge_lanes(algorithm.reducer, keep_arg))
    per_row.append(partial_write_back(algorithm, "tile * num_rows + row"))
    body_lines = [
        f"constexpr int FL = {schedule.feature_lanes};  // feature lanes",
        f"constexpr int EL = {schedule.edge_lanes};  // edge lanes",
        "constexpr int G = FL * EL;  // threads per row",
        f"constexpr int V = {schedule.vector_width};  // features per vector access",
        f"constexpr int O = {schedule.outputs_per_thread};  // vectors per thread",
        f"constexpr long long TILE = {schedule.column_tile};  // lhs rows in shared memory",
        "extern __shared__ __align__(16) unsigned char staged[];",
        "const long long num_slices = gridDim.y / num_tiles;",
        "const long long tile = blockIdx.y / num_slices;",
        "const int slice = blockIdx.y % num_slices;",
        "const long long first = tile * TILE;",
        "const long long count = min(TILE, num_src - first) * lhs_len;",
        "T* tile_lhs = reinterpret_cast<T*>(staged);",
        *_staging(),
        "__syncthreads();",
        "// Below, `lhs` is the staged tile and `u` a row of it.",
        "const T* __restrict__ lhs = tile_lhs;",
        "const int lane = threadIdx.x % G;",
        "const int f_lane = lane % FL;",
        "const int e_lane = lane / FL;",
        "const unsigned mask = G == 32 ? 0xffffffffu\n"
        "                              : ((1u << G) - 1u) << ((threadIdx.x % 32) / G * G);",
        "(void)mask; (void)e_lane;",
        f"const int f_base = slice * {schedule.feature_slice} + f_lane * V;",
        "const long long last = min(num_rows, ((long long)blockIdx.x + 1) * block_rows);",
        "for (long long slot = (long long)blockIdx.x * block_rows + threadIdx.x / G; slot < last;\n"
        "     slot += blockDim.x / G) {",
        indent("\n".join(per_row), 4),
        "}",
    ]
    source = f"""{two_pass_header("column-tiled", algorithm, schedule)}
// One block per SM: the staged tile fills shared memory.
{FIRST_PASS.declaration(bounds=(schedule.threads, 1))}
{{
{indent(chr(10).join(body_lines), 4)}
}}

{tile_merge_kernel(algorithm, MERGE_PASS)}"""
    return Program(source, {KERNEL: FIRST_PASS, MERGE: MERGE_PASS},
                   f"{algorithm} | schedule {schedule}")
