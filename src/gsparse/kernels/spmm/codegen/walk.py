"""The pieces of C the g-SpMM generators share: operand loads, the message fold, the
group walk of the one-pass family, write-backs, and the merge kernels of the two-pass
skeletons. The reducer's meaning comes from its :class:`~gsparse.algebra.Reducer` entry.
"""

from __future__ import annotations

from ....algebra import Reducer
from ...operands import Layout
from ...source import (
    ACCUMULATOR_TYPES,
    INDEX_TYPES,
    PRELUDE,
    SCALAR_TYPES,
    Signature,
    elementwise_expr,
    identity_expr,
    indent,
)
from ..schedule import OnePass, SplitRows, SpmmSchedule
from ..task import SpmmAlgorithm


def operand_load(name: str, layout: Layout, row: str) -> str:
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


def combine(reducer: Reducer, with_arg: bool) -> str:
    """Fold message ``m`` at CSR position ``p`` into ``acc[o][i]`` (and ``arg[o][i]``)."""
    if with_arg:
        # Strictly better, so the first edge of the row wins ties; arg < 0 takes the first
        # message even when it equals the identity (an all -inf row still names an edge).
        better = reducer.beats("m", "acc[o][i]")
        return f"if ({better} || arg[o][i] < 0) {{ acc[o][i] = m; arg[o][i] = p; }}"
    return reducer.accumulate("acc[o][i]", "m")


def merge_lanes(reducer: Reducer, with_arg: bool) -> str:
    """Code that merges the partial results of the edge lanes through warp shuffles."""
    shuffled = "__shfl_xor_sync(mask, acc[o][i], offset, G)"
    if not reducer.keeps_arg:
        step = reducer.accumulate("acc[o][i]", shuffled)
    elif with_arg:
        step = (
            f"const A other = {shuffled};\n"
            "const long long other_arg = __shfl_xor_sync(mask, arg[o][i], offset, G);\n"
            f"{_take_earliest_winner(reducer, '')}"
        )
    else:
        step = f"const A other = {shuffled};\n" + reducer.accumulate("acc[o][i]", "other")
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


def _take_earliest_winner(reducer: Reducer, guard: str) -> str:
    """Code that takes another lane's ``other`` / ``other_arg`` into ``acc[o][i]`` /
    ``arg[o][i]`` where ``guard`` (a condition and ``&&``, or empty) holds and it wins."""
    head = f"if ({guard}other_arg >= 0 && ("
    return (
        "// The earliest CSR position wins ties, as in a sequential walk of the row.\n"
        f"{head}arg[o][i] < 0 || {reducer.beats('other', 'acc[o][i]')} ||\n"
        f"{' ' * len(head)}(other == acc[o][i] && other_arg < arg[o][i]))) {{\n"
        "    acc[o][i] = other;\n"
        "    arg[o][i] = other_arg;\n"
        "}"
    )


def merge_lanes_down(reducer: Reducer, with_arg: bool) -> str:
    """Code that folds the edge lanes' partial results into edge lane 0 where the group
    does not divide a warp: the butterfly's xor partners and ``width`` argument need
    power-of-two groups, so each step reads a named lane ``offset`` edge lanes up (a lane
    with none above reads itself and keeps its value)."""
    shuffled = "__shfl_sync(mask, acc[o][i], source)"
    if with_arg:
        fold = (
            f"const A other = {shuffled};\n"
            "const long long other_arg = __shfl_sync(mask, arg[o][i], source);\n"
            f"{_take_earliest_winner(reducer, 'take && ')}"
        )
    else:
        fold = f"const A other = {shuffled};\nif (take) {{\n{indent(reducer.accumulate('acc[o][i]', 'other'), 4)}\n}}"
    return (
        "#pragma unroll\n"
        "for (int offset = EL / 2; offset >= 1; offset /= 2) {\n"
        "    const bool take = e_lane < offset;\n"
        "    const int source = e_lane + offset < EL ? warp_lane + offset * FL : warp_lane;\n"
        "#pragma unroll\n"
        "    for (int o = 0; o < O; ++o) {\n"
        "#pragma unroll\n"
        "        for (int i = 0; i < V; ++i) {\n"
        f"{indent(fold, 12)}\n"
        "        }\n"
        "    }\n"
        "}"
    )


def message_body(algorithm: SpmmAlgorithm) -> str:
    """Code that folds the message of edge (u, e) at CSR position p into the accumulators.

    Expects ``u``, ``e``, ``p`` and, for SCALAR operands, ``a_scalar`` / ``b_scalar``.
    """
    loads = []
    if algorithm.lhs_layout is not None:
        loads += ["A a[V];", operand_load("lhs", algorithm.lhs_layout, "u")]
    if algorithm.rhs_layout is not None:
        loads += ["A b[V];", operand_load("rhs", algorithm.rhs_layout, "e")]
    return (
        "#pragma unroll\n"
        "for (int o = 0; o < O; ++o) {\n"
        "    const int f = f_base + o * FL * V;\n"
        "    if (f < num_features) {\n"
        f"{indent(chr(10).join(loads), 8)}\n"
        "#pragma unroll\n"
        "        for (int i = 0; i < V; ++i) {\n"
        f"            const A m = {elementwise_expr(algorithm.binop.cuda_expr)};\n"
        f"            {combine(algorithm.reducer, algorithm.with_arg)}\n"
        "        }\n"
        "    }\n"
        "}"
    )


def scalar_loads(algorithm: SpmmAlgorithm, u: str, e: str) -> list[str]:
    lines = []
    if algorithm.lhs_layout is Layout.SCALAR:
        lines.append(f"const A a_scalar = gs::to_acc(lhs[{u}]);")
    if algorithm.rhs_layout is Layout.SCALAR:
        lines.append(f"const A b_scalar = gs::to_acc(rhs[{e}]);")
    return lines


def edge_id(algorithm: SpmmAlgorithm, p: str) -> str:
    return f"(long long)eid[{p}]" if algorithm.has_eid else p


def edge_loop(algorithm: SpmmAlgorithm, schedule: OnePass | SplitRows) -> str:
    body = message_body(algorithm)
    if not schedule.index_tile:
        # Each lane first loads the indices of its next NNZ edges, then gathers their
        # features: NNZ independent loads in flight per lane instead of one dependent pair.
        fetch = [
            "const long long p = p0 + k * EL;",
            "if (p < end) {",
            "    tile_u[k] = col[p];",
            f"    tile_e[k] = {edge_id(algorithm, 'p')};",
            "}",
        ]
        lines = [
            "const long long p = p0 + k * EL;",
            "if (p < end) {",
            "    const long long u = tile_u[k];",
            "    const long long e = tile_e[k];",
            *("    " + line for line in scalar_loads(algorithm, "u", "e")),
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
    fetch = ["tile_u = col[mine];", f"tile_e = {edge_id(algorithm, 'mine')};"]
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


def write_back(algorithm: SpmmAlgorithm) -> str:
    value = f"degree == 0 ? A(0) : {algorithm.reducer.finish('acc[o][i]', 'degree')}"
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
            f"    arg_e[row * num_features + f + i] = q < 0 ? -1 : {edge_id(algorithm, 'q')};",
            "}",
        ]
    return each_output_of_lane_zero(lines, before="    const long long degree = end - start;\n")


def each_output_of_lane_zero(lines: list[str], before: str = "") -> str:
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


def accumulators(algorithm: SpmmAlgorithm) -> list[str]:
    """Declarations of ``acc[O][V]`` at the reducer's identity (and ``arg`` at -1)."""
    identity = identity_expr(algorithm.reducer.identity)
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


def group_walk(algorithm: SpmmAlgorithm, schedule: OnePass | SplitRows, locate: list[str]) -> list[str]:
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
        *(_packed_groups() if schedule.packs_warp else _groups_in_warps()),
        *locate,
        f"const int f_base = blockIdx.y * {schedule.feature_slice} + f_lane * V;",
        *accumulators(algorithm),
        edge_loop(algorithm, schedule),
    ]
    if schedule.edge_lanes > 1:
        merge = merge_lanes if schedule.packs_warp else merge_lanes_down
        lines.append(merge(algorithm.reducer, algorithm.with_arg))
    return lines


def _packed_groups() -> list[str]:
    """A thread's group, lane and slot where groups tile the warps."""
    return [
        "const int lane = threadIdx.x % G;",
        "const int f_lane = lane % FL;",
        "const int e_lane = lane / FL;",
        "// The lanes of this thread's group: shuffles must name exactly them.",
        "const unsigned mask = G == 32 ? 0xffffffffu\n"
        "                              : ((1u << G) - 1u) << ((threadIdx.x % 32) / G * G);",
        "(void)mask; (void)e_lane;",
        "const long long slot = (long long)blockIdx.x * ROWS + threadIdx.x / G;",
    ]


def _groups_in_warps() -> list[str]:
    """A thread's group, lane and slot where a group does not divide a warp: each warp
    holds whole groups (so a group's shuffles stay in its warp), its last lanes idle."""
    return [
        "constexpr int GROUPS = 32 / G;  // groups per warp",
        "const int warp_lane = threadIdx.x % 32;",
        "if (warp_lane >= GROUPS * G) return;  // the warp's last 32 % G lanes idle",
        "const int lane = warp_lane % G;",
        "const int f_lane = lane % FL;",
        "const int e_lane = lane / FL;",
        "// The lanes of this thread's group: shuffles must name exactly them.",
        "const unsigned mask = ((1u << G) - 1u) << (warp_lane / G * G);",
        "(void)mask; (void)e_lane;",
        "const long long slot = (long long)blockIdx.x * ROWS + threadIdx.x / 32 * GROUPS + warp_lane / G;",
    ]


def partial_write_back(algorithm: SpmmAlgorithm, slot: str) -> str:
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
    return each_output_of_lane_zero(lines)


# The parameters every merge kernel starts with.
_MERGE_PARAMS = [("const I* __restrict__", "rowptr"), ("const I* __restrict__", "col"),
                 ("const I* __restrict__", "eid"), ("const A* __restrict__", "partial"),
                 ("const long long* __restrict__", "partial_arg"), ("T* __restrict__", "out"),
                 ("long long* __restrict__", "arg_u"), ("long long* __restrict__", "arg_e")]


def merge_signature(name: str, extra: list[tuple[str, str]]) -> Signature:
    """The signature of a merge kernel: the common parameters, then ``extra``."""
    return Signature(name, [*_MERGE_PARAMS, *extra])


def tile_merge_signature(name: str) -> Signature:
    """The signature of :func:`tile_merge_kernel` named ``name``."""
    return merge_signature(name, [("long long", "num_rows"), ("int", "num_features"),
                                  ("long long", "num_tiles")])


def tile_merge_kernel(algorithm: SpmmAlgorithm, signature: Signature) -> str:
    """The merge of a first pass that leaves ``num_tiles`` partial results per output
    element, ``num_rows * num_features`` apart (a column-tiled kernel's tiles, an
    output-tiled kernel's column groups), folded in tile order."""
    return merge_kernel(algorithm, signature, [
        "if (t >= num_rows * num_features) return;",
        "const long long i = t, row = t / num_features;",
        "const long long first = 0, last = num_tiles, base = i, stride = num_rows * num_features;",
    ])


def merge_kernel(algorithm: SpmmAlgorithm, signature: Signature, locate: list[str]) -> str:
    """A kernel that folds the partial results of each output element in order and writes
    the output: deterministic, ties to the lowest CSR position, like the one-pass kernel.

    Thread ``t`` runs ``locate``, which returns past the last element or names output
    element ``i`` of row ``row`` and its partial results: ``first`` to ``last - 1``, result
    ``k`` at ``base + k * stride``. ``signature`` comes from :func:`merge_signature`.
    """
    reducer = algorithm.reducer
    if algorithm.with_arg:
        fold = (
            "const A other = partial[at];\n"
            "const long long other_arg = partial_arg[at];\n"
            f"if (other_arg >= 0 && (arg < 0 || {reducer.beats('other', 'acc')} || (other == acc && other_arg < arg))) {{\n"
            "    acc = other;\n"
            "    arg = other_arg;\n"
            "}"
        )
    elif reducer.keeps_arg:
        fold = "const A other = partial[at];\n" + reducer.accumulate("acc", "other")
    else:
        fold = reducer.accumulate("acc", "partial[at]")
    finish = reducer.finish("acc", "degree")
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
            f"arg_e[i] = degree == 0 || arg < 0 ? -1 : {edge_id(algorithm, 'arg')};",
        ]
    return f"{signature.declaration()}\n{{\n{indent(chr(10).join(lines), 4)}\n}}\n"


def two_pass_header(skeleton: str, algorithm: SpmmAlgorithm, schedule: SpmmSchedule) -> str:
    """The top of a program of two kernels (a first pass and its merge), which share
    the types ``I``, ``T`` and ``A``."""
    return f"""// gsparse g-SpMM, {skeleton}: {algorithm}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {INDEX_TYPES[algorithm.index_dtype]};
using T = {SCALAR_TYPES[algorithm.dtype]};
using A = {ACCUMULATOR_TYPES[algorithm.dtype]};
"""
