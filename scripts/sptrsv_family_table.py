"""Sizes and level counts of generated triangular factors, with their generation times.

    PYTHONPATH=src python scripts/sptrsv_family_table.py --families geometric,community,arrow,tree \\
        --rows 100000,500000 --seeds 0,1

Prints one Markdown table, a row per (family, rows, seed): the factor's rows and stored
entries (diagonal included), mean and largest entries per row, its number of levels
(``dependency_graph`` and ``levels`` of ``gsparse.kernels.sptrsv.analysis``, the lower
solve), the parameters :func:`gsparse.datasets.triangular.parameters` draws for it (the
corpus families) and the seconds :func:`generate` took (one run).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.analysis import dependency_graph, levels


def _drawn(family: str, rows: int, seed: int) -> str:
    if family not in triangular.CORPUS_FAMILIES:
        return ""
    drawn = triangular.parameters(family, rows, seed)
    if family == "community":
        sizes = drawn.pop("sizes")
        drawn = {"communities": len(sizes), "median size": int(np.median(sizes)), **drawn}
    drawn.pop("n", None)
    drawn.pop("seed")
    return ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in drawn.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(triangular.CORPUS_FAMILIES))
    parser.add_argument("--rows", default="100000,500000")
    parser.add_argument("--seeds", default="0,1")
    args = parser.parse_args()
    print("| family | seed | n | nnz | mean row | max row | levels | build s | drawn |")
    print("|---|---|---|---|---|---|---|---|---|")
    for family in args.families.split(","):
        for rows in (int(r) for r in args.rows.split(",")):
            for seed in (int(s) for s in args.seeds.split(",")):
                start = time.perf_counter()
                matrix = triangular.generate(family, rows, seed)
                seconds = time.perf_counter() - start
                graph = dependency_graph(matrix.indptr, matrix.indices, True)
                depth = int(levels(graph.ptr, graph.deps).max()) + 1
                length = np.diff(matrix.indptr)
                print(f"| {family} | {seed} | {matrix.shape[0]:,} | {matrix.nnz:,} | {length.mean():.1f} | "
                      f"{length.max():,} | {depth:,} | {seconds:.2f} | {_drawn(family, rows, seed)} |", flush=True)


if __name__ == "__main__":
    main()
