"""Where the fast start's preparation of a small factor goes on a GPU: a new
``TriangularSolver`` (the factor checks) and the first solve's scheme and plan, as the
benchmark's ``fast_start`` column times them (``gsparse.bench.sptrsv._fast_start``), in a
warm process.

For each factor and number of right-hand sides it prints:

- each phase's wall time (median of fresh preparations, a synchronisation after each
  phase, as the benchmark), and the whole preparation with one synchronisation at its end;
- the runtime calls of one preparation (kernel launches, copies, synchronisations) from the
  torch profiler;
- with ``--profile``, the Python functions of the preparations by own time (cProfile).

    PYTHONPATH=src python3 scripts/sptrsv_prep_profile.py [--factors cora,citeseer] [--rhs 1,16]
        [--repeats 40] [--profile]
"""
import argparse
import cProfile
import pstats
import statistics
import time
from collections import Counter

import torch

from gsparse import TriangularSolver
from gsparse.bench import sptrsv as bench
from gsparse.target import Target


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factors", default="cora,citeseer,pubmed_cites")
    parser.add_argument("--rhs", default="1,16")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--profile", action="store_true", help="print the cProfile of the preparations")
    args = parser.parse_args()
    device = torch.device("cuda")
    target = Target.of(device)
    bench._warm_up(device, None)
    for name in args.factors.split(","):
        _, m = bench.load_matrix(name)
        n = m.shape[0]
        crow, col, values = bench.device_csr(m, device)
        for k in map(int, args.rhs.split(",")):
            def prepare(sync: bool) -> dict[str, float]:
                times = {}
                start = time.perf_counter()
                solver = TriangularSolver((crow, col, values, (n, n)))
                if sync:
                    torch.cuda.synchronize()
                    times["validation"] = _ms(start)
                    start = time.perf_counter()
                plans = solver._pattern.device_plans
                task = plans.task(values.dtype, False, False, k)
                chosen = plans.natural_schedule(task, target)
                if sync:
                    torch.cuda.synchronize()
                    times["selection"] = _ms(start)
                    start = time.perf_counter()
                plans.build_plan(task, chosen, target)
                torch.cuda.synchronize()
                times["plan" if sync else "whole"] = _ms(start)
                return times

            for _ in range(5):
                prepare(True)
            phased = [prepare(True) for _ in range(args.repeats)]
            whole = [prepare(False)["whole"] for _ in range(args.repeats)]
            medians = {p: statistics.median(t[p] for t in phased) for p in phased[0]}
            print(f"{name} k={k}: " + ", ".join(f"{p} {v:.3f}" for p, v in medians.items())
                  + f", sum {sum(medians.values()):.3f}; whole, one sync {statistics.median(whole):.3f} ms "
                  f"(range {min(whole):.3f}-{max(whole):.3f})")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                    torch.profiler.ProfilerActivity.CUDA]) as prof:
                prepare(False)
            calls = Counter()
            for event in prof.events():
                key = event.name
                if event.device_type == torch.autograd.DeviceType.CUDA:
                    calls["[gpu] " + key[:60]] += 1
                elif key.startswith(("cuda", "cu")):
                    calls[key] += 1
            print("   runtime calls and kernels of one preparation:",
                  ", ".join(f"{key} x{count}" for key, count in sorted(calls.items())))
            if args.profile:
                profile = cProfile.Profile()
                profile.enable()
                for _ in range(args.repeats):
                    prepare(False)
                profile.disable()
                pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
