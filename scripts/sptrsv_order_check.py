"""The fast start in natural order against the fast start by level, on each factor, at k
right-hand sides, with the rule's statistic of rows near the diagonal: its picks with the
order forced each way, the analysed default and cuSPARSE; float64, each output checked
against SciPy, then timed (CUDA events, the median of ``--repeats`` calls after the
check's). The held-out check of ``natural_schedule``'s order.

    PYTHONPATH=src python scripts/sptrsv_order_check.py stencil:500000:71,arrow:500000:51 1,4,16 OUT.json
"""
import argparse
import dataclasses
import json

import scipy.sparse.linalg as sl
import torch

from gsparse.bench import cusparse_triangular
from gsparse.bench import sptrsv as B
from gsparse.kernels.sptrsv import FactorPlans
from gsparse.kernels.sptrsv.default import natural_schedule, natural_serves
from gsparse.target import Target
from gsparse.tune.measure import time_calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", help="factors, comma-separated (gsparse.bench.sptrsv.load_matrix specs)")
    parser.add_argument("ks", help="numbers of right-hand sides, comma-separated")
    parser.add_argument("out", help="JSON file of every measurement")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    dev = torch.device("cuda")
    target = Target.of(dev)
    B._warm_up(dev, None)

    def timed(fn) -> float:
        fn()
        torch.cuda.synchronize()
        return time_calls(fn, [()], dev, warmup=0, min_repeats=args.repeats, max_repeats=args.repeats).median_ms

    out = []
    for spec in args.specs.split(","):
        name, m = B.load_matrix(spec)
        n = m.shape[0]
        crow, col, values = B.device_csr(m, dev)
        for k in (int(k) for k in args.ks.split(",")):
            rhs = torch.randn((n, k), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
            b = (rhs[:, 0] if k == 1 else rhs).to(dev).contiguous()
            ref = torch.from_numpy(sl.spsolve_triangular(m.tocsr(), rhs.numpy(), lower=True))
            plans = FactorPlans(crow, col, True)
            task = plans.task(torch.float64, False, False, k)
            stats = plans.stats(False)
            levels = lambda: plans.device_system(False).level_count(task.index_dtype, target, plans.loader)  # noqa: E731
            picks = {"natural": natural_schedule(dataclasses.replace(stats, near_rows=0), task, target, levels),
                     "levels": natural_schedule(dataclasses.replace(stats, near_rows=stats.rows), task, target, levels)}
            res = {}
            for order, schedule in picks.items():
                plan = plans.build_plan(task, schedule, target)
                x = plan(values, b)
                err = float((x.double().cpu().reshape(ref.shape) - ref).abs().max() / max(ref.abs().max(), 1e-300))
                res[order] = timed(lambda: plan(values, b)) if err < 1e-8 else float("nan")
            fresh = FactorPlans(crow, col, True)  # its own analysis, as a new solver's
            scheme = fresh.chosen_schedule(task, target)
            analysed = fresh.build_plan(task, scheme, target)
            res["analysed"] = timed(lambda: analysed(values, b))
            spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, False, k)
            spsm.analyse()
            spsm.load(b)
            res["cusparse"] = timed(lambda: (spsm.solve(), spsm.result(k == 1)))
            rule = "levels" if natural_schedule(stats, task, target, levels).level_order else "natural"
            record = {"matrix": spec, "k": k, "near_row_share": stats.near_row_share, "mean_row": stats.mean_row,
                      "rule": rule, "default": "fast start" if natural_serves(stats, task) else "analysed",
                      "schemes": {order: str(s) for order, s in picks.items()}, "ms": res}
            print(f"{name} k={k}: near rows {stats.near_row_share:.2f}, rule {rule}; natural {res['natural']:.4f}, "
                  f"levels {res['levels']:.4f}, analysed {res['analysed']:.4f}, cusparse {res['cusparse']:.4f}",
                  flush=True)
            out.append(record)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
