#!/usr/bin/env bash
# compute-sanitizer memcheck over a sampled g-SDDMM schedule space and the fused edge softmax
# (forward and backward) on small edge-case graphs: empty rows, no edges, a long row,
# bipartite shapes, head lengths that are not multiples of a slice, int64 indices, edge ids
# unlike CSR positions; every head length of 8 or more also runs dot on row_transposed
# schedules (batches that run past a row's end), and of 3 or more a random operator on
# edge_transposed ones (ranges that end inside a batch), and of 40 or more fp32/fp64
# features a random operator on row_transposed launches of part of a head. Every result
# is also checked against the float64 reference.
# Run on a GPU machine from the repository root: bash scripts/sanitize_sddmm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src"
exec compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 --print-limit 20 python3 - <<'EOF'
import random
import sys

import torch

import gsparse
from gsparse.algebra import BINARY_OPS, SDDMM_OPS, TARGETS
from gsparse.kernels.sddmm import (
    EdgeTransposed,
    Row,
    RowTransposed,
    run_sddmm,
    schedule_space,
    task_for,
)
from gsparse.kernels.softmax import run_edge_softmax, run_edge_softmax_backward
from gsparse.target import Target
from gsparse.testing.reference import edge_softmax_ref, gsddmm_ref

gen = torch.Generator().manual_seed(0)
src = torch.randint(0, 37, (400,), generator=gen)
dst = torch.randint(0, 53, (400,), generator=gen)
dst[dst % 4 == 0] = 2  # one long row; rows divisible by 4 other than 0 stay empty
long_dst = torch.cat([torch.full((3000,), 1), torch.randint(0, 5, (50,), generator=gen)])
bipartite = gsparse.Graph.from_edge_index(torch.stack([src, dst]), 37, 53)
graphs = {
    "bipartite": bipartite,
    "sorted": gsparse.Graph.from_edge_index(torch.stack([src, dst.sort().values]), 37, 53),
    "int64": bipartite.with_index_dtype(torch.int64),
    "long_row": gsparse.Graph.from_edge_index(
        torch.stack([torch.randint(0, 11, (3050,), generator=gen), long_dst]), 11, 5),
    "no_edges": gsparse.Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), 4, 6),
}
rows = {"u": lambda g: g.num_src, "v": lambda g: g.num_dst, "e": lambda g: g.num_edges}
rng = random.Random(0)
failures = checked = 0


def report(ok: bool, what: str) -> None:
    global failures, checked
    checked += 1
    if not ok:
        failures += 1
        print("MISMATCH", what)


def check_sddmm(name, g, cuda, head_len, dtype, pick, op=None) -> None:
    """One launch of a schedule ``pick`` chooses from the space of a random call's task."""
    op = op or rng.choice(SDDMM_OPS)
    lhs_target, rhs_target = rng.choice(TARGETS), rng.choice(TARGETS)
    binop = BINARY_OPS[op]
    heads = (2,) if op == "dot" else ()  # dot: two heads of head_len features
    out_shape = (2, 1) if op == "dot" else (head_len,)
    lhs = (torch.randn(rows[lhs_target](g), *heads, head_len, dtype=torch.float64)
           if binop.uses_lhs else None)
    rhs = (torch.rand(rows[rhs_target](g), *heads, head_len, dtype=torch.float64) + 0.5
           if binop.uses_rhs else None)
    lhs_cuda = None if lhs is None else lhs.to("cuda", dtype)
    rhs_cuda = None if rhs is None else rhs.to("cuda", dtype)
    task = task_for(cuda, op, lhs_cuda, rhs_cuda, lhs_target, rhs_target, out_shape)
    candidates = pick(list(schedule_space(task, cuda.stats, Target.of(cuda.device))))
    if not candidates:
        return
    schedule = rng.choice(candidates)
    expected = gsddmm_ref(g, op, lhs, rhs, lhs_target, rhs_target)
    out = run_sddmm(cuda, op, lhs_cuda, rhs_cuda, lhs_target, rhs_target, out_shape, schedule)
    tolerance = 2e-2 if dtype == torch.float16 else 1e-4
    report(torch.allclose(out.double().cpu(), expected, rtol=tolerance, atol=tolerance),
           f"{name} {lhs_target}_{op}_{rhs_target} F={head_len} {dtype} {schedule}")


def of(*types, sliced=False):
    return lambda space: [s for s in space if isinstance(s, types) and (s.features_per_launch or not sliced)]


for name, g in graphs.items():
    cuda = g.to("cuda")
    for head_len in (1, 3, 8, 40, 130):
        for dtype in (torch.float16, torch.float32, torch.float64):
            for _ in range(3):
                check_sddmm(name, g, cuda, head_len, dtype, lambda space: space)
            # the transposed butterfly only runs for dot: batches past a row's end, empty rows
            for _ in range(2):
                check_sddmm(name, g, cuda, head_len, dtype, of(RowTransposed), op="dot")
            # edge ranges that end inside a batch and rows that span ranges, every operator
            for _ in range(2):
                check_sddmm(name, g, cuda, head_len, dtype, of(EdgeTransposed))
            # row skeletons over launches of part of a head, the last one partly past it
            check_sddmm(name, g, cuda, head_len, dtype, of(Row, RowTransposed, sliced=True))
    for shape in ((), (8, 1), (40,)):
        logits = torch.randn(g.num_edges, *shape, dtype=torch.float64)
        for norm_by in ("dst", "src"):
            y = run_edge_softmax(cuda, logits.cuda(), norm_by)
            report(torch.allclose(y.cpu(), edge_softmax_ref(g, logits, norm_by)),
                   f"{name} edge_softmax {shape} {norm_by}")
            dz = run_edge_softmax_backward(cuda, y, torch.ones_like(y), norm_by)
            # the rows of a softmax sum to one, so a constant upstream gradient gives zero
            report(torch.allclose(dz.cpu(), torch.zeros_like(logits), atol=1e-12),
                   f"{name} edge_softmax backward {shape} {norm_by}")
torch.cuda.synchronize()
print(f"{checked} kernel launches checked, {failures} mismatches")
sys.exit(1 if failures else 0)
EOF
