"""Run a sampled g-SpMM schedule space on small edge-case graphs and check every result.

Meant to run under compute-sanitizer (scripts/sanitize_spmm.sh): every kernel variant is
launched on graphs where out-of-bounds accesses would happen if a bound were wrong (empty
rows, no edges, a long row, bipartite shapes, feature lengths that are not multiples of a
slice, int64 indices, several column tiles, long rows split into chunks, output-tiled
row ranges), and each output is compared with the float64 reference.
"""

from __future__ import annotations

import random
import sys

import torch

import gsparse
from gsparse.algebra import BINARY_OPS, REDUCERS, SPMM_OPS
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels.spmm import SpmmSchedule, run_spmm, schedule_space
from gsparse.testing.reference import gspmm_ref


def graphs() -> dict[str, gsparse.Graph]:
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, 37, (400,), generator=gen)
    dst = torch.randint(0, 53, (400,), generator=gen)
    dst[dst % 4 == 0] = 2  # one long row; rows divisible by 4 other than 0 stay empty
    long_dst = torch.cat([torch.full((3000,), 1), torch.randint(0, 5, (50,), generator=gen)])
    return {
        "bipartite": gsparse.Graph.from_edge_index(torch.stack([src, dst]), 37, 53),
        "int64": gsparse.Graph.from_edge_index(torch.stack([src, dst]), 37, 53)
        .with_index_dtype(torch.int64),
        "long_row": gsparse.Graph.from_edge_index(
            torch.stack([torch.randint(0, 11, (3050,), generator=gen), long_dst]), 11, 5),
        "no_edges": gsparse.Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), 4, 6),
        # 2,500 sources: three 1,024-row column tiles, the last one partial
        "wide": gsparse.Graph.from_edge_index(torch.stack([
            torch.randint(0, 2_500, (5_000,), generator=gen),
            torch.randint(0, 70, (5_000,), generator=gen)]), 2_500, 70),
    }


def schedules(g: gsparse.Graph, feature_len: int, dtype: torch.dtype,
              rng: random.Random) -> list[SpmmSchedule]:
    """A sample of the space for ``dtype``, plus the column-tiled skeleton with several
    tiles, rows split into chunks of 32 edges (the long rows into dozens) and, up to 4
    features, the output-tiled skeleton."""
    picked = rng.sample(schedule_space(g, feature_len, dtype), 6)
    if feature_len <= 8:
        picked.append(SpmmSchedule(rows_per_block=64, feature_lanes=1, edge_lanes=16,
                                   column_tile=1024, degree_sorted=rng.random() < 0.5))
    if feature_len <= 4:
        picked.append(SpmmSchedule(rows_per_block=rng.choice([8, 16, 32]), feature_lanes=1,
                                   edge_lanes=32, outputs_per_thread=4, output_tile=True,
                                   column_groups=rng.choice([1, 2, 4])))
    picked.append(SpmmSchedule(rows_per_block=8, feature_lanes=8, edge_lanes=4, nnz_tile=2,
                               row_split=32, degree_sorted=rng.random() < 0.5))
    return picked


def on_gpu(t: torch.Tensor | None, dtype: torch.dtype, skip: int = 0) -> torch.Tensor | None:
    """``t`` on the GPU as ``dtype``, ``skip`` elements past the start of its storage (an
    operand that is not 16-byte aligned)."""
    if t is None:
        return None
    storage = torch.empty(t.numel() + skip, dtype=dtype, device="cuda")
    view = storage[skip:].view(t.shape)
    view.copy_(t)
    return view


def main() -> int:
    rng = random.Random(0)
    shared_bytes_limit = spmm_kernels._shared_bytes_limit
    failures = checked = 0
    for name, g in graphs().items():
        cuda = g.to("cuda")
        for feature_len in (1, 3, 8, 40, 130):
            dtype = rng.choice([torch.float16, torch.float32, torch.float64])
            for schedule in schedules(g, feature_len, dtype, rng):
                # the output-tiled skeleton runs copy_lhs only (other ops fall back)
                op = "copy_lhs" if schedule.output_tile else rng.choice(SPMM_OPS)
                reduce = rng.choice(list(REDUCERS))
                binop = BINARY_OPS[op]
                lhs = torch.randn(g.num_src, feature_len, dtype=torch.float64) if binop.uses_lhs else None
                rhs = (torch.rand(g.num_edges, feature_len, dtype=torch.float64) + 0.5
                       if binop.uses_rhs else None)
                expected = gspmm_ref(g, op, reduce, lhs, rhs)
                with_arg = REDUCERS[reduce].keeps_arg and not schedule.output_tile
                # half the scalar column-tiled launches stage an lhs that is not 16-byte
                # aligned (vector schedules need aligned operands, and say so)
                skip = int(bool(schedule.column_tile or schedule.output_tile)
                           and schedule.vector_width == 1 and rng.random() < 0.5)
                target = cuda
                if schedule.output_tile and rng.random() < 0.5:
                    # 48 KB of shared memory: several tiles, capped row ranges, more blocks
                    # than SMs (a fresh graph: layouts and plans are kept per graph)
                    target = g.to("cuda")
                    spmm_kernels._shared_bytes_limit = lambda device: 48 * 1024
                result = run_spmm(target, op, reduce, on_gpu(lhs, dtype, skip), on_gpu(rhs, dtype),
                                  (feature_len,), schedule, with_arg=with_arg)
                spmm_kernels._shared_bytes_limit = shared_bytes_limit
                out = result[0] if with_arg else result
                # half precision rounds the output once: error relative to the largest value
                tolerance = 2e-3 if dtype == torch.float16 else 1e-5
                scale = float(expected.abs().max()) if expected.numel() else 1.0
                ok = torch.allclose(out.double().cpu(), expected, rtol=tolerance,
                                    atol=tolerance * max(scale, 1.0))
                checked += 1
                if not ok:
                    failures += 1
                    print(f"MISMATCH {name} F={feature_len} {op}/{reduce} {dtype} {schedule}")
    torch.cuda.synchronize()
    print(f"{checked} kernel launches checked, {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
