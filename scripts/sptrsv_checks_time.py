"""Where the SpTRSV factor checks' time goes on a GPU: each step of ``check_factor`` alone,
on Cora in a warm process, wall-clock microseconds (median of 200, a synchronisation
after each unless noted), and the check kernel's device time (CUDA events).

    PYTHONPATH=src python3 scripts/sptrsv_checks_time.py
"""
import statistics, time
import torch
from gsparse.bench import sptrsv as B
from gsparse.kernels.sptrsv import checks
from gsparse.kernels.source import device_index
dev = torch.device("cuda")
B._warm_up(dev, None)
_, m = B.load_matrix("cora"); n = m.shape[0]
crow, col, values = B.device_csr(m, dev)
def med(fn, sync=True, reps=200):
    ts = []
    for _ in range(20): fn()
    torch.cuda.synchronize()
    for _ in range(reps):
        t = time.perf_counter(); fn()
        if sync: torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e6)
    return statistics.median(ts)
report = torch.full((checks.SLOTS,), checks.NONE, dtype=torch.int64, device=dev)
prog = checks.checks_program(torch.float64)
blocks = min(max(-(-max(32 * n, col.numel()) // checks.BLOCK), 1), checks.MAX_BLOCKS)
launch = prog.prepare(checks.kernel_name(torch.float64), device_index(dev), blocks, checks.BLOCK,
                      crow=crow, col=col, val=values, n=n, nnz=col.numel(), lower=1, report=report)
print("sync alone us", med(lambda: None))
print("check_factor us", med(lambda: checks.check_factor(crow, col, values, torch.float64, True)))
print("torch.full us", med(lambda: torch.full((checks.SLOTS,), checks.NONE, dtype=torch.int64, device=dev)))
print("slice fill us", med(lambda: report[checks.RULES:].zero_()))
print("prepare (no launch) us", med(lambda: prog.prepare(checks.kernel_name(torch.float64), device_index(dev), blocks, checks.BLOCK, crow=crow, col=col, val=values, n=n, nnz=col.numel(), lower=1, report=report), sync=False))
print("launch + sync us", med(lambda: launch()))
print("tolist us", med(lambda: report.tolist(), sync=False))
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
ts = []
for _ in range(100):
    s.record(); launch(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e) * 1e3)
print("check kernel device us", statistics.median(ts))
