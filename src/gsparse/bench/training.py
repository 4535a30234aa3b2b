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
neighbour sampler on the GPU (:class:`NeighborSampler`, fanouts ``--fanouts`` from the
seeds outwards), and each library runs forward, loss on the seeds, backward and Adam on
them, from the same initial weights. gsparse builds its graphs from the sampled edge lists
inside the timed step (:meth:`gsparse.Graph.from_block`); PyG takes the edge lists, or
their ``adj_t`` built beforehand, as a sampler hands them over. GraphSAGE runs on the
bipartite blocks; GCN and GAT on the square graph of each layer's nodes (PyG's
``trim_to_layer``). Reported per model: the median step time, the host's share of it (the
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

__all__ = ["FORMAT", "MODELS", "Blocks", "NeighborSampler", "Workload", "block_graphs",
           "build_model", "load_workload", "main", "run_minibatch", "time_minibatch"]

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


def build_model(kind: str, library: Any, in_channels: int, num_classes: int) -> TwoLayer:
    """The 2-layer ``kind`` model from ``library``'s layers (``gsparse.nn`` or
    ``torch_geometric.nn``; the constructor arguments are the same)."""
    if kind == "gcn":
        # PyG caches the normalised adjacency only when asked; ours always caches per graph.
        return TwoLayer(library.GCNConv(in_channels, HIDDEN, cached=True),
                        library.GCNConv(HIDDEN, num_classes, cached=True), F.relu)
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


def _model_pair(kind: str, w: Workload, seed: int) -> tuple[TwoLayer, TwoLayer | None]:
    """gsparse's and PyG's model with the same initial weights (PyG's initialisation)."""
    torch.manual_seed(seed)
    pyg_nn = _pyg()
    ours = build_model(kind, gsparse_nn, w.x.shape[1], w.num_classes).to(w.x.device)
    if pyg_nn is None:
        return ours, None
    theirs = build_model(kind, pyg_nn, w.x.shape[1], w.num_classes).to(w.x.device)
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
        epoch_ms = [timer(lambda: _train_step(model, opt, w, graph)) for _ in range(warmup + epochs)][warmup:]
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


# ---------------------------------------------------------------------- mini-batch training

MINIBATCH_WORKLOAD = "reddit-like"
MINIBATCH_SEEDS = 1024
MINIBATCH_FANOUTS = (25, 10)


@dataclass
class Blocks:
    """One step's sampled computation graph, in local node ids (seeds first, then the nodes
    each hop adds), with edges sorted by destination as a neighbour sampler emits them.

    ``sizes`` is ``(B, N1, N0)``: seeds, nodes within one hop, nodes within two hops.
    ``outer`` (the first layer's edges: both hops, destinations in ``[0, N1)``) and
    ``inner`` (the second layer's: the first hop, destinations in ``[0, B)``) are
    ``[2, E]`` edge lists; ``max_degree`` bounds every destination's edges (the largest
    fanout).
    """

    n_id: torch.Tensor
    sizes: tuple[int, int, int]
    outer: torch.Tensor
    inner: torch.Tensor
    max_degree: int


class NeighborSampler:
    """Uniform neighbour sampling on the GPU, written with torch ops.

    Each destination takes ``fanout`` of its in-neighbours uniformly *with* replacement
    (DGL's ``replace=True``; a node without in-neighbours takes none), the first fanout for
    the seeds, the second for the nodes the first hop added (PyG's ``NeighborLoader``
    order). Node ids are made local with a global-to-local map kept on the device. The
    sampler itself reads sizes back (``torch.unique``), as every sampler does; the blocks it
    returns come with their sizes, which is what lets the layers build graphs without
    waiting.
    """

    def __init__(self, graph: Graph, fanouts: tuple[int, ...], seed: int = 0) -> None:
        if len(fanouts) != 2:
            raise ValueError(f"the benchmark's models have 2 layers: give 2 fanouts, got {fanouts}")
        self.rowptr = graph.rowptr.long()
        self.col = graph.col
        self.fanouts = fanouts
        self.local = torch.full((graph.num_dst,), -1, dtype=torch.int64, device=graph.device)
        self.generator = torch.Generator(device=graph.device).manual_seed(seed)

    def _hop(self, frontier: torch.Tensor, first_local: int, fanout: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Global sources and local destinations of ``fanout`` picks per frontier node."""
        start = self.rowptr[frontier]
        degree = self.rowptr[frontier + 1] - start
        r = torch.rand((frontier.numel(), fanout), device=frontier.device, generator=self.generator)
        pick = (start.unsqueeze(1) + (r * degree.unsqueeze(1)).long()).flatten()
        keep = (degree > 0).repeat_interleave(fanout)
        dst = torch.arange(first_local, first_local + frontier.numel(),
                           device=frontier.device).repeat_interleave(fanout)
        return self.col[pick[keep]].long(), dst[keep]

    def _add(self, nodes: list[torch.Tensor], count: int, candidates: torch.Tensor) -> int:
        new = torch.unique(candidates[self.local[candidates] < 0])
        self.local[new] = torch.arange(count, count + new.numel(), device=new.device)
        nodes.append(new)
        return count + new.numel()

    def sample(self, seeds: torch.Tensor) -> Blocks:
        """The blocks of ``seeds`` (distinct global ids)."""
        device = seeds.device
        batch = seeds.numel()
        self.local[seeds] = torch.arange(batch, device=device)
        nodes = [seeds]
        src1, dst1 = self._hop(seeds, 0, self.fanouts[0])
        n1 = self._add(nodes, batch, src1)
        src2, dst2 = self._hop(nodes[1], batch, self.fanouts[1])
        n0 = self._add(nodes, n1, src2)
        inner = torch.stack([self.local[src1], dst1])
        outer = torch.cat([inner, torch.stack([self.local[src2], dst2])], dim=1)
        n_id = torch.cat(nodes)
        self.local[n_id] = -1
        return Blocks(n_id, (batch, n1, n0), outer, inner, max(self.fanouts))


class BlockModel(nn.Module):
    """A :class:`TwoLayer` run on a step's blocks: GraphSAGE on bipartite blocks
    ``((x_src, x_dst), block)``; GCN and GAT, which need square graphs, on the square graph
    of each layer's nodes (PyG's ``trim_to_layer``), keeping the rows the next layer needs."""

    def __init__(self, two_layer: TwoLayer, bipartite: bool) -> None:
        super().__init__()
        self.conv1, self.conv2, self.activation = two_layer.conv1, two_layer.conv2, two_layer.activation
        self.bipartite = bipartite

    def forward(self, x: torch.Tensor, graphs: tuple[Any, Any], sizes: tuple[int, int, int]) -> torch.Tensor:
        batch, n1, _ = sizes
        outer, inner = graphs
        x = F.dropout(x, DROPOUT, self.training)
        h = self.conv1((x, x[:n1]), outer) if self.bipartite else self.conv1(x, outer)[:n1]
        h = F.dropout(self.activation(h), DROPOUT, self.training)
        return self.conv2((h, h[:batch]), inner) if self.bipartite else self.conv2(h, inner)[:batch]


def block_graphs(blocks: Blocks, bipartite: bool) -> tuple[Graph, Graph]:
    """gsparse's graphs of a step's blocks, built on the device without waiting for it."""
    batch, n1, n0 = blocks.sizes
    outer_dst, inner_dst = (n1, batch) if bipartite else (n0, n1)
    return (Graph.from_block(blocks.outer, num_src=n0, num_dst=outer_dst, dst_sorted=True,
                             max_degree=blocks.max_degree),
            Graph.from_block(blocks.inner, num_src=n1, num_dst=inner_dst, dst_sorted=True,
                             max_degree=blocks.max_degree))


def _adj_t(edge_index: torch.Tensor, num_src: int, num_dst: int) -> torch.Tensor:
    """PyG's ``adj_t`` of a destination-sorted edge list: a ``torch.sparse`` CSR ``[num_dst,
    num_src]`` whose row ``v`` lists ``v``'s sources."""
    from ..backends.cpu import unchecked_csr

    dst = edge_index[1].contiguous()
    crow = torch.searchsorted(dst, torch.arange(num_dst + 1, device=dst.device))
    values = torch.ones(edge_index.shape[1], device=dst.device)
    return unchecked_csr(crow, edge_index[0].contiguous(), values, (num_dst, num_src))


def pyg_block_graphs(blocks: Blocks, bipartite: bool, fmt: str) -> tuple[Any, Any]:
    """PyG's inputs for a step's blocks: the edge lists, or their ``adj_t``."""
    if fmt == "edge_index":
        return blocks.outer, blocks.inner
    batch, n1, n0 = blocks.sizes
    outer_dst, inner_dst = (n1, batch) if bipartite else (n0, n1)
    return _adj_t(blocks.outer, n0, outer_dst), _adj_t(blocks.inner, n1, inner_dst)


def _minibatch_step(model: BlockModel, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                    blocks: Blocks, graphs: Callable[[], tuple[Any, Any]]) -> None:
    model.train()
    opt.zero_grad(set_to_none=True)
    out = model(x[blocks.n_id], graphs(), blocks.sizes)
    F.cross_entropy(out, y[blocks.n_id[:blocks.sizes[0]]]).backward()
    opt.step()


class _StepClock:
    """Times steps: wall time from a synchronised start to the end of the GPU work, and
    the host's share of it (the time the host took to issue the step)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.step_ms: list[float] = []
        self.host_ms: list[float] = []

    def __call__(self, fn: Callable[[], Any], record: bool) -> None:
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
        begin = time.perf_counter()
        fn()
        issued = time.perf_counter()
        if cuda:
            torch.cuda.synchronize(self.device)
        end = time.perf_counter()
        if record:
            self.step_ms.append((end - begin) * 1e3)
            self.host_ms.append((issued - begin) * 1e3)

    def result(self) -> dict[str, Any]:
        step, host = statistics.median(self.step_ms), statistics.median(self.host_ms)
        return {"step_ms": step, "host_ms": host, "host_share": min(1.0, host / step),
                "step_ms_all": self.step_ms}


def time_minibatch(kind: str, w: Workload, sampler: NeighborSampler, steps: int, warmup: int,
                   batch: int = MINIBATCH_SEEDS, seed: int = 0) -> dict[str, Any]:
    """Step times of ``kind`` on fresh sampled blocks, gsparse against PyG in each format,
    every library fed the same blocks in the same step, from the same initial weights."""
    device = w.x.device
    bipartite = kind == "sage"
    ours, theirs = _model_pair(kind, w, seed)
    runs: dict[str, tuple[BlockModel, Callable[[Blocks], Callable[[], Any]]]] = {
        "gsparse": (BlockModel(ours, bipartite), lambda b: (lambda: block_graphs(b, bipartite)))}
    if theirs is not None:
        initial = {k: v.detach().clone() for k, v in theirs.state_dict().items()}
        for fmt in ("edge_index", "adj_t"):
            model = build_model(kind, _pyg(), w.x.shape[1], w.num_classes).to(device)
            model.load_state_dict(initial)

            def graphs(b: Blocks, fmt: str = fmt) -> Callable[[], Any]:
                built = pyg_block_graphs(b, bipartite, fmt)  # given, as a sampler hands it over
                return lambda: built

            runs[f"pyg/{fmt}"] = (BlockModel(model, bipartite), graphs)
    opts = {name: _optimizer(model) for name, (model, _) in runs.items()}
    clocks = {name: _StepClock(device) for name in runs}
    errors: dict[str, str] = {}
    peak: dict[str, int] = {}
    sizes = []
    gen = torch.Generator(device="cpu").manual_seed(seed)
    train = w.train_idx
    for step in range(warmup + steps):
        seeds = train[torch.randperm(train.numel(), generator=gen)[:batch].to(train.device)]
        blocks = sampler.sample(seeds)
        sizes.append((*blocks.sizes, blocks.inner.shape[1], blocks.outer.shape[1]))
        for name, (model, graphs) in runs.items():
            if name in errors:
                continue
            feed = graphs(blocks)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                base = torch.cuda.memory_allocated(device)
                torch.cuda.reset_peak_memory_stats(device)
            try:
                clocks[name](lambda: _minibatch_step(model, opts[name], w.x, w.y, blocks, feed),
                             record=step >= warmup)
            except Exception as error:  # one failure is a result, not the end of the run
                errors[name] = "out of memory" if _is_oom(error) else f"{type(error).__name__}: {error}"
                continue
            if device.type == "cuda":
                used = torch.cuda.max_memory_allocated(device) - base
                peak[name] = max(peak.get(name, 0), used)
    entry: dict[str, Any] = {
        "model": kind, "workload": w.name, "batch": batch, "fanouts": list(sampler.fanouts),
        "mean_block": {key: statistics.fmean(s[i] for s in sizes)
                       for i, key in enumerate(("seeds", "hop1_nodes", "hop2_nodes",
                                                "inner_edges", "outer_edges"))}}
    for name in runs:
        result = {"error": errors[name]} if name in errors else clocks[name].result()
        if name in peak and "error" not in result:
            result["peak_memory_bytes"] = peak[name]
        entry[name] = result
    pyg = {k.removeprefix("pyg/"): v for k, v in entry.items() if k.startswith("pyg/") and "error" not in v}
    if pyg:
        best = min(pyg, key=lambda k: pyg[k]["step_ms"])
        entry["pyg"] = {**pyg[best], "format": best}
        if "error" not in entry["gsparse"]:
            entry["speedup_step"] = pyg[best]["step_ms"] / entry["gsparse"]["step_ms"]
    else:
        entry["pyg"] = {"error": "; ".join(f"{k}: {v['error']}" for k, v in entry.items()
                                           if k.startswith("pyg/")) or "torch_geometric is not installed"}
    return entry


def run_minibatch(models: list[str], device: torch.device, *, workload: str, steps: int, warmup: int,
                  batch: int, fanouts: tuple[int, ...], progress: Callable[[str], None] = print
                  ) -> list[dict[str, Any]]:
    """Every model's mini-batch cell on ``workload``."""
    w = load_workload(workload, device)
    progress(f"mini-batch on {workload}: {w.graph.num_dst} nodes, {w.graph.num_edges} edges, "
             f"{w.x.shape[1]} features, {batch} seeds, fanouts {list(fanouts)}")
    sampler = NeighborSampler(w.graph, fanouts)
    cells = []
    for kind in models:
        entry = time_minibatch(kind, w, sampler, steps, warmup, batch)
        cells.append(entry)
        pyg = entry["pyg"]
        progress(f"  {kind}: gsparse {_ms(entry['gsparse'], 'step_ms')} ms/step, PyG "
                 f"{_ms(pyg, 'step_ms')} ms/step" + (f" ({pyg['format']})" if "format" in pyg else ""))
        _release(device)
    return cells


def _share(entry: dict[str, Any]) -> str:
    return "-" if "error" in entry else f"{100 * entry['host_share']:.0f}%"


def _mib(entry: dict[str, Any]) -> str:
    return f"{entry['peak_memory_bytes'] / 2**20:.0f}" if "peak_memory_bytes" in entry else "-"


def minibatch_markdown(cells: list[dict[str, Any]]) -> str:
    """The mini-batch cells as a Markdown table."""
    if not cells:
        return ""
    first = cells[0]
    sizes = first["mean_block"]
    lines = ["", f"## Mini-batch training ({first['workload']}, {first['batch']} seeds, fanouts "
                 f"{first['fanouts']}; blocks of {sizes['inner_edges']:.0f} and {sizes['outer_edges']:.0f} "
                 f"edges on average)", "",
             "| model | gsparse step (ms) | host share | peak MiB | PyG step (ms) (format) | host share "
             "| peak MiB | speedup |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in cells:
        ours, pyg = c["gsparse"], c["pyg"]
        pyg_step = _ms(pyg, "step_ms") + (f" ({pyg['format']})" if "format" in pyg else "")
        speed = f"{c['speedup_step']:.2f}x" if "speedup_step" in c else "-"
        lines.append(f"| {c['model']} | {_ms(ours, 'step_ms')} | {_share(ours)} | {_mib(ours)} | "
                     f"{pyg_step} | {_share(pyg)} | {_mib(pyg)} | {speed} |")
    return "\n".join(lines) + "\n"


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
    parser = argparse.ArgumentParser(prog="python -m gsparse.bench.training", description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="*", default=["reddit-like", "reddit-like@0.1", "cora", "citeseer"],
                        help="presets (NAME or NAME@SCALE) and real graphs of the full-batch cells "
                             "(default: reddit-like reddit-like@0.1 cora citeseer; none: no full-batch cells)")
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
    args = parser.parse_args(argv)
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
                                      "fanouts": list(fanouts)}
        doc["minibatch"] = run_minibatch(args.models, device, workload=args.minibatch_workload,
                                         steps=args.minibatch_steps, warmup=args.minibatch_warmup,
                                         batch=args.batch_size, fanouts=fanouts)
    save(doc)
    table = markdown(doc)
    (out / "training.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
