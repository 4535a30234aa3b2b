"""Everything issue 19's "Done when" measures, on a GPU, in one run; prints a table.

Run from the repository root on a GPU machine::

    PYTHONPATH=src python3 scripts/minibatch_check.py [--bench] [--out minibatch-check]

Sections (``--only host,build,capture,cold`` picks some):

- **host**: microseconds per call on a Cora-sized graph (2,708 nodes, 10,858 edges, 64
  features), wall clock over many calls between two synchronisations: ``gspmm`` without
  autograd, the forward of a ``gspmm`` that records autograd, ``gsddmm``, ``edge_softmax``,
  and ``torch.sparse.mm`` for scale.
- **build**: ``Graph.from_block`` for a 141,000-edge sampled block (sorted by destination,
  and shuffled), per call, with a build and a forward/backward of each layer on a fresh
  block under ``torch.cuda.set_sync_debug_mode("error")``; ``from_edge_index`` and one
  ``torch.sort`` of the keys for scale.
- **capture**: ``torch.compile(mode="reduce-overhead")`` of 2-layer GCN, GAT and GraphSAGE
  on the Cora-sized graph: whether it compiles, the largest difference from eager (output
  and gradients), and the time of a forward + backward step, compiled and eager.
- **cold**: the first call of each operator in a fresh process on an empty kernel cache,
  then after ``gsparse precompile`` filled another empty cache.
- ``--bench`` adds ``python -m gsparse.bench.training --minibatch`` (Reddit-sized base graph,
  1,024 seeds, fanouts 25 and 10, hidden 256; GraphSAGE, GCN, GAT) with its reddit-like
  full-batch cells, and prints its table.

Writes ``check.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import gsparse
from gsparse import Graph, nn as gnn
from gsparse.backends.cpu import unchecked_csr

N, E, F = 2_708, 10_858, 64
ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"gspmm (no autograd)": 20.0, "gspmm forward (autograd)": 40.0}


def cora_sized(device: str = "cuda") -> tuple[Graph, torch.Tensor]:
    edge_index = torch.randint(0, N, (2, E), generator=torch.Generator().manual_seed(0))
    return Graph.from_edge_index(edge_index, num_nodes=N).to(device), edge_index


def per_call_us(fn, calls: int = 2_000, rounds: int = 5) -> float:
    for _ in range(50):
        fn()
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - begin) / calls * 1e6)
    return statistics.median(times)


# ---------------------------------------------------------------------- host time per call


def host() -> dict[str, float]:
    g, _ = cora_sized()
    x = torch.randn(N, F, device="cuda")
    xg = x.clone().requires_grad_()
    w = torch.rand(E, 1, device="cuda")
    logits = torch.randn(E, 8, device="cuda")
    csr = unchecked_csr(g.rowptr.long(), g.col.long(), torch.ones(E, device="cuda"), (N, N))
    cases = {
        "gspmm (no autograd)": lambda: gsparse.gspmm(g, "copy_lhs", "sum", x),
        "gspmm forward (autograd)": lambda: gsparse.gspmm(g, "copy_lhs", "sum", xg),
        "u_mul_e_sum (no autograd)": lambda: gsparse.u_mul_e_sum(g, x, w),
        "u_dot_v (no autograd)": lambda: gsparse.u_dot_v(g, x, x),
        "edge_softmax (no autograd)": lambda: gsparse.edge_softmax(g, logits),
        "torch.sparse.mm": lambda: torch.sparse.mm(csr, x),
        "torch.empty": lambda: torch.empty(N, F, device="cuda"),
    }
    return {name: per_call_us(fn) for name, fn in cases.items()}


# ---------------------------------------------------------------------- graph building


def sampled_block(shuffle: bool, num_dst: int = 14_100, fanout: int = 10, num_src: int = 160_000):
    gen = torch.Generator().manual_seed(1)
    dst = torch.arange(num_dst).repeat_interleave(fanout)
    src = torch.randint(0, num_src, (dst.numel(),), generator=gen)
    ei = torch.stack([src, dst])
    if shuffle:
        ei = ei[:, torch.randperm(ei.shape[1], generator=gen)]
    return ei.cuda(), num_src, num_dst, fanout


def build() -> dict[str, object]:
    out: dict[str, object] = {}
    for shuffle in (False, True):
        ei, ns, nd, fanout = sampled_block(shuffle)
        label = "shuffled" if shuffle else "sorted by destination"
        out[f"from_block, {label} (us)"] = per_call_us(
            lambda: Graph.from_block(ei, num_src=ns, num_dst=nd, dst_sorted=not shuffle, max_degree=fanout),
            calls=200)
        out[f"from_block, {label}, no checks (us)"] = per_call_us(
            lambda: Graph.from_block(ei, num_src=ns, num_dst=nd, dst_sorted=not shuffle, check=False),
            calls=200)
        out[f"from_edge_index, {label} (us)"] = per_call_us(
            lambda: Graph.from_edge_index(ei, num_src=ns, num_dst=nd), calls=50)
    out["torch.sort of the keys (us)"] = per_call_us(lambda: torch.sort(ei[1], stable=True), calls=200)
    out["edges"] = int(ei.shape[1])
    out["no synchronisation (block + GCN/GAT/SAGE forward and backward)"] = _no_sync()
    return out


def _no_sync() -> str:
    layers = {"gcn": gnn.GCNConv(64, 32), "gat": gnn.GATConv(64, 8, heads=4), "sage": gnn.SAGEConv(64, 32)}
    failures = []
    for name, layer in layers.items():
        layer = layer.cuda()
        for fresh in (False, True):  # the first block compiles kernels; the second is timed for syncs
            ei, _, nd, fanout = sampled_block(shuffle=fresh, num_dst=3_000 + fresh, num_src=3_001)
            n = 3_001
            x = torch.randn(n, 64, device="cuda", requires_grad=True)
            torch.cuda.synchronize()
            if fresh:
                torch.cuda.set_sync_debug_mode("error")
            try:
                g = Graph.from_block(ei, num_src=n, num_dst=n, dst_sorted=not fresh, max_degree=fanout)
                layer(x, g).square().sum().backward()
            except RuntimeError as error:
                failures.append(f"{name}: {error}")
            finally:
                torch.cuda.set_sync_debug_mode(0)
            torch.cuda.synchronize()
    return "ok" if not failures else "FAILED: " + "; ".join(failures)


# ---------------------------------------------------------------------- CUDA graphs


class TwoLayer(torch.nn.Module):
    def __init__(self, conv1, conv2):
        super().__init__()
        self.conv1, self.conv2 = conv1, conv2

    def forward(self, x, g):
        return self.conv2(torch.relu(self.conv1(x, g)), g)


def capture() -> dict[str, object]:
    g, _ = cora_sized()
    models = {"gcn": lambda: TwoLayer(gnn.GCNConv(F, 256), gnn.GCNConv(256, 41)),
              "gat": lambda: TwoLayer(gnn.GATConv(F, 32, heads=8), gnn.GATConv(256, 41, heads=1, concat=False)),
              "sage": lambda: TwoLayer(gnn.SAGEConv(F, 256), gnn.SAGEConv(256, 41))}
    out: dict[str, object] = {}
    for name, make in models.items():
        torch.manual_seed(0)
        model = make().cuda()
        x = torch.randn(N, F, device="cuda", requires_grad=True)
        params = [x, *model.parameters()]

        def step(fn):
            result = fn(x, g)
            return result, torch.autograd.grad((result * result).sum(), params)

        want, want_grads = step(model)
        try:
            torch._dynamo.reset()
            compiled = torch.compile(model, mode="reduce-overhead")
            diff = 0.0
            for _ in range(4):
                torch.compiler.cudagraph_mark_step_begin()
                got, grads = step(compiled)
                diff = max([diff, float((got - want).abs().max())]
                           + [float((a - b).abs().max()) for a, b in zip(grads, want_grads)])

            def compiled_step():
                torch.compiler.cudagraph_mark_step_begin()
                step(compiled)

            out[name] = {"compiles": True, "max_abs_diff": diff,
                         "compiled_step_us": per_call_us(compiled_step, calls=200),
                         "eager_step_us": per_call_us(lambda: step(model), calls=200)}
        except Exception as error:  # a failure is the result
            out[name] = {"compiles": False, "error": f"{type(error).__name__}: {error}"[:500]}
    return out


# ---------------------------------------------------------------------- cold start

_FIRST_CALLS = {
    "copy_u_sum": lambda g, x, w, l: gsparse.copy_u_sum(g, x),
    "u_mul_e_sum": lambda g, x, w, l: gsparse.u_mul_e_sum(g, x, w),
    "u_dot_v": lambda g, x, w, l: gsparse.u_dot_v(g, x, x),
    "edge_softmax": lambda g, x, w, l: gsparse.edge_softmax(g, l),
}


def first_call(op: str) -> None:
    """In a fresh process (GSPARSE_CACHE_DIR set by the caller): the first call's ms."""
    g, _ = cora_sized()
    x, w = torch.randn(N, F, device="cuda"), torch.rand(E, 1, device="cuda")
    logits = torch.randn(E, 8, device="cuda")
    torch.cuda.synchronize()
    begin = time.perf_counter()
    _FIRST_CALLS[op](g, x, w, logits)
    torch.cuda.synchronize()
    first = (time.perf_counter() - begin) * 1e3
    begin = time.perf_counter()
    _FIRST_CALLS[op](g, x, w, logits)
    torch.cuda.synchronize()
    print(json.dumps({"first_ms": first, "second_ms": (time.perf_counter() - begin) * 1e3}))


def _child(op: str, cache: str) -> dict[str, float]:
    env = {**os.environ, "GSPARSE_CACHE_DIR": cache, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run([sys.executable, __file__, "--first-call", op], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def cold() -> dict[str, object]:
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        _, edge_index = cora_sized("cpu")
        graph_file = Path(tmp) / "cora-sized.npz"
        np.savez(graph_file, edge_index=edge_index.numpy(), num_nodes=np.array(N))
        for op in _FIRST_CALLS:
            empty = tempfile.mkdtemp(dir=tmp)
            filled = tempfile.mkdtemp(dir=tmp)
            begin = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gsparse.cli", "precompile", "--ops", op, "--features", str(F),
                            "--heads", "1,8", "--graph", str(graph_file), "--cache-dir", filled],
                           env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=True,
                           capture_output=True, text=True)
            out[op] = {"empty cache": _child(op, empty), "after precompile": _child(op, filled),
                       "precompile_s": time.perf_counter() - begin}
    return out


# ---------------------------------------------------------------------- report


def _table(doc: dict[str, object]) -> str:
    lines = ["| check | measured | bar |", "| --- | ---: | --- |"]
    for name, value in doc.get("host", {}).items():
        bar = f"<= {TARGETS[name]:.0f} us" if name in TARGETS else ""
        lines.append(f"| per call: {name} | {value:.1f} us | {bar} |")
    for name, value in doc.get("build", {}).items():
        shown = f"{value:.1f}" if isinstance(value, float) else str(value)
        bar = "<= 150 us" if name.startswith("from_block") and "no checks" not in name else ""
        if name.startswith("no synchronisation"):
            bar = "ok"
        lines.append(f"| build: {name} | {shown} | {bar} |")
    for name, value in doc.get("capture", {}).items():
        if value.get("compiles"):
            shown = (f"compiles, max diff {value['max_abs_diff']:.1e}, step {value['compiled_step_us']:.0f} us "
                     f"compiled vs {value['eager_step_us']:.0f} us eager")
        else:
            shown = value.get("error", "failed")
        lines.append(f"| reduce-overhead: {name} | {shown} | compiles, matches, faster |")
    for name, value in doc.get("cold", {}).items():
        lines.append(f"| first call, empty cache: {name} | {value['empty cache']['first_ms']:.0f} ms | <= 1000 ms |")
        lines.append(f"| first call after precompile: {name} | {value['after precompile']['first_ms']:.1f} ms "
                     f"| <= 50 ms |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="host,build,capture,cold")
    parser.add_argument("--bench", action="store_true", help="also the mini-batch training benchmark")
    parser.add_argument("--out", default="minibatch-check")
    parser.add_argument("--first-call", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_call:
        first_call(args.first_call)
        return 0
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, object] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    for section in args.only.split(","):
        print(f"--- {section}", flush=True)
        doc[section] = {"host": host, "build": build, "capture": capture, "cold": cold}[section]()
        (out / "check.json").write_text(json.dumps(doc, indent=1))
    print(_table(doc))
    if args.bench:
        subprocess.run([sys.executable, "-m", "gsparse.bench.training", "--minibatch", "--workloads", "reddit-like",
                        "--accuracy-epochs", "0", "--out", str(out / "training")],
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
