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
from collections.abc import Callable, Iterator

import numpy as np
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


def cell_parser(description: str, repeats: int) -> argparse.ArgumentParser:
    """The arguments of a script that times schemes per (factor, right-hand sides) cell."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("specs", help="factors, comma-separated (gsparse.bench.sptrsv.load_matrix specs)")
    parser.add_argument("ks", help="numbers of right-hand sides, comma-separated")
    parser.add_argument("out", help="JSON file of every measurement")
    parser.add_argument("--repeats", type=int, default=repeats)
    return parser


def median_ms(device: torch.device, repeats: int) -> Callable[[Callable[[], object]], float]:
    """A timer: one call, then the CUDA-event median of ``repeats`` calls."""
    def timed(fn) -> float:
        fn()
        torch.cuda.synchronize()
        return time_calls(fn, [()], device, warmup=0, min_repeats=repeats, max_repeats=repeats).median_ms
    return timed


def factors(specs: str, ks: str, device: torch.device) -> Iterator[tuple]:
    """``(spec, name, matrix, (crow, col, values), cells)`` for every factor of ``specs``,
    ``cells`` a generator of ``(k, b, reference)`` for every number of right-hand sides:
    ``b`` a seeded random right side on ``device``, ``reference`` SciPy's solution (float64,
    NumPy)."""
    def cells(m) -> Iterator[tuple[int, torch.Tensor, np.ndarray]]:
        for k in (int(k) for k in ks.split(",")):
            rhs = torch.randn((m.shape[0], k), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
            b = (rhs[:, 0] if k == 1 else rhs).to(device).contiguous()
            yield k, b, sl.spsolve_triangular(m.tocsr(), rhs.numpy(), lower=True)

    for spec in specs.split(","):
        name, m = B.load_matrix(spec)
        yield spec, name, m, B.device_csr(m, device), cells(m)


def checked_ms(timed: Callable[[Callable[[], object]], float], plan: Callable, values: torch.Tensor,
               b: torch.Tensor, reference: np.ndarray) -> float:
    """``plan``'s time on ``b``, or NaN where its solution is not SciPy's (a relative error of
    1e-8 or more, :func:`gsparse.bench.sptrsv._error`'s)."""
    return timed(lambda: plan(values, b)) if B._error(plan(values, b), reference) < 1e-8 else float("nan")


def cusparse_ms(timed: Callable[[Callable[[], object]], float], csr: tuple, n: int, k: int, b: torch.Tensor) -> float:
    """cuSPARSE SpSM's solve time on ``b`` (lower, non-unit; its analysis done first, not timed)."""
    crow, col, values = csr
    spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, False, k)
    spsm.analyse()
    spsm.load(b)
    return timed(lambda: (spsm.solve(), spsm.result(k == 1)))


def main() -> None:
    parser = cell_parser(__doc__.splitlines()[0], repeats=25)
    parser.add_argument("--grid", choices=sorted(GRIDS), default="rows")
    args = parser.parse_args()
    dev = torch.device("cuda")
    target = Target.of(dev)
    B._warm_up(dev, None)
    timed = median_ms(dev, args.repeats)
    out = []
    for spec, _, m, csr, cells in factors(args.specs, args.ks, dev):
        crow, col, values = csr
        for k, b, ref in cells:
            plans = FactorPlans(crow, col, True)
            task = plans.task(torch.float64, False, False, k)
            res = {}
            rule = plans.natural_schedule(task, target)
            analysed = plans.chosen_schedule(task, target)
            plan = plans.build_plan(task, analysed, target)
            res["analysed " + str(analysed)] = timed(lambda: plan(values, b))
            res["cusparse"] = cusparse_ms(timed, csr, m.shape[0], k, b)
            for schedule in dict.fromkeys([*GRIDS[args.grid], rule]):
                res[str(schedule)] = checked_ms(timed, plans.build_plan(task, schedule, target), values, b, ref)
            natural = sorted((ms, name) for name, ms in res.items() if name.startswith("natural") and ms == ms)
            print(f"{spec} k={k}: cusparse {res['cusparse']:.4f}, analysed {res['analysed ' + str(analysed)]:.4f}, "
                  f"rule {rule} {res[str(rule)]:.4f}; best: "
                  + ", ".join(f"{name} {ms:.4f}" for ms, name in natural[:5]), flush=True)
            out.append({"matrix": spec, "k": k, "rule": str(rule), "ms": res})
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
