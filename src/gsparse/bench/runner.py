"""The benchmark runner: every (case, workload, feature length, dtype) cell, measured in one process.

For each cell the runner draws fresh random inputs (several independent sets when they
fit in L2, see :func:`~gsparse.bench.timing.rotation_count`), computes the float64
reference on sampled rows, and for each implementation — ours with the default schedule,
then the baselines — checks every input set's output against the reference and only
then times it. A failure of one implementation (out of memory, an unsupported dtype, a
wrong result) is recorded in its entry and the suite goes on. With ``sweep`` the runner
also times every schedule of the case's space that LO-SpMM's constraints keep on the
graph (``pruned_space``, register constraint included), and records how many candidates
each constraint removed.

The result is one JSON-ready document (:data:`FORMAT`); :mod:`gsparse.bench.report`
turns it into tables and plots.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

import torch

from .. import __version__, datasets, kernels
from ..graph import Graph
from ..target import Target
from ..tune import select
from ..tune.measure import compile_ahead, time_calls
from ..tune.search import exhaustive_search
from .baselines import CASES, GSPARSE, TOLERANCE, Case, Impl, Inputs, Sample, sample_rows
from .scatter import pyg_backend
from .timing import Bandwidth, measure_bandwidth, needs_flush, rotation_count

__all__ = ["FORMAT", "DTYPES", "Config", "WorkloadError", "run_suite", "environment"]

FORMAT = "gsparse-bench/2"  # 2: baselines named torch.sparse, PyG, PyTorch (1: cusparse, pyg, torch)
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Config:
    """What one run measures.

    Attributes:
        ops: operator families, keys of :data:`~gsparse.bench.baselines.CASES`.
        workloads: preset names, real graph names or graph file paths.
        feature_lens: feature lengths of the SpMM and SDDMM cells.
        heads: head counts of the edge-softmax cells (logits ``[E, heads]``).
        dtypes: names in :data:`DTYPES`.
        device: where everything runs.
        scale: node-count scale of the presets; ``None``: full size, or ``max_edges``.
        max_edges: with ``scale=None``, shrink presets to about this many edges.
        sweep: also time every schedule of the pruned space (CUDA only), for the cases
            swept by default (those compared with cuSPARSE).
        sweep_all: sweep every case that has schedules (implies ``sweep``).
        budget_s: about how long the timed repeats of one implementation take.
        seed: seed of the synthetic graphs and of the random inputs.
        data_dir: the folder the real graphs are read from; ``None``: the usual search
            (:func:`gsparse.datasets.real_graph`).
    """

    ops: tuple[str, ...]
    workloads: tuple[str, ...]
    feature_lens: tuple[int, ...]
    heads: tuple[int, ...]
    dtypes: tuple[str, ...]
    device: str
    scale: float | None = None
    max_edges: int | None = None
    sweep: bool = False
    sweep_all: bool = False
    budget_s: float = 0.2
    seed: int = 0
    data_dir: str | None = None

    def __post_init__(self) -> None:
        for name, values, allowed in (("ops", self.ops, tuple(CASES)), ("dtypes", self.dtypes, tuple(DTYPES))):
            if not values:
                raise ValueError(f"{name} must name at least one of {allowed}, got none")
            if bad := [v for v in values if v not in allowed]:
                raise ValueError(f"{name} must be among {allowed}, got {bad}")
        if not self.workloads:
            raise ValueError("workloads must name at least one workload, got none")
        for name in ("feature_lens", "heads"):
            values = getattr(self, name)
            if not values or any(not isinstance(v, int) or v < 1 for v in values):
                raise ValueError(f"{name} must be positive integers, got {list(values)}")
        if self.budget_s <= 0:
            raise ValueError(f"budget_s must be positive, got {self.budget_s}")

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


class WorkloadError(ValueError):
    """A workload that cannot be built: an unknown name, a missing or unreadable file, a
    preset size out of range. The message names the workload."""


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment(device: torch.device) -> dict[str, Any]:
    """Versions, host and device description of this run."""
    env: dict[str, Any] = {
        "gsparse": __version__,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "torch_geometric": _version("torch_geometric"),
        "cuda_bindings": _version("cuda-bindings"),
        "pyg_baseline": pyg_backend(),
        "device": str(device),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            gpu=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            gpu_memory_bytes=props.total_memory,
            l2_bytes=props.L2_cache_size,
            nvrtc=_nvrtc_version(),
        )
    else:
        env["gpu"] = None
    return env


def _nvrtc_version() -> str | None:
    from .. import runtime

    version = runtime.nvrtc_version()
    return None if version is None else f"{version[0]}.{version[1]}"


@dataclass
class _Cell:
    """The inputs of one cell, kept while its implementations are measured."""

    case: Case
    sets: list[Inputs]
    samples: list[Sample]
    references: list[torch.Tensor]
    tolerance: float
    device: torch.device
    budget_s: float
    flush_l2: bool = False
    min_repeats: int = 5
    warmup: int = 1


def _is_oom(error: BaseException) -> bool:
    return isinstance(error, (torch.cuda.OutOfMemoryError, MemoryError)) or (
        isinstance(error, RuntimeError) and "out of memory" in str(error).lower())


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    if out.shape != ref.shape:
        raise ValueError(f"output sample has shape {tuple(out.shape)}, the reference {tuple(ref.shape)}")
    scale = float(ref.norm())
    err = float((out - ref).norm())
    err = err / scale if scale > 0 else err
    return err if math.isfinite(err) else math.inf


def _measure(cell: _Cell, impl: Impl) -> dict[str, Any]:
    """Check ``impl`` on every input set, then time it; a failure becomes the entry's status."""
    args: list[tuple[Any, ...]] = []
    try:
        args = [impl.prepare(inputs) for inputs in cell.sets]
        worst = 0.0
        for a, sample, ref in zip(args, cell.samples, cell.references):
            err = _relative_error(impl.pick(impl.run(*a), sample), ref)
            worst = max(worst, err)
            if not err <= cell.tolerance:
                return {"status": "wrong", "rel_error": err,
                        "message": f"relative error {err:.3g} over the tolerance {cell.tolerance:g}"}
        timing = time_calls(impl.run, args, cell.device, budget_s=cell.budget_s, flush_l2=cell.flush_l2,
                            min_repeats=cell.min_repeats, warmup=cell.warmup)
        return {"status": "ok", "median_ms": timing.median_ms, "spread": timing.spread,
                "rel_error": worst, "times_ms": list(timing.times_ms)}
    except Exception as error:  # noqa: BLE001 - one implementation's failure must not end the suite
        if not _is_oom(error):
            return {"status": "error", "message": f"{type(error).__name__}: {str(error)[:300]}"}
        message = str(error).splitlines()[0][:300]
    # Out of memory: free the cache only here, once the traceback (which holds the failed
    # call's tensors) is gone.
    args.clear()
    _release(cell.device)
    return {"status": "OOM", "message": message}


def _why_not_swept(case: Case, device: torch.device, sweep_all: bool = False) -> str | None:
    """Why a sweep of ``case`` does not run, or None when it does."""
    if case.kernel_task is None:
        return f"{case.label} has no schedules"
    if not (case.swept_by_default or sweep_all):
        return f"{case.label} is swept with sweep_all (--sweep-all) only"
    if device.type != "cuda":
        return "schedules apply to the generated CUDA kernels; this run is on the CPU"
    return None


def _sweep(cell: _Cell, feature_len: int, dtype: torch.dtype, default_entry: dict[str, Any],
           target: Target) -> dict[str, Any]:
    """Time every schedule of the task's pruned space
    (:func:`~gsparse.tune.search.exhaustive_search`); the best of those and of the default
    path. ``size`` is the schedules measured; ``pruning`` holds the space's size before
    pruning and what each constraint removed (:meth:`~gsparse.kernels.pruning.Pruning.to_json`)."""
    inputs = cell.sets[0]
    g = inputs.graph
    try:
        name, task = cell.case.kernel_task(inputs)
        operator = kernels.OPERATORS[name]
        # What the front end ran for the default entry: the policy's choice, made once per
        # graph and task (found here, not made again).
        default = select.choose(name, g, task, lambda schedule: cell.case.ours(inputs, schedule), target)
        pruning = operator.pruned_space(task, g.stats, target, registers="kept")
        space = list(pruning.kept)
    except Exception as error:  # noqa: BLE001 - a broken space is reported, not fatal
        return {"status": "error", "message": f"{type(error).__name__}: {error}"}
    impls = {schedule: cell.case.implementations(schedule)[0] for schedule in space}
    compile_ahead([_first_call(cell, impl, feature_len, dtype) for impl in impls.values()], cell.device)
    # Screening: two timed calls right after each schedule's check (which warmed it up).
    screen = dataclasses.replace(cell, min_repeats=2, warmup=0)
    records = exhaustive_search(space, lambda s: _measure(screen, impls[s]),
                                lambda s: _measure(cell, impls[s]))
    entries = [{"schedule": str(s), "json": s.to_json(), **record} for s, record in zip(space, records)]
    timed = [e for e in entries if e["status"] == "ok" and "median_ms" in e]
    result: dict[str, Any] = {"status": "ok", "default": str(default), "default_json": default.to_json(),
                              "size": len(space), "screened": sum("screen_ms" in e for e in entries),
                              "timed": len(timed), "pruning": pruning.to_json(), "schedules": entries}
    candidates = list(timed)
    if default_entry["status"] == "ok":
        candidates.append({"schedule": str(default), "json": default.to_json(),
                           "median_ms": default_entry["median_ms"]})
    if candidates:
        best = min(candidates, key=lambda e: e["median_ms"])
        result.update(best=best["schedule"], best_json=best["json"], best_ms=best["median_ms"])
    return result


def _first_call(cell: _Cell, impl: Impl, feature_len: int, dtype: torch.dtype) -> Callable[[], Any]:
    """A first call of ``impl`` on a 64-node graph of the cell's index type: it compiles
    the kernels without spending time on the cell's graph."""
    like = cell.sets[0].graph
    gen = torch.Generator(device=cell.device).manual_seed(0)
    col = torch.randint(0, 64, (640,), generator=gen, device=cell.device).sort().values
    rowptr = torch.arange(0, 641, 10, device=cell.device)
    g = Graph.from_csr(rowptr.to(like.index_dtype), col.to(like.index_dtype), num_src=64)
    inputs = cell.case.make_inputs(g, feature_len, dtype, gen)
    return lambda: impl.run(*impl.prepare(inputs))


@dataclass
class _Rotation:
    """Independent copies of a workload's graph for input rotation (copy 0 is the graph),
    each with its ``[E]`` int64 endpoints, built once per workload."""

    graphs: list[tuple[Graph, torch.Tensor, torch.Tensor]] = field(default_factory=list)

    def take(self, k: int) -> list[tuple[Graph, torch.Tensor, torch.Tensor]]:
        while len(self.graphs) < k:
            base = self.graphs[0][0]
            g = Graph.from_csr(base.rowptr.clone(), base.col.clone(), base.num_src,
                               None if base.eid is None else base.eid.clone())
            self.graphs.append(_with_endpoints(g))
        return self.graphs[:k]


def _with_endpoints(g: Graph) -> tuple[Graph, torch.Tensor, torch.Tensor]:
    src, dst = g.edges()
    return g, src.long(), dst.long()


def _floor(case: Case, g: Graph, feature_len: int, dtype: torch.dtype, bw: Bandwidth) -> dict[str, Any]:
    """Bytes that must move over the measured rates. On the CPU only the compulsory bytes
    count: its deep caches serve a graph's gathers at rates no single probe captures."""
    moved, gathered = case.floor_bytes(g, feature_len, dtype.itemsize)
    gather_s = gathered / bw.gather if g.device.type == "cuda" else 0.0
    floor_s = max(moved / bw.copy, gather_s)
    return {"bytes": moved, "gather_bytes": gathered, "floor_ms": floor_s * 1e3}


def _progress_line(index: int, total: int, cell: dict[str, Any]) -> str:
    ours = cell["results"][GSPARSE]
    head = (f"[{index}/{total}] {cell['op']}/{cell['case']} {cell['workload']} "
            f"F={cell['feature_len']} {cell['dtype']}: ")
    if ours["status"] != "ok":
        return head + f"gsparse {ours['status']} ({ours.get('message', '')})"
    parts = [f"gsparse {ours['median_ms']:.4g} ms (spread {ours['spread']:.0%})"]
    for name, entry in cell["results"].items():
        if name == GSPARSE:
            continue
        if entry["status"] == "ok":
            parts.append(f"{entry['median_ms'] / ours['median_ms']:.2f}x vs {name} ({entry['median_ms']:.4g} ms)")
        else:
            parts.append(f"{name} {entry['status']}")
    parts.append(f"{cell['floor']['floor_ms'] / ours['median_ms']:.0%} of floor")
    sweep = cell.get("sweep")
    if sweep and sweep.get("best_ms"):
        measured = (f", {sweep['size']} of {sweep['pruning']['candidates']} schedules measured"
                    if "pruning" in sweep else "")
        parts.append(f"default/best {ours['median_ms'] / sweep['best_ms']:.2f} "
                     f"(best {sweep['best']}{measured})")
    return head + ", ".join(parts)


def _cell_plan(config: Config) -> list[tuple[Case, int, str]]:
    plan = []
    for op in config.ops:
        for case in CASES[op]:
            lengths = config.heads if op == "softmax" else config.feature_lens
            plan.extend((case, f, dtype) for dtype in config.dtypes for f in lengths if case.runs_at(f))
    return plan


def cell_count(config: Config) -> int:
    """How many cells :func:`run_suite` measures for ``config``."""
    return len(_cell_plan(config)) * len(config.workloads)


def run_suite(
    config: Config,
    progress: Callable[[str], None] = print,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    on_cell: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run every cell of ``config`` and return the result document (JSON-ready).

    ``progress`` receives one line per workload built and per cell measured; ``on_cell``
    (if given) is called after each cell (for a progress bar); ``checkpoint`` (if given)
    receives the document so far after each workload, with ``complete`` false, so a run cut
    short still leaves its finished workloads behind.

    Raises:
        WorkloadError: a workload cannot be built (before anything is measured on it).
    """
    device = torch.device(config.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {config.device!r} was asked for but no CUDA device is visible to PyTorch")
    started = time.perf_counter()
    bandwidth = measure_bandwidth(device)
    progress(f"bandwidth on {device}: copy {bandwidth.copy / 1e9:.1f} GB/s, "
             f"L2-resident gather {bandwidth.gather / 1e9:.1f} GB/s")
    plan = _cell_plan(config)
    total = len(plan) * len(config.workloads)
    target = Target.of(device) if device.type == "cuda" else None
    gen = torch.Generator(device=device).manual_seed(config.seed)
    sweeping = config.sweep or config.sweep_all
    not_swept = ({case.label: _why_not_swept(case, device, config.sweep_all) for case, _, _ in plan}
                 if sweeping else {})
    doc: dict[str, Any] = {
        "format": FORMAT,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "environment": environment(device),
        "bandwidth": bandwidth.to_json(),
        "config": config.to_json(),
        "tolerance": {str(k).removeprefix("torch."): v for k, v in TOLERANCE.items()},
        "complete": False,
        "workloads": {},
        "cells": [],
    }
    index = 0
    for spec in config.workloads:
        build = time.perf_counter()
        try:
            w = datasets.workload(spec, scale=config.scale, max_edges=config.max_edges, seed=config.seed,
                                  device=device, data_dir=config.data_dir)
        except (ValueError, FileNotFoundError) as error:
            raise WorkloadError(f"workload {spec!r}: {error}") from error
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        doc["workloads"][w.name] = {**datasets.describe(w.graph), "source": w.source,
                                    "build_s": time.perf_counter() - build}
        stats = w.graph.row_stats
        progress(f"workload {w.name}: {w.graph.num_dst:,} rows, {w.graph.num_edges:,} edges, "
                 f"row mean {stats.mean:.1f}, COV {stats.cov:.2f} ({w.source}; "
                 f"{time.perf_counter() - build:.1f} s)")
        rotation = _Rotation([_with_endpoints(w.graph)])
        for case, feature_len, dtype_name in plan:
            index += 1
            dtype = DTYPES[dtype_name]
            floor = _floor(case, w.graph, feature_len, dtype, bandwidth)
            k = rotation_count(floor["bytes"], device)
            flush = needs_flush(floor["bytes"], device)
            cell_doc: dict[str, Any] = {"op": case.op, "case": case.name, "workload": w.name,
                                        "feature_len": feature_len, "dtype": dtype_name,
                                        "baseline": case.baseline, "rotation": k, "l2_flush": flush,
                                        "floor": floor}
            try:
                sets = [case.make_inputs(g, feature_len, dtype, gen, endpoints=(src, dst))
                        for g, src, dst in rotation.take(k)]
                samples = [sample_rows(s.graph, feature_len, gen) for s in sets]
                refs = [case.reference(s, smp) for s, smp in zip(sets, samples)]
                failure = None
            except Exception as error:  # noqa: BLE001 - inputs too big for this device: record, go on
                if not _is_oom(error):
                    raise
                failure = str(error).splitlines()[0][:300]
            if failure is not None:
                sets = samples = refs = []
                _release(device)
                cell_doc["results"] = {GSPARSE: {"status": "OOM", "message": f"inputs do not fit: {failure}"}}
                doc["cells"].append(cell_doc)
                progress(_progress_line(index, total, cell_doc))
                if on_cell is not None:
                    on_cell()
                continue
            cell = _Cell(case, sets, samples, refs, TOLERANCE[dtype], device, config.budget_s, flush)
            cell_doc["results"] = {impl.name: _measure(cell, impl) for impl in case.implementations()}
            if sweeping:
                why = not_swept[case.label]
                cell_doc["sweep"] = (_sweep(cell, feature_len, dtype, cell_doc["results"][GSPARSE], target)
                                     if why is None else {"status": "unavailable", "message": why})
            doc["cells"].append(cell_doc)
            progress(_progress_line(index, total, cell_doc))
            if on_cell is not None:
                on_cell()
            del cell, sets, samples, refs
        del rotation, w
        _release(device)
        doc["wall_s"] = time.perf_counter() - started
        if checkpoint is not None:
            checkpoint(doc)
    doc["complete"] = True
    return doc
