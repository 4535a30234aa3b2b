"""Lane rows by level, 1-32 rows a ticket over 32 warps, on each factor (checked against SciPy,
median of three CUDA-event medians each), with the rows a ticket that the prediction
``4 x rows a level / warps`` gives: the record behind the fast start's ticket rule.

    PYTHONPATH=src python scripts/sptrsv_fast_start_tickets.py laplacian3d:500000,geometric:500000 OUT.json
"""
import sys, json, statistics
import numpy as np, torch
import scipy.sparse.linalg as sl
from gsparse.bench import sptrsv as B
from gsparse.kernels.sptrsv import FactorPlans
from gsparse.kernels.sptrsv.natural import device_levels
from gsparse.kernels.sptrsv.schedule import NaturalOrderSchedule as N
from gsparse.target import Target
from gsparse.tune.measure import time_calls
dev = torch.device("cuda"); target = Target.of(dev)
B._warm_up(dev, None)
warps = target.sms * 32
out = []
for spec in sys.argv[1].split(","):
    _, m = B.load_matrix(spec); n = m.shape[0]
    crow, col, values = B.device_csr(m, dev)
    plans = FactorPlans(crow, col, True)
    task = plans.task(torch.float64, False, False, 1)
    levels = int(device_levels(plans.device_system(False), torch.int32, target).max()) + 1
    per_level = n / levels
    want = 4 * per_level / warps
    pred = 1 << max(0, min(5, round(np.log2(max(want, 1)))))
    b = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).to(dev)
    ref = sl.spsolve_triangular(m.tocsr(), b.cpu().numpy(), lower=True)
    res = {}
    for t in (1, 2, 4, 8, 16, 32):
        s = N(warps_per_block=32, rows_per_ticket=t, rows_per_thread=True, level_order=True)
        p = plans.build_plan(task, s, target)
        x = p(values, b); torch.cuda.synchronize()
        err = float(np.abs(x.cpu().numpy() - ref).max() / max(np.abs(ref).max(), 1e-300))
        assert err < 1e-10, (spec, t, err)
        res[t] = statistics.median(time_calls(lambda: p(values, b), [()], dev, budget_s=0.03).median_ms for _ in range(3))
    best = min(res.values())
    print(f"{spec}: n {n} levels {levels} rows/level {per_level:.0f} predicted t{pred} ({res[pred]/best:.2f} of best) | " + " ".join(f"t{t} {v:.4f} ({v/best:.2f})" for t, v in res.items()), flush=True)
    out.append({"matrix": spec, "n": n, "levels": levels, "predicted": pred, "ms": res})
json.dump(out, open(sys.argv[2], "w"), indent=1)
