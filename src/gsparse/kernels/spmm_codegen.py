"""g-SpMM code generation: (algorithm, schedule, dtypes) -> CUDA source. Pure; no GPU needed.

The algorithm — the message ``a ⊕ b`` and the reducer Φ — is spliced as inline device code
into a skeleton whose loops the schedule shapes (see :mod:`.spmm_schedule`). The one-pass
skeleton (:func:`generate`) has one kernel signature for every program, so one launcher
serves them all::

    gspmm(rowptr, col, eid, row_order, lhs, rhs, lhs_offset, rhs_offset,
          out, arg_u, arg_e, num_rows, num_features, lhs_len, rhs_len)

The column-tiled (:func:`generate_tiled`) and split-row (:func:`generate_split`) skeletons
leave unfinished partial results that a second kernel of the same program merges in a
fixed order. Unused pointers are null. Offsets into feature arrays are 64-bit: ``num_edges *
num_features`` passes 2**31 on the graphs we serve.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ..algebra import BINARY_OPS, REDUCERS
from .common import (
    ACCUMULATOR_TYPES,
    INDEX_TYPES,
    PRELUDE,
    SCALAR_TYPES,
    Layout,
    identity_expr,
    indent,
)
from .spmm_schedule import SpmmSchedule

KERNEL_NAME = "gspmm"


@dataclass(frozen=True)
class SpmmAlgorithm:
    """What to compute, and the facts about the operands that the code is specialised on.

    Attributes:
        op: ⊕, a key of :data:`gsparse.algebra.BINARY_OPS` valid for g-SpMM.
        reduce: Φ, a key of :data:`gsparse.algebra.REDUCERS`.
        lhs_layout, rhs_layout: how each used operand maps onto the output features
            (None for an operand the op does not read).
        dtype: feature dtype; index_dtype: int32 or int64.
        has_eid: edge ids differ from CSR positions (read ``eid[p]``).
        with_arg: max/min also write the winning source node and edge of each output.
    """

    op: str
    reduce: str
    lhs_layout: Layout | None
    rhs_layout: Layout | None
    dtype: torch.dtype
    index_dtype: torch.dtype
    has_eid: bool
    with_arg: bool = False

    def __post_init__(self) -> None:
        binop = BINARY_OPS[self.op]
        if (self.lhs_layout is not None) != binop.uses_lhs:
            raise ValueError(f"op {self.op!r} {'reads' if binop.uses_lhs else 'ignores'} lhs")
        if (self.rhs_layout is not None) != binop.uses_rhs:
            raise ValueError(f"op {self.op!r} {'reads' if binop.uses_rhs else 'ignores'} rhs")
        if self.with_arg and not REDUCERS[self.reduce].keeps_arg:
            raise ValueError(f"reduce {self.reduce!r} keeps no arg index")

    def __str__(self) -> str:
        layouts = "/".join(
            f"{name}:{layout.value}"
            for name, layout in (("lhs", self.lhs_layout), ("rhs", self.rhs_layout))
            if layout is not None
        )
        return (
            f"{self.op}.{self.reduce} {layouts} {str(self.dtype).removeprefix('torch.')} "
            f"{str(self.index_dtype).removeprefix('torch.')}"
            f"{' eid' if self.has_eid else ''}{' arg' if self.with_arg else ''}"
        )


@dataclass(frozen=True)
class LaunchGeometry:
    grid: tuple[int, int]
    block: int


def launch_geometry(schedule: SpmmSchedule, num_rows: int, num_features: int) -> LaunchGeometry:
    """Blocks over (row groups, feature slices) and threads per block."""
    blocks_x = -(-num_rows // schedule.rows_per_block)
    blocks_y = -(-num_features // schedule.feature_slice)
    return LaunchGeometry((blocks_x, blocks_y), schedule.threads)


def _operand_load(name: str, layout: Layout, row: str) -> str:
    """Code that fills ``{name[0]}[V]`` with the operand's features ``f .. f+V-1``."""
    target = {"lhs": "a", "rhs": "b"}[name]
    if layout is Layout.FULL:
        return f"gs::load<V>({name} + {row} * {name}_len + f, {target});"
    if layout is Layout.SCALAR:
        return f"for (int i = 0; i < V; ++i) {target}[i] = {target}_scalar;"
    return (
        f"for (int i = 0; i < V; ++i) "
        f"{target}[i] = gs::to_acc({name}[{row} * {name}_len + {name}_offset[f + i]]);"
    )


def _combine(reduce: str, with_arg: bool) -> str:
    """Fold message ``m`` at CSR position ``p`` into ``acc[o][i]`` (and ``arg[o][i]``)."""
    if not REDUCERS[reduce].keeps_arg:
        return "acc[o][i] += m;"
    better = "m > acc[o][i]" if reduce == "max" else "m < acc[o][i]"
    if with_arg:
        # Strictly better, so the first edge of the row wins ties; arg < 0 takes the first
        # message even when it equals the identity (an all -inf row still names an edge).
        return f"if ({better} || arg[o][i] < 0) {{ acc[o][i] = m; arg[o][i] = p; }}"
    return f"if ({better}) acc[o][i] = m;"


def _merge_lanes(reduce: str, with_arg: bool) -> str:
    """Code that merges the partial results of the edge lanes through warp shuffles."""
    if not REDUCERS[reduce].keeps_arg:
        step = "acc[o][i] += __shfl_xor_sync(mask, acc[o][i], offset, G);"
    elif with_arg:
        better = "other > acc[o][i]" if reduce == "max" else "other < acc[o][i]"
        step = (
            "const A other = __shfl_xor_sync(mask, acc[o][i], offset, G);\n"
            "const long long other_arg = __shfl_xor_sync(mask, arg[o][i], offset, G);\n"
            "// The earliest CSR position wins ties, as in a sequential walk of the row.\n"
            f"if (other_arg >= 0 && (arg[o][i] < 0 || {better} ||\n"
            "                       (other == acc[o][i] && other_arg < arg[o][i]))) {\n"
            "    acc[o][i] = other;\n"
            "    arg[o][i] = other_arg;\n"
            "}"
        )
    else:
        better = "other > acc[o][i]" if reduce == "max" else "other < acc[o][i]"
        step = (
            "const A other = __shfl_xor_sync(mask, acc[o][i], offset, G);\n"
            f"if ({better}) acc[o][i] = other;"
        )
    return (
        "#pragma unroll\n"
        "for (int offset = G / 2; offset >= FL; offset /= 2) {\n"
        "#pragma unroll\n"
        "    for (int o = 0; o < O; ++o) {\n"
        "#pragma unroll\n"
        "        for (int i = 0; i < V; ++i) {\n"
        f"{indent(step, 12)}\n"
        "        }\n"
        "    }\n"
        "}"
    )


def _message_body(algorithm: SpmmAlgorithm) -> str:
    """Code that folds the message of edge (u, e) at CSR position p into the accumulators.

    Expects ``u``, ``e``, ``p`` and, for SCALAR operands, ``a_scalar`` / ``b_scalar``.
    """
    binop = BINARY_OPS[algorithm.op]
    loads = []
    if algorithm.lhs_layout is not None:
        loads += ["A a[V];", _operand_load("lhs", algorithm.lhs_layout, "u")]
    if algorithm.rhs_layout is not None:
        loads += ["A b[V];", _operand_load("rhs", algorithm.rhs_layout, "e")]
    combine = _combine(algorithm.reduce, algorithm.with_arg)
    return (
        "#pragma unroll\n"
        "for (int o = 0; o < O; ++o) {\n"
        "    const int f = f_base + o * FL * V;\n"
        "    if (f < num_features) {\n"
        f"{indent(chr(10).join(loads), 8)}\n"
        "#pragma unroll\n"
        "        for (int i = 0; i < V; ++i) {\n"
        f"            const A m = {_indexed_expr(binop.cuda_expr)};\n"
        f"            {combine}\n"
        "        }\n"
        "    }\n"
        "}"
    )


def _indexed_expr(expr: str) -> str:
    """``a + b`` -> ``a[i] + b[i]``: the table's expression over element ``i``."""
    out = []
    for token in expr.split(" "):
        out.append(f"{token}[i]" if token in ("a", "b") else token)
    return " ".join(out)


def _scalar_loads(algorithm: SpmmAlgorithm, u: str, e: str) -> list[str]:
    lines = []
    if algorithm.lhs_layout is Layout.SCALAR:
        lines.append(f"const A a_scalar = gs::to_acc(lhs[{u}]);")
    if algorithm.rhs_layout is Layout.SCALAR:
        lines.append(f"const A b_scalar = gs::to_acc(rhs[{e}]);")
    return lines


def _edge_id(algorithm: SpmmAlgorithm, p: str) -> str:
    return f"(long long)eid[{p}]" if algorithm.has_eid else p


def _edge_loop(algorithm: SpmmAlgorithm, schedule: SpmmSchedule) -> str:
    body = _message_body(algorithm)
    if not schedule.index_tile:
        # Each lane first loads the indices of its next NNZ edges, then gathers their
        # features: NNZ independent loads in flight per lane instead of one dependent pair.
        fetch = [
            "const long long p = p0 + k * EL;",
            "if (p < end) {",
            "    tile_u[k] = col[p];",
            f"    tile_e[k] = {_edge_id(algorithm, 'p')};",
            "}",
        ]
        lines = [
            "const long long p = p0 + k * EL;",
            "if (p < end) {",
            "    const long long u = tile_u[k];",
            "    const long long e = tile_e[k];",
            *("    " + line for line in _scalar_loads(algorithm, "u", "e")),
            indent(body, 4),
            "}",
        ]
        return (
            "for (long long p0 = start + e_lane; p0 < end; p0 += EL * NNZ) {\n"
            "    long long tile_u[NNZ], tile_e[NNZ];\n"
            "#pragma unroll\n"
            "    for (int k = 0; k < NNZ; ++k) {\n"
            f"{indent(chr(10).join(fetch), 8)}\n"
            "    }\n"
            "#pragma unroll\n"
            "    for (int k = 0; k < NNZ; ++k) {\n"
            f"{indent(chr(10).join(lines), 8)}\n"
            "    }\n"
            "}"
        )
    # One coalesced load of the next G indices per group, then a broadcast per edge.
    tile_loads = ["long long tile_u = 0, tile_e = 0;"]
    fetch = ["tile_u = col[mine];", f"tile_e = {_edge_id(algorithm, 'mine')};"]
    broadcast = [
        "const long long u = __shfl_sync(mask, tile_u, j, G);",
        "const long long e = __shfl_sync(mask, tile_e, j, G);",
        "const long long p = base + j;",
    ]
    if algorithm.rhs_layout is Layout.SCALAR:
        tile_loads.append("A tile_b = 0;")
        fetch.append("tile_b = gs::to_acc(rhs[tile_e]);")
        broadcast.append("const A b_scalar = __shfl_sync(mask, tile_b, j, G);")
    if algorithm.lhs_layout is Layout.SCALAR:
        broadcast.append("const A a_scalar = gs::to_acc(lhs[u]);")
    return (
        "for (long long base = start; base < end; base += G) {\n"
        f"{indent(chr(10).join(tile_loads), 4)}\n"
        "    const long long mine = base + lane;\n"
        "    if (mine < end) {\n"
        f"{indent(chr(10).join(fetch), 8)}\n"
        "    }\n"
        "    const int count = (int)min((long long)G, end - base);\n"
        "#pragma unroll NNZ\n"
        "    for (int j = 0; j < count; ++j) {\n"
        f"{indent(chr(10).join(broadcast), 8)}\n"
        f"{indent(body, 8)}\n"
        "    }\n"
        "}"
    )


def _write_back(algorithm: SpmmAlgorithm) -> str:
    if algorithm.reduce == "mean":
        value = "degree == 0 ? A(0) : acc[o][i] / A(degree)"
    else:
        value = "degree == 0 ? A(0) : acc[o][i]"
    lines = [
        "A result[V];",
        "#pragma unroll",
        f"for (int i = 0; i < V; ++i) result[i] = {value};",
        "gs::store<V>(out + row * num_features + f, result);",
    ]
    if algorithm.with_arg:
        lines += [
            "#pragma unroll",
            "for (int i = 0; i < V; ++i) {",
            "    const long long q = arg[o][i];",
            "    arg_u[row * num_features + f + i] = q < 0 ? -1 : (long long)col[q];",
            f"    arg_e[row * num_features + f + i] = q < 0 ? -1 : {_edge_id(algorithm, 'q')};",
            "}",
        ]
    return _each_output_of_lane_zero(lines, before="    const long long degree = end - start;\n")


def _each_output_of_lane_zero(lines: list[str], before: str = "") -> str:
    """``lines`` run for each in-range output vector ``o`` (feature ``f``) of edge lane 0,
    which holds the row's merged result."""
    return (
        "if (e_lane == 0) {\n"
        f"{before}"
        "#pragma unroll\n"
        "    for (int o = 0; o < O; ++o) {\n"
        "        const int f = f_base + o * FL * V;\n"
        "        if (f < num_features) {\n"
        f"{indent(chr(10).join(lines), 12)}\n"
        "        }\n"
        "    }\n"
        "}"
    )


def _accumulators(algorithm: SpmmAlgorithm) -> list[str]:
    """Declarations of ``acc[O][V]`` at the reducer's identity (and ``arg`` at -1)."""
    identity = identity_expr(REDUCERS[algorithm.reduce].identity)
    return [
        "A acc[O][V];",
        *(["long long arg[O][V];"] if algorithm.with_arg else []),
        "#pragma unroll",
        "for (int o = 0; o < O; ++o) {",
        "#pragma unroll",
        "    for (int i = 0; i < V; ++i) {",
        f"        acc[o][i] = {identity};",
        *(["        arg[o][i] = -1;"] if algorithm.with_arg else []),
        "    }",
        "}",
    ]


def _group_walk(algorithm: SpmmAlgorithm, schedule: SpmmSchedule, locate: list[str]) -> list[str]:
    """The one-pass skeleton up to a group's merged result (in edge lane 0).

    ``locate`` turns the group's ``slot`` into the ``row`` it writes and the CSR range
    ``[start, end)`` it walks (or returns, for slots past the last).
    """
    lines = [
        f"constexpr int FL = {schedule.feature_lanes};  // feature lanes",
        f"constexpr int EL = {schedule.edge_lanes};  // edge lanes",
        "constexpr int G = FL * EL;  // threads per row",
        f"constexpr int V = {schedule.vector_width};  // features per vector access",
        f"constexpr int O = {schedule.outputs_per_thread};  // vectors per thread",
        f"constexpr int NNZ = {schedule.nnz_tile};  // edges in flight per lane",
        f"constexpr int ROWS = {schedule.rows_per_block};",
        "const int lane = threadIdx.x % G;",
        "const int f_lane = lane % FL;",
        "const int e_lane = lane / FL;",
        "// The lanes of this thread's group: shuffles must name exactly them.",
        "const unsigned mask = G == 32 ? 0xffffffffu\n"
        "                              : ((1u << G) - 1u) << ((threadIdx.x % 32) / G * G);",
        "(void)mask; (void)e_lane;",
        "const long long slot = (long long)blockIdx.x * ROWS + threadIdx.x / G;",
        *locate,
        f"const int f_base = blockIdx.y * {schedule.feature_slice} + f_lane * V;",
        *_accumulators(algorithm),
        _edge_loop(algorithm, schedule),
    ]
    if schedule.edge_lanes > 1:
        lines.append(_merge_lanes(algorithm.reduce, algorithm.with_arg))
    return lines


@functools.lru_cache(maxsize=4096)
def generate(algorithm: SpmmAlgorithm, schedule: SpmmSchedule) -> str:
    """CUDA C++ of the g-SpMM kernel ``gspmm`` for ``algorithm`` under ``schedule``."""
    schedule.validate()
    if schedule.row_split:
        raise ValueError(f"schedule {schedule} splits rows: generate_split builds its program")
    row = "(long long)row_order[slot]" if schedule.degree_sorted else "slot"
    locate = [
        "if (slot >= num_rows) return;  // whole groups leave together",
        f"const long long row = {row};",
        "const long long start = rowptr[row];",
        "const long long end = rowptr[row + 1];",
    ]
    body = [
        f"using T = {SCALAR_TYPES[algorithm.dtype]};",
        f"using A = {ACCUMULATOR_TYPES[algorithm.dtype]};",
        *_group_walk(algorithm, schedule, locate),
        _write_back(algorithm),
    ]
    index = INDEX_TYPES[algorithm.index_dtype]
    return f"""// gsparse g-SpMM: {algorithm}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {index};

extern "C" __global__ void __launch_bounds__({schedule.threads})
{KERNEL_NAME}(const I* __restrict__ rowptr, const I* __restrict__ col,
      const I* __restrict__ eid, const I* __restrict__ row_order,
      const {SCALAR_TYPES[algorithm.dtype]}* __restrict__ lhs,
      const {SCALAR_TYPES[algorithm.dtype]}* __restrict__ rhs,
      const int* __restrict__ lhs_offset, const int* __restrict__ rhs_offset,
      {SCALAR_TYPES[algorithm.dtype]}* __restrict__ out,
      long long* __restrict__ arg_u, long long* __restrict__ arg_e,
      long long num_rows, int num_features, long long lhs_len, long long rhs_len)
{{
{indent(chr(10).join(body), 4)}
}}
"""


TILED_KERNEL_NAME = "gspmm_tiled"
MERGE_KERNEL_NAME = "gspmm_merge"


def _partial_write_back(algorithm: SpmmAlgorithm, slot: str) -> str:
    """Edge lane 0 stores the group's result, unfinished (accumulator type, no mean
    division), as partial result ``slot`` of ``[slots, num_features]``."""
    lines = [
        f"const long long at = ({slot}) * num_features + f;",
        "#pragma unroll",
        "for (int i = 0; i < V; ++i) {",
        "    partial[at + i] = acc[o][i];",
        *(["    partial_arg[at + i] = arg[o][i];"] if algorithm.with_arg else []),
        "}",
    ]
    return _each_output_of_lane_zero(lines)


def tile_merge_kernel(algorithm: SpmmAlgorithm, name: str) -> str:
    """The merge of a first pass that leaves ``num_tiles`` partial results per output
    element, ``num_rows * num_features`` apart (a column-tiled kernel's tiles, an
    output-tiled kernel's column groups), folded in tile order."""
    return _merge_kernel(algorithm, name, "long long num_rows, int num_features, long long num_tiles", [
        "if (t >= num_rows * num_features) return;",
        "const long long i = t, row = t / num_features;",
        "const long long first = 0, last = num_tiles, base = i, stride = num_rows * num_features;",
    ])


def _merge_kernel(algorithm: SpmmAlgorithm, name: str, parameters: str, locate: list[str]) -> str:
    """A kernel that folds the partial results of each output element in order and writes
    the output: deterministic, ties to the lowest CSR position, like the one-pass kernel.

    Thread ``t`` runs ``locate``, which returns past the last element or names output
    element ``i`` of row ``row`` and its partial results: ``first`` to ``last - 1``, result
    ``k`` at ``base + k * stride``. ``parameters`` follow the ones every merge takes.
    """
    reducer = REDUCERS[algorithm.reduce]
    if not reducer.keeps_arg:
        fold = "acc += partial[at];"
    else:
        better = "other > acc" if algorithm.reduce == "max" else "other < acc"
        if algorithm.with_arg:
            fold = (
                "const A other = partial[at];\n"
                "const long long other_arg = partial_arg[at];\n"
                f"if (other_arg >= 0 && (arg < 0 || {better} || (other == acc && other_arg < arg))) {{\n"
                "    acc = other;\n"
                "    arg = other_arg;\n"
                "}"
            )
        else:
            fold = f"const A other = partial[at];\nif ({better}) acc = other;"
    finish = "acc / A(degree)" if algorithm.reduce == "mean" else "acc"
    lines = [
        "const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
        *locate,
        "const long long degree = (long long)rowptr[row + 1] - rowptr[row];",
        "A acc = partial[base + first * stride];",
        *(["long long arg = partial_arg[base + first * stride];"] if algorithm.with_arg else []),
        "for (long long k = first + 1; k < last; ++k) {",
        "    const long long at = base + k * stride;",
        indent(fold, 4),
        "}",
        f"out[i] = gs::from_acc<T>(degree == 0 ? A(0) : {finish});",
    ]
    if algorithm.with_arg:
        lines += [
            "arg_u[i] = degree == 0 || arg < 0 ? -1 : (long long)col[arg];",
            f"arg_e[i] = degree == 0 || arg < 0 ? -1 : {_edge_id(algorithm, 'arg')};",
        ]
    return (
        f'extern "C" __global__ void {name}(\n'
        "      const I* __restrict__ rowptr, const I* __restrict__ col, const I* __restrict__ eid,\n"
        "      const A* __restrict__ partial, const long long* __restrict__ partial_arg,\n"
        "      T* __restrict__ out, long long* __restrict__ arg_u, long long* __restrict__ arg_e,\n"
        f"      {parameters})\n"
        "{\n"
        f"{indent(chr(10).join(lines), 4)}\n"
        "}\n"
    )


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


@functools.lru_cache(maxsize=1024)
def generate_tiled(algorithm: SpmmAlgorithm, schedule: SpmmSchedule) -> str:
    """CUDA C++ of the column-tiled skeleton (``schedule.column_tile > 0``) and its merge.

    Block (x, y) stages rows ``[y * column_tile, (y + 1) * column_tile)`` of ``lhs`` in
    shared memory and folds, for ``block_rows`` output rows, the edges whose
    source falls in that tile; edges are pre-grouped by (tile, row) with 16-bit local
    source indices and their original CSR position (for ``rhs``, edge ids and arg).
    Per-tile partial rows are then folded by ``gspmm_merge`` in tile order.
    """
    schedule.validate()
    if schedule.column_tile == 0:
        raise ValueError(f"schedule {schedule} has no column tile")
    if algorithm.lhs_layout is None:
        raise ValueError("the column-tiled skeleton stages lhs; copy_rhs has none")
    keep_arg = algorithm.with_arg
    init = _accumulators(algorithm)
    body = _message_body(algorithm)
    edge_loop = "\n".join([
        "for (long long q = start + e_lane; q < end; q += EL) {",
        "    const long long u = local_col[q];",
        "    const long long p = position[q];  // the edge's CSR position",
        f"    const long long e = {_edge_id(algorithm, 'p')};",
        *("    " + line for line in _scalar_loads(algorithm, "u", "e")),
        indent(body, 4),
        "}",
    ])
    row = "(long long)row_order[slot]" if schedule.degree_sorted else "slot"
    per_row = [
        f"const long long row = {row};",
        "const long long start = tile_rowptr[tile * num_rows + row];",
        "const long long end = tile_rowptr[tile * num_rows + row + 1];",
        *init,
        edge_loop,
    ]
    if schedule.edge_lanes > 1:
        per_row.append(_merge_lanes(algorithm.reduce, keep_arg))
    per_row.append(_partial_write_back(algorithm, "tile * num_rows + row"))
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
    merge = tile_merge_kernel(algorithm, MERGE_KERNEL_NAME)
    return f"""{_two_pass_header("column-tiled", algorithm, schedule)}
// One block per SM: the staged tile fills shared memory.
extern "C" __global__ void __launch_bounds__({schedule.threads}, 1)
{TILED_KERNEL_NAME}(const I* __restrict__ tile_rowptr, const unsigned short* __restrict__ local_col,
      const I* __restrict__ position, const I* __restrict__ eid, const I* __restrict__ row_order,
      const T* __restrict__ lhs_global, const T* __restrict__ rhs,
      const int* __restrict__ lhs_offset, const int* __restrict__ rhs_offset,
      A* __restrict__ partial, long long* __restrict__ partial_arg,
      long long num_rows, long long num_src, int num_features, long long lhs_len,
      long long rhs_len, long long num_tiles, long long block_rows)
{{
{indent(chr(10).join(body_lines), 4)}
}}

{merge}"""


def _two_pass_header(skeleton: str, algorithm: SpmmAlgorithm, schedule: SpmmSchedule) -> str:
    """The top of a program of two kernels (a first pass and its merge), which share
    the types ``I``, ``T`` and ``A``."""
    return f"""// gsparse g-SpMM, {skeleton}: {algorithm}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {INDEX_TYPES[algorithm.index_dtype]};
using T = {SCALAR_TYPES[algorithm.dtype]};
using A = {ACCUMULATOR_TYPES[algorithm.dtype]};
"""


SPLIT_KERNEL_NAME = "gspmm_split"
SPLIT_MERGE_KERNEL_NAME = "gspmm_split_merge"


@functools.lru_cache(maxsize=1024)
def generate_split(algorithm: SpmmAlgorithm, schedule: SpmmSchedule) -> str:
    """CUDA C++ of the split-row skeleton (``schedule.row_split > 0``) and its merge.

    Group ``slot`` walks item ``slot`` of the graph's work list, as the one-pass kernel
    walks a row: the edges from ``work_start[slot]`` to the end of row ``work_row[slot]``,
    at most ``row_split`` of them. The first ``num_chunks`` items are the chunks of the rows
    longer than that, in (row, chunk) order; each leaves its unfinished result as partial
    result ``slot``, and ``gspmm_split_merge`` folds every split row's chunks in order
    into its output. The other items are whole rows, written directly.
    """
    schedule.validate()
    if not schedule.row_split:
        raise ValueError(f"schedule {schedule} splits no rows")
    locate = [
        f"constexpr long long SPLIT = {schedule.row_split};  // most edges per work item",
        "if (slot >= num_items) return;  // whole groups leave together",
        "const long long row = work_row[slot];",
        "const long long start = work_start[slot];",
        "// A chunk ends SPLIT edges on, or at its row's end; a whole row is never longer.",
        "const long long end = min(start + SPLIT, (long long)rowptr[row + 1]);",
    ]
    body = [
        *_group_walk(algorithm, schedule, locate),
        "if (slot < num_chunks) {  // a chunk of a split row: the merge writes the output",
        indent(_partial_write_back(algorithm, "slot"), 4),
        "} else {",
        indent(_write_back(algorithm), 4),
        "}",
    ]
    merge = _merge_kernel(algorithm, SPLIT_MERGE_KERNEL_NAME,
                          "const I* __restrict__ split_row, const I* __restrict__ split_first,\n"
                          "      long long num_split, int num_features", [
        "if (t >= num_split * num_features) return;",
        "const long long r = t / num_features;  // the r-th split row",
        "const long long row = split_row[r], i = row * num_features + t % num_features;",
        "// One partial result per chunk of the row, num_features apart.",
        "const long long first = split_first[r], last = split_first[r + 1];",
        "const long long base = t % num_features, stride = num_features;",
    ])
    return f"""{_two_pass_header("split rows", algorithm, schedule)}
extern "C" __global__ void __launch_bounds__({schedule.threads})
{SPLIT_KERNEL_NAME}(const I* __restrict__ rowptr, const I* __restrict__ col,
      const I* __restrict__ eid, const I* __restrict__ work_row, const I* __restrict__ work_start,
      const T* __restrict__ lhs, const T* __restrict__ rhs,
      const int* __restrict__ lhs_offset, const int* __restrict__ rhs_offset,
      T* __restrict__ out, long long* __restrict__ arg_u, long long* __restrict__ arg_e,
      A* __restrict__ partial, long long* __restrict__ partial_arg,
      long long num_items, long long num_chunks, int num_features, long long lhs_len,
      long long rhs_len)
{{
{indent(chr(10).join(body), 4)}
}}

{merge}"""
