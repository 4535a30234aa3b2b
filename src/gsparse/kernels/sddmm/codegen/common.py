"""The pieces of C the g-SDDMM skeletons share: operand loads, the per-feature work, the
``dot`` reduction within a group, and the row skeletons' cached ``v`` features and chunks."""

from __future__ import annotations

from ...operands import Layout
from ...source import elementwise_expr, indent
from ..task import SddmmAlgorithm

# The C names: an operand's row is the variable named after its target (u, v or e), and an
# operand's values are held in ``a`` (lhs) or ``b`` (rhs), as in the algebra's cuda_expr.
VAR = {"lhs": "a", "rhs": "b"}


def load_operand(name: str, target: str, layout: Layout) -> str:
    """Code that fills ``a[V]`` (lhs) or ``b[V]`` (rhs) with features ``f .. f+V-1``."""
    var = VAR[name]
    row = target
    if layout is Layout.FULL:
        return f"A {var}[V];\ngs::load<V>({name} + {row} * {name}_len + f, {var});"
    if layout is Layout.SCALAR:
        return f"A {var}[V];\n#pragma unroll\nfor (int i = 0; i < V; ++i) {var}[i] = {var}_scalar;"
    return (f"A {var}[V];\n#pragma unroll\nfor (int i = 0; i < V; ++i) "
            f"{var}[i] = gs::to_acc({name}[{row} * {name}_len + {name}_offset[f + i]]);")


def operands(algorithm: SddmmAlgorithm) -> list[tuple[str, str, Layout]]:
    return [(name, target, layout)
            for name, target, layout in (("lhs", algorithm.lhs_target, algorithm.lhs_layout),
                                         ("rhs", algorithm.rhs_target, algorithm.rhs_layout))
            if layout is not None]


def scalar_loads(algorithm: SddmmAlgorithm, targets: set[str]) -> list[str]:
    """Per-edge (or per-row) loads of the SCALAR operands whose target is in ``targets``."""
    return [f"const A {VAR[name]}_scalar = gs::to_acc({name}[{target}]);"
            for name, target, layout in operands(algorithm)
            if layout is Layout.SCALAR and target in targets]


def feature_work(algorithm: SddmmAlgorithm, cached: set[str]) -> str:
    """Code for the vector of features at virtual index ``f``: element-wise, compute and
    store the messages; ``dot``, add their products into ``partial``. Operands named in
    ``cached`` are read from ``{a,b}_cache[k]`` instead of memory."""
    lines = []
    for name, target, layout in operands(algorithm):
        var = VAR[name]
        if name in cached:
            lines.append(f"const A (&{var})[V] = {var}_cache[k];")
        else:
            lines.append(load_operand(name, target, layout))
    if algorithm.is_dot:
        lines += ["#pragma unroll", "for (int i = 0; i < V; ++i) partial += a[i] * b[i];"]
    else:
        lines += [
            "A m[V];",
            "#pragma unroll",
            f"for (int i = 0; i < V; ++i) m[i] = {elementwise_expr(algorithm.binop.cuda_expr)};",
            "gs::store<V>(out + e * head_len + f, m);",
        ]
    return "\n".join(lines)


def store_dot(value: str) -> str:
    """Store a head's dot ``value`` at ``out[i]``, added to the sum of the earlier launches'
    slices that ``out`` holds when ``accumulate`` (features_per_launch)."""
    return f"out[i] = gs::from_acc<T>(accumulate ? gs::to_acc(out[i]) + {value} : {value});"


REDUCE_PARTIAL = f"""\
#pragma unroll
for (int offset = LANES / 2; offset > 0; offset /= 2) {{
    partial += __shfl_xor_sync(mask, partial, offset, LANES);
}}
if (lane == 0) {{
    const long long i = e * num_heads + h;
    {store_dot("partial")}
}}"""


def v_cache(algorithm: SddmmAlgorithm) -> tuple[set[str], list[str]]:
    """The operands read from ``v``'s row, and code that holds the chunk's features of
    them in registers (``{a,b}_cache[K][V]``, zero past ``limit``): ``v`` is the same for
    every edge of a row."""
    cached = {name for name, target, layout in operands(algorithm)
              if target == "v" and layout is not Layout.SCALAR}
    lines = []
    for name, target, layout in operands(algorithm):
        if name not in cached:
            continue
        var = VAR[name]
        lines += [
            f"A {var}_cache[K][V];",
            "#pragma unroll",
            "for (int k = 0; k < K; ++k) {",
            "    const int f = base + k * LANES * V + lane * V;",
            "    if (f < limit) {",
            indent(load_operand(name, target, layout), 8),
            "        #pragma unroll",
            f"        for (int i = 0; i < V; ++i) {var}_cache[k][i] = {var}[i];",
            "    } else {",
            "        #pragma unroll",
            f"        for (int i = 0; i < V; ++i) {var}_cache[k][i] = 0;",
            "    }",
            "}",
        ]
    return cached, lines


def row_start(algorithm: SddmmAlgorithm) -> list[str]:
    """The warp's destination row ``v`` and its CSR range; empty rows and rows past the
    end leave at once (whole warps, so no shuffle misses a lane)."""
    return [
        "const long long v = (long long)blockIdx.x * GROUPS + threadIdx.x / 32;",
        "if (v >= num_rows) return;",
        "const long long start = rowptr[v];",
        "const long long end = rowptr[v + 1];",
        "if (start == end) return;",
        "const int sub = (threadIdx.x % 32) / LANES;  // the lane group within the warp",
        *scalar_loads(algorithm, {"v"}),
    ]


def lane_features(algorithm: SddmmAlgorithm, cached: set[str]) -> list[str]:
    """The loop over a lane's ``K`` vectors of one edge, in the row skeletons (``v``'s
    features read from the warp's ``cached`` registers)."""
    return [
        "#pragma unroll",
        "for (int k = 0; k < K; ++k) {",
        "    const int f = base + k * LANES * V + lane * V;",
        "    if (f < limit) {",
        indent(feature_work(algorithm, cached), 8),
        "    }",
        "}",
    ]


def chunks(algorithm: SddmmAlgorithm) -> list[str]:
    """The opening of the loop over a warp's chunks (closed by the caller), one per
    ``blockIdx.y`` step: a head for ``dot``, a slice of ``SLICE`` features otherwise.
    Either way the chunk covers features ``base .. limit - 1`` (virtual indices) of the
    launch's range ``d_begin .. d_end - 1``, so ``features_per_launch`` slices these
    skeletons as it does the edge skeleton."""
    if algorithm.is_dot:
        return ["for (int h = blockIdx.y; h < num_heads; h += gridDim.y) {",
                "    const int base = h * head_len + d_begin;",
                "    const int limit = h * head_len + d_end;"]
    return ["const int num_chunks = (d_end - d_begin + SLICE - 1) / SLICE;",
            "for (int c = blockIdx.y; c < num_chunks; c += gridDim.y) {",
            "    const int base = d_begin + c * SLICE;",
            "    const int limit = d_end;"]
