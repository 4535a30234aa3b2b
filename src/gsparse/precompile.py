"""``gsparse precompile``: fill the disk kernel cache ahead of time.

On a new machine or container every first call of an operator compiles its kernels with
NVRTC. For images and clusters, ``gsparse precompile`` compiles them beforehand, without a
GPU, so that first calls only read the cache and load modules::

    gsparse precompile --ops u_mul_e_sum,copy_u_mean,u_dot_v,edge_softmax \\
        --dtypes float32,bfloat16 --features 64,256 --archs sm_90
    gsparse precompile --models gcn,gat,sage --channels 602,256,41 --archs sm_80,sm_90

What gets compiled:

* **Tasks.** Each operator (a DGL shorthand of :mod:`gsparse`) or layer is run once,
  forward and backward, on small CPU graphs with a backend that records the CUDA task of
  every call it makes and computes it with the PyTorch-ops backend: the tasks are exactly
  those of the real calls and of the backward formulas, with edge ids or without.
* **Schedules.** For each task, the schedule the hand rule picks on each graph of a
  statistics grid, for the :class:`~gsparse.target.Target` of each architecture (the
  local GPU's when it has that architecture, else the known GPUs of it): the presets'
  statistics (full-batch training), what the host knows of sampled blocks of a range of
  sizes (mini-batch training), and the exact statistics of each ``--graph`` given. On a
  real graph or graph file given with ``--graph``, also the schedule the shipped cost model
  picks there (what a call runs under the default "model" policy, see
  :mod:`gsparse.tune.select`); the model needs the graph's structure, so the grid, which
  has statistics only, gets the hand rule's picks (what sampled blocks run in any case).
* **Triangular solves** (``--sptrsv-rhs``, numbers of right-hand sides): the factor
  checks of every float32 and float64 solver, and the fast start's kernels
  (:func:`gsparse.kernels.sptrsv.default.natural_schedule`, every scheme it picks for the
  number of right-hand sides, and the levels kernel of the schemes that go by level) for
  lower and upper systems, unit and stored diagonals, int32 indices: what a
  :class:`~gsparse.TriangularSolver` compiles before its first solve by default. Solves the
  solver analyses (several right-hand sides on short rows) depend on the factor's analysis
  and are compiled at their first solve.
* **A mini-batch step's first kernels**, whatever the operators: the checks of sampled
  blocks (:meth:`gsparse.Graph.from_block`), the gather of input features
  (:func:`gsparse.nn.gather_features`), each one program for every dtype and index type,
  the scatter of a block's backward (:mod:`gsparse._block_scatter`), a program for
  each, and a block's self-loop graph with GCN's weights (:mod:`gsparse._block_loops`), a
  program for each index type.
* **Programs** are generated, deduplicated and compiled in a thread pool (NVRTC releases
  the GIL) into the kernel cache of :func:`gsparse.runtime.default_cache_dir`. Programs
  already there are skipped.

The cache key includes the NVRTC version: precompile with the NVRTC of the machines that
will run the kernels.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch

from . import _block_checks as block_checks
from . import _block_loops as block_loops
from . import _block_scatter as block_scatter
from . import _gather_features as gather_features
from . import backends, datasets, runtime
from ._usage import Parser, UsageError, one_line
from .backends import cpu as cpu_backend
from .graph import Graph, GraphStats, RowStats
from .kernels import sddmm as sddmm_kernels
from .kernels import softmax as softmax_kernels
from .kernels import spmm as spmm_kernels
from .kernels.sddmm import codegen as sddmm_codegen
from .kernels.softmax import codegen as softmax_codegen
from .kernels.spmm import codegen as spmm_codegen
from .kernels.sptrsv import checks as sptrsv_checks
from .kernels.sptrsv.codegen import levels_program, natural_program
from .kernels.sptrsv.default import NATURAL_SCHEMES, SUBWARP_PER_ROW, WARP_PER_ROW, WARP_PER_ROW_BY_LEVEL
from .kernels.sptrsv.task import SptrsvAlgorithm
from .runtime._nvrtc import arch_number
from .target import A100, H100, H200, Target

__all__ = ["DEFAULT_OPS", "MODELS", "Report", "main", "precompile"]

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
           "float64": torch.float64}
_KNOWN_TARGETS = (H100, H200, A100)
MODELS = ("gcn", "gat", "sage")
GAT_HEADS = 8
# What the gsparse.nn layers call, and the attention-style calls around them.
DEFAULT_OPS = ("copy_u_sum", "copy_u_mean", "copy_u_max", "u_mul_e_sum", "u_add_v", "u_dot_v",
               "edge_softmax", "gat_attention")


def _operators() -> dict[str, Callable[..., torch.Tensor]]:
    """Every DGL shorthand of gsparse, ``edge_softmax`` and ``gat_attention``, by name."""
    from . import attention, sddmm, softmax, spmm

    table: dict[str, Callable[..., torch.Tensor]] = {**spmm.SHORTHANDS, **sddmm.SHORTHANDS}
    table["edge_softmax"] = softmax.edge_softmax
    table["gat_attention"] = attention.gat_attention
    return table


def _spmm_names() -> set[str]:
    from . import spmm

    return set(spmm.SHORTHANDS)


# ---------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class _Task:
    kind: str  # "spmm", "sddmm" or "softmax" (GAT's attention too)
    task: object


class _TaskRecorder:
    """A backend for CPU tensors that records the CUDA task of each call and computes the
    call with the PyTorch-ops backend (so that backward formulas see real values)."""

    def __init__(self) -> None:
        self.tasks: set[_Task] = set()

    def spmm(self, g, op, reduce, lhs, rhs, out_shape, schedule=None, with_arg=False):
        if g.num_dst and math.prod(out_shape):
            self.tasks.add(_Task("spmm", spmm_kernels.task_for(g, op, reduce, lhs, rhs, out_shape,
                                                                with_arg)))
        return cpu_backend.BACKEND.spmm(g, op, reduce, lhs, rhs, out_shape, with_arg=with_arg)

    def sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule=None):
        if g.num_edges and math.prod(out_shape):
            task = sddmm_kernels.task_for(g, op, lhs, rhs, lhs_target, rhs_target, out_shape)
            if task.head_len:
                self.tasks.add(_Task("sddmm", task))
        return cpu_backend.BACKEND.sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape)

    def edge_softmax(self, g, logits, norm_by):
        self._softmax("forward", g, logits, norm_by)
        return cpu_backend.BACKEND.edge_softmax(g, logits, norm_by)

    def edge_softmax_grad(self, g, y, grad, norm_by):
        self._softmax("backward", g, y, norm_by)
        return cpu_backend.BACKEND.edge_softmax_grad(g, y, grad, norm_by)

    def gat_attention(self, g, score_src, score_dst, edge_scores, masked, negative_slope):
        self._softmax("forward", g, score_src, "dst", (edge_scores, masked))
        return cpu_backend.BACKEND.gat_attention(g, score_src, score_dst, edge_scores, masked, negative_slope)

    def gat_attention_grad(self, g, y, grad, score_src, score_dst, edge_scores, masked, negative_slope):
        self._softmax("backward", g, score_src, "dst", (edge_scores, masked))
        return cpu_backend.BACKEND.gat_attention_grad(g, y, grad, score_src, score_dst, edge_scores, masked,
                                                      negative_slope)

    def _softmax(self, direction: str, g: Graph, values: torch.Tensor, norm_by: str,
                 gat: tuple | None = None) -> None:
        """An edge softmax task of logits ``values``; with ``gat`` (edge scores and mask, or
        None), GAT's attention of source scores ``values``."""
        if values.numel() and g.num_edges:
            rows = g if norm_by == "dst" else g.reverse()
            heads = values.numel() // g.num_edges if gat is None else math.prod(values.shape[1:])
            logits = () if gat is None else ("gat", gat[0] is not None, gat[1] is not None)
            self.tasks.add(_Task("softmax", softmax_kernels.SoftmaxTask(
                direction, values.dtype, rows.index_dtype, rows.eid is not None, heads, *logits)))


@contextlib.contextmanager
def _recording() -> Iterator[_TaskRecorder]:
    """CPU calls go to a :class:`_TaskRecorder` inside the block."""
    cpu = torch.device("cpu")
    previous = backends.for_device(cpu)
    recorder = _TaskRecorder()
    backends.register("cpu", recorder)
    try:
        yield recorder
    finally:
        backends.register("cpu", previous)


def _trace_graphs() -> list[tuple[Graph, Graph]]:
    """Small graphs to trace calls on, as (square, bipartite) pairs: validated on the host
    with edges in random order (edge ids) and sorted by destination (none), and built as
    sampled blocks (whose reverse graphs always keep edge ids)."""
    gen = torch.Generator().manual_seed(0)
    n, m, e = 48, 24, 384
    square = torch.randint(0, n, (2, e), generator=gen)
    bipartite = torch.stack([torch.randint(0, n, (e,), generator=gen),
                             torch.randint(0, m, (e,), generator=gen)])
    square_sorted = square[:, torch.argsort(square[1], stable=True)]
    bipartite_sorted = bipartite[:, torch.argsort(bipartite[1], stable=True)]
    return [
        (Graph.from_edge_index(square, num_nodes=n),
         Graph.from_edge_index(bipartite, num_src=n, num_dst=m)),
        (Graph.from_edge_index(square_sorted, num_nodes=n),
         Graph.from_edge_index(bipartite_sorted, num_src=n, num_dst=m)),
        (Graph.from_block(square, num_src=n, num_dst=n),
         Graph.from_block(bipartite_sorted, num_src=n, num_dst=m, dst_sorted=True)),
    ]


def _node_shapes(features: int, heads: int) -> tuple[int, ...]:
    return (features,) if heads == 1 else (heads, features)


def _trace_operator(name: str, fn: Callable[..., torch.Tensor], g: Graph, dtype: torch.dtype,
                    features: int, heads: int) -> None:
    """One call of operator ``name`` and its backward pass on ``g``."""
    shape = _node_shapes(features, heads)
    if name == "edge_softmax":
        inputs = [torch.randn(g.num_edges, heads, dtype=dtype, requires_grad=True)]
        out = fn(g, *inputs)
    elif name == "gat_attention":
        inputs = [torch.randn(rows, heads, dtype=dtype, requires_grad=True) for rows in (g.num_src, g.num_dst)]
        out = fn(g, *inputs)
    elif name in _spmm_names():
        op = name.split("_")[1]
        if op in ("u", "e"):  # copy_u_*, copy_e_*
            rows = g.num_src if op == "u" else g.num_edges
            inputs = [torch.randn(rows, *shape, dtype=dtype, requires_grad=True)]
            out = fn(g, *inputs)
        else:
            x = torch.randn(g.num_src, *shape, dtype=dtype, requires_grad=True)
            # Edge values per feature, and one per edge (per head): weights, attention.
            for y_shape in (shape, (*shape[:-1], 1)):
                y = torch.rand(g.num_edges, *y_shape, dtype=dtype).add_(0.5).requires_grad_()
                fn(g, x, y).sum().backward()
            return
    else:
        rows = {"u": g.num_src, "v": g.num_dst, "e": g.num_edges}
        targets = name.split("_")
        if targets[0] == "copy":
            inputs = [torch.randn(rows[targets[1]], *shape, dtype=dtype, requires_grad=True)]
        else:
            inputs = [torch.rand(rows[t], *shape, dtype=dtype).add_(0.5).requires_grad_()
                      for t in (targets[0], targets[2])]
        out = fn(g, *inputs)
    out.sum().backward()


def _trace_model(kind: str, channels: tuple[int, int, int], square: Graph, bipartite: Graph,
                 dtype: torch.dtype) -> None:
    """Forward and backward of the 2-layer ``kind`` model of the training benchmark."""
    from . import nn as gnn

    f_in, hidden, out = channels
    if kind == "gcn":
        layers = [gnn.GCNConv(f_in, hidden), gnn.GCNConv(hidden, out)]
    elif kind == "gat":
        layers = [gnn.GATConv(f_in, max(1, hidden // GAT_HEADS), heads=GAT_HEADS),
                  gnn.GATConv(max(1, hidden // GAT_HEADS) * GAT_HEADS, out, heads=1, concat=False)]
    else:
        layers = [gnn.SAGEConv(f_in, hidden), gnn.SAGEConv(hidden, out)]
    layers = [layer.to(dtype) for layer in layers]
    x = torch.randn(square.num_src, f_in, dtype=dtype, requires_grad=True)
    h = torch.relu(layers[0](x, square))
    layers[1](h, square).sum().backward()
    if kind == "sage":  # bipartite blocks: (source, destination) features
        x = torch.randn(bipartite.num_src, f_in, dtype=dtype, requires_grad=True)
        layers[0]((x, x[:bipartite.num_dst]), bipartite).sum().backward()


def collect_tasks(ops: Sequence[str] = (), models: Sequence[str] = (), *,
                  dtypes: Sequence[torch.dtype] = (torch.float32,), features: Sequence[int] = (64,),
                  heads: Sequence[int] = (1,), channels: tuple[int, int, int] = (602, 256, 41)
                  ) -> set[_Task]:
    """The CUDA tasks the calls of ``ops`` and ``models`` make, forward and backward."""
    table = _operators()
    if unknown := [op for op in ops if op not in table]:
        raise ValueError(f"unknown operators {unknown}; precompile knows {sorted(table)}")
    if unknown := [m for m in models if m not in MODELS]:
        raise ValueError(f"unknown models {unknown}; precompile knows {list(MODELS)}")
    with _recording() as recorder, torch.random.fork_rng():
        torch.manual_seed(0)
        for square, bipartite in _trace_graphs():
            for dtype in dtypes:
                for name in ops:
                    g = square if name in ("edge_softmax", "gat_attention") or "_v" in name else bipartite
                    for f in features:
                        for h in heads:
                            _trace_operator(name, table[name], g, dtype, f, h)
                for kind in models:
                    _trace_model(kind, channels, square, bipartite, dtype)
    return recorder.tasks


# ---------------------------------------------------------------------- statistics


def _stats(num_src: int, num_dst: int, num_edges: int, mean: float, maximum: int, cov: float,
           exact: bool = True) -> GraphStats:
    return GraphStats(num_src, num_dst, num_edges, RowStats(mean, maximum, cov, exact))


def full_batch_grid() -> list[GraphStats]:
    """The presets' statistics, their longest row 2 and 50 times the mean."""
    grid = []
    for p in datasets.PRESETS.values():
        for factor in (2, 50):
            maximum = min(p.num_nodes, math.ceil(p.mean * factor))
            grid.append(_stats(p.num_nodes, p.num_nodes, p.num_edges, p.mean, maximum, p.cov))
    return grid


def block_grid() -> list[GraphStats]:
    """What the host knows of sampled blocks (and their reverse graphs) of a range of sizes:
    1,024 to 262,144 destinations, 2 to 200 edges per destination, square or with many
    more sources, the longest row bounded by a fanout or unknown."""
    grid = []
    for num_dst in (1024, 16_384, 262_144):
        for mean in (2, 5, 10, 25, 50, 100, 200):
            num_edges = num_dst * mean
            for num_src in {num_dst, min(num_edges, 1 << 21)}:
                for bound in (mean, num_edges):
                    grid.append(_stats(num_src, num_dst, num_edges, float(mean), bound,
                                       float("nan"), exact=False))
    return grid


def graph_stats(spec: str) -> tuple[list[GraphStats], list[Graph]]:
    """The statistics of a preset (``NAME`` or ``NAME@SCALE``, from its parameters, without
    building it), a real graph or a graph file, and of its reverse graph; with the graphs
    themselves where they were built (none for a preset)."""
    base, _, scale = spec.partition("@")
    if base in datasets.PRESETS:
        p, factor = datasets.PRESETS[base], float(scale) if scale else 1.0
        n = max(1, round(p.num_nodes * factor))
        e = round(n * p.mean)
        return [_stats(n, n, e, p.mean, min(n, math.ceil(p.mean * f)), p.cov) for f in (2, 50)], []
    g = datasets.workload(spec).graph
    graphs = [g, g.reverse()]
    return [h.stats for h in graphs], graphs


# ---------------------------------------------------------------------- targets and programs


def targets_for(arch: str) -> list[Target]:
    """The targets kernels for ``arch`` are chosen for: the local GPU's when it has that
    architecture, and the known GPUs of it (an H100's facts under the arch's name when
    none is known)."""
    found = [t for t in _KNOWN_TARGETS if t.arch == arch]
    if torch.cuda.is_available():
        local = Target.of()
        if runtime.device_arch() == arch and local not in found:
            found.insert(0, local)
    if not found:
        import dataclasses

        found = [dataclasses.replace(H100, name=f"{H100.name} facts for {arch}", arch=arch)]
    return found


def programs(tasks: set[_Task], grid: Sequence[GraphStats], target: Target,
             graphs: Sequence[Graph] = ()) -> dict[str, str]:
    """Each program the hand rule picks for ``tasks`` on the graphs of ``grid``, and the
    cost model on ``graphs``, by source, with its context (algorithm and schedule)."""
    from .tune import select

    found: dict[str, str] = {}

    def add(item: _Task, schedule) -> None:
        if item.kind == "spmm":
            program = spmm_codegen.program(item.task.algorithm, schedule, item.task.num_features)
        elif item.kind == "sddmm":
            program = sddmm_codegen.program(item.task.algorithm, schedule)
        else:
            program = softmax_codegen.program(item.task, schedule)
        found[program.source] = program.context

    rules = {"spmm": spmm_kernels.default_schedule, "sddmm": sddmm_kernels.default_schedule,
             "softmax": softmax_kernels.default_schedule}
    for item in tasks:
        for stats in grid:
            add(item, rules[item.kind](item.task, stats, target))
        for g in graphs:
            # no model ships for the edge softmax: its hand rule on the graph's statistics
            add(item, select.model_choice(item.kind, g, item.task, target))
    return found


@dataclass
class Report:
    """What a precompile did."""

    tasks: int = 0
    programs: int = 0
    compiled: int = 0
    cached: int = 0
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        text = (f"{self.tasks} tasks, {self.programs} programs: {self.compiled} compiled, "
                f"{self.cached} already cached, {len(self.failed)} failed, in {self.seconds:.1f} s")
        return text + "".join(f"\n  failed: {f}" for f in self.failed)


def sptrsv_programs(dtypes: Sequence[torch.dtype], rhs: Sequence[int]) -> dict[str, str]:
    """Source -> context of the triangular solver's programs that a first solve compiles by
    default: the factor checks per dtype and the fast start's kernels (module docstring).
    Only float32 and float64 of ``dtypes`` apply (the solver's dtypes)."""
    found: dict[str, str] = {}
    for dtype in (d for d in dtypes if d in (torch.float32, torch.float64)):
        checks = sptrsv_checks.checks_program(dtype)
        found[checks.source] = checks.context
        for k in rhs:
            # natural_schedule gives a lane per row, and 4 rows a ticket, to one right-hand side
            # only, and rows a subwarp to several only.
            schemes = (tuple(s for s in NATURAL_SCHEMES if s not in SUBWARP_PER_ROW) if k == 1
                       else (WARP_PER_ROW, WARP_PER_ROW_BY_LEVEL, *SUBWARP_PER_ROW))
            for lower in (True, False):
                for unit in (False, True):
                    algorithm = SptrsvAlgorithm(dtype, torch.int32, lower, unit, k)
                    for scheme in schemes:
                        program = natural_program(algorithm, scheme)
                        found[program.source] = program.context
    if found:  # the levels kernel of the schemes that go by level, for either orientation
        for lower in (True, False):
            levels = levels_program(torch.int32, lower)
            found[levels.source] = levels.context
    return found


def precompile(ops: Sequence[str] = DEFAULT_OPS, models: Sequence[str] = (), *,
               dtypes: Sequence[torch.dtype] = (torch.float32,), features: Sequence[int] = (64,),
               heads: Sequence[int] = (1,), channels: tuple[int, int, int] = (602, 256, 41),
               archs: Sequence[str] = ("sm_90",), graphs: Sequence[str] = (), grid: bool = True,
               sptrsv_rhs: Sequence[int] = (), cache: runtime.KernelCache | None = None,
               workers: int | None = None, dry_run: bool = False,
               progress: Callable[[str], None] = lambda line: None) -> Report:
    """Compile, into ``cache`` (the default kernel cache), every program the calls of ``ops``
    and ``models`` need on the graphs of the statistics grid and of ``graphs``, and the
    triangular solver's for ``sptrsv_rhs`` right-hand sides, for each architecture of
    ``archs`` (see the module docstring). ``dry_run`` counts the programs without compiling
    anything."""
    if any(k < 1 for k in sptrsv_rhs):
        raise ValueError(f"sptrsv_rhs must hold positive numbers of right-hand sides, got {list(sptrsv_rhs)}")
    begin = time.perf_counter()
    cache = runtime.KernelCache() if cache is None else cache
    tasks = collect_tasks(ops, models, dtypes=dtypes, features=features, heads=heads, channels=channels)
    stats: list[GraphStats] = []
    real_graphs: list[Graph] = []
    for spec in graphs:
        found_stats, found_graphs = graph_stats(spec)
        stats += found_stats
        real_graphs += found_graphs
    if grid:
        stats += full_batch_grid() + block_grid()
    report = Report(tasks=len(tasks))
    work: dict[tuple[str, str], str] = {}
    for arch in archs:
        for target in targets_for(arch):
            for source, context in programs(tasks, stats, target, real_graphs).items():
                work[(arch, source)] = context
    for arch in archs:  # a mini-batch step's first kernels, whatever the operators
        work[(arch, block_checks.source())] = block_checks.CONTEXT
        work[(arch, gather_features.source())] = gather_features.CONTEXT
        for dtype, index in block_scatter.PROGRAMS:
            work[(arch, block_scatter.source(dtype, index))] = block_scatter.CONTEXT
        for index in block_loops.PROGRAMS:
            work[(arch, block_loops.source(index))] = block_loops.CONTEXT
        if sptrsv_rhs:
            for source, context in sptrsv_programs(dtypes, sptrsv_rhs).items():
                work[(arch, source)] = context
    report.programs = len(work)
    progress(f"{len(tasks)} tasks: {len(work)} programs for {', '.join(archs)}")
    if dry_run:
        report.seconds = time.perf_counter() - begin
        return report

    def build(item: tuple[tuple[str, str], str]) -> str:
        (arch, source), context = item
        if cache.get(runtime.cache_key(source, arch, ())) is not None:
            return "cached"
        try:
            runtime.compile_cuda(source, arch=arch, context=context, cache=cache)
        except runtime.CompileError as error:
            return f"failed: {arch} {context}: {error}"
        return "compiled"

    with ThreadPoolExecutor(max_workers=workers or min(32, os.cpu_count() or 1)) as pool:
        for outcome in pool.map(build, work.items()):
            if outcome == "cached":
                report.cached += 1
            elif outcome == "compiled":
                report.compiled += 1
            else:
                report.failed.append(outcome.removeprefix("failed: "))
    report.seconds = time.perf_counter() - begin
    return report


# ---------------------------------------------------------------------- command line


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _ints(flag: str, text: str) -> list[int]:
    try:
        values = [int(part) for part in _list(text)]
    except ValueError:
        raise UsageError(f"gsparse precompile: {flag} takes comma-separated integers, got {text!r}")
    if any(v < 1 for v in values):
        raise UsageError(f"gsparse precompile: {flag} takes positive integers, got {text!r}")
    return values


def _default_arch() -> str:
    return runtime.device_arch() if torch.cuda.is_available() else "sm_90"


def main(argv: list[str] | None = None) -> int:
    """The command; 2 with one line on stderr for a user error."""
    try:
        return _main(argv)
    except UsageError as error:
        print(one_line(error), file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    parser = Parser(
        prog="gsparse precompile",
        description="Fill the disk kernel cache ahead of time (no GPU needed): the kernels "
                    "of the chosen operators and layers, forward and backward, for the chosen "
                    "dtypes, feature lengths and architectures.")
    parser.add_argument("--ops", default=None,
                        help=f"comma-separated operators: DGL shorthands (u_mul_e_sum, copy_u_mean, "
                             f"u_dot_v, ...) and edge_softmax (default: {','.join(DEFAULT_OPS)}, "
                             f"unless --models is given)")
    parser.add_argument("--models", default="", help=f"comma-separated layers' 2-layer models: {', '.join(MODELS)}")
    parser.add_argument("--channels", default="602,256,41",
                        help="the models' input, hidden and output channels (default: 602,256,41)")
    parser.add_argument("--features", default="64", help="comma-separated feature lengths of the operators")
    parser.add_argument("--heads", default="1", help="comma-separated head counts (features per head "
                                                     "are --features)")
    parser.add_argument("--dtypes", default="float32", help=f"comma-separated: {', '.join(_DTYPES)}")
    parser.add_argument("--archs", default=None,
                        help="comma-separated architectures (default: the local GPU's, else sm_90)")
    parser.add_argument("--graph", action="append", default=[],
                        help="also the exact statistics of this graph: a preset (NAME[@SCALE]), a "
                             "real graph or a graph file; repeatable")
    parser.add_argument("--no-grid", action="store_true",
                        help="only the --graph statistics, not the presets' and sampled blocks' grid")
    parser.add_argument("--sptrsv-rhs", default="",
                        help="comma-separated numbers of right-hand sides: also the triangular solver's "
                             "factor checks and fast-start kernels (float32 and float64 of --dtypes)")
    parser.add_argument("--cache-dir", default=None,
                        help="the kernel cache to fill (default: $GSPARSE_CACHE_DIR or ~/.cache/gsparse)")
    parser.add_argument("--workers", type=int, default=None, help="compiler threads (default: CPUs, at most 32)")
    parser.add_argument("--dry-run", action="store_true", help="count the programs, compile nothing")
    args = parser.parse_args(argv)
    models = _list(args.models)
    ops = _list(args.ops) if args.ops is not None else ([] if models else list(DEFAULT_OPS))
    try:
        dtypes = [_DTYPES[d] for d in _list(args.dtypes)]
    except KeyError as error:
        raise UsageError(f"gsparse precompile: unknown dtype {error}; expected {', '.join(_DTYPES)}")
    channels = _ints("--channels", args.channels)
    if len(channels) != 3:
        raise UsageError(f"gsparse precompile: --channels takes 3 integers, got {args.channels!r}")
    archs = _list(args.archs) if args.archs else [_default_arch()]
    for arch in archs:
        try:
            arch_number(arch)
        except ValueError as error:
            raise UsageError(f"gsparse precompile: {error}")
    try:
        report = precompile(
            ops, models, dtypes=dtypes, features=_ints("--features", args.features),
            heads=_ints("--heads", args.heads), channels=tuple(channels), archs=archs,
            graphs=args.graph, grid=not args.no_grid, sptrsv_rhs=_ints("--sptrsv-rhs", args.sptrsv_rhs),
            cache=runtime.KernelCache(args.cache_dir) if args.cache_dir else None,
            workers=args.workers, dry_run=args.dry_run, progress=print)
    except ValueError as error:
        raise UsageError(f"gsparse precompile: {error}")
    print(report)
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
