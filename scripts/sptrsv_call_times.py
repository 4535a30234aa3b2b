"""Where a small factor's solve time goes: the launch rate, the device time and the host's
time per call, for gsparse's analysed solve, the fast start and cuSPARSE (through CuPy).

    PYTHONPATH=src python scripts/sptrsv_call_times.py cora pubmed_cites community:500000:1

Each matrix spec is one of ``gsparse.bench.sptrsv``'s (a family, a real graph's name, a
``.npz`` file). Per factor and number of right-hand sides (1, 16), in microseconds:

- launch rate: CUDA-event median of back-to-back calls (``time_calls``, as the benchmark
  times them): the larger of the host's and the device's time per call, and more;
- device: the same with the host's enqueueing hidden behind a device wait
  (``time_calls(hide_host=True)``): the kernels alone;
- host: wall clock per call over 300 calls issued without waiting for the device.

Then the CUDA kernels of 20 analysed solves (``torch.profiler``), microseconds per solve.
"""

from __future__ import annotations

import sys
import time

import torch

from gsparse.bench import cusparse_triangular
from gsparse.bench import sptrsv as bench
from gsparse.tune.measure import time_calls


def _host_us(fn, calls: int = 300) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    spent = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return spent


def _device_us(event) -> float:
    total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0) or 0
    return total / max(event.count, 1)


def main(specs: list[str]) -> int:
    device = torch.device("cuda")
    bench._warm_up(device, None)
    for spec in specs:
        _, matrix = bench.load_matrix(spec)
        n = matrix.shape[0]
        crow, col, values = bench.device_csr(matrix, device)
        for k in (1, 16):
            rhs = torch.randn((n, k), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
            b = (rhs[:, 0] if k == 1 else rhs).to(device).contiguous()
            analysed, _ = bench._gsparse(crow, col, values, b, k, False, device, None, None)
            fast, _ = bench._fast_start(crow, col, values, b, k, False, device, None)
            spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, False, k)
            spsm.analyse()
            spsm.load(b)

            def cusparse() -> torch.Tensor:
                spsm.solve()
                return spsm.result(k == 1)

            cells = []
            for label, fn in (("gsparse", analysed), ("fast start", fast), ("cuSPARSE", cusparse)):
                fn()
                rate = time_calls(fn, [()], device, budget_s=0.1).median_ms * 1e3
                alone = time_calls(fn, [()], device, budget_s=0.1, hide_host=True).median_ms * 1e3
                cells.append(f"{label}: launch rate {rate:.1f}, device {alone:.1f}, host {_host_us(fn):.1f}")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
                for _ in range(20):
                    analysed()
                torch.cuda.synchronize()
            kernels = "; ".join(f"{e.key[:40]} {_device_us(e) * e.count / 20:.1f}" for e in profile.key_averages()
                                if _device_us(e) > 0)
            print(f"{spec} k={k} n={n} (us) " + " | ".join(cells))
            print(f"    kernels of one analysed solve (us): {kernels}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
