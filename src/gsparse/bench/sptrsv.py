r"""The SpTRSV benchmark: gsparse's generated kernels against cuSPARSE, the level-set solve in
PyTorch ops and SciPy on the CPU, over a set of triangular factors.

    python -m gsparse.bench.sptrsv --matrices laplacian2d:1000000,banded:4000000 --rhs 1,16 --out DIR

Implementations, each solving ``L x = b`` (``L^T x = b`` with ``--transpose``) for the
lower factor ``L``:

- ``gsparse``: the generated AG-SpTRSV kernel under the analysed default's scheme (the
  shipped MLP selector's where it answers, else the hand rule's; the selectors of
  ``--selector FILE`` instead, a fixed scheme with ``--schedule JSON``); ``chooser`` says
  which chose. Its preprocessing is reported
  by phase, each run on the factor's device (:mod:`gsparse.kernels.sptrsv.device_analysis`):
  ``analysis`` (for a transposed solve the transpose, the dependency graph, the levels
  kernel, the features read back), ``selection`` (the MLP or the hand rule, on the host)
  and ``plan`` (transform, scheduling and launch tables, the group levels of a merging
  scheme, the arrays in the kernel's index type); ``codegen_ms`` (source generation, NVRTC
  compile and module load; cold unless ``--kernel-cache`` points at a warm cache) is
  reported apart, as the fast start's compile is. Long rows are split before the analysis
  (:mod:`gsparse.kernels.sptrsv.split`).
  What a process pays once, not per factor (the CUDA modules of PyTorch's sorts and scans,
  of the levels and check kernels, the selector file) is paid before the first matrix and
  reported apart (``process_warm_up_ms``), as CuPy's cuSPARSE handle is made before.
- ``fast_start``: the natural-order kernel with no analysis, what
  :class:`gsparse.TriangularSolver` runs with ``analysis=False`` (and by default where it
  serves) (:mod:`gsparse.kernels.sptrsv.natural`; a fixed scheme with
  ``--fast-start JSON``). Its preprocessing is everything before the first solve but the
  compile: ``validation`` (the solver's checks of the factor: one kernel launch on the GPU,
  :mod:`gsparse.kernels.sptrsv.checks`, which also measures the statistics the fast start's
  rule reads), ``selection`` (the rule; for ``--transpose`` the system transposed on the
  device, whose longest row it reads; for lane rows by level the levels, their sort and
  their count read back) and ``plan`` (the system on the device, and in level order the
  levels and their sort where the rule did not make them); ``compile_ms`` (NVRTC and module load of
  the solve kernels, NVRTC of the check kernel, on a cold kernel cache) is reported apart,
  since it is paid once per dtype, right-hand sides and orientation, not per factor, and is
  kept on disk. The check kernel's module load is paid once per process, in the warm-up.
- Both preprocessings are the phase-by-phase medians of :data:`PREPARATIONS` fresh
  preparations of the factor (a new solver or plan set each), as cuSPARSE's analysis is
  the median of its repeats; the code generation and compile are the first one's.
- Each record's ``default`` names which of the two a :class:`gsparse.TriangularSolver` runs
  by default (``analysis=None``: :func:`gsparse.kernels.sptrsv.default.natural_serves`).
- ``cusparse``: cuSPARSE SpSM through CuPy's bindings (:mod:`.cusparse_triangular`), the
  analysis timed apart from the solve; needs CuPy.
- ``cusparse_per_call``: ``torch.triangular_solve`` on a CUDA sparse CSR tensor, which runs
  cuSPARSE's SpSV/SpSM analysis and solve on every call (what CuPy's
  ``spsolve_triangular`` does too).
- ``levelset``: the level-set solve in PyTorch ops (:mod:`gsparse.kernels.sptrsv.levelset`),
  its plan (levels on the host) as preprocessing.
- ``scipy``: ``scipy.sparse.linalg.spsolve_triangular`` on the CPU.

Every output is checked against a float64 SciPy solution before it is timed: relative
error ``max|x - x_ref| / max|x_ref|`` at most 1e-10 (float64) or 1e-4 (float32); a failed
check records the error instead of a time. GPU times are CUDA-event medians after warm-up
(:func:`gsparse.tune.measure.time_calls`) of calls issued back to back, as a loop of solves
issues them: where a call's host side is slower than its kernels (small factors), the
host's time is in them. A solve that is cheap on the GPU is also timed with the host's
enqueueing hidden behind a device wait (``device_ms``: its kernels alone), and as a loop
of calls between two events (``loop_ms``, the median of :data:`LOOP_ROUNDS` loops: the
per-call events of ``median_ms`` add their own recording, some microseconds of the host's,
to a call whose host side is the longer); both in a table of their own in ``sptrsv.md``,
the solver's default against cuSPARSE. Throughput follows AG-SpTRSV:
GFLOP/s = ``(2 nnz + n) k / t``. ``total_20_ms`` is preprocessing plus 20 solves, each at
the loop's time per call where a loop was timed (20 solves in a row are such a loop), else
at the per-call median.
``--implementations`` runs a subset (gsparse, fast_start and cuSPARSE alone take a fraction
of the time of the CPU and level-set baselines).

Writes ``sptrsv.json`` (every measurement) and ``sptrsv.md`` (a table) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..backends.cpu import unchecked_csr
from ..datasets import triangular
from ..datasets.real import REAL_GRAPHS, real_graph
from ..kernels.schedule import schedule_from_json
from ..kernels.source import RUNTIME_LOADER
from ..kernels.sptrsv import FactorPlans
from ..kernels.sptrsv import checks as factor_checks
from ..kernels.sptrsv.codegen import (
    KERNEL,
    LEVELS_KERNEL,
    NATURAL_KERNEL,
    levels_program,
    natural_program,
    program,
)
from ..kernels.sptrsv.default import natural_serves
from ..kernels.sptrsv.levelset import levelset_plan, levelset_solve
from ..kernels.sptrsv.schedule import NaturalOrderSchedule, SptrsvSchedule
from ..kernels.sptrsv.selector import default_selectors, load_selectors
from ..runtime import compile_cuda, device_arch
from ..sptrsv import TriangularSolver
from ..target import Target
from ..tune.measure import time_calls
from . import cusparse_triangular

__all__ = ["FORMAT", "gflops", "load_matrix", "device_csr", "bench_matrix", "markdown", "main"]

FORMAT = "gsparse-bench-sptrsv/1"
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-4}
SOLVES = 20  # total_20_ms: preprocessing plus this many solves
# Fresh preparations of each factor whose phases' medians are reported (cuSPARSE's analysis
# is likewise the median of its repeats).
PREPARATIONS = 5
IMPLEMENTATIONS = ("gsparse", "fast_start", "cusparse", "cusparse_per_call", "levelset", "scipy")
# Solves shorter than this are also timed with the host hidden (``device_ms``) and in loops
# (``loop_ms``): a longer one keeps the GPU busy while the host enqueues the next.
_DEVICE_ALONE_MS = 1.0
LOOP_ROUNDS = 5
_DEFAULT_MATRICES = "laplacian2d:1000000,laplacian3d:1000000,banded:1000000,power_law:1000000,rmat:1000000,road:1000000"


def gflops(n: int, nnz: int, k: int, ms: float) -> float:
    """AG-SpTRSV's throughput: ``(2 nnz + n) k`` floating-point operations in ``ms``."""
    return (2 * nnz + n) * k / (ms * 1e6)


def load_matrix(spec: str) -> tuple[str, Any]:
    """``(name, lower factor)`` for ``FAMILY[:ROWS[:SEED]]`` (named ``FAMILY:ROWS``, and
    ``:SEED`` where one is given; a family of
    :data:`gsparse.datasets.triangular.FAMILIES`, 1M rows and seed 0 by default), the name
    of a real graph shipped with gsparse (:data:`gsparse.datasets.real.REAL_GRAPHS`: the
    lower triangle of its symmetrised adjacency, as a factor) or a ``.npz`` file of a square
    SciPy sparse matrix (its lower triangle, likewise)."""
    import scipy.sparse as sp

    if spec.endswith(".npz"):
        return Path(spec).stem, triangular.graph_lower(sp.load_npz(spec))
    if spec in REAL_GRAPHS:
        return spec, triangular.graph_lower(real_graph(spec).graph)
    family, *rest = spec.split(":")
    rows = int(rest[0]) if rest else 1_000_000
    seed = int(rest[1]) if len(rest) > 1 else 0
    # The seed stays in the name when given: factors of one family and size differ by it.
    name = f"{family}:{rows}:{seed}" if len(rest) > 1 else f"{family}:{rows}"
    return name, triangular.generate(family, rows, seed)


def device_csr(matrix: Any, device: torch.device | str,
               dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(crow, col, values)`` of a SciPy CSR factor on ``device``: int64 indices, values in
    ``dtype`` (default: the matrix's)."""
    return (torch.from_numpy(matrix.indptr.astype(np.int64)).to(device),
            torch.from_numpy(matrix.indices.astype(np.int64)).to(device),
            torch.from_numpy(matrix.data).to(device=device, dtype=dtype))


def _error(x: torch.Tensor, reference: np.ndarray) -> float:
    got = x.detach().double().cpu().numpy().reshape(reference.shape)
    if not np.isfinite(got).all():
        return float("inf")
    scale = max(float(np.abs(reference).max(initial=0.0)), 1e-300)
    return float(np.abs(got - reference).max(initial=0.0)) / scale


def _measure(solve: Callable[[], torch.Tensor], reference: np.ndarray, dtype: torch.dtype,
             device: torch.device, budget_s: float, cheap: bool = True) -> dict[str, Any]:
    """Check ``solve()`` against the reference, then time it; a failure is recorded, not raised."""
    try:
        error = _error(solve(), reference)
        if not error <= TOLERANCE[dtype]:
            return {"status": "wrong", "error": f"relative error {error:.3e} > {TOLERANCE[dtype]:g}"}
        if cheap:
            timing = time_calls(lambda: solve(), [()], device, budget_s=budget_s)
        else:  # one call is long already: three more, no warm-up beyond the check
            timing = time_calls(lambda: solve(), [()], device, budget_s=budget_s, min_repeats=3, warmup=0)
        record = {"status": "ok", "median_ms": timing.median_ms, "spread": timing.spread,
                  "repeats": len(timing.times_ms), "relative_error": error}
        if cheap and device.type == "cuda" and timing.median_ms < _DEVICE_ALONE_MS:
            record["device_ms"] = time_calls(lambda: solve(), [()], device, budget_s=budget_s / 2,
                                             hide_host=True).median_ms
            record["loop_ms"] = _loop_ms(solve, budget_s / 2, timing.median_ms)
        return record
    except Exception as exc:  # noqa: BLE001 - a failing implementation is data in the record
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}


def _loop_ms(solve: Callable[[], torch.Tensor], budget_s: float, call_ms: float) -> float:
    """Milliseconds per call of ``solve`` issued back to back between two CUDA events: the
    median of :data:`LOOP_ROUNDS` loops of at least 10 calls, as many as ``budget_s`` holds
    at ``call_ms`` a call."""
    calls = max(10, int(budget_s / LOOP_ROUNDS / (call_ms / 1e3)))
    rounds = []
    for _ in range(LOOP_ROUNDS):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(calls):
            solve()
        end.record()
        end.synchronize()
        rounds.append(begin.elapsed_time(end) / calls)
    return statistics.median(rounds)


def _host_ms(fn: Callable[[], Any], device: torch.device) -> tuple[Any, float]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return out, (time.perf_counter() - start) * 1e3


def _median_phases(prepare: Callable[[bool], tuple[Any, dict[str, float]]]) -> tuple[Any, dict[str, float]]:
    """The last of :data:`PREPARATIONS` runs of ``prepare(first)``, each a fresh preparation
    of the factor returning ``(result, {phase: ms})``, and each phase's median over them."""
    phases: list[dict[str, float]] = []
    for i in range(PREPARATIONS):  # only the last result is kept: a large factor's plans are large
        result, times = prepare(i == 0)
        phases.append(times)
    return result, {phase: statistics.median(times[phase] for times in phases) for phase in phases[0]}


def _gsparse(crow, col, values, b, k, transpose, device, schedule, selectors) -> tuple[Callable, dict]:
    """gsparse's solve, its preprocessing phases (ms, medians of fresh preparations) and the
    first preparation's code generation (ms)."""
    target = Target.of(device)
    codegen: dict[str, float] = {}

    def prepare(first: bool) -> tuple[Any, dict[str, float]]:
        plans = FactorPlans(crow, col, True)
        if selectors is not None:
            plans.selectors = selectors
        # On the factor's device; the selector's features are made with the levels and read
        # back: part of the analysis.
        analysis, analysis_ms = _host_ms(lambda: plans.analysis(transpose), device)
        task = plans.task(values.dtype, False, transpose, k)
        chosen, chooser, selection_ms = schedule, "forced", 0.0
        if schedule is None:
            chosen, selection_ms = _host_ms(lambda: plans.chosen_schedule(task, target), device)
            mlp = plans.selectors.select(analysis.features, k, target.sms) if plans.selectors is not None else None
            chooser = "mlp" if mlp is not None else "hand rule"
        _, codegen_ms = _host_ms(lambda: RUNTIME_LOADER.kernel(program(task.algorithm, chosen), KERNEL,
                                                               device.index), device)
        if first:
            codegen["ms"] = codegen_ms
        plan, plan_ms = _host_ms(lambda: plans.build_plan(task, chosen, target), device)
        return (plan, chosen, chooser), {"analysis": analysis_ms, "selection": selection_ms, "plan": plan_ms}

    (plan, chosen, chooser), phases = _median_phases(prepare)
    return (lambda: plan(values, b)), {"schedule": chosen.to_json(), "chooser": chooser, "codegen_ms": codegen["ms"],
                                       "launches": plan.num_launches, "preprocess_ms": phases}


def _warm_up(device: torch.device, selectors: Any, dtypes: tuple[torch.dtype, ...] = (torch.float64,)) -> float:
    """Milliseconds of the preparations of a small factor, paid once per process before the
    first matrix (as CuPy's cuSPARSE handle is): the lazy loading of the CUDA modules of
    PyTorch's sorts and scans that the analysed preparation calls, and the levels kernel's
    module; for the fast start, a solver's checks of a factor of each of ``dtypes`` (the
    check kernel's module, the operations around it) and a plan by level. Without it the
    first matrix's preparation carried them (about 280 ms analysed, 7 ms for the fast start's
    validation, on an H100)."""
    matrix = triangular.generate("laplacian2d", 2_000, 0)
    crow, col = (torch.from_numpy(a.astype(np.int64)).to(device) for a in (matrix.indptr, matrix.indices))
    plans = FactorPlans(crow, col, True)
    if selectors is not None:
        plans.selectors = selectors
    target = Target.of(device)

    def prepare() -> None:
        for transpose in (False, True):
            task = plans.task(torch.float64, False, transpose, 1)
            plans.build_plan(task, plans.chosen_schedule(task, target), target)
        for dtype in dtypes:
            values = torch.from_numpy(matrix.data).to(device=device, dtype=dtype)
            fast = TriangularSolver((crow, col, values, matrix.shape))._pattern.device_plans
            task = fast.task(dtype, False, False, 1)
            fast.build_plan(task, fast.natural_schedule(task, target), target)

    return _host_ms(prepare, device)[1]


def _fast_start(crow, col, values, b, k, transpose, device, schedule) -> tuple[Callable, dict]:
    """The fast start's solve, its preprocessing phases (ms) and its compile time (ms)."""
    n = crow.numel() - 1
    target = Target.of(device)
    # The factor checks' NVRTC compile, like the solve's, is paid once per architecture and
    # kept on disk: it goes to compile_ms (on a cold cache the warm-up compiled it, and loaded
    # its module once for the process).
    checks = factor_checks.checks_program(values.dtype)
    _, checks_ms = _host_ms(lambda: compile_cuda(checks.source, arch=device_arch(device.index),
                                                 context=checks.context), device)
    compiled: dict[str, float] = {}

    def prepare(first: bool) -> tuple[Any, dict[str, float]]:
        solver, validation_ms = _host_ms(lambda: TriangularSolver((crow, col, values, (n, n))), device)
        plans = solver._pattern.device_plans
        task = plans.task(values.dtype, False, transpose, k)
        # The rule reads the system's statistics (the checks' for A, read back for A^T with
        # the transposed system) and for lane rows by level the level count: what it builds,
        # the plan then reuses.
        rule = (lambda: plans.natural_schedule(task, target)) if schedule is None else (lambda: schedule)
        chosen, selection_ms = _host_ms(rule, device)

        def compile_kernels() -> None:
            RUNTIME_LOADER.kernel(natural_program(task.algorithm, chosen), NATURAL_KERNEL, device.index)
            if chosen.level_order:
                RUNTIME_LOADER.kernel(levels_program(task.index_dtype, task.system_lower), LEVELS_KERNEL,
                                      device.index)

        _, compile_ms = _host_ms(compile_kernels, device)
        if first:
            compiled["ms"] = compile_ms
        plan, plan_ms = _host_ms(lambda: plans.build_plan(task, chosen, target), device)
        return (plan, chosen), {"validation": validation_ms, "selection": selection_ms, "plan": plan_ms}

    (plan, chosen), phases = _median_phases(prepare)
    return (lambda: plan(values, b)), {"schedule": chosen.to_json(), "compile_ms": checks_ms + compiled["ms"],
                                       "preprocess_ms": phases}


def bench_matrix(name: str, matrix: Any, k: int, dtype: torch.dtype, transpose: bool, device: torch.device,
                 budget_s: float, schedule: SptrsvSchedule | None = None, selector: Any = None,
                 levelset_max_levels: int = 20_000, fast_start: NaturalOrderSchedule | None = None,
                 implementations: tuple[str, ...] = IMPLEMENTATIONS) -> dict[str, Any]:
    """The ``implementations`` on one factor, ``k`` right-hand sides, one dtype: a record
    (those not run are ``skipped``). The level-set solve is skipped on factors deeper than
    ``levelset_max_levels``."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve_triangular

    n, nnz = matrix.shape[0], matrix.nnz
    system = sp.csr_array(matrix.T) if transpose else matrix
    gen = torch.Generator().manual_seed(0)
    b_cpu = torch.randn((n, k), generator=gen, dtype=torch.float64)[:, 0 if k == 1 else slice(None)].to(dtype)
    reference = spsolve_triangular(system, b_cpu.double().numpy(), lower=not transpose)
    crow, col, values = device_csr(matrix, device, dtype)
    b = b_cpu.to(device).contiguous()
    results: dict[str, Any] = {impl: {"status": "skipped", "error": "not asked for"} for impl in IMPLEMENTATIONS}

    for impl, prepare in (("gsparse", lambda: _gsparse(crow, col, values, b, k, transpose, device, schedule,
                                                        selector)),
                          ("fast_start", lambda: _fast_start(crow, col, values, b, k, transpose, device,
                                                             fast_start))):
        if impl not in implementations:
            continue
        try:
            solve, extra = prepare()
            results[impl] = {**_measure(solve, reference, dtype, device, budget_s), **extra}
        except Exception as exc:  # noqa: BLE001
            results[impl] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}

    if "cusparse" in implementations and not cusparse_triangular.available():
        results["cusparse"] = {"status": "skipped", "error": "CuPy with cuSPARSE SpSM is not installed"}
    elif "cusparse" in implementations:
        try:
            spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, transpose, k)
            analysis = time_calls(spsm.analyse, [()], device, budget_s=budget_s, min_repeats=3)
            spsm.analyse()
            spsm.load(b)

            def cusparse_solve() -> torch.Tensor:
                spsm.solve()
                return spsm.result(k == 1)

            record = _measure(cusparse_solve, reference, dtype, device, budget_s)
            results["cusparse"] = {**record, "preprocess_ms": {"analysis": analysis.median_ms}}
        except Exception as exc:  # noqa: BLE001
            results["cusparse"] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}

    if "cusparse_per_call" in implementations:
        csr = unchecked_csr(crow, col, values, (n, n))
        rhs = b.unsqueeze(1) if k == 1 else b
        results["cusparse_per_call"] = _measure(
            lambda: torch.triangular_solve(rhs, csr, upper=False, transpose=transpose).solution.reshape(b.shape),
            reference, dtype, device, budget_s)

    if "levelset" in implementations:
        plan, levelset_ms = _host_ms(lambda: levelset_plan(matrix.indptr, matrix.indices, True, transpose,
                                                           device), device)
        if plan.num_levels <= levelset_max_levels:
            record = _measure(lambda: levelset_solve(plan, values, b, False), reference, dtype, device, budget_s,
                              cheap=plan.num_levels < 1_000)
        else:  # a few launches per level: a deep factor takes seconds per solve
            record = {"status": "skipped", "error": f"{plan.num_levels} levels > {levelset_max_levels}"}
        results["levelset"] = {**record, "preprocess_ms": {"analysis": levelset_ms}, "levels": plan.num_levels}

    if "scipy" in implementations:
        scipy_matrix = system.astype(np.float32 if dtype == torch.float32 else np.float64)
        b_host = b_cpu.numpy()
        results["scipy"] = _measure(
            lambda: torch.from_numpy(np.asarray(spsolve_triangular(scipy_matrix, b_host, lower=not transpose))),
            reference, dtype, torch.device("cpu"), budget_s, cheap=False)

    for entry in results.values():
        if entry.get("status") == "ok":
            entry["gflops"] = gflops(n, nnz, k, entry["median_ms"])
            prep = sum(entry.get("preprocess_ms", {}).values())
            entry["total_20_ms"] = prep + SOLVES * entry.get("loop_ms", entry["median_ms"])
    plans = FactorPlans(crow, col, True)
    serves = natural_serves(plans.stats(transpose), plans.task(dtype, False, transpose, k))
    return {"matrix": name, "n": n, "nnz": nnz, "k": k, "dtype": str(dtype).removeprefix("torch."),
            "transpose": transpose, "levels": results["levelset"].get("levels"),
            "default": "fast_start" if serves else "gsparse", "results": results}


_DEFAULT_NAMES = {"fast_start": "fast start", "gsparse": "analysed"}


def _ms(entry: dict[str, Any], key: str = "median_ms") -> str:
    return f"{entry[key]:.3f}" if entry.get("status") == "ok" and key in entry else entry.get("status", "-")


def _ratio(num: dict[str, Any], den: dict[str, Any], key: str) -> str:
    if num.get("status") == "ok" and den.get("status") == "ok":
        return f"{num[key] / den[key]:.2f}x"
    return "-"


def markdown(doc: dict[str, Any]) -> str:
    """One row per (matrix, k, dtype): solve times, cuSPARSE over gsparse (solve, and
    preprocessing plus 20 solves), preprocessing, the other baselines, GFLOP/s; then the
    same for the fast start (its compile apart: paid once per kernel, kept on disk)."""
    lines = [f"# SpTRSV benchmark on {doc['environment']['device']}", "",
             f"Process warm-up, once before the first matrix: "
             f"{doc['environment'].get('process_warm_up_ms', float('nan')):.1f} ms.", "",
             "| matrix | n | nnz | levels | k | dtype | gsparse ms | cuSPARSE ms | cuSPARSE / gsparse | "
             "gsparse prep ms | cuSPARSE analysis ms | total@20 cuSPARSE / gsparse | per-call cuSPARSE ms | "
             "level-set ms | SciPy ms | gsparse GFLOP/s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    fast = ["", "## Fast start (natural order, no analysis)", "",
            ("| matrix | k | dtype | scheme | fast ms | cuSPARSE / fast | fast prep ms | fast compile ms | "
             "cuSPARSE analysis ms | total@20 cuSPARSE / fast | fast / gsparse | solver's default |"),
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["records"]:
        ours, cus = r["results"]["gsparse"], r["results"]["cusparse"]
        prep = f"{sum(ours['preprocess_ms'].values()):.1f}" if "preprocess_ms" in ours else "-"
        analysis = f"{cus['preprocess_ms']['analysis']:.3f}" if "preprocess_ms" in cus else "-"
        matrix = _matrix_label(r)
        lines.append(
            f"| {matrix} | {r['n']:,} | {r['nnz']:,} | {r['levels'] or '-'} | "
            f"{r['k']} | {r['dtype']} | {_ms(ours)} | {_ms(cus)} | {_ratio(cus, ours, 'median_ms')} | {prep} | "
            f"{analysis} | {_ratio(cus, ours, 'total_20_ms')} | {_ms(r['results']['cusparse_per_call'])} | "
            f"{_ms(r['results']['levelset'])} | {_ms(r['results']['scipy'])} | {_ms(ours, 'gflops')} |")
        start = r["results"]["fast_start"]
        if start.get("status") != "skipped":
            scheme = str(schedule_from_json(start["schedule"])) if "schedule" in start else "-"
            fast_prep = f"{sum(start['preprocess_ms'].values()):.2f}" if "preprocess_ms" in start else "-"
            compile_ms = f"{start['compile_ms']:.1f}" if "compile_ms" in start else "-"
            fast.append(
                f"| {matrix} | {r['k']} | {r['dtype']} | {scheme} | {_ms(start)} | "
                f"{_ratio(cus, start, 'median_ms')} | {fast_prep} | {compile_ms} | {analysis} | "
                f"{_ratio(cus, start, 'total_20_ms')} | {_ratio(start, ours, 'median_ms')} | "
                f"{_DEFAULT_NAMES.get(r.get('default'), '-')} |")
    if len(fast) > 5:
        lines += fast
    lines += _small_solves(doc["records"])
    failures = [(r["matrix"], r["k"], r["dtype"], name, e["error"]) for r in doc["records"]
                for name, e in r["results"].items() if e.get("status") in ("failed", "wrong")]
    if failures:
        lines += ["", "## Failures", ""] + [f"- {m} k={k} {d} {name}: {err}" for m, k, d, name, err in failures]
    return "\n".join(lines) + "\n"


def _matrix_label(record: dict[str, Any]) -> str:
    """The record's matrix, marked ᵀ for a transposed solve."""
    return f"{record['matrix']}{'ᵀ' if record['transpose'] else ''}"


def _small_solves(records: list[dict[str, Any]]) -> list[str]:
    """The table of the small solves timed in loops (``loop_ms``) and with the host hidden
    (``device_ms``): the solver's default against cuSPARSE, where both have them; no lines
    when none has."""
    rows = []
    for r in records:
        ours, cus = r["results"].get(r.get("default"), {}), r["results"]["cusparse"]
        if "device_ms" in ours and "device_ms" in cus:
            loop = (f"{ours['loop_ms']:.3f} | {cus['loop_ms']:.3f} | {_ratio(cus, ours, 'loop_ms')}"
                    if "loop_ms" in ours and "loop_ms" in cus else "- | - | -")
            rows.append(f"| {_matrix_label(r)} | {r['k']} | {r['dtype']} | {_DEFAULT_NAMES[r['default']]} | "
                        f"{loop} | {ours['device_ms']:.3f} | {cus['device_ms']:.3f} | "
                        f"{_ratio(cus, ours, 'device_ms')} |")
    if not rows:
        return []
    return ["", "## Small solves: back to back, and the device time alone (the host's enqueueing hidden)", "",
            "| matrix | k | dtype | solver's default | loop: default ms | loop: cuSPARSE ms | cuSPARSE / default "
            "| device: default ms | device: cuSPARSE ms | cuSPARSE / default |",
            "|---|---|---|---|---|---|---|---|---|---|", *rows]


def _environment(device: torch.device) -> dict[str, Any]:
    env = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "python": platform.python_version(),
           "cusparse_spsm": cusparse_triangular.available()}
    if device.type == "cuda":
        env["target"] = Target.of(device).to_json()
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", default=_DEFAULT_MATRICES,
                        help="comma-separated FAMILY[:ROWS[:SEED]], real graphs (cora, citeseer, pubmed_cites) or .npz "
                             "files (default: every family at 1M rows)")
    parser.add_argument("--rhs", default="1,16", help="comma-separated numbers of right-hand sides")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--transpose", action="store_true", help="solve with L^T")
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of timed calls per measurement")
    parser.add_argument("--schedule", help="a SptrsvSchedule as JSON, run instead of the chosen one")
    parser.add_argument("--selector", help="a trained SelectorSet (or SchemeSelector) file: the analysed default "
                        "asks it instead of the shipped one")
    parser.add_argument("--levelset-max-levels", type=int, default=20_000,
                        help="skip the level-set baseline on deeper factors (it launches per level)")
    parser.add_argument("--fast-start", help="a NaturalOrderSchedule as JSON: the fast start runs it "
                        "instead of natural_schedule's")
    parser.add_argument("--implementations", default=",".join(IMPLEMENTATIONS),
                        help=f"comma-separated subset of {','.join(IMPLEMENTATIONS)} (default: all)")
    parser.add_argument("--kernel-cache", help="the kernel cache directory (default: a new empty one)")
    parser.add_argument("--out", required=True, help="directory for sptrsv.json and sptrsv.md")
    args = parser.parse_args(argv)
    implementations = tuple(args.implementations.split(","))
    if unknown := set(implementations) - set(IMPLEMENTATIONS):
        parser.error(f"--implementations: unknown {sorted(unknown)}; choose from {', '.join(IMPLEMENTATIONS)}")
    if not torch.cuda.is_available():
        parser.error("the SpTRSV benchmark needs a CUDA GPU")
    os.environ["GSPARSE_CACHE_DIR"] = args.kernel_cache or tempfile.mkdtemp(prefix="gsparse-sptrsv-cache-")
    device = torch.device("cuda", torch.cuda.current_device())
    schedule = SptrsvSchedule.from_json(args.schedule) if args.schedule else None
    fast_start = NaturalOrderSchedule.from_json(args.fast_start) if args.fast_start else None
    # The selectors are read once per process (as the solver does), not per factor: like
    # cuSPARSE's handle, before the first matrix.
    selector = load_selectors(args.selector) if args.selector else default_selectors()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"format": FORMAT, "environment": _environment(device), "records": []}
    dtypes = tuple(getattr(torch, name) for name in args.dtypes.split(","))
    doc["environment"]["process_warm_up_ms"] = _warm_up(device, selector, dtypes)
    for spec in args.matrices.split(","):
        name, matrix = load_matrix(spec)
        for dtype_name in args.dtypes.split(","):
            for k in (int(v) for v in args.rhs.split(",")):
                record = bench_matrix(name, matrix, k, getattr(torch, dtype_name), args.transpose, device,
                                      args.budget, schedule, selector, args.levelset_max_levels, fast_start,
                                      implementations)
                doc["records"].append(record)
                print(json.dumps({key: record[key] for key in ("matrix", "k", "dtype")}
                                 | {impl: e.get("median_ms", e.get("status")) for impl, e in record["results"].items()}),
                      flush=True)
                (out / "sptrsv.json").write_text(json.dumps(doc, indent=1))
                (out / "sptrsv.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
