"""The edge g-SDDMM skeleton: a group of threads per edge, a grid-stride loop over the edges."""

from __future__ import annotations

from ...source import indent
from ..task import SddmmAlgorithm
from .common import REDUCE_PARTIAL, feature_work, scalar_loads

def edge_body(algorithm: SddmmAlgorithm) -> list[str]:
    targets = algorithm.targets()
    indices = []
    if "u" in targets:
        indices.append("const long long u = col[p];")
    if "v" in targets:
        indices.append("const long long v = dst[p];")
    indices.append(f"const long long e = {'eid[p]' if algorithm.has_eid else 'p'};")
    indices += scalar_loads(algorithm, targets)
    vectors = [
        "#pragma unroll",
        "for (int k = 0; k < K; ++k) {",
        "    const int d = d0 + k * LANES * V + lane * V;",
        "    if (d < d_end) {",
        "        const int f = h * head_len + d;" if algorithm.is_dot else
        "        const int f = d;",
        indent(feature_work(algorithm, cached=set()), 8),
        "    }",
        "}",
    ]
    passes = ["for (int d0 = d_begin; d0 < d_end; d0 += SLICE) {", indent("\n".join(vectors), 4), "}"]
    if algorithm.is_dot:
        heads = ["for (int h = 0; h < num_heads; ++h) {",
                 "    A partial = 0;",
                 indent("\n".join(passes), 4),
                 indent(REDUCE_PARTIAL, 4),
                 "}"]
    else:
        heads = passes
    return [
        "const long long stride = (long long)gridDim.x * GROUPS;",
        "for (long long p = (long long)blockIdx.x * GROUPS + threadIdx.x / LANES; p < num_edges;",
        "     p += stride) {  // the group's lanes share p, so they leave together",
        indent("\n".join([*indices, *heads]), 4),
        "}",
    ]
