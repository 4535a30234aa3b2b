"""Every fast-start scheme (warps 8/16/32, 1-32 rows a ticket, lane or warp rows, by level or
not: 60) on each factor, k right-hand sides, against cuSPARSE and the analysed default; one
CUDA-event median each. The design data of ``natural_schedule``'s rule.

    PYTHONPATH=src python scripts/sptrsv_fast_start_schemes.py cora,laplacian3d:500000 1,16 OUT.json
"""
import sys, itertools, json
import numpy as np, torch
from gsparse.bench import sptrsv as B, cusparse_triangular
from gsparse.kernels.sptrsv import FactorPlans
from gsparse.kernels.sptrsv.schedule import NaturalOrderSchedule
from gsparse.target import Target
from gsparse.tune.measure import time_calls
dev = torch.device("cuda"); target = Target.of(dev)
B._warm_up(dev, None)
specs = sys.argv[1].split(","); ks = [int(k) for k in sys.argv[2].split(",")]
out = []
for spec in specs:
    _, m = B.load_matrix(spec); n = m.shape[0]
    crow = torch.from_numpy(m.indptr.astype(np.int64)).to(dev); col = torch.from_numpy(m.indices.astype(np.int64)).to(dev)
    values = torch.from_numpy(m.data).to(dev)
    import scipy.sparse.linalg as sl
    for k in ks:
        rhs = torch.randn((n, k), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        b = (rhs[:, 0] if k == 1 else rhs).to(dev).contiguous()
        ref = sl.spsolve_triangular(m.tocsr(), rhs.numpy(), lower=True)
        plans = FactorPlans(crow, col, True)
        task = plans.task(torch.float64, False, False, k)
        res = {}
        def t(fn):
            fn(); torch.cuda.synchronize()
            return time_calls(fn, [()], dev, budget_s=0.05).median_ms
        sch = plans.chosen_schedule(task, target); ap = plans.build_plan(task, sch, target)
        res["analysed " + str(sch)] = t(lambda: ap(values, b))
        spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, False, k)
        spsm.analyse(); spsm.load(b)
        res["cusparse"] = t(lambda: (spsm.solve(), spsm.result(k == 1)))
        for nw, rt, thr, lo in itertools.product((8, 16, 32), (1, 2, 4, 8, 32), (True, False), (False, True)):
            s = NaturalOrderSchedule(warps_per_block=nw, rows_per_ticket=rt, rows_per_thread=thr, level_order=lo)
            p = plans.build_plan(task, s, target)
            x = p(values, b)
            err = float((x.double().cpu().reshape(ref.shape) - torch.from_numpy(ref)).abs().max() / max(abs(ref).max(), 1e-300))
            ms = t(lambda: p(values, b)) if err < 1e-8 else float("nan")
            res[str(s)] = ms
        best = sorted(((v, kk) for kk, v in res.items() if kk.startswith("natural") and v == v))[:6]
        print(f"{spec} k={k}: cusparse {res['cusparse']:.4f}, analysed {[v for kk, v in res.items() if kk.startswith('analysed')][0]:.4f}; best natural: " + ", ".join(f"{kk} {v:.4f}" for v, kk in best), flush=True)
        out.append({"matrix": spec, "k": k, "ms": res})
json.dump(out, open(sys.argv[3], "w"), indent=1)
