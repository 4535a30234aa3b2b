"""Would an edge-balanced walk close the one-feature g-SpMM cells where the space loses to cuSPARSE?

    python3 scripts/edge_balanced_spmv_probe.py CELLS.jsonl.gz [...] [--below 1.5]   (needs a CUDA GPU)
    python3 scripts/edge_balanced_spmv_probe.py --emulate                            (no GPU: checks the write rules)

The space's walks give each row a group of lanes. At one feature with an edge operand
(u_mul_e sum: SpMV with the edge weights as the matrix) the best of them stay at
0.86-1.08x cuSPARSE on some large graphs of the tuning files (docs/performance.md, "Open
problems"): a group's lanes each hold an edge or two of a row, so few gathers are in flight.

The idea measured here (merge-path SpMV in its simplest form): warp ``w`` takes the fixed
tile of ``32 * K`` CSR positions from ``w * 32 * K``, lane ``i`` the ``K`` consecutive ones
from ``32 * K * w + K * i``, loaded with 16-byte vector loads together with their rows
(the graph's ``csr_dst``: 4 more bytes per edge) and weights, then the ``K`` gathers of
``lhs`` issued at once. A lane folds its runs of equal rows in registers: a run that
starts and ends inside the lane is a whole row and is written at once; the lane's last run
takes part in a segmented scan over the warp's 32 lanes (rows are non-decreasing along
the tile, so equal rows are neighbours), and a lane with more than one run adds the scan's
carry to its first. A row that crosses a tile's edge leaves one partial result per tile,
and a second kernel (one thread per tile) folds those in tile order: deterministic, no
atomics. Rows without edges keep the zero the output starts from.

For every collected cell (``python -m gsparse.tune.collect``) at one feature of
``spmm:mul:sum`` or ``spmm:copy_lhs:sum`` in float32 whose recorded best schedule is below
``--below`` times cuSPARSE: rebuild the graph on the GPU and time, in the same process
(device time, median of repeats, the L2 flushed before each call, every output checked
against the PyTorch reference): cuSPARSE as the tuning files time it (``torch.sparse.mm``,
64-bit indices), cuSPARSE with 32-bit indices, the cell's recorded best schedule, and the
edge-balanced kernel at ``K`` = 4, 8 and 16 (the output's zero fill included). Prints one
line per cell, each time as a speed-up over the first cuSPARSE.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import math

import numpy as np

_KS = (4, 8, 16)
_THREADS = 256
# The row key of positions past the last edge (the last tile's padding): larger than any row.
_PAD_ROW = 2**31 - 1


def kernel_source(K: int, weighted: bool, has_eid: bool) -> str:
    """The two kernels for ``K`` positions a lane: ``eb_walk`` and ``eb_fix``."""
    weight = "" if not weighted else ("w[eid[e]]" if has_eid else "w[e]")
    load_weights = ""
    if weighted and not has_eid:
        load_weights = """
#pragma unroll
        for (int q = 0; q < K / 4; ++q) {
            const float4 ww = reinterpret_cast<const float4*>(w + e0)[q];
            m[4 * q] = ww.x; m[4 * q + 1] = ww.y; m[4 * q + 2] = ww.z; m[4 * q + 3] = ww.w;
        }"""
    elif weighted:
        load_weights = """
#pragma unroll
        for (int k = 0; k < K; ++k) m[k] = w[eid[e0 + k]];"""
    tail_weight = f"m[k] = {weight};" if weighted else ""
    message = "m[k] * lhs[c[k]]" if weighted else "lhs[c[k]]"
    return f"""
constexpr int K = {K};
constexpr int PAD = {_PAD_ROW};

extern "C" __global__ void __launch_bounds__({_THREADS})
eb_walk(const int* __restrict__ dst, const int* __restrict__ col, const int* __restrict__ eid,
        const float* __restrict__ lhs, const float* __restrict__ w, float* __restrict__ out,
        float* __restrict__ head, float* __restrict__ tail, long long num_edges, long long num_tiles)
{{
    const long long tile = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (tile >= num_tiles) return;  // whole warps leave together
    const long long base = tile * 32 * K, e0 = base + (long long)lane * K;
    int c[K], r[K];
    float m[K];
    if (e0 + K <= num_edges) {{  // all K positions exist: 16-byte loads
#pragma unroll
        for (int q = 0; q < K / 4; ++q) {{
            const int4 cc = reinterpret_cast<const int4*>(col + e0)[q];
            const int4 rr = reinterpret_cast<const int4*>(dst + e0)[q];
            c[4 * q] = cc.x; c[4 * q + 1] = cc.y; c[4 * q + 2] = cc.z; c[4 * q + 3] = cc.w;
            r[4 * q] = rr.x; r[4 * q + 1] = rr.y; r[4 * q + 2] = rr.z; r[4 * q + 3] = rr.w;
        }}{load_weights}
    }} else {{
#pragma unroll
        for (int k = 0; k < K; ++k) {{
            const long long e = e0 + k;
            c[k] = 0; r[k] = PAD; m[k] = 0.f;
            if (e < num_edges) {{ c[k] = col[e]; r[k] = dst[e]; {tail_weight} }}
        }}
    }}
    float v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = r[k] == PAD ? 0.f : {message};

    // The lane's runs: the first (maybe continuing the lane before), whole rows, the last.
    const int first = r[0];
    int row = r[0];
    float run = 0.f, first_sum = 0.f;
    bool several = false;
#pragma unroll
    for (int k = 0; k < K; ++k) {{
        if (r[k] != row) {{
            if (several) out[row] = run;  // began and ended in this lane: a whole row
            else first_sum = run;
            several = true;
            row = r[k];
            run = 0.f;
        }}
        run += v[k];
    }}
    // Segmented inclusive scan of the last runs (equal rows are neighbours).
    float chain = run;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {{
        const float up = __shfl_up_sync(0xffffffffu, chain, d);
        const int up_row = __shfl_up_sync(0xffffffffu, row, d);
        if (lane >= d && up_row == row) chain += up;
    }}
    const float before = __shfl_up_sync(0xffffffffu, chain, 1);
    const int before_row = __shfl_up_sync(0xffffffffu, row, 1);
    const int next_first = __shfl_down_sync(0xffffffffu, first, 1);
    const int tile_first = __shfl_sync(0xffffffffu, first, 0);
    const long long end = min(base + 32 * K, num_edges);
    // The tile's first row began in an earlier tile; its last row goes on in the next.
    const bool from_before = base > 0 && dst[base - 1] == tile_first;
    const bool goes_on = lane == 31 && end < num_edges && dst[end] == row;
    if (several) {{  // the first run ends in this lane
        const float total = first_sum + (lane > 0 && before_row == first ? before : 0.f);
        if (first == tile_first && from_before) head[tile] = total;
        else out[first] = total;
    }}
    const bool chain_ends = lane == 31 || next_first != row;
    if (chain_ends && row != PAD) {{
        if (row == tile_first && from_before) head[tile] = chain;
        else if (goes_on) tail[tile] = chain;
        else out[row] = chain;
    }}
}}

// One thread a tile: the row that leaves tile t for the next and began in t (or at its
// start) folds its tiles' partial results in tile order.
extern "C" __global__ void eb_fix(const int* __restrict__ dst, const float* __restrict__ head,
                                  const float* __restrict__ tail, float* __restrict__ out,
                                  long long num_edges, long long num_tiles)
{{
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= num_tiles) return;
    const long long tile_edges = 32LL * K, start = t * tile_edges, end = min(start + tile_edges, num_edges);
    const int last = dst[end - 1];
    if (end >= num_edges || dst[end] != last) return;  // nothing goes on
    if (dst[start] == last && start > 0 && dst[start - 1] == last) return;  // a middle tile
    float total = tail[t];
    for (long long u = t + 1; u < num_tiles; ++u) {{
        total += head[u];
        const long long u_end = min((u + 1) * tile_edges, num_edges);
        if (u_end >= num_edges || dst[u_end] != last) break;
    }}
    out[last] = total;
}}
"""


# What bounds any walk of the same edges: the same loads without rows (each thread folds its K
# positions and writes one value), with and without the gathers of lhs.
FLOOR_SOURCE = """
extern "C" __global__ void __launch_bounds__(256)
eb_floor(const int* __restrict__ col, const float* __restrict__ w, const float* __restrict__ lhs,
         float* __restrict__ sink, long long num_edges, int gather)
{
    constexpr int K = 8;
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x, e0 = t * K;
    if (e0 + K > num_edges) return;
    float acc = 0.f;
    const int4 c0 = reinterpret_cast<const int4*>(col + e0)[0], c1 = reinterpret_cast<const int4*>(col + e0)[1];
    const float4 w0 = reinterpret_cast<const float4*>(w + e0)[0], w1 = reinterpret_cast<const float4*>(w + e0)[1];
    const int c[K] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    const float m[K] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
    for (int k = 0; k < K; ++k) acc += gather ? m[k] * lhs[c[k]] : m[k] * (float)c[k];
    sink[t] = acc;
}
"""


# ------------------------------------------------------------------ emulation (no GPU)

def emulate(dst: np.ndarray, col: np.ndarray, lhs: np.ndarray, w: np.ndarray | None, num_rows: int,
            K: int) -> np.ndarray:
    """The two kernels' writes, lane by lane in NumPy (float64), to check their rules."""
    E = len(dst)
    tiles = -(-E // (32 * K))
    out = np.zeros(num_rows)
    head = np.full(tiles, np.nan)
    tail = np.full(tiles, np.nan)
    written = np.zeros(num_rows, dtype=int)
    for t in range(tiles):
        base = t * 32 * K
        lanes = []
        for lane in range(32):
            e0 = base + lane * K
            r = [int(dst[e]) if e < E else _PAD_ROW for e in range(e0, e0 + K)]
            v = [(lhs[col[e]] * (w[e] if w is not None else 1.0)) if e < E else 0.0 for e in range(e0, e0 + K)]
            first, row, run, first_sum, several = r[0], r[0], 0.0, 0.0, False
            for k in range(K):
                if r[k] != row:
                    if several:
                        out[row] = run
                        written[row] += 1
                    else:
                        first_sum = run
                    several, row, run = True, r[k], 0.0
                run += v[k]
            lanes.append([first, row, run, first_sum, several])
        chain = [ln[2] for ln in lanes]
        rows = [ln[1] for ln in lanes]
        d = 1
        while d < 32:
            chain = [chain[i] + (chain[i - d] if i >= d and rows[i - d] == rows[i] else 0.0) for i in range(32)]
            d *= 2
        tile_first = lanes[0][0]
        end = min(base + 32 * K, E)
        from_before = base > 0 and dst[base - 1] == tile_first
        for i, (first, row, _run, first_sum, several) in enumerate(lanes):
            if several:
                total = first_sum + (chain[i - 1] if i > 0 and rows[i - 1] == first else 0.0)
                if first == tile_first and from_before:
                    head[t] = total
                else:
                    out[first] = total
                    written[first] += 1
            goes_on = i == 31 and end < E and dst[end] == row
            if (i == 31 or lanes[i + 1][0] != row) and row != _PAD_ROW:
                if row == tile_first and from_before:
                    head[t] = chain[i]
                elif goes_on:
                    tail[t] = chain[i]
                else:
                    out[row] = chain[i]
                    written[row] += 1
    for t in range(tiles):
        start, end = t * 32 * K, min((t + 1) * 32 * K, E)
        last = dst[end - 1]
        if end >= E or dst[end] != last:
            continue
        if dst[start] == last and start > 0 and dst[start - 1] == last:
            continue
        total = tail[t]
        for u in range(t + 1, tiles):
            total += head[u]
            u_end = min((u + 1) * 32 * K, E)
            if u_end >= E or dst[u_end] != last:
                break
        out[last] = total
        written[last] += 1
    assert written.max(initial=0) <= 1, "a row was written twice"
    return out


def _emulation_check() -> None:
    rng = np.random.default_rng(0)
    shapes = [
        ("short rows", lambda: rng.integers(0, 4, 300)),
        ("one hub", lambda: np.r_[rng.integers(0, 3, 50), 2000, rng.integers(0, 3, 50)]),
        ("rows of exactly a tile", lambda: np.full(7, 32 * 4)),
        ("hub at the end", lambda: np.r_[rng.integers(1, 3, 20), 1500]),
        ("mixed", lambda: rng.choice([0, 1, 2, 5, 40, 300, 1000], 120)),
        ("one row", lambda: np.array([777])),
    ]
    for name, degrees in shapes:
        for K in _KS:
            deg = degrees()
            dst = np.repeat(np.arange(len(deg)), deg)
            col = rng.integers(0, 50, len(dst))
            lhs = rng.standard_normal(50)
            for w in (None, rng.uniform(0.5, 1.5, len(dst))):
                want = np.zeros(len(deg))
                np.add.at(want, dst, lhs[col] * (w if w is not None else 1.0))
                got = emulate(dst, col, lhs, w, len(deg), K)
                assert np.allclose(got, want), (name, K)
    print(f"emulated rules match the reference on {len(shapes)} shapes x K = {_KS}")


# ------------------------------------------------------------------ GPU


def _cells(paths: list[str], below: float) -> list[dict]:
    cells = []
    for path in paths:
        for line in gzip.open(path, "rt"):
            doc = json.loads(line)
            if (doc["feature_len"] != 1 or doc["dtype"] != "float32"
                    or doc["case"] not in ("spmm:mul:sum", "spmm:copy_lhs:sum")):
                continue
            ran = [s for s in doc["schedules"] if "ms" in s]
            if "ms" not in doc.get("cusparse", {}) or not ran:
                continue
            best = min(ran, key=lambda s: s["ms"])
            if doc["cusparse"]["ms"] / best["ms"] < below:
                cells.append({**doc, "best": best})
    return cells


def _probe(paths: list[str], below: float) -> None:
    import torch

    from gsparse import backends, datasets
    from gsparse.kernels.schedule import schedule_from_json
    from gsparse.runtime import get_kernel, i32, i64
    from gsparse.tune.collect import _TOLERANCE, Case, _measure
    from gsparse.tune.measure import time_calls

    device = torch.device("cuda")
    gen = torch.Generator(device=device).manual_seed(0)
    cells = _cells(paths, below)
    print(f"{len(cells)} one-feature float32 cells below {below}x cuSPARSE", flush=True)

    @functools.lru_cache(maxsize=1)  # cells of one graph are neighbours in the files
    def graph_of(family: str, parameters: str):
        drawn = json.loads(parameters)
        return datasets.FAMILIES[family].build(drawn, seed=drawn["seed"], device=device, max_edges=30_000_000)

    for doc in cells:
        family = doc["graph"]["family"]
        g = graph_of(family, json.dumps(doc["graph"]["parameters"], sort_keys=True))
        case = Case(doc["case"])
        weighted = doc["case"] == "spmm:mul:sum"
        operands = case.operands(g, 1, torch.float32, gen)
        ref, tolerance = case.reference(g, operands, 1), _TOLERANCE[torch.float32]
        cusparse_call, pick = case.cusparse(g, operands)
        base_ms = _measure(cusparse_call, ref, tolerance, device, 0.05, True, pick)["ms"]
        values = (operands["rhs"].flatten() if weighted else torch.ones(g.num_edges, device=device))
        values = values if g.eid is None else values[g.eid.long()]
        csr32 = backends.cpu.unchecked_csr(g.rowptr.int(), g.col.int(), values, (g.num_dst, g.num_src))
        lhs = operands["lhs"]
        narrow = _measure(lambda: torch.sparse.mm(csr32, lhs), ref, tolerance, device, 0.05, True)
        _, run = case.call(g, operands, 1)
        recorded = _measure(lambda s=schedule_from_json(doc["best"]["schedule"]): run(s), ref, tolerance,
                            device, 0.05, True)
        dst, col = g.csr_dst.int(), g.col.int()
        eid = g.eid.int() if g.eid is not None else col  # unread without edge ids
        w = operands["rhs"].flatten() if weighted else lhs.flatten()
        flat = lhs.flatten()
        found = []
        for K in _KS:
            source = kernel_source(K, weighted, g.eid is not None)
            walk, fix = get_kernel(source, "eb_walk"), get_kernel(source, "eb_fix")
            tiles = math.ceil(g.num_edges / (32 * K))
            head = torch.empty(tiles, device=device)
            tail = torch.empty(tiles, device=device)

            def eb(walk=walk, fix=fix, tiles=tiles, head=head, tail=tail):
                out = torch.zeros(g.num_dst, 1, device=device)
                walk.launch(math.ceil(tiles * 32 / _THREADS), _THREADS,
                            [dst, col, eid, flat, w, out, head, tail, i64(g.num_edges), i64(tiles)])
                fix.launch(math.ceil(tiles / 256), 256, [dst, head, tail, out, i64(g.num_edges), i64(tiles)])
                return out

            m = _measure(eb, ref, tolerance, device, 0.05, True)
            found.append(f"K={K} {base_ms / m['ms']:.2f}" if "ms" in m else f"K={K} {m['error']}")
        floor = get_kernel(FLOOR_SOURCE, "eb_floor")
        sink = torch.empty(g.num_edges // 8 + 1, device=device)
        per_edge = operands["rhs"].flatten() if weighted else torch.ones(g.num_edges, device=device)
        floors = []
        for gather in (1, 0):
            def loads(gather=gather):
                floor.launch(math.ceil(g.num_edges / 8 / 256), 256,
                             [col, per_edge, flat, sink, i64(g.num_edges), i32(gather)])
            timing = time_calls(loads, [()], device, budget_s=0.05, min_repeats=7, flush_l2=True, hide_host=True)
            floors.append(f"{timing.median_ms:.3f}")
        st = doc["graph"]["structure"]

        def ratio(m: dict) -> str:
            return f"{base_ms / m['ms']:.2f}" if "ms" in m else m["error"]

        print(f"{family} E={st['num_edges']:,} rows={st['num_dst']:,} mean={st['row_mean']:.1f} "
              f"max={st['row_max']} {doc['case']}: cuSPARSE {base_ms:.3f} ms; x cuSPARSE: int32 "
              f"{ratio(narrow)}, recorded best {ratio(recorded)} (file {doc['cusparse']['ms'] / doc['best']['ms']:.2f}), "
              f"edge-balanced {', '.join(found)}; "
              f"no rows: col, weights and gathers {floors[0]} ms, without the gathers {floors[1]} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="*")
    parser.add_argument("--below", type=float, default=1.5)
    parser.add_argument("--emulate", action="store_true", help="check the write rules in NumPy (no GPU)")
    args = parser.parse_args()
    if args.emulate:
        _emulation_check()
        return
    _probe(args.cells, args.below)


if __name__ == "__main__":
    main()
