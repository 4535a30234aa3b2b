"""Per-call time of ``TriangularSolver.solve`` on the real graphs (float64, 1 and 16
right-hand sides), on a GPU: wall time of 1,000 calls back to back between two
synchronisations (the median of 5 rounds), the benchmark's per-call CUDA-event median, and
the device time alone (the host's enqueueing hidden). Where the first is above the last, the
host bounds a loop of solves.

    PYTHONPATH=src python3 scripts/sptrsv_host_calls.py LABEL
"""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from host_time import per_call_us  # noqa: E402

import gsparse  # noqa: E402
from gsparse.bench import sptrsv as B  # noqa: E402
from gsparse.tune.measure import time_calls  # noqa: E402

dev = torch.device("cuda")
B._warm_up(dev, None)
for spec in ("cora", "citeseer", "pubmed_cites"):
    _, m = B.load_matrix(spec)
    A = torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype("int64")), torch.from_numpy(m.indices.astype("int64")),
                                torch.from_numpy(m.data), m.shape).to(dev)
    solver = gsparse.TriangularSolver(A)
    for k in (1, 16):
        b = torch.randn(m.shape[0], k, dtype=torch.float64, device=dev)
        if k == 1:
            b = b[:, 0].contiguous()
        def solve():
            return solver.solve(b)
        rounds = [per_call_us(solve, torch.cuda.synchronize, calls=1000) for _ in range(5)]
        events = time_calls(solve, [()], dev, budget_s=0.2).median_ms
        alone = time_calls(solve, [()], dev, budget_s=0.1, hide_host=True).median_ms
        print(f"{sys.argv[1]} {spec} k={k}: back-to-back {statistics.median(rounds):.1f} us/call "
              f"({min(rounds):.1f}-{max(rounds):.1f}); events {events * 1e3:.1f} us; device alone {alone * 1e3:.1f} us",
              flush=True)
