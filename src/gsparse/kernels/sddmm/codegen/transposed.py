"""The transposed g-SDDMM skeletons: batches of edges per group of lanes, whose ``dot``
products one reduce-scatter of shuffles adds up (row_transposed over a row,
edge_transposed over a fixed range of CSR positions)."""

from __future__ import annotations

from ...source import indent
from ..schedule import RANGE_BATCHES
from ..task import SddmmAlgorithm
from .common import chunks, lane_features, row_start, scalar_loads, store_dot, v_cache

# The transposed butterfly (a reduce-scatter by shuffles). Each of a group's LANES lanes
# holds sums[0 .. B-1]: its partial dot of each of the batch's B edges. At the step of
# width `half` (B/2, B/4, ..., 1) a lane and its partner `lane ^ half` split the live
# sums[0 .. 2*half-1]: the lane whose `half` bit is clear keeps the first half and sends
# the second, its partner keeps the second and sends the first, and each adds what it
# receives to what it keeps, so sums[i] now covers edge (i + the halves it kept) of twice
# as many lanes. After log2(B) steps (B/2 + B/4 + ... + 1 = B - 1 shuffles) sums[0] is
# edge `lane % B`'s partial over the B lanes that agree with `lane` beyond bit log2(B);
# log2(LANES / B) plain butterfly steps (one shuffle each) add up those LANES / B blocks.
# So B edges take B - 1 + log2(LANES / B) shuffles, against log2(LANES) each one at a time.
TRANSPOSED_REDUCE = """\
// Counted steps: the unroller must see a constant trip count, or sums[] goes to memory.
#pragma unroll
for (int step = 1; step < B; step *= 2) {
    const int half = B / 2 / step;
    const bool upper = lane & half;
    #pragma unroll
    for (int i = 0; i < half; ++i) {
        const A keep = upper ? sums[i + half] : sums[i];
        const A give = upper ? sums[i] : sums[i + half];
        sums[i] = keep + __shfl_xor_sync(mask, give, half, LANES);
    }
}
#pragma unroll
for (int offset = B; offset < LANES; offset *= 2) {
    sums[0] += __shfl_xor_sync(mask, sums[0], offset, LANES);
}"""


def transposed_body(algorithm: SddmmAlgorithm, batch: int, by_edge: bool) -> list[str]:
    """Batches of edges: ``dot`` on ``row_transposed`` (``by_edge`` False) and every
    operator on ``edge_transposed`` (``by_edge`` True).

    ``row_transposed``: a warp walks one destination row with ``v``'s features of the head
    in registers. ``edge_transposed``: a warp walks a fixed range of ``edges_per_warp`` CSR
    positions, whatever rows they belong to, and reads ``v`` per edge (in CSR order a
    group's edges mostly share it, so those loads should mostly hit L1; not profiled).
    Either way the warp's groups of ``LANES`` lanes take turns at batches of ``B``
    consecutive edges. For ``dot`` each lane adds up its slice of the head for every edge
    of the batch (``sums[j]`` for edge ``p0 + j``; edges past the end add nothing), the
    transposed butterfly leaves edge ``j``'s dot in lane ``j``, and lanes ``0 .. B-1``
    write the batch's outputs, consecutive for consecutive edges when edge ids are CSR
    positions; other operators store each edge's messages as they go.

    The indices of a batch (source, and destination on ``edge_transposed``) are loaded one
    batch ahead, into ``B`` registers per lane and index: otherwise each batch waits for
    its index loads (streamed from DRAM) before its gathers can start, two round trips per
    batch where the gathers alone need one. Every lane of the group loads the indices
    itself (one broadcast load per edge), where a lane loading the batch's and shuffling
    them out would spend the shuffles the butterfly saves.
    """
    if by_edge:
        cached, cache_lines = set(), []
        edge_targets = algorithm.targets()
    else:
        cached, cache_lines = v_cache(algorithm)
        edge_targets = algorithm.targets() - {"v"}
    prefetched = [(target, array) for target, array in (("u", "col"), ("v", "dst"))
                  if target in edge_targets]
    edge = [f"const long long {target} = batch_{target}[j];" for target, _ in prefetched]
    if "e" in edge_targets or not algorithm.is_dot:  # element-wise stores go to out[e]
        edge.append(f"const long long e = {'eid[p]' if algorithm.has_eid else 'p'};")
    edge += scalar_loads(algorithm, edge_targets)
    edge += lane_features(algorithm, cached)

    def load_next_indices(first: str) -> list[str]:
        return [
            "#pragma unroll",
            "for (int j = 0; j < B; ++j) {",
            f"    const long long p = {first} + j;",
            *(f"    next_{target}[j] = p < end ? {array}[p] : 0;" for target, array in prefetched),
            "}",
        ]

    take_batch = [
        *(f"I batch_{target}[B];" for target, _ in prefetched),
        "#pragma unroll",
        "for (int j = 0; j < B; ++j) {",
        *(f"    batch_{target}[j] = next_{target}[j];" for target, _ in prefetched),
        "}",
        *load_next_indices("p0 + STRIDE"),
    ] if prefetched else []
    if algorithm.is_dot:
        work = [
            "A sums[B];",
            "#pragma unroll",
            "for (int j = 0; j < B; ++j) {",
            "    const long long p = p0 + j;",
            "    A partial = 0;",
            "    if (p < end) {",
            indent("\n".join(edge), 8),
            "    }",
            "    sums[j] = partial;",
            "}",
            TRANSPOSED_REDUCE,
            "if (lane < B && p0 + lane < end) {",
            "    const long long p = p0 + lane;",
            f"    const long long i = {'eid[p]' if algorithm.has_eid else 'p'} * num_heads + h;",
            f"    {store_dot('sums[0]')}",
            "}",
        ]
    else:
        work = [
            "#pragma unroll",
            "for (int j = 0; j < B; ++j) {",
            "    const long long p = p0 + j;",
            "    if (p < end) {",
            indent("\n".join(edge), 8),
            "    }",
            "}",
        ]
    walk = [
        *chunks(algorithm),
        indent("\n".join([
            *cache_lines,
            *(f"I next_{target}[B];  // the group's next batch's {array}"
              for target, array in prefetched),
            *(load_next_indices("start + sub * B") if prefetched else []),
            "// the group's lanes share p0, so they leave together",
            "for (long long p0 = start + sub * B; p0 < end; p0 += STRIDE) {",
            indent("\n".join([*take_batch, *work]), 4),
            "}",
        ]), 4),
        "}",
    ]
    head = [f"constexpr int B = {batch};  // edges per group and batch",
            "constexpr int STRIDE = 32 / LANES * B;  // edges a warp takes per batch"]
    if not by_edge:
        return [*head, *row_start(algorithm), *walk]
    return [
        *head,
        f"constexpr long long RANGE = STRIDE * {RANGE_BATCHES};  // edges a warp walks",
        "const int sub = (threadIdx.x % 32) / LANES;  // the lane group within the warp",
        "const long long range_stride = (long long)gridDim.x * GROUPS * RANGE;",
        "for (long long start = ((long long)blockIdx.x * GROUPS + threadIdx.x / 32) * RANGE;",
        "     start < num_edges; start += range_stride) {  // whole warps leave together",
        "    const long long end = start + RANGE < num_edges ? start + RANGE : num_edges;",
        indent("\n".join(walk), 4),
        "}",
    ]
