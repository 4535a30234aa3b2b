"""What the first call of an operator costs the host in a fresh process, piece by piece.

Each piece is timed in its own fresh Python process (``--runs`` of them; the median is
printed), since what it measures is first-use cost: imports, file parsing, library loads.
Runs without a GPU:

- ``import gsparse``;
- loading the shipped rank models (``gsparse/tune/models/*-rank.json``);
- the kernel cache key of a program (the first one pays for whatever it needs to know
  about NVRTC);
- the model policy's graph statistics (``describe_structure``) and signature on a
  ~300K-node, ~3M-edge graph on the CPU;
- the first ``copy_u_sum``, ``u_dot_v`` and ``edge_softmax`` on a Cora-sized graph through
  the CUDA backend's Python path on CPU tensors (``tests/cuda_path.py``: an H100's facts,
  launches that do nothing): task, model choice, plan.

On a GPU the first call pays more (CUDA's lazy loading of each torch kernel on first use,
module loads); ``scripts/minibatch_check.py`` measures that.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIECES = ("import", "models", "cache_key", "structure", "first_call")


def _ms(begin: float) -> float:
    return (time.perf_counter() - begin) * 1e3


def _import() -> dict[str, float]:
    begin = time.perf_counter()
    import gsparse  # noqa: F401

    return {"import gsparse": _ms(begin)}


def _models() -> dict[str, float]:
    from gsparse.tune.models import RankModel

    out = {}
    for operator in ("spmm", "sddmm"):
        begin = time.perf_counter()
        RankModel().load(ROOT / "src" / "gsparse" / "tune" / "models" / f"{operator}-rank.json")
        out[f"load {operator} model"] = _ms(begin)
    return out


def _cache_key() -> dict[str, float]:
    from gsparse import runtime

    begin = time.perf_counter()
    runtime.cache_key('extern "C" __global__ void k() {}', "sm_90", ())
    first = _ms(begin)
    begin = time.perf_counter()
    runtime.cache_key('extern "C" __global__ void k2() {}', "sm_90", ())
    return {"first cache key": first, "second cache key": _ms(begin)}


def _structure() -> dict[str, float]:
    import torch

    from gsparse import Graph
    from gsparse.datasets.structure import describe_structure
    from gsparse.tune.select import graph_signature

    nodes, edges = 300_000, 3_000_000
    edge_index = torch.randint(0, nodes, (2, edges), generator=torch.Generator().manual_seed(0))
    g = Graph.from_edge_index(edge_index, num_nodes=nodes)
    begin = time.perf_counter()
    describe_structure(g)
    structure = _ms(begin)
    begin = time.perf_counter()
    graph_signature(g)
    return {"structure 300K/3M": structure, "signature 300K/3M": _ms(begin)}


def _first_call() -> dict[str, float]:
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from cuda_path import cuda_path_on_cpu

    import gsparse

    nodes, edges, features = 2708, 10858, 64
    edge_index = torch.randint(0, nodes, (2, edges), generator=torch.Generator().manual_seed(0))
    g = gsparse.Graph.from_edge_index(edge_index, num_nodes=nodes)
    x, logits = torch.randn(nodes, features), torch.randn(g.num_edges, 8)
    calls = {"copy_u_sum": lambda: gsparse.copy_u_sum(g, x), "u_dot_v": lambda: gsparse.u_dot_v(g, x, x),
             "edge_softmax": lambda: gsparse.edge_softmax(g, logits)}
    out = {}
    with cuda_path_on_cpu():
        for name, call in calls.items():
            begin = time.perf_counter()
            call()
            out[f"first {name} (CPU mock)"] = _ms(begin)
    return out


def _child(piece: str) -> dict[str, float]:
    run = subprocess.run([sys.executable, __file__, "--child", piece], capture_output=True, text=True,
                         check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per piece")
    parser.add_argument("--only", default=",".join(PIECES))
    parser.add_argument("--child", choices=PIECES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        pieces = {"import": _import, "models": _models, "cache_key": _cache_key, "structure": _structure,
                  "first_call": _first_call}
        print(json.dumps(pieces[args.child]()))
        return 0
    for piece in args.only.split(","):
        runs = [_child(piece) for _ in range(args.runs)]
        for name in runs[0]:
            times = sorted(run[name] for run in runs)
            print(f"{name}: median {statistics.median(times):.1f} ms (min {times[0]:.1f}, max {times[-1]:.1f}, "
                  f"{len(times)} processes)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
