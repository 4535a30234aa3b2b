"""Host time per call of ``TriangularSolver.solve``'s CUDA path, without a GPU: CPU tensors
routed to the factor's CUDA plans (an H200's target), kernels launched through the driver
bindings into ``scripts/stub_libcuda.c`` (as ``scripts/host_time.py --stub-driver``); then
a profile of the calls.

    PYTHONPATH=src python scripts/sptrsv_host_profile.py [FACTOR] [K] [analysed]
"""
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from host_time import _stub_driver  # noqa: E402

import gsparse  # noqa: E402
from gsparse import _sptrsv_ops, target  # noqa: E402
from gsparse.bench.sptrsv import load_matrix  # noqa: E402

_, A = load_matrix(sys.argv[1] if len(sys.argv) > 1 else "cora")
k = int(sys.argv[2]) if len(sys.argv) > 2 else 16
b = torch.randn(A.shape[0], k, dtype=torch.float64) if k > 1 else torch.randn(A.shape[0], dtype=torch.float64)
crow, col = torch.from_numpy(A.indptr.astype("int64")), torch.from_numpy(A.indices.astype("int64"))
with _stub_driver() as loader:
    solver = gsparse.TriangularSolver((crow, col, torch.from_numpy(A.data), A.shape), analysis=len(sys.argv) > 3)
    plans = solver._pattern.device_plans
    plans.loader, plans.target = loader, target.H200
    # The CPU's solve, rerouted to the CUDA plans (whose launches do nothing).
    _sptrsv_ops.cpu_triangular.solve = lambda crow, col, values, b, lower, unit, transpose: plans.solve(
        values, b, unit, transpose)
    solver.solve(b)
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(2000):
            solver.solve(b)
        rounds.append((time.perf_counter() - start) / 2000 * 1e6)
    print(f"per call: median {statistics.median(rounds):.1f} us of {[round(r, 1) for r in rounds]}")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(2000):
        solver.solve(b)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(15)
