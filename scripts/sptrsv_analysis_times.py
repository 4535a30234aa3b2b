"""Times of SpTRSV's host-side preprocessing per matrix family: build, analysis, plan, selection.

    PYTHONPATH=src python scripts/sptrsv_analysis_times.py --rows 4000000

Prints one Markdown table: seconds to generate the factor, to build its row graph, to
compute its levels, its 10 features, one plan per scheme below, and the selector's pick
(an untrained MLP over the reduced space: selection cost does not depend on training).
The grid is an H100's: 132 blocks, 8,448 resident warps.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv import analysis, features, scheduling, selector
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.kernels.sptrsv.space import reduced_space

SCHEMES = {
    "rr": SptrsvSchedule(),
    "balance32": SptrsvSchedule(merge_rows=32, grouping="rg_balance", warp_schedule="ws_balance", alpha_level=2),
    "locality": SptrsvSchedule(subwarps=4, sw_rnnz=2, merge="merge_avg", merge_rows=32, merge_thresh=8,
                               reorder=True, warp_schedule="ws_locality", alpha_level=math.inf),
    "locality1": SptrsvSchedule(warp_schedule="ws_locality", alpha_level=0),
}


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--families", default=",".join(triangular.FAMILIES))
    args = parser.parse_args()
    dummy = selector.SchemeSelector(reduced_space(), torch.zeros(66), torch.ones(66))
    print(f"| family | rows | nnz | levels | build s | graph s | levels s | features ms | "
          f"{' | '.join(f'plan {k} s' for k in SCHEMES)} | select ms |")
    print("|" + "---|" * (9 + len(SCHEMES)))
    for family in args.families.split(","):
        matrix, build = _timed(lambda: triangular.generate(family, args.rows, seed=0))
        rows, graph_s = _timed(lambda: analysis.dependency_graph(matrix.indptr, matrix.indices, True))
        level, levels_s = _timed(lambda: analysis.levels(rows.ptr, rows.deps))
        feats, features_s = _timed(lambda: features.matrix_features(rows, level))
        plans = [_timed(lambda s=s: scheduling.plan(rows, level, s, 132, 8448))[1] for s in SCHEMES.values()]
        dummy.select(feats)
        _, select_s = _timed(lambda: dummy.select(feats))
        print(f"| {family} | {matrix.shape[0]:,} | {matrix.nnz:,} | {int(level.max()) + 1:,} | {build:.2f} | "
              f"{graph_s:.2f} | {levels_s:.2f} | {features_s * 1e3:.1f} | "
              f"{' | '.join(f'{p:.2f}' for p in plans)} | {select_s * 1e3:.2f} |", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
