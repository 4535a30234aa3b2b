"""End-to-end training benchmark: full-batch 2-layer GCN, GAT and GraphSAGE, gsparse vs PyG.

``python -m gsparse.bench.training`` measures, for each workload and model, in one process:

* **epoch time**: forward, loss on the training nodes, backward and an Adam step;
* **inference time**: one forward pass in ``eval`` mode without autograd;

for the model built on :mod:`gsparse.nn` and for the same model built on PyTorch
Geometric's layers, both starting from the same weights (ours load PyG's ``state_dict``).
PyG is run in each graph format its layers accept — ``adj_t``, a ``torch.sparse`` CSR
adjacency (cuSPARSE), and ``edge_index`` (its scatter path) — and the fastest is its
figure. On CUDA each epoch is bracketed by CUDA events; the figure is the median epoch
after warm-up. Running out of memory is recorded (``"error": "out of memory"``) and the
run goes on.

With labelled real graphs (Cora, CiteSeer with their standard split) it also trains each
model for ``--accuracy-epochs`` epochs with both libraries from the same initial weights,
over several seeds, and reports the test accuracy of each (best validation epoch is not
used: the figure is the accuracy after the last epoch).

Models (hidden size 256, as in the G-Sparse paper): GCN ``GCNConv(F, 256) → ReLU →
GCNConv(256, C)``; GAT with 8 heads of 32 (``GATConv(F, 32, heads=8) → ELU →
GATConv(256, C, concat=False)``); GraphSAGE with mean aggregation. Dropout 0.5 on the
input of each layer (and on GAT's attention). Synthetic ``reddit-like`` workloads have
Reddit's 602 features and 41 classes with random values and labels.

With ``--minibatch`` it also times **mini-batch training**, the way most GNNs are trained:
every step samples a fresh pair of blocks around ``--batch-size`` seeds with a uniform
neighbour sampler on the GPU (:class:`~gsparse.bench.minibatch.NeighborSampler`, fanouts ``--fanouts`` from the
seeds outwards), and each library runs forward, loss on the seeds, backward and Adam on
them, from the same initial weights. gsparse builds its graphs from the sampled edge lists
inside the timed step (:meth:`gsparse.Graph.from_block`); PyG takes the edge lists, or
their ``adj_t`` built beforehand, as a sampler hands them over. GraphSAGE runs on the
bipartite blocks; GCN and GAT on the square graph of each layer's nodes (PyG's
``trim_to_layer``). gsparse's steps read their input features with the first dropout in
one pass (:func:`gsparse.nn.gather_features`; ``--minibatch-input index_select`` makes
them gather and drop out as PyG's steps do). Reported per model: the median step time, the host's share of it (the
time to issue the step over the step), and the step's peak memory above what was allocated
before it. The default setup is Reddit's size (the ``reddit-like`` preset), 1,024 seeds,
fanouts 25 and 10, hidden 256.

Output: ``training.json`` (format :data:`FORMAT`) and ``training.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .. import nn as gsparse_nn
from ..graph import Graph
from .. import datasets

__all__ = ["FORMAT", "MODELS", "Workload", "build_model", "load_workload", "main"]

FORMAT = "gsparse-training/1"
HIDDEN = 256
GAT_HEADS = 8
DROPOUT = 0.5
LEARNING_RATE = 0.01
WEIGHT_DECAY = 5e-4
MODELS = ("gcn", "gat", "sage")
# Synthetic node data for graphs that come without (Reddit's sizes for reddit-like).
_SYNTHETIC_DATA = {"reddit-like": (602, 41)}
_DEFAULT_SYNTHETIC_DATA = (500, 3)


@dataclass
class Workload:
    """A graph with node data on the benchmark's device.

    ``graph`` is ours; ``edge_index`` (``[2, E]``, edge order) and ``adj_t`` (``torch.sparse``
    CSR ``[N, N]`` whose row ``v`` lists the sources of ``v``'s incoming edges) are PyG's.
    ``labelled`` says whether labels and split are real (accuracy is meaningful).
    """

    name: str
    graph: Graph
    edge_index: torch.Tensor
    adj_t: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor
    num_classes: int
    labelled: bool


def _random_split(n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reddit's proportions: 66% train, 10% validation, 24% test."""
    perm = torch.randperm(n, generator=gen)
    a, b = int(0.66 * n), int(0.76 * n)
    return perm[:a], perm[a:b], perm[b:]


def _parse_workload(name: str, scale: float) -> tuple[str, float]:
    """``"preset@0.25"`` -> ``("preset", 0.25)``; a bare preset name takes ``scale``."""
    if "@" not in name:
        return name, scale
    base, _, factor = name.partition("@")
    try:
        return base, float(factor)
    except ValueError:
        raise ValueError(f"workload {name!r}: the scale after '@' must be a number, got {factor!r}") from None


def load_workload(name: str, device: torch.device, *, scale: float = 1.0, seed: int = 0,
                  data_dir: str | None = None) -> Workload:
    """A preset (synthetic graph, random features and labels; ``"reddit-like@0.1"`` scales
    its node count by 0.1, a bare name by ``scale``) or a real graph of
    :data:`~gsparse.datasets.REAL_GRAPHS` (its features, labels and split where it
    has them, random ones otherwise)."""
    gen = torch.Generator().manual_seed(seed)
    base, scale = _parse_workload(name, scale)
    if base in datasets.PRESETS:
        graph = datasets.preset(base, scale=scale, seed=seed, device=device)
        x = y = split = None
    elif name in datasets.REAL_GRAPHS:
        data = datasets.real_graph(name, data_dir)
        graph = data.graph.to(device)
        x, y = data.features, data.labels
        split = (data.train_idx, data.val_idx, data.test_idx) if data.train_idx is not None else None
    else:
        raise ValueError(f"workload must be a preset {sorted(datasets.PRESETS)} or a real graph "
                         f"{datasets.REAL_GRAPHS}, got {name!r}")
    n = graph.num_dst
    labelled = x is not None and y is not None and split is not None
    num_features, num_classes = _SYNTHETIC_DATA.get(base, _DEFAULT_SYNTHETIC_DATA)
    if x is None:
        x = torch.randn(n, num_features, generator=gen)
    if y is None:
        y = torch.randint(0, num_classes, (n,), generator=gen)
    if split is None:
        split = _random_split(n, gen)
    src, dst = graph.edges()
    edge_index = torch.stack([src.long(), dst.long()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
        adj_t = torch.sparse_csr_tensor(graph.rowptr.long(), graph.col.long(),
                                        torch.ones(graph.num_edges, device=device), (n, graph.num_src),
                                        check_invariants=False)
    train_idx, val_idx, test_idx = (t.to(device) for t in split)
    # CiteSeer marks its isolated test nodes -1 (no label): they count in no split.
    valid = y.to(device) >= 0
    train_idx, val_idx, test_idx = (t[valid[t]] for t in (train_idx, val_idx, test_idx))
    return Workload(name, graph, edge_index, adj_t, x.to(device), y.to(device), train_idx, val_idx,
                    test_idx, int(y.max()) + 1, labelled)


class TwoLayer(nn.Module):
    """``conv2(dropout(act(conv1(dropout(x)))))``, the graph passed to both layers."""

    def __init__(self, conv1: nn.Module, conv2: nn.Module, activation: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.conv1, self.conv2, self.activation = conv1, conv2, activation

    def forward(self, x: torch.Tensor, graph: Any) -> torch.Tensor:
        x = F.dropout(x, DROPOUT, self.training)
        x = self.activation(self.conv1(x, graph))
        return self.conv2(F.dropout(x, DROPOUT, self.training), graph)


def build_model(kind: str, library: Any, in_channels: int, num_classes: int, *,
                one_graph: bool = True) -> TwoLayer:
    """The 2-layer ``kind`` model from ``library``'s layers (``gsparse.nn`` or
    ``torch_geometric.nn``; the constructor arguments are the same). ``one_graph``: every
    call gets the same graph (full-batch training), which GCN may cache its normalisation
    for; mini-batch steps each bring a new one."""
    if kind == "gcn":
        # PyG caches the normalised adjacency only when asked (and then for the first graph
        # it sees, whatever graph comes later); ours always caches per graph.
        return TwoLayer(library.GCNConv(in_channels, HIDDEN, cached=one_graph),
                        library.GCNConv(HIDDEN, num_classes, cached=one_graph), F.relu)
    if kind == "gat":
        return TwoLayer(library.GATConv(in_channels, HIDDEN // GAT_HEADS, heads=GAT_HEADS, dropout=DROPOUT),
                        library.GATConv(HIDDEN, num_classes, heads=1, concat=False, dropout=DROPOUT), F.elu)
    if kind == "sage":
        return TwoLayer(library.SAGEConv(in_channels, HIDDEN), library.SAGEConv(HIDDEN, num_classes), F.relu)
    raise ValueError(f"model must be one of {MODELS}, got {kind!r}")


def _pyg():
    try:
        import torch_geometric.nn as pyg_nn
    except ImportError:
        return None
    return pyg_nn


def _model_pair(kind: str, w: Workload, seed: int, *, one_graph: bool = True) -> tuple[TwoLayer, TwoLayer | None]:
    """gsparse's and PyG's model with the same initial weights (PyG's initialisation)."""
    torch.manual_seed(seed)
    pyg_nn = _pyg()
    ours = build_model(kind, gsparse_nn, w.x.shape[1], w.num_classes, one_graph=one_graph).to(w.x.device)
    if pyg_nn is None:
        return ours, None
    theirs = build_model(kind, pyg_nn, w.x.shape[1], w.num_classes, one_graph=one_graph).to(w.x.device)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


# ---------------------------------------------------------------------- timing


def _timer(device: torch.device) -> Callable[[Callable[[], Any]], float]:
    """A function that runs ``fn`` once and returns its time in milliseconds."""
    if device.type == "cuda":
        def run(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
    else:
        def run(fn):
            begin = time.perf_counter()
            fn()
            return (time.perf_counter() - begin) * 1e3
    return run


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, w: Workload, graph: Any) -> torch.Tensor:
    model.train()
    opt.zero_grad(set_to_none=True)
    out = model(w.x, graph)
    loss = F.cross_entropy(out[w.train_idx], w.y[w.train_idx])
    loss.backward()
    opt.step()
    return loss


def _optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)


def _is_oom(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _measure(model: nn.Module, w: Workload, graph: Any, epochs: int, warmup: int) -> dict[str, Any]:
    """Median epoch and inference times (ms) and peak memory of ``model`` on ``graph``."""
    device = w.x.device
    timer = _timer(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    opt = _optimizer(model)
    try:
        epoch_ms = [timer(lambda opt=opt: _train_step(model, opt, w, graph)) for _ in range(warmup + epochs)][warmup:]
        model.eval()
        with torch.no_grad():
            infer_ms = [timer(lambda: model(w.x, graph)) for _ in range(warmup + epochs)][warmup:]
    except Exception as error:  # one failure is a result, not the end of the run
        return {"error": "out of memory" if _is_oom(error) else f"{type(error).__name__}: {error}"}
    finally:
        del opt
        _release(device)
    result = {"epoch_ms": statistics.median(epoch_ms), "inference_ms": statistics.median(infer_ms),
              "epoch_ms_all": epoch_ms, "inference_ms_all": infer_ms}
    if device.type == "cuda":
        result["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
    return result


def _pyg_graphs(w: Workload) -> dict[str, Any]:
    return {"adj_t": w.adj_t, "edge_index": w.edge_index}


def time_workload(w: Workload, kind: str, epochs: int, warmup: int, seed: int = 0) -> dict[str, Any]:
    """gsparse's and PyG's times for ``kind`` on ``w``; PyG's best format is its figure."""
    ours, theirs = _model_pair(kind, w, seed)
    initial = {k: v.detach().clone() for k, v in ours.state_dict().items()}
    entry: dict[str, Any] = {"workload": w.name, "model": kind, "num_nodes": w.graph.num_dst,
                             "num_edges": w.graph.num_edges, "num_features": w.x.shape[1],
                             "gsparse": _measure(ours, w, w.graph, epochs, warmup)}
    del ours
    _release(w.x.device)
    if theirs is None:
        entry["pyg"] = {"error": "torch_geometric is not installed"}
        return entry
    formats = {}
    for fmt, graph in _pyg_graphs(w).items():
        theirs.load_state_dict(initial)
        formats[fmt] = _measure(theirs, w, graph, epochs, warmup)
    entry["pyg_formats"] = formats
    ok = {k: v for k, v in formats.items() if "error" not in v}
    if ok:
        best = min(ok, key=lambda k: ok[k]["epoch_ms"])
        entry["pyg"] = {**ok[best], "format": best}
        if "error" not in entry["gsparse"]:
            entry["speedup_epoch"] = ok[best]["epoch_ms"] / entry["gsparse"]["epoch_ms"]
            entry["speedup_inference"] = min(v["inference_ms"] for v in ok.values()) / \
                entry["gsparse"]["inference_ms"]
    else:
        entry["pyg"] = {"error": "; ".join(f"{k}: {v['error']}" for k, v in formats.items())}
    return entry


# ---------------------------------------------------------------------- accuracy


def _test_accuracy(model: nn.Module, w: Workload, graph: Any) -> float:
    model.eval()
    with torch.no_grad():
        pred = model(w.x, graph).argmax(dim=-1)
    return float((pred[w.test_idx] == w.y[w.test_idx]).float().mean())


def accuracy(w: Workload, kind: str, epochs: int, seeds: int) -> dict[str, Any]:
    """Test accuracy after ``epochs`` epochs, per seed, for both libraries from the same
    initial weights (PyG on ``edge_index``)."""
    result: dict[str, Any] = {"workload": w.name, "model": kind, "epochs": epochs, "gsparse": [], "pyg": []}
    for seed in range(seeds):
        ours, theirs = _model_pair(kind, w, seed)
        for name, model, graph in (("gsparse", ours, w.graph), ("pyg", theirs, w.edge_index)):
            if model is None:
                continue
            torch.manual_seed(seed)
            opt = _optimizer(model)
            for _ in range(epochs):
                _train_step(model, opt, w, graph)
            result[name].append(_test_accuracy(model, w, graph))
    for name in ("gsparse", "pyg"):
        if result[name]:
            result[f"{name}_mean"] = statistics.fmean(result[name])
    if result["pyg"]:
        result["difference_points"] = 100 * (result["gsparse_mean"] - result["pyg_mean"])
    return result


# ---------------------------------------------------------------------- report


def _ms(entry: dict[str, Any], key: str) -> str:
    return entry["error"] if "error" in entry else f"{entry[key]:.2f}"


def markdown(doc: dict[str, Any]) -> str:
    """The run as Markdown tables: times (ms, speedups) and accuracies (%)."""
    env = doc["environment"]
    lines = [f"# Training benchmark ({env.get('gpu') or env['device']})", "",
             "| workload | model | gsparse epoch | PyG epoch (format) | epoch speedup | gsparse inference "
             "| PyG inference | inference speedup |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in doc["timings"]:
        pyg = r["pyg"]
        pyg_epoch = _ms(pyg, "epoch_ms") + (f" ({pyg['format']})" if "format" in pyg else "")
        speed = [f"{r[k]:.2f}x" if k in r else "-" for k in ("speedup_epoch", "speedup_inference")]
        lines.append(f"| {r['workload']} | {r['model']} | {_ms(r['gsparse'], 'epoch_ms')} | {pyg_epoch} | "
                     f"{speed[0]} | {_ms(r['gsparse'], 'inference_ms')} | "
                     f"{_ms(pyg, 'inference_ms')} | {speed[1]} |")
    if doc["accuracy"]:
        lines += ["", "| workload | model | epochs | seeds | gsparse test acc | PyG test acc | difference (points) |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for a in doc["accuracy"]:
            pyg = f"{100 * a['pyg_mean']:.2f}" if "pyg_mean" in a else "-"
            diff = f"{a['difference_points']:+.2f}" if "difference_points" in a else "-"
            lines.append(f"| {a['workload']} | {a['model']} | {a['epochs']} | {len(a['gsparse'])} | "
                         f"{100 * a['gsparse_mean']:.2f} | {pyg} | {diff} |")
    from .minibatch import minibatch_markdown

    return "\n".join(lines) + "\n" + minibatch_markdown(doc.get("minibatch", []))


def _environment(device: torch.device) -> dict[str, Any]:
    from .runner import environment

    return environment(device)


def run(workloads: list[str], models: list[str], device: torch.device, *, scale: float, epochs: int,
        warmup: int, accuracy_epochs: int, accuracy_seeds: int, data_dir: str | None = None,
        progress: Callable[[str], None] = print,
        checkpoint: Callable[[dict[str, Any]], None] = lambda doc: None) -> dict[str, Any]:
    """Every (workload, model) timing, and the accuracies on labelled workloads; the
    document so far goes to ``checkpoint`` after each model, so a run cut short keeps them."""
    doc: dict[str, Any] = {
        "format": FORMAT, "environment": _environment(device),
        "config": {"workloads": workloads, "models": models, "scale": scale, "epochs": epochs,
                   "warmup": warmup, "accuracy_epochs": accuracy_epochs, "accuracy_seeds": accuracy_seeds,
                   "hidden": HIDDEN, "gat_heads": GAT_HEADS, "dropout": DROPOUT},
        "timings": [], "accuracy": [],
    }
    for name in workloads:
        w = load_workload(name, device, scale=scale, data_dir=data_dir)
        progress(f"{name}: {w.graph.num_dst} nodes, {w.graph.num_edges} edges, {w.x.shape[1]} features")
        for kind in models:
            entry = time_workload(w, kind, epochs, warmup)
            doc["timings"].append(entry)
            progress(f"  {kind}: gsparse {_ms(entry['gsparse'], 'epoch_ms')} ms/epoch, "
                     f"PyG {_ms(entry['pyg'], 'epoch_ms')} ms/epoch")
            if w.labelled and accuracy_epochs > 0:
                acc = accuracy(w, kind, accuracy_epochs, accuracy_seeds)
                doc["accuracy"].append(acc)
                progress(f"  {kind}: test accuracy gsparse {100 * acc['gsparse_mean']:.2f}%"
                         + (f", PyG {100 * acc['pyg_mean']:.2f}%" if "pyg_mean" in acc else ""))
            checkpoint(doc)
        del w
        _release(device)
    return doc


def main(argv: list[str] | None = None) -> int:
    from .minibatch import MINIBATCH_FANOUTS, MINIBATCH_SEEDS, MINIBATCH_WORKLOAD, run_minibatch

    parser = argparse.ArgumentParser(prog="python -m gsparse.bench.training", description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="*", default=["reddit-like", "reddit-like@0.1", "cora", "citeseer"],
                        help="presets (NAME or NAME@SCALE) and real graphs of the full-batch cells "
                             "(default: reddit-like reddit-like@0.1 cora citeseer; 'none', or the option "
                             "alone: no full-batch cells)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--scale", type=float, default=1.0, help="node-count scale of presets")
    parser.add_argument("--epochs", type=int, default=20, help="timed epochs (after warm-up)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--accuracy-epochs", type=int, default=200)
    parser.add_argument("--accuracy-seeds", type=int, default=5)
    parser.add_argument("--data-dir", default=None, help="directory of the real graphs' .npz files")
    parser.add_argument("--out", default="bench-out", help="directory for training.json and training.md")
    parser.add_argument("--minibatch", action="store_true",
                        help="also the mini-batch cells: each model on fresh sampled blocks every step")
    parser.add_argument("--minibatch-workload", default=MINIBATCH_WORKLOAD,
                        help=f"base graph of the mini-batch cells (default: {MINIBATCH_WORKLOAD})")
    parser.add_argument("--minibatch-steps", type=int, default=30, help="timed mini-batch steps")
    parser.add_argument("--minibatch-warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=MINIBATCH_SEEDS, help="seeds per mini-batch")
    parser.add_argument("--fanouts", default=",".join(map(str, MINIBATCH_FANOUTS)),
                        help="neighbours sampled per node, from the seeds outwards (default: 25,10)")
    parser.add_argument("--minibatch-input", choices=("gather_features", "index_select"), default="gather_features",
                        help="how gsparse's mini-batch steps read their input features: gathered with the "
                             "first dropout in one pass (gsparse.nn.gather_features, the default), or by "
                             "index_select and F.dropout as PyG's steps are")
    args = parser.parse_args(argv)
    if "none" in args.workloads:
        if args.workloads != ["none"]:
            parser.error(f"--workloads none means no full-batch cells: give it alone, got {args.workloads}")
        args.workloads = []
    if not args.workloads and not args.minibatch:
        parser.error("nothing to run: no full-batch workloads and no --minibatch")
    if args.epochs < 1 or args.warmup < 0 or args.accuracy_epochs < 0 or args.accuracy_seeds < 1:
        parser.error("--epochs and --accuracy-seeds must be >= 1, --warmup and --accuracy-epochs >= 0")
    try:
        fanouts = tuple(int(f) for f in args.fanouts.split(","))
    except ValueError:
        parser.error(f"--fanouts takes 2 comma-separated integers, got {args.fanouts!r}")
    if len(fanouts) != 2 or min(fanouts) < 1 or args.batch_size < 1 or args.minibatch_steps < 1 \
            or args.minibatch_warmup < 0:
        parser.error("--fanouts takes 2 positive integers; --batch-size and --minibatch-steps must be "
                     ">= 1, --minibatch-warmup >= 0")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device} asked for, but PyTorch sees no CUDA device")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def save(doc: dict[str, Any]) -> None:
        (out / "training.json").write_text(json.dumps(doc, indent=1))

    doc = run(args.workloads, args.models, device, scale=args.scale, epochs=args.epochs, warmup=args.warmup,
              accuracy_epochs=args.accuracy_epochs, accuracy_seeds=args.accuracy_seeds,
              data_dir=args.data_dir, checkpoint=save)
    if args.minibatch:
        doc["config"]["minibatch"] = {"workload": args.minibatch_workload, "steps": args.minibatch_steps,
                                      "warmup": args.minibatch_warmup, "batch": args.batch_size,
                                      "fanouts": list(fanouts), "gsparse_input": args.minibatch_input}
        doc["minibatch"] = run_minibatch(args.models, device, workload=args.minibatch_workload,
                                         steps=args.minibatch_steps, warmup=args.minibatch_warmup,
                                         batch=args.batch_size, fanouts=fanouts,
                                         fused_input=args.minibatch_input == "gather_features")
    save(doc)
    table = markdown(doc)
    (out / "training.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
