"""Mini-batch training cells of ``python -m gsparse.bench.training --minibatch``.

Every step samples a fresh pair of blocks around a batch of seeds with a uniform neighbour
sampler on the device (:class:`NeighborSampler`), and gsparse and PyG each run forward,
loss on the seeds, backward and Adam on them, from the same initial weights. gsparse builds
its graphs from the sampled edge lists inside the timed step
(:meth:`gsparse.Graph.from_block`); PyG takes the edge lists, or their ``adj_t``, as a
sampler hands them over. See :mod:`gsparse.bench.training` for the models and the report.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..graph import Graph
from ..nn import CapturedStep, StaticBlocks, gather_features
from .training import (DROPOUT, LEARNING_RATE, WEIGHT_DECAY, TwoLayer, Workload, _is_oom, _model_pair, _ms,
                       _optimizer, _pyg, _release, build_model, load_workload)

__all__ = ["MINIBATCH_FANOUTS", "MINIBATCH_SEEDS", "MINIBATCH_WORKLOAD", "Blocks", "BlockModel",
           "NeighborSampler", "block_graphs", "minibatch_markdown", "pyg_block_graphs", "run_minibatch",
           "time_minibatch"]

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
    of each layer's nodes (PyG's ``trim_to_layer``), keeping the rows the next layer needs.

    The step's input features come from :meth:`inputs`. With ``fused_input`` (gsparse's
    way) they are gathered with the first dropout in one pass
    (:func:`gsparse.nn.gather_features`); else gathered by ``index_select`` and dropped out
    by the forward pass with ``F.dropout``, as PyG's step does."""

    def __init__(self, two_layer: TwoLayer, bipartite: bool, fused_input: bool = False) -> None:
        super().__init__()
        self.conv1, self.conv2, self.activation = two_layer.conv1, two_layer.conv2, two_layer.activation
        self.bipartite, self.fused_input = bipartite, fused_input

    def inputs(self, x: torch.Tensor, n_id: torch.Tensor) -> torch.Tensor:
        """The features of the step's nodes ``n_id`` from the table ``x``, as :meth:`forward`
        takes them."""
        if self.fused_input:
            return gather_features(x, n_id, DROPOUT, self.training)
        # index_select: the same gather as x[n_id], a kernel that moves whole rows (0.37
        # against 0.51 ms for 150K rows of 602 features on an H100)
        return torch.index_select(x, 0, n_id)

    def forward(self, x: torch.Tensor, graphs: tuple[Any, Any], sizes: tuple[int, int, int]) -> torch.Tensor:
        batch, n1, _ = sizes
        outer, inner = graphs
        if not self.fused_input:
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
    out = model(model.inputs(x, blocks.n_id), graphs(), blocks.sizes)
    F.cross_entropy(out, y[blocks.n_id[:blocks.sizes[0]]]).backward()
    opt.step()



def _eager_run(model: BlockModel, opt: torch.optim.Optimizer, w: Workload,
               graphs: Callable[[Blocks], Callable[[], Any]]) -> Callable[[Blocks], Callable[[], None]]:
    """A library's eager step on a step's blocks: its graphs are handed over (built inside
    the step for gsparse, as a sampler's edge lists for PyG)."""
    def run(blocks: Blocks) -> Callable[[], None]:
        feed = graphs(blocks)
        return lambda: _minibatch_step(model, opt, w.x, w.y, blocks, feed)
    return run


def _captured_run(model: BlockModel, w: Workload, batch: int, max_degree: int,
                  bipartite: bool) -> tuple[CapturedStep, Callable[[Blocks], Callable[[], None]]]:
    """gsparse's step replayed from a CUDA graph (:class:`gsparse.nn.CapturedStep`): each
    step's blocks are copied into :class:`gsparse.nn.StaticBlocks` and the captured step
    (graphs built from the buffers, gather, forward, loss, backward, Adam) replays; a batch
    that outgrows the buffers is captured again. The same Adam, made capturable."""
    static = StaticBlocks(max_degree, square=not bipartite)
    opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY, capturable=True)

    def step() -> None:
        model.train()
        opt.zero_grad(set_to_none=True)
        n0, n1, seeds = static.sizes
        out = model(model.inputs(w.x, static.n_id), tuple(static.graphs()), (seeds, n1, n0))
        F.cross_entropy(out[:batch], w.y[static.n_id[:batch]]).backward()
        opt.step()

    captured = CapturedStep(step, static)

    def run(blocks: Blocks) -> Callable[[], None]:
        seeds, n1, n0 = blocks.sizes

        def replay() -> None:
            static.load(blocks.n_id, (n0, n1, seeds), (blocks.outer, blocks.inner))
            captured()
        return replay
    return captured, run


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
                   batch: int = MINIBATCH_SEEDS, seed: int = 0, fused_input: bool = True) -> dict[str, Any]:
    """Step times of ``kind`` on fresh sampled blocks, gsparse against PyG in each format,
    every library fed the same blocks in the same step, from the same initial weights.
    ``fused_input``: gsparse's steps gather their input features with the first dropout
    (:meth:`BlockModel.inputs`); PyG's gather and drop out in two kernels either way."""
    device = w.x.device
    bipartite = kind == "sage"
    ours, theirs = _model_pair(kind, w, seed, one_graph=False)
    eager = BlockModel(ours, bipartite, fused_input)
    # copied before any step trains `ours`: the same initial weights
    captured, captured_run = _captured_run(BlockModel(copy.deepcopy(ours), bipartite, fused_input), w, batch,
                                           max(sampler.fanouts), bipartite)
    runs: dict[str, Callable[[Blocks], Callable[[], Any]]] = {
        "gsparse": _eager_run(eager, _optimizer(eager), w, lambda b: (lambda: block_graphs(b, bipartite))),
        "gsparse/captured": captured_run}
    if theirs is not None:
        initial = {k: v.detach().clone() for k, v in theirs.state_dict().items()}
        for fmt in ("edge_index", "adj_t"):
            model = BlockModel(build_model(kind, _pyg(), w.x.shape[1], w.num_classes, one_graph=False).to(device),
                               bipartite)
            model.load_state_dict(initial)

            def graphs(b: Blocks, fmt: str = fmt) -> Callable[[], Any]:
                built = pyg_block_graphs(b, bipartite, fmt)  # given, as a sampler hands it over
                return lambda: built

            runs[f"pyg/{fmt}"] = _eager_run(model, _optimizer(model), w, graphs)
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
        for name, run in runs.items():
            if name in errors:
                continue
            step_fn = run(blocks)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                base = torch.cuda.memory_allocated(device)
                torch.cuda.reset_peak_memory_stats(device)
            try:
                clocks[name](step_fn, record=step >= warmup)
            except Exception as error:  # one failure is a result, not the end of the run
                errors[name] = "out of memory" if _is_oom(error) else f"{type(error).__name__}: {error}"
                continue
            if device.type == "cuda":
                used = torch.cuda.max_memory_allocated(device) - base
                peak[name] = max(peak.get(name, 0), used)
    entry: dict[str, Any] = {
        "model": kind, "workload": w.name, "batch": batch, "fanouts": list(sampler.fanouts),
        "gsparse_input": "gather_features" if fused_input else "index_select",
        "mean_block": {key: statistics.fmean(s[i] for s in sizes)
                       for i, key in enumerate(("seeds", "hop1_nodes", "hop2_nodes",
                                                "inner_edges", "outer_edges"))}}
    for name in runs:
        result = {"error": errors[name]} if name in errors else clocks[name].result()
        if name in peak and "error" not in result:
            result["peak_memory_bytes"] = peak[name]
        entry[name] = result
    if "error" not in entry["gsparse/captured"]:
        entry["gsparse/captured"]["captures"] = captured.captures
    pyg = {k.removeprefix("pyg/"): v for k, v in entry.items() if k.startswith("pyg/") and "error" not in v}
    if pyg:
        best = min(pyg, key=lambda k: pyg[k]["step_ms"])
        entry["pyg"] = {**pyg[best], "format": best}
        for ours_name, key in (("gsparse", "speedup_step"), ("gsparse/captured", "speedup_step_captured")):
            if "error" not in entry[ours_name]:
                entry[key] = pyg[best]["step_ms"] / entry[ours_name]["step_ms"]
    else:
        entry["pyg"] = {"error": "; ".join(f"{k}: {v['error']}" for k, v in entry.items()
                                           if k.startswith("pyg/")) or "torch_geometric is not installed"}
    return entry


def run_minibatch(models: list[str], device: torch.device, *, workload: str, steps: int, warmup: int,
                  batch: int, fanouts: tuple[int, ...], fused_input: bool = True,
                  progress: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Every model's mini-batch cell on ``workload`` (``fused_input``: see :func:`time_minibatch`)."""
    w = load_workload(workload, device)
    progress(f"mini-batch on {workload}: {w.graph.num_dst} nodes, {w.graph.num_edges} edges, "
             f"{w.x.shape[1]} features, {batch} seeds, fanouts {list(fanouts)}")
    sampler = NeighborSampler(w.graph, fanouts)
    cells = []
    for kind in models:
        entry = time_minibatch(kind, w, sampler, steps, warmup, batch, fused_input=fused_input)
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
                 f"edges on average; gsparse's input features by {first.get('gsparse_input', 'index_select')})", "",
             "| model | gsparse step (ms) | host share | peak MiB | gsparse captured step (ms) | captures "
             "| peak MiB | PyG step (ms) (format) | host share | peak MiB | speedup | speedup, captured |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in cells:
        ours, pyg = c["gsparse"], c["pyg"]
        captured = c.get("gsparse/captured", {"error": "not run"})
        pyg_step = _ms(pyg, "step_ms") + (f" ({pyg['format']})" if "format" in pyg else "")
        speed = f"{c['speedup_step']:.2f}x" if "speedup_step" in c else "-"
        speed_captured = f"{c['speedup_step_captured']:.2f}x" if "speedup_step_captured" in c else "-"
        lines.append(f"| {c['model']} | {_ms(ours, 'step_ms')} | {_share(ours)} | {_mib(ours)} | "
                     f"{_ms(captured, 'step_ms')} | {captured.get('captures', '-')} | {_mib(captured)} | "
                     f"{pyg_step} | {_share(pyg)} | {_mib(pyg)} | {speed} | {speed_captured} |")
    return "\n".join(lines) + "\n"
