"""Run a sampled g-SpMM schedule space on small edge-case graphs and check every result.

Meant to run under compute-sanitizer (scripts/sanitize_spmm.sh): every kernel variant is
launched on graphs where out-of-bounds accesses would happen if a bound were wrong (empty
rows, no edges, a long row, bipartite shapes, feature lengths that are not multiples of a
slice, int64 indices, several column tiles, long rows split into chunks, output-tiled
row ranges), and each output is compared with the float64 reference.
"""

from __future__ import annotations

import dataclasses
import random
import sys

import torch

import gsparse
from gsparse.algebra import BINARY_OPS, REDUCERS, SPMM_OPS
from gsparse.kernels.memory import allocate
from gsparse.kernels.spmm import (
    ColumnTiled,
    OutputTiled,
    SplitRows,
    SpmmSchedule,
    SpmmTask,
    build_plan,
    schedule_space,
    task_for,
)
from gsparse.target import Target
from gsparse.testing.reference import gspmm_ref


def graphs() -> dict[str, gsparse.Graph]:
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, 37, (400,), generator=gen)
    dst = torch.randint(0, 53, (400,), generator=gen)
    dst[dst % 4 == 0] = 2  # one long row; rows divisible by 4 other than 0 stay empty
    long_dst = torch.cat([torch.full((3000,), 1), torch.randint(0, 5, (50,), generator=gen)])
    return {
        "bipartite": gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_src=37, num_dst=53),
        "int64": gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_src=37, num_dst=53)
        .with_index_dtype(torch.int64),
        "long_row": gsparse.Graph.from_edge_index(
            torch.stack([torch.randint(0, 11, (3050,), generator=gen), long_dst]), num_src=11, num_dst=5),
        "no_edges": gsparse.Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), num_src=4, num_dst=6),
        # 2,500 sources: three 1,024-row column tiles, the last one partial
        "wide": gsparse.Graph.from_edge_index(torch.stack([
            torch.randint(0, 2_500, (5_000,), generator=gen),
            torch.randint(0, 70, (5_000,), generator=gen)]), num_src=2_500, num_dst=70),
    }


def schedules(g: gsparse.Graph, task: SpmmTask, target: Target,
              rng: random.Random) -> list[SpmmSchedule]:
    """A sample of the task's space, plus the column-tiled skeleton with several tiles
    (tasks that read lhs), rows split into chunks of 32 edges (the long rows into dozens)
    and, up to 4 features of a copy_lhs, the output-tiled skeleton."""
    picked = rng.sample(list(schedule_space(task, g.stats, target)), 6)
    if task.num_features <= 8 and task.lhs_shape is not None:
        picked.append(ColumnTiled(rows_per_block=64, feature_lanes=1, edge_lanes=16,
                                  column_tile=1024, degree_sorted=rng.random() < 0.5))
    if task.num_features <= 4 and task.algorithm.message_is_lhs:
        picked.append(OutputTiled(warps_per_block=rng.choice([8, 16, 32]), outputs_per_thread=4,
                                  column_groups=rng.choice([1, 2, 4])))
    picked.append(SplitRows(rows_per_block=8, feature_lanes=8, edge_lanes=4, nnz_tile=2,
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
    failures = checked = 0
    for name, g in graphs().items():
        cuda = g.to("cuda")
        target = Target.of(cuda.device)
        for feature_len in (1, 3, 8, 40, 130):
            dtype = rng.choice([torch.float16, torch.float32, torch.float64])
            # the output-tiled skeleton runs copy_lhs with no arg indices: every fourth
            # draw is one, so that it is sampled
            op = "copy_lhs" if rng.random() < 0.25 else rng.choice(SPMM_OPS)
            reduce = rng.choice(list(REDUCERS))
            binop = BINARY_OPS[op]
            with_arg = REDUCERS[reduce].keeps_arg and rng.random() < 0.7
            lhs = torch.randn(g.num_src, feature_len, dtype=torch.float64) if binop.uses_lhs else None
            rhs = (torch.rand(g.num_edges, feature_len, dtype=torch.float64) + 0.5
                   if binop.uses_rhs else None)
            expected = gspmm_ref(g, op, reduce, lhs, rhs)
            aligned = task_for(cuda, op, reduce, on_gpu(lhs, dtype), on_gpu(rhs, dtype), (feature_len,),
                               with_arg)
            for schedule in schedules(cuda, aligned, target, rng):
                # half the scalar staged launches stage an lhs that is not 16-byte aligned
                # (vector schedules need aligned operands, and say so)
                staged = isinstance(schedule, (ColumnTiled, OutputTiled))
                skip = int(staged and schedule.vector_width == 1 and rng.random() < 0.5)
                x, w = on_gpu(lhs, dtype, skip), on_gpu(rhs, dtype)
                task = task_for(cuda, op, reduce, x, w, (feature_len,), with_arg)
                graph, plan_target = cuda, target
                if isinstance(schedule, OutputTiled) and rng.random() < 0.5:
                    # 48 KB of shared memory: several tiles, capped row ranges, more blocks
                    # than SMs (a fresh graph: layouts and plans are kept per graph)
                    graph = g.to("cuda")
                    plan_target = dataclasses.replace(target, shared_bytes_per_block=48 * 1024)
                out = allocate((g.num_dst, feature_len), dtype, cuda.device)
                arg_u = allocate(out.shape, torch.int64, cuda.device) if with_arg else None
                arg_e = allocate(out.shape, torch.int64, cuda.device) if with_arg else None
                build_plan(graph, task, schedule, plan_target)(lhs=x, rhs=w, out=out, arg_u=arg_u,
                                                                arg_e=arg_e)
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
