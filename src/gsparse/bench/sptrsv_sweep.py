r"""The SpTRSV scheme sweep: on a GPU, every factor's cuSPARSE solve, the hand rule's scheme,
the MLP's pick and a sample of the reduced scheme space, measured in one process: the
oracle data the selector and the hand rule are fit on.

    python -m gsparse.bench.sptrsv_sweep --rows 1000000 --schemes 64 --budget-s 420 --out DIR

For each factor (:func:`gsparse.datasets.triangular.generate` of each family at ``--rows``,
for each of ``--seeds``) and each ``k`` of ``--rhs``, one JSON line in ``DIR/sweep.jsonl``,
written as soon as the factor is done:

- ``matrix``, ``family``, ``seed``, ``n``, ``nnz``, ``levels``, ``k``, ``dtype``;
  ``features`` (the 10 of :mod:`gsparse.kernels.sptrsv.features`, by name) and
  ``analysis_ms`` (levels and features, shared by every scheme);
- ``cusparse``: SpSM's ``analysis_ms`` and the solve's ``median_ms`` (CuPy; the
  benchmark's :class:`~.cusparse_triangular.CuSparseSpSM`);
- ``default`` and ``mlp`` (with ``--selector``): the scheme each picks, as JSON;
  ``by_value``: the default's ``ready_by_value`` twin (the knob flipped: rows signal
  readiness by their values or by flags; the hand rule signals by values, so its twin is
  the flag scheme), measured unless ``--by-value none``;
- ``schemes``: one entry per scheme measured (the default's, its ``by_value`` twin, the
  MLP's and each ``--also`` scheme first, then the sample; with ``--by-value all`` each
  sampled scheme is followed by its ``ready_by_value`` twin): ``schedule`` (JSON), ``status`` (``ok``, ``wrong``, ``failed``, ``skipped``),
  ``median_ms``, ``repeats``, ``plan_ms`` (transform, scheduling, arrays to the device),
  ``codegen_ms`` (source, NVRTC and module load: cold on a program's first use only),
  ``launches``; ``truncated`` when the factor's time slice ran out first.

Every solve is checked against SciPy (float64) before it is timed (relative error at most
1e-10 in float64, 1e-4 in float32); times are CUDA-event medians after warm-up
(:func:`gsparse.tune.measure.time_calls`, ``--time-s`` of timed calls per scheme), except
that a scheme whose checked solve took longer than ``--slow-ms`` is recorded at that one
call's time (it is far off the best anyway) and one with more than ``--max-launches``
launches is skipped (its host loop alone takes seconds).

Time: ``--budget-s`` is shared out among the factors not yet swept (each gets the rest of
the budget over the factors left), so that every family gets data and the run ends in
time; a factor whose slice runs out stops starting schemes. The sample is the same for
every factor (``--sample-seed``), so the records' times form a matrix x scheme table for
:func:`gsparse.kernels.sptrsv.selector.train`. ``DIR/summary.md`` closes the run: per
factor cuSPARSE over the best of the space and over the default, the MLP's pick over the
best, and a leave-one-family-out fit of the MLP on the sweep's own table. ``--summarize
DIR`` rebuilds the summary from an existing ``sweep.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..datasets import triangular
from ..kernels.sptrsv import FactorPlans
from ..kernels.sptrsv.codegen import KERNEL, program
from ..kernels.sptrsv.features import FEATURE_NAMES
from ..kernels.sptrsv.schedule import SptrsvSchedule
from ..kernels.sptrsv.space import reduced_space
from ..kernels.source import RUNTIME_LOADER
from ..target import Target
from ..tune.measure import time_calls
from . import cusparse_triangular
from .sptrsv import TOLERANCE, _error, _host_ms

__all__ = ["FORMAT", "sample_schemes", "matrix_specs", "sweep_matrix", "gpu_prepare", "summary", "main"]

FORMAT = "gsparse-sptrsv-sweep/1"


def sample_schemes(count: int | None, seed: int = 0) -> list[SptrsvSchedule]:
    """``count`` schemes of the reduced space drawn without replacement (all when ``count``
    is None or not smaller than the space), in a seeded random order."""
    space = reduced_space()
    if count is None or count >= len(space):
        return space
    return random.Random(seed).sample(space, count)


def matrix_specs(families: list[str], rows: int, seeds: list[int]) -> list[tuple[str, int, int]]:
    """``(family, rows, seed)`` with the seed outermost: a run cut short has every family."""
    return [(family, rows, seed) for seed in seeds for family in families]


def gpu_prepare(plans: FactorPlans, task: Any, schedule: SptrsvSchedule, target: Target,
                values: torch.Tensor, b: torch.Tensor) -> tuple[Callable[[], torch.Tensor], dict]:
    """The generated kernel under ``schedule``: compile (timed apart) and plan."""
    device = b.device
    _, codegen_ms = _host_ms(lambda: RUNTIME_LOADER.kernel(program(task.algorithm, schedule), KERNEL,
                                                           device.index), device)
    plan, plan_ms = _host_ms(lambda: plans.build_plan(task, schedule, target), device)
    return (lambda: plan(values, b)), {"plan_ms": plan_ms, "codegen_ms": codegen_ms,
                                       "launches": plan.num_launches}


def _measure(solve: Callable[[], torch.Tensor], reference: np.ndarray, dtype: torch.dtype,
             device: torch.device, time_s: float, slow_ms: float) -> dict[str, Any]:
    """Check, then time; a failure is data in the record."""
    try:
        x, first_ms = _host_ms(solve, device)
        error = _error(x, reference)
        del x
        if not error <= TOLERANCE[dtype]:
            return {"status": "wrong", "error": f"relative error {error:.3e} > {TOLERANCE[dtype]:g}"}
        if first_ms > slow_ms:
            return {"status": "ok", "median_ms": first_ms, "repeats": 1, "relative_error": error}
        timing = time_calls(lambda: solve(), [()], device, budget_s=time_s, min_repeats=5, max_repeats=100)
        return {"status": "ok", "median_ms": timing.median_ms, "spread": timing.spread,
                "repeats": len(timing.times_ms), "relative_error": error}
    except Exception as exc:  # noqa: BLE001 - a failing scheme is data in the record
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}


def _cusparse(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, b: torch.Tensor, n: int, k: int,
              reference: np.ndarray, device: torch.device, time_s: float) -> dict[str, Any]:
    if device.type != "cuda" or not cusparse_triangular.available():
        return {"status": "skipped", "error": "needs CuPy with cuSPARSE SpSM on a CUDA device"}
    try:
        spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, False, k)
        analysis = time_calls(spsm.analyse, [()], device, budget_s=time_s, min_repeats=3)
        spsm.analyse()
        spsm.load(b)

        def solve() -> torch.Tensor:
            spsm.solve()
            return spsm.result(k == 1)

        record = _measure(solve, reference, values.dtype, device, time_s, math.inf)
        return {**record, "analysis_ms": analysis.median_ms}
    except Exception as exc:  # noqa: BLE001
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}


def sweep_matrix(name: str, matrix: Any, k: int, dtype: torch.dtype, device: torch.device,
                 schemes: list[SptrsvSchedule], target: Target, *, deadline: float,
                 time_s: float = 0.15, slow_ms: float = 200.0, max_launches: int = 20_000,
                 selector: Any = None, by_value: str = "default", also: tuple[SptrsvSchedule, ...] = (),
                 prepare: Callable[..., tuple[Callable, dict]] = gpu_prepare,
                 clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """One factor's record (see the module docstring): ``L x = b`` for the lower factor
    ``matrix`` with ``k`` right-hand sides; no scheme starts after ``clock()`` passes
    ``deadline``. ``by_value``: ``none``, ``default`` (the default's ``ready_by_value`` twin is
    measured too) or ``all`` (every scheme's). ``also``: schemes measured before the sample. ``prepare(plans, task, schedule, target,
    values, b)`` makes a scheme's solve (:func:`gpu_prepare`; a CPU model in tests)."""
    from scipy.sparse.linalg import spsolve_triangular

    n, nnz = matrix.shape[0], matrix.nnz
    gen = torch.Generator().manual_seed(0)
    b_cpu = torch.randn((n, k), generator=gen, dtype=torch.float64)[:, 0 if k == 1 else slice(None)].to(dtype)
    reference = spsolve_triangular(matrix, b_cpu.double().numpy(), lower=True)
    crow = torch.from_numpy(matrix.indptr.astype(np.int64)).to(device)
    col = torch.from_numpy(matrix.indices.astype(np.int64)).to(device)
    values = torch.from_numpy(matrix.data).to(device=device, dtype=dtype)
    b = b_cpu.to(device).contiguous()

    plans = FactorPlans(crow, col, True)
    analysis, analysis_ms = _host_ms(lambda: (a := plans.analysis(False), a.features)[0], device)
    features = analysis.features
    task = plans.task(dtype, False, False, k)
    default = plans.chosen_schedule(task, target)
    mlp = selector.select(features) if selector is not None else None
    twin = _by_value(default) if by_value != "none" else None
    record: dict[str, Any] = {
        "format": FORMAT, "matrix": name, "n": n, "nnz": nnz, "levels": int(features[FEATURE_NAMES.index("layer_num")]),
        "k": k, "dtype": str(dtype).removeprefix("torch."),
        "features": dict(zip(FEATURE_NAMES, map(float, features))), "analysis_ms": analysis_ms,
        "cusparse": _cusparse(crow, col, values, b, n, k, reference, device, time_s),
        "default": default.to_json(), "by_value": twin.to_json() if twin is not None else None,
        "mlp": mlp.to_json() if mlp is not None else None,
        "schemes": [], "truncated": False,
    }
    seen: set[str] = set()
    sample = [t for s in schemes for t in (s, _by_value(s))] if by_value == "all" else schemes
    for schedule in [default, *(s for s in (twin, mlp) if s is not None), *also, *sample]:
        key = schedule.to_json()
        if key in seen:
            continue
        if clock() > deadline:
            record["truncated"] = True
            break
        seen.add(key)
        entry: dict[str, Any] = {"schedule": key}
        try:
            solve, facts = prepare(plans, task, schedule, target, values, b)
            entry.update(facts)
        except Exception as exc:  # noqa: BLE001
            record["schemes"].append({**entry, "status": "failed", "error": f"{type(exc).__name__}: {exc}"})
            continue
        if facts.get("launches", 0) > max_launches:
            entry.update(status="skipped", error=f"{facts['launches']} launches > {max_launches}")
        else:
            entry.update(_measure(solve, reference, dtype, device, time_s, slow_ms))
        del solve
        record["schemes"].append(entry)
    return record


def _by_value(schedule: SptrsvSchedule) -> SptrsvSchedule:
    """``schedule`` with ``ready_by_value`` flipped."""
    return SptrsvSchedule(**{**schedule.knobs(), "ready_by_value": not schedule.ready_by_value})


# ---------------------------------------------------------------------- the summary


def _times(record: dict[str, Any]) -> dict[str, float]:
    return {e["schedule"]: e["median_ms"] for e in record["schemes"] if e.get("status") == "ok"}


def _geomean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def _loo_mlp(records: list[dict[str, Any]]) -> dict[int, float]:
    """Leave one family out: the MLP trained on the other families' records over the schemes
    every record measured, its pick's time over the best on each held-out record (by index)."""
    from ..kernels.sptrsv.selector import train

    columns = sorted(set.intersection(*(set(_times(r)) for r in records))) if records else []
    families = {r["matrix"].split(":")[0] for r in records}
    if len(columns) < 2 or len(families) < 2:
        return {}
    schemes = [SptrsvSchedule.from_json(c) for c in columns]
    feats = np.array([[r["features"][f] for f in FEATURE_NAMES] for r in records])
    times = np.array([[_times(r)[c] for c in columns] for r in records])
    family = np.array([r["matrix"].split(":")[0] for r in records])
    ratios = {}
    for held in sorted(families):
        train_rows = family != held
        selector = train(feats[train_rows], times[train_rows], schemes, epochs=300)
        for i in np.flatnonzero(~train_rows):
            pick = schemes.index(selector.select(feats[i]))
            best = min(_times(records[i]).values())
            ratios[int(i)] = float(times[i, pick] / best)
    return ratios


def summary(records: list[dict[str, Any]]) -> str:
    """Markdown: per record, cuSPARSE's solve over the best scheme measured and over the
    default, the MLP's pick (``--selector``) and the leave-one-family-out MLP over the best."""
    loo = _loo_mlp(records)
    lines = ["| matrix | k | n | nnz | levels | cuSPARSE ms | best ms | cuSPARSE / best | default ms | "
             "cuSPARSE / default | default's rv twin ms | MLP / best | LOFO MLP / best | schemes ok | best scheme |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    speedups: dict[str, list[float]] = {"best": [], "default": []}
    for i, r in enumerate(records):
        times = _times(r)
        cus = r["cusparse"].get("median_ms") if r["cusparse"].get("status") == "ok" else None
        best_key = min(times, key=times.get) if times else None
        best = times.get(best_key)
        dflt = times.get(r["default"])
        mlp = times.get(r["mlp"]) if r.get("mlp") else None
        twin = times.get(r["by_value"]) if r.get("by_value") else None

        def ratio(a: float | None, b: float | None) -> str:
            return f"{a / b:.2f}" if a and b else "-"

        if cus and best:
            speedups["best"].append(cus / best)
        if cus and dflt:
            speedups["default"].append(cus / dflt)
        lines.append(
            f"| {r['matrix']} | {r['k']} | {r['n']:,} | {r['nnz']:,} | {r['levels']:,} | "
            f"{cus or float('nan'):.3f} | {best or float('nan'):.3f} | {ratio(cus, best)} | "
            f"{dflt or float('nan'):.3f} | {ratio(cus, dflt)} | {twin or float('nan'):.3f} | {ratio(mlp, best)} | "
            f"{f'{loo[i]:.2f}' if i in loo else '-'} | {len(times)}/{len(r['schemes'])}"
            f"{' (truncated)' if r.get('truncated') else ''} | "
            f"{SptrsvSchedule.from_json(best_key) if best_key else '-'} |")
    lines += ["", f"geomean cuSPARSE / best-of-space: {_geomean(speedups['best']):.2f}x over "
              f"{len(speedups['best'])}; cuSPARSE / default: {_geomean(speedups['default']):.2f}x over "
              f"{len(speedups['default'])}"]
    if loo:
        within = sum(v <= 1.1 for v in loo.values())
        lines.append(f"leave-one-family-out MLP within 10% of the best measured: {within}/{len(loo)}")
    return "\n".join(lines) + "\n"


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(triangular.FAMILIES))
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seeds", default="0", help="comma-separated generator seeds")
    parser.add_argument("--rhs", default="1", help="comma-separated numbers of right-hand sides")
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--schemes", default="64", help="schemes sampled from the reduced space, or 'all'")
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=420.0, help="wall-clock seconds for the whole sweep")
    parser.add_argument("--time-s", type=float, default=0.15, help="seconds of timed calls per scheme")
    parser.add_argument("--slow-ms", type=float, default=200.0, help="a slower checked solve is timed once")
    parser.add_argument("--max-launches", type=int, default=20_000, help="skip schemes with more launches")
    parser.add_argument("--selector", help="a trained SchemeSelector file: its pick is measured too")
    parser.add_argument("--by-value", default="default", choices=("none", "default", "all"),
                        help="which schemes are also measured with ready_by_value")
    parser.add_argument("--also", action="append", default=[], metavar="SCHEME_JSON",
                        help="a scheme (SptrsvSchedule JSON) measured on every factor; repeatable")
    parser.add_argument("--summarize", action="store_true", help="only rebuild summary.md from sweep.jsonl")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    start = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        text = summary(_read(out / "sweep.jsonl"))
        (out / "summary.md").write_text(text)
        print(text)
        return 0
    if not torch.cuda.is_available():
        parser.error("the sweep needs a CUDA GPU")
    os.environ.setdefault("GSPARSE_CACHE_DIR", tempfile.mkdtemp(prefix="gsparse-sptrsv-sweep-"))
    device = torch.device("cuda", torch.cuda.current_device())
    target = Target.of(device)
    schemes = sample_schemes(None if args.schemes == "all" else int(args.schemes), args.sample_seed)
    selector = None
    if args.selector:
        from ..kernels.sptrsv.selector import SchemeSelector

        selector = SchemeSelector.load(args.selector)
    also = tuple(SptrsvSchedule.from_json(text).validate() for text in args.also)
    specs = matrix_specs(args.families.split(","), args.rows, [int(s) for s in args.seeds.split(",")])
    rhs = [int(v) for v in args.rhs.split(",")]
    jsonl = out / "sweep.jsonl"
    jsonl.write_text("")
    records = []
    jobs = len(specs) * len(rhs)
    for family, rows, seed in specs:
        left = args.budget_s - (time.monotonic() - start)
        if left <= 0:
            print(f"budget spent: {family}:{rows}:{seed} and later factors not swept", flush=True)
            break
        matrix = triangular.generate(family, rows, seed)
        for k in rhs:
            left = args.budget_s - (time.monotonic() - start)
            deadline = time.monotonic() + left / jobs
            jobs -= 1
            record = sweep_matrix(f"{family}:{rows}:{seed}", matrix, k, getattr(torch, args.dtype), device,
                                  schemes, target, deadline=deadline, time_s=args.time_s, slow_ms=args.slow_ms,
                                  max_launches=args.max_launches, selector=selector, by_value=args.by_value,
                                  also=also)
            record["elapsed_s"] = time.monotonic() - start
            records.append(record)
            with jsonl.open("a") as f:
                f.write(json.dumps(record) + "\n")
            times = _times(record)
            print(json.dumps({"matrix": record["matrix"], "k": k, "levels": record["levels"],
                              "cusparse_ms": record["cusparse"].get("median_ms"),
                              "default_ms": times.get(record["default"]),
                              "by_value_ms": times.get(record["by_value"]),
                              "best_ms": min(times.values(), default=None),
                              "measured": len(record["schemes"]), "elapsed_s": round(record["elapsed_s"], 1)}),
                  flush=True)
        del matrix
    text = summary(records)
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
