"""Host time per call of the operators on a tiny graph, where the GPU work is negligible.

Run on a GPU machine from the repository root:
``PYTHONPATH=src python3 scripts/host_time.py [--rounds 5] [--no-profile]``.
Prints microseconds per call (wall time of 2,000 calls between two synchronisations; the
median of ``--rounds`` rounds, each round timing every call in turn) for gspmm, the CUDA
backend's g-SpMM alone, gsddmm, edge_softmax and, for scale, torch.sparse.mm on the same
CSR and torch.empty; then profiles of the three operators' Python paths.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable

import torch

import gsparse
from gsparse import backends


def per_call_us(fn: Callable[[], object], calls: int = 2000) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    g = gsparse.Graph.from_edge_index(torch.randint(0, 100, (2, 1000), generator=gen), num_nodes=100).to("cuda")
    x = torch.randn(100, 16, device="cuda")
    logits = torch.randn(g.num_edges, 8, device="cuda")
    with torch.sparse.check_sparse_tensor_invariants(False):
        csr = torch.sparse_csr_tensor(g.rowptr.long(), g.col.long(),
                                      torch.ones(g.num_edges, device="cuda"), (100, 100))
    cuda = backends.for_device(g.device)
    timings = {
        "gspmm": lambda: gsparse.gspmm(g, "copy_lhs", "sum", x),
        "CUDA backend g-SpMM": lambda: cuda.spmm(g, "copy_lhs", "sum", x, None, (16,)),
        "gsddmm": lambda: gsparse.gsddmm(g, "dot", x, x, "u", "v"),
        "edge_softmax": lambda: gsparse.edge_softmax(g, logits),
        "torch.sparse.mm": lambda: torch.sparse.mm(csr, x),
        "torch.empty": lambda: torch.empty(100, 16, device="cuda"),
    }
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    rounds: dict[str, list[float]] = {name: [] for name in timings}
    for _ in range(args.rounds):
        for name, fn in timings.items():
            rounds[name].append(per_call_us(fn))
    for name, values in rounds.items():
        print(f"{name}: {statistics.median(values):.1f} us per call "
              f"(median of {args.rounds} rounds, {min(values):.1f}-{max(values):.1f})")
    if args.no_profile:
        return
    for name in ("gspmm", "gsddmm", "edge_softmax"):
        print(f"--- profile of 2,000 {name} calls")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            timings[name]()
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
