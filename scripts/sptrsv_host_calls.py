"""Per-call time of ``TriangularSolver.solve`` on the real graphs (float64, 1 and 16
right-hand sides), on a GPU: wall time of 1,000 calls back to back between two
synchronisations (the median of 5 rounds), the benchmark's per-call CUDA-event median, and
the device time alone (the host's enqueueing hidden). Where the first is above the last, the
host bounds a loop of solves.

    PYTHONPATH=src python3 scripts/sptrsv_host_calls.py LABEL
"""
import statistics
import sys
import time

import torch

import gsparse
from gsparse.bench import sptrsv as B
from gsparse.tune.measure import time_calls

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
        for _ in range(50):
            solve()
        rounds = []
        for _ in range(5):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(1000):
                solve()
            torch.cuda.synchronize()
            rounds.append((time.perf_counter() - start) * 1e3)
        events = time_calls(solve, [()], dev, budget_s=0.2).median_ms
        alone = time_calls(solve, [()], dev, budget_s=0.1, hide_host=True).median_ms
        print(f"{sys.argv[1]} {spec} k={k}: back-to-back {statistics.median(rounds):.1f} us/call "
              f"({min(rounds):.1f}-{max(rounds):.1f}); events {events * 1e3:.1f} us; device alone {alone * 1e3:.1f} us",
              flush=True)
