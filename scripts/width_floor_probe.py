"""What does a feature cost at 100 features against 128 when nothing but the gathers is timed?

    PYTHONPATH=src python3 scripts/width_floor_probe.py   (needs a CUDA GPU)

Issue 18 asks that a width between two multiples of 32 (100) cost at most 10% more per
feature than the next multiple (128) on the same graph. g-SpMM copy_lhs sum measured 1.12-1.18x
on large R-MAT and power-law graphs (docs/performance.md, "Feature widths between
multiples of 32"). This separates what the walk adds from what the gathers cost: on each
graph, in one process, for 96, 100 and 128 fp32 features,

- ``gspmm``: :func:`gsparse.gspmm` copy_lhs sum with the policy in force (the shipped model);
- ``floor``: a kernel that only gathers: each warp takes 64 consecutive CSR positions and
  its first ``F / 4`` lanes load the source rows of 8 positions at a time as 16-byte
  vectors (every row's bytes, as any walk must), fold them in registers and write one value
  a lane; no rows, no outputs.

Device time, the median of at least 20 calls after a warm-up, the L2 overwritten before each
(:func:`gsparse.tune.measure.time_calls`).
Prints the times and, per feature, 100 over 128 and 96 over 128. With ``--space N``, the
first N graphs' cells are also measured schedule by schedule
(:func:`gsparse.tune.collect.collect_cell`): the best of the space, and the model's pick, in
the same units.
"""

from __future__ import annotations

import argparse
import json
import math

import torch

import gsparse
from gsparse import datasets
from gsparse.kernels.schedule import schedule_from_json
from gsparse.runtime import get_kernel, i32, i64
from gsparse.target import Target
from gsparse.tune import select
from gsparse.tune.collect import Case, collect_cell
from gsparse.tune.measure import time_calls

_WIDTHS = (96, 100, 128)
_EDGES_PER_WARP = 64
_FLOOR = """
extern "C" __global__ void __launch_bounds__(256)
gather_floor(const int* __restrict__ col, const float4* __restrict__ lhs, float* __restrict__ sink,
             long long num_edges, int vectors)
{
    constexpr int CHUNK = %d, BATCH = 8;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const long long first = warp * CHUNK;
    if (first >= num_edges) return;
    const long long last = min(first + CHUNK, num_edges);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (long long e = first; e < last; e += BATCH) {
        int c[BATCH];
#pragma unroll
        for (int k = 0; k < BATCH; ++k) c[k] = e + k < last ? col[e + k] : -1;
        if (lane < vectors) {
#pragma unroll
            for (int k = 0; k < BATCH; ++k) {
                if (c[k] >= 0) {
                    const float4 x = lhs[(long long)c[k] * vectors + lane];
                    acc.x += x.x; acc.y += x.y; acc.z += x.z; acc.w += x.w;
                }
            }
        }
    }
    sink[warp * 32 + lane] = acc.x + acc.y + acc.z + acc.w;
}
""" % _EDGES_PER_WARP


def _median_ms(call, device: torch.device) -> float:
    """Device time of ``call``: the median of repeats after a warm-up, the L2 overwritten
    before each (the project's timing, :func:`gsparse.tune.measure.time_calls`)."""
    return time_calls(call, [()], device, budget_s=0.1, min_repeats=20, flush_l2=True, hide_host=True).median_ms


def _space(g, F: int, gen: torch.Generator, out: str | None) -> str:
    """The best of the space and the model's pick for copy_lhs sum at ``F``, from every
    schedule timed (collect_cell's own timing: device time, median, the L2 flushed)."""
    case, target = Case("spmm:copy_lhs:sum"), Target.of(g.device)
    cell = collect_cell(case, g, F, torch.float32, target, gen)
    if out:
        with open(out, "a") as sink:
            sink.write(json.dumps({"graph": {"num_edges": g.num_edges, "num_src": g.num_src}, **cell}) + "\n")
    times = {entry["schedule"]: entry["ms"] for entry in cell["schedules"] if "ms" in entry}
    best = min(times, key=times.get)
    task, _ = case.call(g, case.operands(g, F, torch.float32, gen), F)
    model = select.model_choice("spmm", g, task, target).to_json()
    label = schedule_from_json
    return (f"best {times[best]:.3f} ms ({label(best)}), model {times.get(model, float('nan')):.3f} ms "
            f"({label(model)}), {len(times)} schedules")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", type=int, default=0, help="also time every schedule on the first N graphs")
    parser.add_argument("--out", help="append the measured cells to this JSON-lines file")
    args = parser.parse_args()
    device = torch.device("cuda")
    graphs = {
        "uniform, 1M rows of 16": lambda: datasets.random_graph(1_000_000, datasets.Regular(16), seed=3, device=device),
        "R-MAT scale 19, 32 edges a row": lambda: datasets.rmat_graph(19, 32, seed=1, device=device),
        "R-MAT scale 20, 16 edges a row": lambda: datasets.rmat_graph(20, 16, seed=2, device=device),
        "community, 100K rows of ~130": lambda: datasets.community_graph(
            100_000, datasets.LogNormal(130.0, 0.5), 8192, 0.7, seed=4, device=device),
    }
    kernel = get_kernel(_FLOOR, "gather_floor")
    gen = torch.Generator(device=device).manual_seed(0)
    for index, (name, build) in enumerate(graphs.items()):
        g = build()
        col = g.col.int()
        warps = math.ceil(g.num_edges / _EDGES_PER_WARP)
        sink = torch.empty(warps * 32, device=device)
        times = {}
        for F in _WIDTHS:
            x = torch.randn(g.num_src, F, generator=gen, device=device)

            def floor(x=x, F=F):
                kernel.launch(math.ceil(warps * 32 / 256), 256, [col, x, sink, i64(g.num_edges), i32(F // 4)])

            times[F] = (_median_ms(lambda x=x: gsparse.gspmm(g, "copy_lhs", "sum", x, None), device),
                        _median_ms(floor, device))
        line = ", ".join(f"F={F}: gspmm {t[0]:.3f} ms, floor {t[1]:.3f} ms" for F, t in times.items())
        per = {F: (times[F][0] / F, times[F][1] / F) for F in _WIDTHS}
        print(f"{name} ({g.num_edges:,} edges, {g.num_src:,} nodes): {line}\n"
              f"    per feature, 100 over 128: gspmm {per[100][0] / per[128][0]:.2f}, floor {per[100][1] / per[128][1]:.2f}; "
              f"96 over 128: gspmm {per[96][0] / per[128][0]:.2f}, floor {per[96][1] / per[128][1]:.2f}", flush=True)
        if index < args.space:
            for F in _WIDTHS:
                print(f"    space at F={F}: {_space(g, F, gen, args.out)}", flush=True)


if __name__ == "__main__":
    main()
