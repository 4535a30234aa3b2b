"""Run sampled SpTRSV schemes on small edge-case factors and check every result against SciPy.

Meant to run under compute-sanitizer (scripts/sanitize_sptrsv.sh): every code variant of
the reduced space (its 12: warps, subwarps, row paths, with and without reordering), plus
schemes with the code optimisations switched off, each also with ``ready_by_value``, and the
fast start's schemes (its rule's, and subwarps of other widths), is launched on the factors
of :func:`gsparse.datasets.triangular.edge_cases` (a dense row, rows without off-diagonal
entries, diagonal only, n = 1, a unit diagonal stored nowhere, no entries at all) and a
small member of each family, in float32 and float64, with 1 and 16 right-hand sides,
lower, upper and transposed, int32 and int64 indices; outputs start poisoned (NaN), so an
element never written fails the check. Each solver solves twice, so that the second solve
runs on the ``x`` its first launch prepared (the fast start on small systems).

    PYTHONPATH=src python scripts/sptrsv_selfcheck.py [--seed 0] [--shard I/N]

Prints one line per failure and closes with "N passed, M failed"; exits 1 on a failure. With
``--shard I/N`` it runs every N-th check of the same list, from the I-th.
"""

from __future__ import annotations

import argparse
import random
import sys

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import spsolve_triangular

from gsparse import TriangularSolver
from gsparse.datasets import triangular
from gsparse.kernels.memory import poisoned
from gsparse.kernels.sptrsv.codegen import CodeVariant
from gsparse.kernels.sptrsv.default import NATURAL_SCHEMES
from gsparse.kernels.sptrsv.schedule import NaturalOrderSchedule, SptrsvSchedule
from gsparse.kernels.sptrsv.space import reduced_space

# Subwarps of widths the rule never picks, sharing rows and a row per lane.
_OTHER_SUBWARPS = (NaturalOrderSchedule(warps_per_block=8, rows_per_ticket=2, rows_per_thread=False, subwarps=8),
                   NaturalOrderSchedule(warps_per_block=16, rows_per_ticket=8, subwarps=2, level_order=True))

TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-4}


def factors() -> dict[str, tuple[sp.csr_array, bool]]:
    found = dict(triangular.edge_cases())
    for family in triangular.FAMILIES:
        found[family] = (triangular.generate(family, 200, seed=7), False)
    return found


def schedules(rng: random.Random) -> list[SptrsvSchedule | NaturalOrderSchedule]:
    """One scheme per code variant of the reduced space (a random one of it), two with the
    collaborative read, sync elimination and early division switched off, each also with
    ``ready_by_value``; and the fast start's schemes."""
    by_variant: dict[CodeVariant, list[SptrsvSchedule]] = {}
    for schedule in reduced_space():
        by_variant.setdefault(CodeVariant.of(schedule), []).append(schedule)
    picked = [rng.choice(group) for group in by_variant.values()]
    for schedule in rng.sample(picked, 2):
        picked.append(SptrsvSchedule(**{**schedule.knobs(), "collaborative_read": False,
                                        "sync_elimination": False, "early_division": False}))
    by_value = [SptrsvSchedule(**{**s.knobs(), "ready_by_value": True}) for s in picked]
    return picked + by_value + list(NATURAL_SCHEMES) + list(_OTHER_SUBWARPS)


def check(matrix: sp.csr_array, lower: bool, unit: bool, transpose: bool, k: int, dtype: torch.dtype,
          index_dtype: torch.dtype, schedule: SptrsvSchedule | NaturalOrderSchedule) -> str | None:
    """None when both of a solver's two GPU solves match SciPy, else what went wrong."""
    csr = sp.csr_array(matrix if lower else matrix.T)
    csr.sort_indices()
    arrays = (torch.from_numpy(csr.indptr.astype(np.int64)).cuda(),
              torch.from_numpy(csr.indices.astype(np.int64)).cuda(),
              torch.from_numpy(csr.data).to(device="cuda", dtype=dtype), csr.shape)
    solver = TriangularSolver(arrays, lower=lower, unit_diagonal=unit, schedule=schedule)
    solver._pattern.device_plans.index_dtype = index_dtype
    system, system_lower = (sp.csr_array(csr.T), not lower) if transpose else (csr, lower)
    for solve in ("first", "second"):
        gen = torch.Generator().manual_seed(k + (solve == "second"))
        b = torch.randn((csr.shape[0], k), generator=gen, dtype=torch.float64)[:, 0 if k == 1 else slice(None)]
        with poisoned():
            x = solver.solve(b.to(device="cuda", dtype=dtype), transpose=transpose)
        torch.cuda.synchronize()
        want = spsolve_triangular(sp.csr_array(system, dtype=np.float64), b.numpy(), lower=system_lower,
                                  unit_diagonal=unit)
        got = x.double().cpu().numpy()
        if not np.isfinite(got).all():
            return f"{solve} solve: {int((~np.isfinite(got)).sum())} elements of x never written"
        error = np.abs(got - want).max(initial=0.0) / max(1.0, np.abs(want).max(initial=0.0))
        if not error <= TOLERANCE[dtype]:
            return f"{solve} solve: relative error {error:.2e}"
    return None


def cases(seed: int) -> list[tuple]:
    """Every check of the run, ``(name, matrix, lower, unit, transpose, k, dtype, index_dtype,
    schedule)``, drawn from ``seed`` (the same list in every shard)."""
    rng = random.Random(seed)
    drawn = []
    for name, (matrix, unit) in factors().items():
        for schedule in schedules(rng):
            lower, transpose = rng.random() < 0.5, rng.random() < 0.5
            for k, dtype, index_dtype in ((1, torch.float64, torch.int32), (16, torch.float32, torch.int64),
                                          (rng.choice([1, 3, 16]), rng.choice([torch.float32, torch.float64]),
                                           rng.choice([torch.int32, torch.int64]))):
                drawn.append((name, matrix, lower, unit, transpose, k, dtype, index_dtype, schedule))
    return drawn


def _shard(text: str) -> tuple[int, int]:
    part, _, count = text.partition("/")
    if not (part.isdigit() and count.isdigit() and 0 <= int(part) < int(count)):
        raise argparse.ArgumentTypeError(f"expected I/N with 0 <= I < N, got {text!r}")
    return int(part), int(count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shard", type=_shard, default=(0, 1), metavar="I/N",
                        help="run every N-th check from the I-th (scripts/sanitize_sptrsv.sh runs shards side by side)")
    args = parser.parse_args()
    part, count = args.shard
    mine = cases(args.seed)[part::count]
    passed = failed = 0
    for done, (name, matrix, lower, unit, transpose, k, dtype, index_dtype, schedule) in enumerate(mine, 1):
        problem = check(matrix, lower, unit, transpose, k, dtype, index_dtype, schedule)
        if problem is None:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {name} lower={lower} unit={unit} transpose={transpose} k={k} {dtype} "
                  f"{index_dtype} {schedule}: {problem}", flush=True)
        if done % 100 == 0:
            print(f"shard {part}/{count}: {done} of {len(mine)} checked", file=sys.stderr, flush=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
