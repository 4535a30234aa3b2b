"""The fast start's rule on factors: its scheme against the rule it replaced, nine other
schemes, the analysed default and cuSPARSE (median of three CUDA-event medians each), with the
statistics the rule read. The held-out check of ``natural_schedule``.

    PYTHONPATH=src python scripts/sptrsv_fast_start_rule.py geometric:500000,cora OUT.json
"""
import sys, json, statistics
import torch
from gsparse import TriangularSolver
from gsparse.bench import sptrsv as B, cusparse_triangular
from gsparse.kernels.sptrsv import FactorPlans
from gsparse.kernels.sptrsv.default import natural_serves
from gsparse.kernels.sptrsv.schedule import NaturalOrderSchedule as N
from gsparse.target import Target
from gsparse.tune.measure import time_calls
dev = torch.device("cuda"); target = Target.of(dev)
B._warm_up(dev, None)
OLD = {1: (N(warps_per_block=32, rows_per_ticket=32, rows_per_thread=True), N(warps_per_block=8, rows_per_ticket=4, rows_per_thread=False)),
       16: N(warps_per_block=8, rows_per_ticket=4, rows_per_thread=False)}
ALT = [N(warps_per_block=16, rows_per_ticket=1, rows_per_thread=False), N(warps_per_block=16, rows_per_ticket=1, rows_per_thread=False, level_order=True),
       N(warps_per_block=32, rows_per_ticket=2, rows_per_thread=False), N(warps_per_block=32, rows_per_ticket=8, rows_per_thread=True),
       N(warps_per_block=32, rows_per_ticket=1, rows_per_thread=False), N(warps_per_block=32, rows_per_ticket=1, rows_per_thread=False, level_order=True),
       N(warps_per_block=32, rows_per_ticket=2, rows_per_thread=True, level_order=True), N(warps_per_block=32, rows_per_ticket=32, rows_per_thread=True),
       N(warps_per_block=8, rows_per_ticket=4, rows_per_thread=False)]
out = []
def t(fn):
    fn(); torch.cuda.synchronize()
    return statistics.median(time_calls(fn, [()], dev, budget_s=0.03).median_ms for _ in range(3))
for spec in sys.argv[1].split(","):
    _, m = B.load_matrix(spec); n = m.shape[0]
    crow, col, values = B.device_csr(m, dev)
    solver = TriangularSolver((crow, col, values, (n, n)))
    plans = solver._pattern.device_plans
    st = plans.stats(False)
    for k in (1, 16):
        rhs = torch.randn((n, k), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        b = (rhs[:, 0] if k == 1 else rhs).to(dev).contiguous()
        task = plans.task(torch.float64, False, False, k)
        new = plans.natural_schedule(task, target)
        old = OLD[16] if k > 1 else OLD[1][0 if st.mean_row < 4 else 1]
        res = {}
        for s in [new, old, *ALT]:
            if str(s) in res: continue
            p = plans.build_plan(task, s, target)
            res[str(s)] = t(lambda: p(values, b))
        fresh = FactorPlans(crow, col, True)
        sch = fresh.chosen_schedule(task, target); ap = fresh.build_plan(task, sch, target)
        res["analysed"] = t(lambda: ap(values, b))
        spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, False, k)
        spsm.analyse(); spsm.load(b)
        res["cusparse"] = t(lambda: (spsm.solve(), spsm.result(k == 1)))
        best = min(v for kk, v in res.items() if kk.startswith("natural"))
        serves = natural_serves(st, task)
        print(f"{spec} k={k} near rows={st.near_row_share:.2f} longest={st.longest_row} mean={st.mean_row:.1f} default={'fast' if serves else 'analysed'} | "
              f"new {new} {res[str(new)]:.4f} ({res[str(new)]/best:.2f} of best, {res['cusparse']/res[str(new)]:.2f}x cuSPARSE) | "
              f"old {old} {res[str(old)]:.4f} ({res['cusparse']/res[str(old)]:.2f}x) | analysed {res['analysed']:.4f} | cusparse {res['cusparse']:.4f} | "
              + " ".join(f"{kk.replace('natural.','')} {v/best:.2f}" for kk, v in res.items() if kk.startswith('natural')), flush=True)
        out.append({"matrix": spec, "k": k, "stats": [st.rows, st.entries, st.longest_row, st.near_rows], "new": str(new), "old": str(old), "ms": res})
json.dump(out, open(sys.argv[2], "w"), indent=1)
