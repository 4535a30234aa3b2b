"""The SpTRSV levels kernel against the host's levels, on factors with long chains and without.

On a GPU machine, from the repository root: ``PYTHONPATH=src python3 scripts/sptrsv_device_levels.py``.
For each factor (lower, natural order) prints its longest chain of rows each depending on the
one before (``analysis.longest_chain``), the levels kernel's time with the copy back
(``natural.device_levels``, median of 5) and the host's (``analysis.levels``, median of 3):
what sets ``device_analysis.DEVICE_LEVELS_MAX_CHAIN``.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv import analysis, natural
from gsparse.target import Target

FACTORS = (("banded", 20_000), ("banded", 50_000), ("banded", 100_000), ("banded", 500_000),
           ("laplacian2d", 500_000), ("road", 500_000), ("power_law", 500_000))


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    target = Target.of(torch.device("cuda"))
    for family, rows_wanted in FACTORS:
        factor = triangular.generate(family, rows_wanted, seed=0)
        factor.sort_indices()
        crow, col = factor.indptr.astype(np.int64), factor.indices.astype(np.int64)
        system = natural.DeviceSystem(torch.from_numpy(crow).cuda(), torch.from_numpy(col).cuda(), True, False)
        rows = analysis.dependency_graph(crow, col, True)
        chain = analysis.longest_chain(rows)
        natural.device_levels(system, torch.int32, target)  # loads the kernel
        device = median_ms(lambda: natural.device_levels(system, torch.int32, target).cpu(), 5)
        host = median_ms(lambda: analysis.levels(rows.ptr, rows.deps), 3)
        print(f"{family}:{rows_wanted} rows {factor.shape[0]} chain {chain}: device levels {device:.2f} ms, "
              f"host levels {host:.2f} ms, device us per chain row {device * 1e3 / max(chain, 1):.3f}", flush=True)


if __name__ == "__main__":
    main()
