"""Times of the CPU triangular solves per matrix family: MKL (gsparse's CPU path) and SciPy's
``spsolve_triangular``.

    PYTHONPATH=src python scripts/sptrsv_cpu_solve_times.py --rows 1000000

Prints one Markdown table of milliseconds per solve (the best of ``--repeat`` runs) for 1
and 16 right-hand sides, lower factors in float64.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy.sparse.linalg import spsolve_triangular

from gsparse.backends import cpu_triangular
from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.analysis import dependency_graph, levels


def _best_ms(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--families", default=",".join(triangular.FAMILIES))
    args = parser.parse_args()
    print("| family | rows | nnz | levels | right-hand sides | MKL ms | SciPy ms |")
    print("|---|---|---|---|---|---|---|")
    for family in args.families.split(","):
        matrix = triangular.generate(family, args.rows, seed=0)
        crow = torch.from_numpy(matrix.indptr.astype(np.int64))
        col = torch.from_numpy(matrix.indices.astype(np.int64))
        values = torch.from_numpy(matrix.data)
        rows = dependency_graph(matrix.indptr, matrix.indices, True)
        depth = int(levels(rows.ptr, rows.deps).max()) + 1
        for k in (1, 16):
            b = torch.randn(matrix.shape[0], k, dtype=torch.float64)
            mkl = _best_ms(lambda: cpu_triangular.solve(crow, col, values, b, True, False, False), args.repeat)
            scipy = _best_ms(lambda: spsolve_triangular(matrix, b.numpy()), args.repeat)
            print(f"| {family} | {matrix.shape[0]:,} | {matrix.nnz:,} | {depth:,} | {k} | {mkl:.1f} | "
                  f"{scipy:.1f} |", flush=True)


if __name__ == "__main__":
    main()
