"""Collect tuning data: every schedule of the space, measured on a corpus of graphs.

    python -m gsparse.tune.collect --out DIR [--families lognormal,rmat,...] [--graphs 24]
        [--min-edges 1e5] [--max-edges 3e7] [--features 1,4,16,32,64,100,128,256]
        [--cases spmm:copy_lhs:sum,sddmm:u:dot:v,...] [--dtypes float32,bfloat16]
        [--budget-s 400] [--seed 0]

For each graph of :func:`gsparse.datasets.corpus` (built on the GPU) and each cell (case,
feature length, dtype), on fresh random operands: the reference (PyTorch ops, or the
default schedule where the per-edge messages would not fit), the default schedule, the
cuSPARSE baseline where one exists, and every schedule of the task's space (not pruned:
the models rank, and the pruning constraints are judged on, the whole space) — each
checked against the reference, then timed by CUDA events around its device work alone
(median of repeats; the host's launch time is hidden, and the GPU is brought back to full
clocks before the cell's first measurement). A schedule that fails to compile, launch or match is recorded with its error.

Writes ``DIR/cells.jsonl``: one JSON object per cell with the graph's family, parameters
and structure, the task, the target, and every measurement, so that features can be
recomputed offline as they evolve. Stops starting new graphs after ``--budget-s`` seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from .. import backends, datasets, kernels
from ..algebra import BINARY_OPS, REDUCERS
from ..datasets.structure import describe_structure
from ..graph import Graph
from ..target import Target
from . import select
from .measure import compile_ahead, time_calls

__all__ = ["Case", "CASES", "main"]

_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 5e-3, torch.bfloat16: 2e-2}
# Per-edge message elements the PyTorch-ops reference may hold (E x F), beyond which the
# default schedule stands in for it.
_REFERENCE_ELEMENTS = 1 << 30


@dataclass(frozen=True)
class Case:
    """An operator call measured on each graph: ``spmm:<op>:<reduce>`` (copy_lhs or mul with
    an edge scalar) or ``sddmm:<lhs target>:<op>:<rhs target>``."""

    name: str

    @property
    def operator(self) -> str:
        return self.name.split(":")[0]

    def operands(self, g: Graph, feature_len: int, dtype: torch.dtype,
                 gen: torch.Generator) -> dict[str, torch.Tensor | None]:
        """Fresh random operands (never zeros) on the graph's device."""
        device = g.device

        def randn(rows: int) -> torch.Tensor:
            return torch.randn(rows, feature_len, generator=gen, device=device).to(dtype)

        parts = self.name.split(":")
        if self.operator == "spmm":
            op = parts[1]
            weights = (torch.rand(g.num_edges, 1, generator=gen, device=device) + 0.5).to(dtype)
            return {"lhs": randn(g.num_src), "rhs": weights if BINARY_OPS[op].uses_rhs else None}
        rows = {"u": g.num_src, "v": g.num_dst, "e": g.num_edges}
        return {"lhs": randn(rows[parts[1]]), "rhs": randn(rows[parts[3]])}

    def call(self, g: Graph, operands: dict[str, Any], feature_len: int) -> tuple[Any, Callable]:
        """``(task, run)``: the kernel task of the call and ``run(schedule)`` (None: the
        default) returning its output."""
        parts = self.name.split(":")
        lhs, rhs = operands["lhs"], operands["rhs"]
        cuda = backends.cuda.BACKEND
        if self.operator == "spmm":
            op, reduce = parts[1], parts[2]
            out_shape = (feature_len,)
            task = kernels.spmm.task_for(g, op, reduce, lhs, rhs, out_shape)
            return task, lambda s=None: cuda.spmm(g, op, reduce, lhs, rhs, out_shape, s)
        lt, op, rt = parts[1], parts[2], parts[3]
        out_shape = (1,) if BINARY_OPS[op].reduces_last_dim else (feature_len,)
        task = kernels.sddmm.task_for(g, op, lhs, rhs, lt, rt, out_shape)
        return task, lambda s=None: cuda.sddmm(g, op, lhs, rhs, lt, rt, out_shape, s)

    def reference(self, g: Graph, operands: dict[str, Any], feature_len: int) -> torch.Tensor:
        """The PyTorch-ops result (the backend CUDA tensors fall back to without kernels)."""
        parts = self.name.split(":")
        lhs, rhs = operands["lhs"], operands["rhs"]
        torch_ops = backends.cpu.BACKEND
        if self.operator == "spmm":
            return torch_ops.spmm(g, parts[1], parts[2], lhs, rhs, (feature_len,))
        out_shape = (1,) if BINARY_OPS[parts[2]].reduces_last_dim else (feature_len,)
        return torch_ops.sddmm(g, parts[2], lhs, rhs, parts[1], parts[3], out_shape)

    def cusparse(self, g: Graph, operands: dict[str, Any]) -> tuple[Callable[[], Any], Callable] | None:
        """``(call, pick)``: the cuSPARSE call computing the same result, where one exists,
        and how to read its output in the reference's layout."""
        parts = self.name.split(":")
        lhs, rhs = operands["lhs"], operands["rhs"]
        # cuSPARSE multiplies: it computes a sum of lhs, or of lhs scaled by an edge weight
        reducer = REDUCERS.get(parts[2]) if self.operator == "spmm" else None
        if reducer is not None and not reducer.keeps_arg and not reducer.divides_by_degree:
            values = rhs.flatten() if rhs is not None else torch.ones(g.num_edges, dtype=lhs.dtype,
                                                                     device=g.device)
            values = values if g.eid is None else values[g.eid.long()]
            csr = backends.cpu.unchecked_csr(g.rowptr.long(), g.col.long(), values, (g.num_dst, g.num_src))
            return (lambda: torch.sparse.mm(csr, lhs)), (lambda out: out)
        if self.name == "sddmm:u:dot:v":
            pattern = backends.cpu.unchecked_csr(g.rowptr.long(), g.col.long(),
                                                 torch.ones(g.num_edges, dtype=lhs.dtype, device=g.device),
                                                 (g.num_dst, g.num_src))
            lhs_t = lhs.t()

            def in_edge_order(out: torch.Tensor) -> torch.Tensor:
                values = out.values()  # CSR order
                if g.eid is None:
                    return values.unsqueeze(-1)
                return torch.empty_like(values).index_copy_(0, g.eid.long(), values).unsqueeze(-1)

            return (lambda: torch.sparse.sampled_addmm(pattern, rhs, lhs_t, beta=0.0)), in_edge_order
        return None


CASES = tuple(Case(name) for name in ("spmm:copy_lhs:sum", "spmm:copy_lhs:mean", "spmm:copy_lhs:max",
                                      "spmm:mul:sum", "sddmm:u:dot:v", "sddmm:u:add:v"))


def _error(out: torch.Tensor, ref: torch.Tensor) -> float:
    scale = float(ref.double().norm())
    err = float((out.double() - ref.double()).norm())
    err = err / scale if scale > 0 else err
    return err if math.isfinite(err) else math.inf


def _measure(run: Callable[[], Any], ref: torch.Tensor, tolerance: float, device: torch.device,
             budget_s: float, flush_l2: bool, pick: Callable = lambda out: out,
             warmup: int = 0) -> dict[str, Any]:
    """Check ``pick(run())`` against ``ref``, then time ``run`` (overwriting the L2 before
    each call when ``flush_l2``); a failure is recorded, never raised. ``warmup`` 0: the
    check call warmed the kernel up and the clocks are up (candidates run back to back)."""
    try:
        err = _error(pick(run()), ref)
        if not err <= tolerance:
            return {"error": f"relative error {err:.3g} over {tolerance:g}"}
        timing = time_calls(run, [()], device, budget_s=budget_s, min_repeats=7, warmup=warmup,
                            flush_l2=flush_l2, hide_host=True)
        return {"ms": timing.median_ms, "spread": timing.spread}
    except Exception as error:  # noqa: BLE001 - one candidate's failure is data
        return {"error": f"{type(error).__name__}: {str(error)[:200]}"}


def _task_dict(task: Any) -> dict[str, Any]:
    fields = asdict(task)
    return {k: (str(v).removeprefix("torch.") if isinstance(v, torch.dtype) else v) for k, v in fields.items()}


def _tune_policy(case: Case, g: Graph, operands: dict[str, Any], feature_len: int) -> dict[str, Any]:
    """The "tune" policy on a fresh copy of ``g`` (no earlier choice or plan) with a fresh
    database: its choice and its wall time, compilation of programs not compiled yet in
    this process included."""
    fresh = Graph.from_csr(g.rowptr, g.col, g.num_src, g.eid)
    task, run = case.call(fresh, operands, feature_len)
    torch.cuda.synchronize()
    started = time.perf_counter()
    with select.policy("tune"):
        chosen = select.choose(case.operator, fresh, task, run)
    torch.cuda.synchronize()
    return {"schedule": chosen.to_json(), "seconds": time.perf_counter() - started}


def collect_cell(case: Case, g: Graph, feature_len: int, dtype: torch.dtype, target: Target,
                 gen: torch.Generator, budget_s: float = 0.02, tune: bool = False) -> dict[str, Any]:
    """Every measurement of one cell (see the module docstring); with ``tune``, also the
    "tune" policy's choice and time, before anything else compiles this cell's programs."""
    device = g.device
    operands = case.operands(g, feature_len, dtype, gen)
    tuned = _tune_policy(case, g, operands, feature_len) if tune else None
    task, run = case.call(g, operands, feature_len)
    operator = kernels.OPERATORS[case.operator]
    space = list(operator.schedule_space(task, g.stats, target))
    default = operator.default_schedule(task, g.stats, target)
    compile_ahead([lambda s=s: operator.load_kernels(task, s, device.index) for s in space], device)
    elements = g.num_edges * feature_len
    ref = (case.reference(g, operands, feature_len) if elements <= _REFERENCE_ELEMENTS
           else run(default).clone())
    tolerance = _TOLERANCE[dtype]
    # Inputs that fit in the L2 would stay there from call to call, as they do not between a
    # model's layers: overwrite it before each timed call.
    working_set = 4 * (g.num_edges + g.num_dst) + dtype.itemsize * feature_len * (g.num_src + g.num_dst)
    flush = working_set < 2 * target.l2_bytes
    cell: dict[str, Any] = {
        "case": case.name, "feature_len": feature_len, "dtype": str(dtype).removeprefix("torch."),
        "task": _task_dict(task), "reference": "torch" if elements <= _REFERENCE_ELEMENTS else "default",
        # The first measurement after compilation and a CPU reference: the GPU was idle.
        "default": {"schedule": default.to_json(),
                    **_measure(lambda: run(default), ref, tolerance, device, budget_s, flush, warmup=1)},
    }
    baseline = case.cusparse(g, operands)
    if baseline is not None:
        call, pick = baseline
        cell["cusparse"] = _measure(call, ref, tolerance, device, budget_s, flush, pick)
    cell["schedules"] = [{"schedule": s.to_json(), **_measure(lambda s=s: run(s), ref, tolerance, device,
                                                               budget_s, flush)} for s in space]
    if tuned is not None:
        cell["tune"] = tuned
    return cell


def row_length_profile(g: Graph) -> dict[str, list[float]]:
    """The row lengths in more detail than the structure statistics hold, for features yet to
    be tried offline: rows per power-of-two length class (``rows[0]``: empty rows,
    ``rows[b]``: lengths in ``[2^(b-1), 2^b)``), and for each lane group ``2^i`` (1 to 256)
    the edges a kernel giving each row whole groups of that many lanes would cover, over the
    real edges (``padding[i] = sum(ceil(len / 2^i) 2^i) / E``)."""
    lengths = (g.rowptr[1:] - g.rowptr[:-1]).to(torch.int64)
    # Integer bounds, not floor(log2): a GPU's double log2 puts some powers of two a class low.
    bounds = torch.tensor([1 << b for b in range(33)], dtype=torch.int64, device=lengths.device)
    classes = torch.bucketize(lengths, bounds, right=True)
    rows = torch.bincount(classes, minlength=34)
    covered = [float(((lengths + (1 << i) - 1) >> i).sum()) * (1 << i) for i in range(9)]
    padding = [c / max(g.num_edges, 1) for c in covered]
    return {"rows": rows.tolist(), "padding": padding}


def _feature_lengths(lengths: tuple[int, ...], num_edges: int, cap: int) -> list[int]:
    """The lengths whose per-edge work (E x F) stays under ``cap`` elements."""
    return [f for f in lengths if num_edges * f <= cap]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gsparse.tune.collect", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for cells.jsonl")
    parser.add_argument("--families", default=",".join(datasets.FAMILIES))
    parser.add_argument("--graphs", type=int, default=24, help="graphs drawn from the corpus")
    parser.add_argument("--min-edges", type=float, default=1e5)
    parser.add_argument("--max-edges", type=float, default=3e7)
    parser.add_argument("--features", default="1,4,16,32,64,100,128,256")
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--cells-per-graph", type=int, default=0,
                        help="measure this many (case, feature length, dtype) cells per graph, drawn "
                             "at random (0: all of them)")
    parser.add_argument("--work-cap", type=float, default=2e9, help="most E x F per cell")
    parser.add_argument("--budget-s", type=float, default=400.0, help="stop starting graphs after this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tune", action="store_true",
                        help="also run the tune policy on each cell (a fresh tuning database in --out)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("python -m gsparse.tune.collect: needs a CUDA GPU (the schedules are GPU kernels)", file=sys.stderr)
        return 2
    families = tuple(f for f in args.families.split(",") if f)
    if unknown := [f for f in families if f not in datasets.FAMILIES]:
        print(f"python -m gsparse.tune.collect: unknown families {unknown}; known: {sorted(datasets.FAMILIES)}",
              file=sys.stderr)
        return 2
    cases = [Case(name) for name in args.cases.split(",") if name]
    lengths = tuple(int(f) for f in args.features.split(","))
    dtypes = [getattr(torch, name) for name in args.dtypes.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.tune:
        os.environ["GSPARSE_TUNING_DB"] = str(out / "tuning.sqlite")
    device = torch.device("cuda")
    target = Target.of(device)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    started = time.perf_counter()
    with open(out / "cells.jsonl", "a") as sink:
        for index, (family, parameters, g) in enumerate(datasets.corpus(
                families, args.graphs, seed=args.seed, min_edges=int(args.min_edges),
                max_edges=int(args.max_edges), device=device)):
            if time.perf_counter() - started > args.budget_s:
                print(f"budget spent after {index} graphs", flush=True)
                break
            structure = describe_structure(g)
            graph_doc = {"index": index, "family": family, "parameters": parameters,
                         "structure": structure.as_dict(), "row_lengths": row_length_profile(g)}
            cells = [(case, dtype, f) for case in cases for dtype in dtypes
                     for f in _feature_lengths(lengths, g.num_edges, int(args.work_cap))]
            if args.cells_per_graph:
                picks = torch.randperm(len(cells), generator=torch.Generator().manual_seed(args.seed + index))
                cells = [cells[i] for i in sorted(picks[: args.cells_per_graph].tolist())]
            for case, dtype, feature_len in cells:
                try:
                    cell = collect_cell(case, g, feature_len, dtype, target, gen, tune=args.tune)
                except Exception as error:  # noqa: BLE001 - a cell that cannot be set up is reported
                    print(f"graph {index} {family} {case.name} F={feature_len}: {type(error).__name__}: "
                          f"{str(error)[:200]}", flush=True)
                    torch.cuda.empty_cache()
                    continue
                sink.write(json.dumps({"graph": graph_doc, "target": target.to_json(), **cell}) + "\n")
                sink.flush()
                ok = [s["ms"] for s in cell["schedules"] if "ms" in s]
                best = min(ok) if ok else math.nan
                default_ms = cell["default"].get("ms", math.nan)
                print(f"[{time.perf_counter() - started:6.0f} s] graph {index} {family} "
                      f"E={g.num_edges:,} {case.name} F={feature_len} {cell['dtype']}: "
                      f"{len(ok)}/{len(cell['schedules'])} ok, best {best:.4g} ms, "
                      f"default/best {default_ms / best:.2f}", flush=True)
            del g
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
