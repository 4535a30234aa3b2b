"""The fast start in one block against the fast start over the whole GPU and cuSPARSE, on
small factors of every family: the design data of ``natural_schedule``'s one-block branch.

For each factor and number of right-hand sides: cuSPARSE's solve, the rule's scheme (and
where it runs in one block, the same scheme over the grid), and the one-block schemes of ``SCHEMES``;
each output checked against SciPy, each time the CUDA-event median of
:func:`gsparse.tune.measure.time_calls` (as the benchmark times). Records the factor's
pattern statistics and level count, so that a rule can be fitted on some families and
judged on the others.

    PYTHONPATH=src python scripts/sptrsv_one_block.py SPECS KS OUT.json

SPECS: comma-separated ``gsparse.bench.sptrsv.load_matrix`` specs; KS: e.g. ``1,16``.
"""
import dataclasses
import itertools
import json
import sys

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sl
import torch

from gsparse.bench import cusparse_triangular
from gsparse.bench import sptrsv as B
from gsparse.kernels.sptrsv import FactorPlans
from gsparse.kernels.sptrsv.analysis import levels
from gsparse.kernels.sptrsv.default import natural_schedule
from gsparse.kernels.sptrsv.schedule import NaturalOrderSchedule
from gsparse.kernels.sptrsv.stats import pattern_stats
from gsparse.target import Target
from gsparse.tune.measure import time_calls

SCHEMES = [NaturalOrderSchedule(warps_per_block=nw, rows_per_ticket=rt, rows_per_thread=thread, level_order=lo,
                                one_block=True)
           for nw, (rt, thread), lo in itertools.product((32,), ((32, True), (8, True), (1, False), (4, False)),
                                                          (False, True))]


def main() -> None:
    dev = torch.device("cuda")
    target = Target.of(dev)
    B._warm_up(dev, None)
    specs, ks = sys.argv[1].split(","), [int(k) for k in sys.argv[2].split(",")]
    out = []
    for spec in specs:
        _, m = B.load_matrix(spec)
        m = m.tocsr()
        n = m.shape[0]
        crow, col, values = B.device_csr(m, dev)
        stats = pattern_stats(crow, col)
        below = sp.tril(m, -1).tocsr()
        depth = int(levels(below.indptr, below.indices).max(initial=-1)) + 1
        for k in ks:
            rhs = torch.randn((n, k), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
            b = (rhs[:, 0] if k == 1 else rhs).to(dev).contiguous()
            ref = sl.spsolve_triangular(m, rhs.numpy(), lower=True)
            plans = FactorPlans(crow, col, True, stats)
            task = plans.task(torch.float64, False, False, k)
            ms = {}

            def timed(fn):
                x = fn()
                err = float((x.double().cpu().reshape(ref.shape) - torch.from_numpy(ref)).abs().max()
                            / max(np.abs(ref).max(), 1e-300))
                if not err < 1e-8:
                    return f"wrong: {err:.2e}"
                return time_calls(fn, [()], dev, budget_s=0.05).median_ms

            spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, False, k)
            spsm.analyse()
            spsm.load(b)
            ms["cusparse"] = timed(lambda: (spsm.solve(), spsm.result(k == 1))[1])
            rule = natural_schedule(stats, task, target, lambda: plans.device_system(False).level_count(
                task.index_dtype, target))
            rule_plan = plans.build_plan(task, rule, target)
            ms["rule " + str(rule)] = timed(lambda: rule_plan(values, b))
            if rule.one_block:  # the same scheme over the grid, one block per SM
                grid = dataclasses.replace(rule, one_block=False)
                grid_plan = plans.build_plan(task, grid, target)
                ms["grid " + str(grid)] = timed(lambda: grid_plan(values, b))
            for scheme in SCHEMES:
                try:
                    plan = plans.build_plan(task, scheme, target)
                except ValueError as error:
                    ms[str(scheme)] = f"refused: {error}"
                    continue
                ms[str(scheme)] = timed(lambda: plan(values, b))
            numbers = {key: v for key, v in ms.items() if isinstance(v, float)}
            blocks = [(v, key) for key, v in numbers.items() if key.endswith(".block")]
            best = f"{min(blocks)[1]} {min(blocks)[0]:.4f}" if blocks else "none (x does not fit)"
            print(f"{spec} n={n} levels={depth} k={k}: cusparse {ms['cusparse']:.4f}, rule {list(ms.values())[1]}, "
                  f"best block {best}", flush=True)
            out.append({"matrix": spec, "n": n, "nnz": int(m.nnz), "levels": depth, "k": k,
                        "stats": {"longest_row": stats.longest_row, "near_row_share": stats.near_row_share,
                                  "mean_row": stats.mean_row}, "ms": ms})
    with open(sys.argv[3], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
