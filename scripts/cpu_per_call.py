"""Per-call time of the CPU fallback on a Cora-sized graph, against ``torch.sparse.mm``.

Run from the repository root: ``OMP_NUM_THREADS=1 PYTHONPATH=src python3 scripts/cpu_per_call.py``
(``--graph random`` for a random graph of Cora's size when the data is not at hand).

For ``u_mul_e_sum`` and ``copy_u_sum`` at 4 and 64 features (``--features``), prints microseconds per call
of gsparse (the public operator, eager, no autograd) and of ``torch.sparse.mm`` on a CSR
built once with the same weights in CSR order (what a PyG user calls with ``adj_t``), and
their ratio. The two take turns call by call; each number is the median over ``--rounds``
rounds of the median of ``--calls`` calls (the ratio: the median of the rounds' ratios),
so that a machine busy with other work slows both alike.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import torch

import gsparse


def _paired_us(ours: Callable[[], object], theirs: Callable[[], object], calls: int) -> tuple[float, float]:
    """Median microseconds per call of each, timed in alternation (call by call), so that a
    machine busy with other work slows both alike."""
    mine, base = [], []
    for _ in range(calls):
        start = time.perf_counter()
        ours()
        middle = time.perf_counter()
        theirs()
        end = time.perf_counter()
        mine.append(middle - start)
        base.append(end - middle)
    return statistics.median(mine) * 1e6, statistics.median(base) * 1e6


def _graph(kind: str) -> gsparse.Graph:
    if kind == "cora":
        return gsparse.datasets.cora().graph
    gen = torch.Generator().manual_seed(0)
    return gsparse.Graph.from_edge_index(torch.randint(0, 2708, (2, 10858), generator=gen), num_nodes=2708)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", choices=("cora", "random"), default="cora")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--features", type=int, nargs="+", default=[4, 64])
    args = parser.parse_args()
    g = _graph(args.graph)
    print(f"{args.graph}: {g}; torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(f"{'case':<12} {'F':>3} {'gsparse µs':>11} {'torch.sparse.mm µs':>19} {'ratio':>6}")
    gen = torch.Generator().manual_seed(1)
    for features in args.features:
        x = torch.randn(g.num_src, features, generator=gen)
        w = torch.rand(g.num_edges, generator=gen)
        in_csr_order = w if g.eid is None else w[g.eid.long()]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's "beta" notice
            weighted = torch.sparse_csr_tensor(g.rowptr.long(), g.col.long(), in_csr_order,
                                               (g.num_dst, g.num_src), check_invariants=False)
            unit = torch.sparse_csr_tensor(g.rowptr.long(), g.col.long(), torch.ones(g.num_edges),
                                           (g.num_dst, g.num_src), check_invariants=False)
        cases = {
            "u_mul_e_sum": (lambda: gsparse.u_mul_e_sum(g, x, w), lambda: torch.sparse.mm(weighted, x)),
            "copy_u_sum": (lambda: gsparse.copy_u_sum(g, x), lambda: torch.sparse.mm(unit, x)),
        }
        for name, (ours, theirs) in cases.items():
            torch.testing.assert_close(ours(), theirs(), rtol=1e-4, atol=1e-4)
            _paired_us(ours, theirs, 50)
            rounds = [_paired_us(ours, theirs, args.calls) for _ in range(args.rounds)]
            mine = statistics.median(r[0] for r in rounds)
            base = statistics.median(r[1] for r in rounds)
            ratio = statistics.median(r[0] / r[1] for r in rounds)
            print(f"{name:<12} {features:>3} {mine:>11.1f} {base:>19.1f} {ratio:>5.2f}x")


if __name__ == "__main__":
    main()
