"""The fast start's order held out: natural order against levels on factors at k sides.

For each factor and number of right-hand sides: the rule's picks with the order forced each
way, the analysed default and cuSPARSE, with the rule's statistic of rows near the
diagonal; float64, each output checked against SciPy, then timed (CUDA events, the median of
``--repeats`` calls after the check's). The held-out check of ``natural_schedule``'s order.

    PYTHONPATH=src python scripts/sptrsv_order_check.py stencil:500000:71,arrow:500000:51 1,4,16 OUT.json
"""
import dataclasses
import json

import torch
from sptrsv_fast_start_schemes import (  # the same cells, checks and timers
    cell_parser, checked_ms, cusparse_ms, factors, median_ms)

from gsparse.bench import sptrsv as B
from gsparse.kernels.sptrsv import FactorPlans
from gsparse.kernels.sptrsv.default import natural_schedule, natural_serves
from gsparse.target import Target


def main() -> None:
    args = cell_parser(__doc__.splitlines()[0], repeats=15).parse_args()
    dev = torch.device("cuda")
    target = Target.of(dev)
    B._warm_up(dev, None)
    timed = median_ms(dev, args.repeats)
    out = []
    for spec, name, m, csr, cells in factors(args.specs, args.ks, dev):
        crow, col, values = csr
        for k, b, ref in cells:
            plans = FactorPlans(crow, col, True)
            task = plans.task(torch.float64, False, False, k)
            stats = plans.stats(False)
            levels = lambda: plans.device_system(False).level_count(task.index_dtype, target, plans.loader)  # noqa: E731
            picks = {"natural": natural_schedule(dataclasses.replace(stats, near_rows=0), task, target, levels),
                     "levels": natural_schedule(dataclasses.replace(stats, near_rows=stats.rows), task, target, levels)}
            res = {order: checked_ms(timed, plans.build_plan(task, schedule, target), values, b, ref)
                   for order, schedule in picks.items()}
            fresh = FactorPlans(crow, col, True)  # its own analysis, as a new solver's
            scheme = fresh.chosen_schedule(task, target)
            analysed = fresh.build_plan(task, scheme, target)
            res["analysed"] = timed(lambda: analysed(values, b))
            res["cusparse"] = cusparse_ms(timed, csr, m.shape[0], k, b)
            rule = "levels" if natural_schedule(stats, task, target, levels).level_order else "natural"
            print(f"{name} k={k}: near rows {stats.near_row_share:.2f}, rule {rule}; natural {res['natural']:.4f}, "
                  f"levels {res['levels']:.4f}, analysed {res['analysed']:.4f}, cusparse {res['cusparse']:.4f}",
                  flush=True)
            out.append({"matrix": spec, "k": k, "near_row_share": stats.near_row_share, "mean_row": stats.mean_row,
                        "rule": rule, "default": "fast start" if natural_serves(stats, task) else "analysed",
                        "schemes": {order: str(s) for order, s in picks.items()}, "ms": res})
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
