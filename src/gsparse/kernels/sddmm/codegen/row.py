"""The row g-SDDMM skeleton: a warp per destination row, ``v``'s features in registers."""

from __future__ import annotations

from ...source import indent
from ..task import SddmmAlgorithm
from .common import REDUCE_PARTIAL, chunks, lane_features, row_start, scalar_loads, v_cache

def row_body(algorithm: SddmmAlgorithm) -> list[str]:
    cached, cache_lines = v_cache(algorithm)
    edge_targets = algorithm.targets() - {"v"}
    edge = []
    if "u" in edge_targets:
        edge.append("const long long u = col[p];")
    edge.append(f"const long long e = {'eid[p]' if algorithm.has_eid else 'p'};")
    edge += scalar_loads(algorithm, edge_targets)
    if algorithm.is_dot:
        edge.append("A partial = 0;")
    edge += lane_features(algorithm, cached)
    if algorithm.is_dot:
        edge.append(REDUCE_PARTIAL)
    return [
        "constexpr int EDGES = 32 / LANES;  // edges a warp handles at a time",
        *row_start(algorithm),
        *chunks(algorithm),
        indent("\n".join([
            *cache_lines,
            "for (long long p = start + sub; p < end; p += EDGES) {",
            indent("\n".join(edge), 4),
            "}",
        ]), 4),
        "}",
    ]
