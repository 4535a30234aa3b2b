"""Fast-start schemes on each factor, k right-hand sides, against cuSPARSE, the analysed
default and the fast start's rule; float64, each scheme's output checked against SciPy, then
timed (CUDA events, the median of ``--repeats`` calls after the check's). The design data of
``natural_schedule``'s rule.

    PYTHONPATH=src python scripts/sptrsv_fast_start_schemes.py cora,laplacian3d:500000 1,16 OUT.json
    PYTHONPATH=src python scripts/sptrsv_fast_start_schemes.py SPECS 4,16 OUT.json --grid subwarps

Grids: ``rows`` (the first rule's: warps 8/16/32, 1-32 rows a ticket, lane or warp rows, by
level or not: 60 schemes), ``subwarps`` (rows the subwarp shares: 32 warps, 1-8 rows a
ticket, 1-8 subwarps, by level or not: 32 schemes), ``widths`` (the subwarps alone: 1-8, a
row a ticket, by level or not: 8 schemes) and ``tickets`` (1-8 subwarps, 1-2 rows a subwarp
a ticket, by level or not: 16 schemes).
"""
import argparse
import itertools
import json

import scipy.sparse.linalg as sl
import torch

from gsparse.bench import cusparse_triangular
from gsparse.bench import sptrsv as B
from gsparse.kernels.sptrsv import FactorPlans
from gsparse.kernels.sptrsv.schedule import NaturalOrderSchedule
from gsparse.target import Target
from gsparse.tune.measure import time_calls

GRIDS = {
    "rows": [NaturalOrderSchedule(warps_per_block=nw, rows_per_ticket=rt, rows_per_thread=thr, level_order=lo)
             for nw, rt, thr, lo in itertools.product((8, 16, 32), (1, 2, 4, 8, 32), (True, False), (False, True))],
    "subwarps": [NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=rt, rows_per_thread=False, level_order=lo,
                                      subwarps=ng)
                 for ng, rt, lo in itertools.product((1, 2, 4, 8), (1, 2, 4, 8), (False, True))],
    "widths": [NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=1, rows_per_thread=False, level_order=lo,
                                    subwarps=ng)
               for ng, lo in itertools.product((1, 2, 4, 8), (False, True))],
    "tickets": [NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=rt, rows_per_thread=False, level_order=lo,
                                     subwarps=ng)
                for ng, rt, lo in itertools.product((1, 2, 4, 8), (1, 2), (False, True))],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", help="factors, comma-separated (gsparse.bench.sptrsv.load_matrix specs)")
    parser.add_argument("ks", help="numbers of right-hand sides, comma-separated")
    parser.add_argument("out", help="JSON file of every measurement")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="rows")
    parser.add_argument("--repeats", type=int, default=25)
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
        _, m = B.load_matrix(spec)
        n = m.shape[0]
        crow, col, values = B.device_csr(m, dev)
        for k in (int(k) for k in args.ks.split(",")):
            rhs = torch.randn((n, k), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
            b = (rhs[:, 0] if k == 1 else rhs).to(dev).contiguous()
            ref = torch.from_numpy(sl.spsolve_triangular(m.tocsr(), rhs.numpy(), lower=True))
            plans = FactorPlans(crow, col, True)
            task = plans.task(torch.float64, False, False, k)
            res = {}
            rule = plans.natural_schedule(task, target)
            analysed = plans.chosen_schedule(task, target)
            plan = plans.build_plan(task, analysed, target)
            res["analysed " + str(analysed)] = timed(lambda: plan(values, b))
            spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, False, k)
            spsm.analyse()
            spsm.load(b)
            res["cusparse"] = timed(lambda: (spsm.solve(), spsm.result(k == 1)))
            for schedule in dict.fromkeys([*GRIDS[args.grid], rule]):
                plan = plans.build_plan(task, schedule, target)
                x = plan(values, b)
                err = float((x.double().cpu().reshape(ref.shape) - ref).abs().max() / max(ref.abs().max(), 1e-300))
                res[str(schedule)] = timed(lambda: plan(values, b)) if err < 1e-8 else float("nan")
            natural = sorted((ms, name) for name, ms in res.items() if name.startswith("natural") and ms == ms)
            print(f"{spec} k={k}: cusparse {res['cusparse']:.4f}, analysed {res['analysed ' + str(analysed)]:.4f}, "
                  f"rule {rule} {res[str(rule)]:.4f}; best: "
                  + ", ".join(f"{name} {ms:.4f}" for ms, name in natural[:5]), flush=True)
            out.append({"matrix": spec, "k": k, "rule": str(rule), "ms": res})
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
