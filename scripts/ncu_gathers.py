"""Targets for Nsight Compute: where the gather-bound kernels spend their memory system.

One profiled launch per kernel, after an unprofiled warm-up (compilation, first touch):
reddit-like u_dot_v at 32 and 64 fp32 features (the best edge schedule, and at 64 the
``row_transposed`` one) beside the g-SpMM default at the same width, then products-like
g-SpMM at F = 1 beside cuSPARSE (``torch.sparse.mm``). Run on a GPU machine from the
repository root (``docs/results/h100-2026-11-23-ncu-gathers.txt`` holds the H100 output):

    PYTHONPATH=src ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \\
        --section LaunchStats --section SchedulerStats python3 scripts/ncu_gathers.py
"""
import torch

import gsparse
from gsparse import datasets


def profiled(name: str, launch) -> None:
    launch()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    launch()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("profiled", name, flush=True)


def main() -> None:
    torch.manual_seed(0)
    g = datasets.preset("reddit-like", device="cuda")
    sddmm_schedules = {
        32: {"edge.g64.l2.f2.v4": gsparse.SddmmEdge(groups_per_block=64, lanes=2, features_per_thread=2, vector_width=4)},
        64: {"edge.g32.l4.f4.v4": gsparse.SddmmEdge(groups_per_block=32, lanes=4, features_per_thread=4, vector_width=4),
             "row_transposed.g4.l16.f1.v4.b16": gsparse.SddmmRowTransposed(
                 groups_per_block=4, lanes=16, features_per_thread=1, vector_width=4, edges_per_batch=16)},
    }
    for feature_len, schedules in sddmm_schedules.items():
        x = torch.randn(g.num_src, feature_len, device="cuda")
        y = torch.randn(g.num_dst, feature_len, device="cuda")
        for name, schedule in schedules.items():
            profiled(f"reddit-like F={feature_len} gsddmm {name}",
                     lambda: gsparse.gsddmm(g, "dot", x, y, "u", "v", schedule=schedule))
        profiled(f"reddit-like F={feature_len} gspmm default",
                 lambda: gsparse.gspmm(g, "copy_lhs", "sum", x))
    del g  # free the reddit-like graph before products-like
    g = datasets.preset("products-like", device="cuda")
    x = torch.randn(g.num_src, 1, device="cuda")
    profiled("products-like F=1 gspmm default", lambda: gsparse.gspmm(g, "copy_lhs", "sum", x))
    ones = torch.ones(g.num_edges, device="cuda")
    a = torch.sparse_csr_tensor(g.rowptr, g.col, ones, (g.num_dst, g.num_src))
    profiled("products-like F=1 cusparse", lambda: torch.sparse.mm(a, x))


if __name__ == "__main__":
    main()
