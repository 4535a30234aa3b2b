r"""The SpTRSV scheme sweep: on a GPU, every factor's cuSPARSE solve, the hand rule's scheme,
the MLP's pick and a fixed set of schemes, measured in one process: the oracle data the
selector and the hand rule are fit on and judged by.

    python -m gsparse.bench.sptrsv_sweep --rows 50000-300000,banded=10000-60000 --seeds 0-7 \
        --rhs 1,16 --schemes selection --repeats 8 --prune 4 --budget-s 285 --out DIR

The factors are :func:`gsparse.datasets.triangular.generate` of each family of
``--families`` for each seed of ``--seeds``, seed outermost (a run cut short has every
family), with ``--rows`` rows: a number, or a range ``LO-HI`` from which each factor's size
is drawn log-uniformly by its family and seed (:func:`~gsparse.datasets.triangular.corpus_rows`);
``FAMILY=...`` entries set a family's own (``--rows 50000-300000,banded=10000-60000``).
Each factor is analysed once and solved with each ``k`` of ``--rhs``; per factor and ``k``,
one JSON line in ``DIR/sweep.jsonl``, written as soon as the factor is done:

- ``matrix`` (``family:rows:seed``), ``family``, ``seed``, ``gpu`` and ``sms`` (the
  device's name and SM count), ``n``, ``nnz``, ``levels``, ``k``, ``dtype``; ``features``
  (the 10 of :mod:`gsparse.kernels.sptrsv.features`, by name) and ``analysis_ms`` (levels
  and features, shared by every scheme and ``k``);
- ``cusparse``: SpSM's ``analysis_ms`` and the solve's ``median_ms`` (CuPy; the
  benchmark's :class:`~.cusparse_triangular.CuSparseSpSM`);
- ``default``: the hand rule's scheme (:func:`~gsparse.kernels.sptrsv.default_schedule`),
  as JSON; ``mlp``: the pick of the selectors of ``--selector FILE``, else of those gsparse
  ships (None where none answers); ``by_value``: the default's ``ready_by_value`` twin (the
  knob flipped), measured unless ``--by-value none``;
- ``schemes``: one entry per scheme (the default's, its twin, the MLP's and each ``--also``
  scheme first, then ``--schemes``: ``selection``, the selector's space
  (:func:`~gsparse.kernels.sptrsv.space.selection_space`); ``all``, the reduced space; or
  a number, a seeded sample of it; with ``--by-value all`` each followed by its
  ``ready_by_value`` twin): ``schedule`` (JSON), ``status`` (``ok``, ``wrong``, ``failed``,
  ``skipped``, ``pruned``), ``median_ms``, ``repeats``, ``plan_ms`` (transform, scheduling,
  arrays to the device; what earlier schemes or ``k`` of the factor computed already is
  not counted again), ``codegen_ms`` (source, NVRTC and module load: cold on a program's
  first use only), ``launches``; ``truncated`` when the factor's time ran out first.

Every solve is checked against SciPy (float64) before it is timed (relative error at most
1e-10 in float64, 1e-4 in float32). Times are CUDA-event medians: ``--repeats R`` timed
calls right after the checked one, or warm-up and ``--time-s`` of timed calls per scheme
(:func:`gsparse.tune.measure.time_calls`); a scheme whose checked solve took longer than
``--slow-ms`` is recorded at that one call's time (it is far off the best anyway), one with
more than ``--max-launches`` launches is skipped (its host loop alone takes seconds).

What is not measured:

- A scheme that differs from one measured on the factor only in ``alpha_level`` and whose
  kernel partition came out the same has the same plan, launch for launch: its entry copies
  that measurement (``same_plan_as``). This changes no time.
- With ``--prune X``, on the assumption that a scheme this far off is not near the best: at a larger ``k``, a scheme that was more than ``X`` times the best at
  a smaller ``k`` of the same factor (or pruned there); and on a family's later factors, a
  scheme that was more than ``X`` times the best (or pruned) on each of its first ``A =
  --prune-after`` factors at that ``k``, or more than ``X ** A`` times on one. Its entry
  says so (``pruned``). The hand rule's, the MLP's and the ``--also`` schemes are always
  measured. (Merging a mesh's rows made schemes 10 to 900 times slower than the best in the
  H100 sweep at 500K rows, up to ~3 us a row: unpruned, they would take most of the time.)

Time: ``--budget-s`` is the sweep's wall clock. A factor may use up to ``--share`` times
the budget left over the factors left (its ``k`` split what it has evenly, a ``k`` passing
on what it did not use); a factor that runs out stops starting schemes (``truncated``), and
no factor starts once the budget left is under half the mean factor's time so far. The
scheme set is the same for every factor (``--sample-seed``), so the records' times form a
matrix x scheme table per ``k`` for :func:`gsparse.kernels.sptrsv.selector.train`
(:mod:`gsparse.bench.sptrsv_selector` builds and judges it). ``DIR/summary.md`` closes the
run: per record cuSPARSE over the best of the space and over the default, the MLP's pick
over the best, and (unless ``--no-lofo``) a leave-one-family-out fit of the MLP on the
sweep's own table. ``--summarize`` rebuilds the summary from an existing ``sweep.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..datasets import triangular
from ..kernels.source import RUNTIME_LOADER
from ..kernels.sptrsv import FactorPlans, default_schedule
from ..kernels.sptrsv.codegen import KERNEL, program
from ..kernels.sptrsv.features import FEATURE_NAMES
from ..kernels.sptrsv.schedule import SptrsvSchedule
from ..kernels.sptrsv.scheduling import SolvePlan
from ..kernels.sptrsv.space import reduced_space, selection_space
from ..target import Target
from ..tune.measure import time_calls
from . import cusparse_triangular
from .sptrsv import TOLERANCE, _error, _host_ms, device_csr

__all__ = ["FORMAT", "sample_schemes", "scheme_set", "parse_rows", "parse_seeds", "matrix_specs", "sweep_matrix",
           "gpu_prepare", "FamilyPruning", "summary", "main"]

FORMAT = "gsparse-sptrsv-sweep/2"


def sample_schemes(count: int | None, seed: int = 0) -> list[SptrsvSchedule]:
    """``count`` schemes of the reduced space drawn without replacement (all when ``count``
    is None or not smaller than the space), in a seeded random order."""
    space = reduced_space()
    if count is None or count >= len(space):
        return space
    return random.Random(seed).sample(space, count)


def scheme_set(spec: str, seed: int = 0) -> list[SptrsvSchedule]:
    """``--schemes``: ``selection`` (the selector's space), ``all`` (the reduced space) or a
    number (a sample of it)."""
    if spec == "selection":
        return selection_space()
    if spec == "all":
        return sample_schemes(None)
    try:
        count = int(spec)
    except ValueError:
        raise ValueError(f"--schemes must be 'selection', 'all' or a number, got {spec!r}") from None
    return sample_schemes(count, seed)


def _range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def parse_rows(spec: str) -> dict[str, tuple[int, int]]:
    """``--rows``: comma-separated ``N`` or ``LO-HI``, each optionally ``FAMILY=``-prefixed;
    the unprefixed entry is every other family's (key ``""``)."""
    ranges: dict[str, tuple[int, int]] = {}
    for entry in spec.split(","):
        family, _, text = entry.rpartition("=")
        try:
            low, high = _range(text)
        except ValueError:
            raise ValueError(f"--rows entries must be N, LO-HI or FAMILY=LO-HI, got {entry!r}") from None
        if not 27 <= low <= high:
            raise ValueError(f"--rows ranges must satisfy 27 <= LO <= HI, got {entry!r}")
        ranges[family] = (low, high)
    return ranges


def parse_seeds(spec: str) -> list[int]:
    """``--seeds``: comma-separated seeds and ``LO-HI`` runs (inclusive)."""
    seeds: list[int] = []
    for entry in spec.split(","):
        low, high = _range(entry)
        seeds.extend(range(low, high + 1))
    return seeds


def matrix_specs(families: Sequence[str], rows: int | dict[str, tuple[int, int]],
                 seeds: Sequence[int]) -> list[tuple[str, int, int]]:
    """``(family, rows, seed)`` with the seed outermost: a run cut short has every family.
    ``rows``: one size, or ranges by family (:func:`parse_rows`) drawn from by
    :func:`~gsparse.datasets.triangular.corpus_rows`."""
    if isinstance(rows, int):
        rows = {"": (rows, rows)}
    specs = []
    for seed in seeds:
        for family in families:
            if family not in rows and "" not in rows:
                raise ValueError(f"--rows gives no size for family {family!r}")
            low, high = rows.get(family, rows.get(""))
            size = low if low == high else triangular.corpus_rows(family, low, high, seed)
            specs.append((family, size, seed))
    return specs


def gpu_prepare(plans: FactorPlans, task: Any, schedule: SptrsvSchedule, target: Target, values: torch.Tensor,
                b: torch.Tensor, solve_plan: SolvePlan | None = None) -> tuple[Callable[[], torch.Tensor], dict]:
    """The generated kernel under ``schedule`` on ``solve_plan``: compile (timed apart) and plan."""
    device = b.device
    _, codegen_ms = _host_ms(lambda: RUNTIME_LOADER.kernel(program(task.algorithm, schedule), KERNEL,
                                                           device.index), device)
    plan, plan_ms = _host_ms(lambda: plans.build_plan(task, schedule, target, solve_plan), device)
    return (lambda: plan(values, b)), {"plan_ms": plan_ms, "codegen_ms": codegen_ms,
                                       "launches": plan.num_launches}


def _measure(solve: Callable[[], torch.Tensor], reference: np.ndarray, dtype: torch.dtype,
             device: torch.device, time_s: float, slow_ms: float, repeats: int | None) -> dict[str, Any]:
    """Check, then time; a failure is data in the record."""
    try:
        x, first_ms = _host_ms(solve, device)
        error = _error(x, reference)
        del x
        if not error <= TOLERANCE[dtype]:
            return {"status": "wrong", "error": f"relative error {error:.3e} > {TOLERANCE[dtype]:g}"}
        if first_ms > slow_ms:
            return {"status": "ok", "median_ms": first_ms, "repeats": 1, "relative_error": error}
        if repeats is not None:  # the checked call was the warm-up
            timing = time_calls(lambda: solve(), [()], device, warmup=0, min_repeats=repeats, max_repeats=repeats)
        else:
            timing = time_calls(lambda: solve(), [()], device, budget_s=time_s, min_repeats=5, max_repeats=100)
        return {"status": "ok", "median_ms": timing.median_ms, "spread": timing.spread,
                "repeats": len(timing.times_ms), "relative_error": error}
    except Exception as exc:  # noqa: BLE001 - a failing scheme is data in the record
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}


def _cusparse(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, b: torch.Tensor, n: int, k: int,
              reference: np.ndarray, device: torch.device, time_s: float, repeats: int | None) -> dict[str, Any]:
    if device.type != "cuda" or not cusparse_triangular.available():
        return {"status": "skipped", "error": "needs CuPy with cuSPARSE SpSM on a CUDA device"}
    try:
        spsm = cusparse_triangular.CuSparseSpSM(crow.int(), col.int(), values, n, True, False, False, k)
        if repeats is not None:
            analysis = time_calls(spsm.analyse, [()], device, warmup=0, min_repeats=3, max_repeats=3)
        else:
            analysis = time_calls(spsm.analyse, [()], device, budget_s=time_s, min_repeats=3)
        spsm.analyse()
        spsm.load(b)

        def solve() -> torch.Tensor:
            spsm.solve()
            return spsm.result(k == 1)

        record = _measure(solve, reference, values.dtype, device, time_s, math.inf, repeats)
        return {**record, "analysis_ms": analysis.median_ms}
    except Exception as exc:  # noqa: BLE001
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}


def _times(record: dict[str, Any]) -> dict[str, float]:
    return {e["schedule"]: e["median_ms"] for e in record["schemes"] if e.get("status") == "ok"}


def _ratios(record: dict[str, Any]) -> dict[str, float]:
    """Each scheme's time over the record's best: ``inf`` for a wrong, failed or pruned one;
    skipped and unmeasured schemes are absent (no evidence either way)."""
    times = _times(record)
    best = min(times.values(), default=math.nan)
    out = {key: t / best for key, t in times.items()}
    for e in record["schemes"]:
        if e["status"] in ("wrong", "failed", "pruned"):
            out[e["schedule"]] = math.inf
    return out


class FamilyPruning:
    """``--prune X``'s record of how far each scheme was from the best on each family's
    factors, per ``k``: a scheme more than ``X`` times the best on each of the family's first
    ``after`` factors, or more than ``X ** after`` times on one of them, is pruned on its
    later ones."""

    def __init__(self, factor: float, after: int) -> None:
        self.factor, self.after = factor, after
        self._ratios: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))

    def add(self, family: str, record: dict[str, Any]) -> None:
        seen = self._ratios[(family, record["k"])]
        for key, ratio in _ratios(record).items():
            seen[key].append(ratio)

    def reason(self, family: str, k: int, key: str) -> str | None:
        ratios = self._ratios[(family, k)].get(key, [])
        if len(ratios) >= self.after and all(r > self.factor for r in ratios):
            return f"over {self.factor:g}x the best (or pruned) on the family's first {len(ratios)} factors"
        if any(r > self.factor ** self.after for r in ratios):
            return f"over {self.factor ** self.after:g}x the best (or pruned) on one of the family's factors"
        return None


def _by_value(schedule: SptrsvSchedule) -> SptrsvSchedule:
    """``schedule`` with ``ready_by_value`` flipped."""
    return SptrsvSchedule(**{**schedule.knobs(), "ready_by_value": not schedule.ready_by_value})


def _plan_identity(schedule: SptrsvSchedule, solve_plan: SolvePlan) -> tuple:
    """Equal for two schemes whose plans are the same launch for launch: the same knobs but
    ``alpha_level``, whose only effect is the kernel partition, and the same partition."""
    knobs = {**schedule.knobs(), "alpha_level": None}
    return (json.dumps(knobs, sort_keys=True), solve_plan.kernel_ptr.tobytes(), solve_plan.kernel_waits.tobytes())


def sweep_matrix(name: str, matrix: Any, ks: Sequence[int], dtype: torch.dtype, device: torch.device,
                 schemes: Sequence[SptrsvSchedule], target: Target, *, deadline: float, time_s: float = 0.15,
                 repeats: int | None = None, slow_ms: float = 200.0, max_launches: int = 20_000,
                 selectors: Any = None, by_value: str = "default", also: Sequence[SptrsvSchedule] = (),
                 prune: float | None = None, family_pruning: FamilyPruning | None = None,
                 prepare: Callable[..., tuple[Callable, dict]] = gpu_prepare,
                 clock: Callable[[], float] = time.monotonic) -> list[dict[str, Any]]:
    """One factor's records, one per ``k`` of ``ks`` (see the module docstring): ``L x = b``
    for the lower factor ``matrix``; no scheme starts after ``clock()`` passes ``deadline``
    (each ``k`` gets an even share of the time left). ``by_value``: ``none``, ``default``
    (the default's ``ready_by_value`` twin is measured too) or ``all`` (every scheme's).
    ``also``: schemes measured before the set. ``prune``, ``family_pruning``: what is left
    out (module docstring). ``prepare(plans, task, schedule, target, values, b, solve_plan)``
    makes a scheme's solve (:func:`gpu_prepare`; a CPU model in tests)."""
    from scipy.sparse.linalg import spsolve_triangular

    n, nnz = matrix.shape[0], matrix.nnz
    parts = name.split(":")
    family, seed = parts[0], int(parts[2]) if len(parts) == 3 and parts[2].isdigit() else None
    crow, col, values = device_csr(matrix, device, dtype)
    plans = FactorPlans(crow, col, True)
    analysis, analysis_ms = _host_ms(lambda: plans.analysis(False), device)
    features = analysis.features
    # Many schemes of one factor share their transforms on the host (the cache), from the
    # analysis read back once (not timed: no solver pays it).
    host = analysis.host
    transforms = host.transform_cache()
    solve_plans: dict[SptrsvSchedule, SolvePlan] = {}
    records: list[dict[str, Any]] = []
    earlier: list[dict[str, float]] = []  # ratios to the best at each earlier k
    for index, k in enumerate(ks):
        gen = torch.Generator().manual_seed(0)
        b_cpu = torch.randn((n, k), generator=gen, dtype=torch.float64)[:, 0 if k == 1 else slice(None)].to(dtype)
        reference = spsolve_triangular(matrix, b_cpu.double().numpy(), lower=True)
        b = b_cpu.to(device).contiguous()
        k_deadline = clock() + (deadline - clock()) / (len(ks) - index)
        task = plans.task(dtype, False, False, k)
        default = default_schedule(features, task, target)
        mlp = selectors.select(features, k, target.sms) if selectors is not None else None
        twin = _by_value(default) if by_value != "none" else None
        record: dict[str, Any] = {
            "format": FORMAT, "matrix": name, "family": family, "seed": seed, "gpu": target.name, "sms": target.sms,
            "n": n, "nnz": nnz, "levels": int(features[FEATURE_NAMES.index("layer_num")]), "k": k,
            "dtype": str(dtype).removeprefix("torch."),
            "features": dict(zip(FEATURE_NAMES, map(float, features), strict=True)), "analysis_ms": analysis_ms,
            "cusparse": _cusparse(crow, col, values, b, n, k, reference, device, time_s, repeats),
            "default": default.to_json(), "by_value": twin.to_json() if twin is not None else None,
            "mlp": mlp.to_json() if mlp is not None else None, "schemes": [], "truncated": False,
        }
        protected = [default, *(s for s in (twin, mlp) if s is not None), *also]
        sample = [t for s in schemes for t in (s, _by_value(s))] if by_value == "all" else list(schemes)
        seen: set[str] = set()
        measured: dict[tuple, dict[str, Any]] = {}
        for schedule in [*protected, *sample]:
            key = schedule.to_json()
            if key in seen:
                continue
            if clock() > k_deadline:
                record["truncated"] = True
                break
            seen.add(key)
            entry: dict[str, Any] = {"schedule": key}
            reason = None
            if prune is not None and schedule not in protected:
                for ratios in earlier:
                    if ratios.get(key, 0.0) > prune:
                        reason = f"over {prune:g}x the best (or pruned) at a smaller k"
                if reason is None and family_pruning is not None:
                    reason = family_pruning.reason(family, k, key)
            if reason is not None:
                record["schemes"].append({**entry, "status": "pruned", "error": reason})
                continue
            try:
                host_ms = 0.0
                if schedule not in solve_plans:
                    solve_plans[schedule], host_ms = _host_ms(
                        lambda s=schedule: host.solve_plan(s, target, transforms), torch.device("cpu"))
                solve_plan = solve_plans[schedule]
                identity = _plan_identity(schedule, solve_plan)
                if identity in measured:
                    same = measured[identity]
                    record["schemes"].append({**entry, **{f: same[f] for f in ("status", "median_ms", "repeats",
                                                                              "launches") if f in same},
                                              "same_plan_as": same["schedule"], "plan_ms": host_ms})
                    continue
                if solve_plan.num_kernels > max_launches:
                    record["schemes"].append({**entry, "status": "skipped", "launches": solve_plan.num_kernels,
                                              "error": f"{solve_plan.num_kernels} launches > {max_launches}"})
                    continue
                solve, facts = prepare(plans, task, schedule, target, values, b, solve_plan)
                facts["plan_ms"] = facts.get("plan_ms", 0.0) + host_ms
                entry.update(facts)
            except Exception as exc:  # noqa: BLE001
                record["schemes"].append({**entry, "status": "failed", "error": f"{type(exc).__name__}: {exc}"})
                continue
            entry.update(_measure(solve, reference, dtype, device, time_s, slow_ms, repeats))
            del solve
            if entry["status"] == "ok":
                measured[identity] = entry
            record["schemes"].append(entry)
        earlier.append(_ratios(record))
        records.append(record)
    return records


# ---------------------------------------------------------------------- the summary


def _geomean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def summary(records: list[dict[str, Any]], lofo: bool = True) -> str:
    """Markdown: per record, cuSPARSE's solve over the best scheme measured and over the
    default, the MLP's pick (``--selector``) and, with ``lofo``, the leave-one-family-out
    MLP over the best (:func:`.sptrsv_selector.leave_one_family_out`, per ``k``)."""
    loo: dict[int, float] = {}
    if lofo and records:
        from .sptrsv_selector import leave_one_family_out

        # The schemes every record reached: the sweep's set, less what a truncated record missed.
        common = set.intersection(*({e["schedule"] for e in r["schemes"]} for r in records))
        schemes = [SptrsvSchedule.from_json(key) for key in sorted(common)]
        if len(schemes) >= 2:
            judged = leave_one_family_out(records, schemes=schemes, epochs=300, include_truncated=True)
            loo = {i: j.ratio for i, j in judged.items()}
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


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a ``sweep.jsonl`` (``.gz``: gzip-compressed)."""
    import gzip

    path = Path(path)
    text = gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(triangular.FAMILIES))
    parser.add_argument("--rows", default="1000000", help="N, LO-HI, and FAMILY=N or FAMILY=LO-HI, comma-separated")
    parser.add_argument("--seeds", default="0", help="comma-separated generator seeds and LO-HI runs")
    parser.add_argument("--rhs", default="1", help="comma-separated numbers of right-hand sides")
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--schemes", default="selection", help="'selection', 'all' or a sample size of the reduced space")
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=420.0, help="wall-clock seconds for the whole sweep")
    parser.add_argument("--share", type=float, default=2.0,
                        help="a factor may use this many times the budget left over the factors left")
    parser.add_argument("--time-s", type=float, default=0.15, help="seconds of timed calls per scheme")
    parser.add_argument("--repeats", type=int, help="timed calls per scheme right after the checked one, no warm-up")
    parser.add_argument("--slow-ms", type=float, default=200.0, help="a slower checked solve is timed once")
    parser.add_argument("--max-launches", type=int, default=20_000, help="skip schemes with more launches")
    parser.add_argument("--prune", type=float, help="leave out schemes this many times the best (module docstring)")
    parser.add_argument("--prune-after", type=int, default=2, help="a family's factors measured in full first")
    parser.add_argument("--selector", help="a SelectorSet file: its pick is measured too (default: the shipped one)")
    parser.add_argument("--by-value", default="default", choices=("none", "default", "all"),
                        help="which schemes are also measured with ready_by_value flipped")
    parser.add_argument("--also", action="append", default=[], metavar="SCHEME_JSON",
                        help="a scheme (SptrsvSchedule JSON) measured on every factor; repeatable")
    parser.add_argument("--no-lofo", action="store_true", help="no leave-one-family-out fit in summary.md")
    parser.add_argument("--summarize", action="store_true", help="only rebuild summary.md from sweep.jsonl")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    start = time.monotonic()
    out = Path(args.out)
    try:
        schemes = scheme_set(args.schemes, args.sample_seed)
        specs = matrix_specs(args.families.split(","), parse_rows(args.rows), parse_seeds(args.seeds))
    except ValueError as exc:
        parser.error(str(exc))
    rhs = [int(v) for v in args.rhs.split(",")]
    out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        text = summary(read_records(out / "sweep.jsonl"), lofo=not args.no_lofo)
        (out / "summary.md").write_text(text)
        print(text)
        return 0
    if not torch.cuda.is_available():
        parser.error("the sweep needs a CUDA GPU")
    os.environ.setdefault("GSPARSE_CACHE_DIR", tempfile.mkdtemp(prefix="gsparse-sptrsv-sweep-"))
    device = torch.device("cuda", torch.cuda.current_device())
    target = Target.of(device)
    from ..kernels.sptrsv.selector import default_selectors, load_selectors

    selectors = load_selectors(args.selector) if args.selector else default_selectors()
    also = tuple(SptrsvSchedule.from_json(text).validate() for text in args.also)
    pruning = FamilyPruning(args.prune, args.prune_after) if args.prune is not None else None
    jsonl = out / "sweep.jsonl"
    jsonl.write_text("")
    records, spent = [], []
    for i, (family, rows, seed) in enumerate(specs):
        left = args.budget_s - (time.monotonic() - start)
        if left <= 0 or (spent and left < 0.5 * float(np.mean(spent))):
            print(f"budget spent: {family}:{rows}:{seed} and {len(specs) - i - 1} later factors not swept", flush=True)
            break
        begun = time.monotonic()
        deadline = begun + min(left, args.share * left / (len(specs) - i))
        matrix = triangular.generate(family, rows, seed)
        done = sweep_matrix(f"{family}:{rows}:{seed}", matrix, rhs, getattr(torch, args.dtype), device, schemes,
                            target, deadline=deadline, time_s=args.time_s, repeats=args.repeats,
                            slow_ms=args.slow_ms, max_launches=args.max_launches, selectors=selectors,
                            by_value=args.by_value, also=also, prune=args.prune, family_pruning=pruning)
        spent.append(time.monotonic() - begun)
        for record in done:
            record["elapsed_s"] = time.monotonic() - start
            records.append(record)
            if pruning is not None:
                pruning.add(family, record)
            with jsonl.open("a") as f:
                f.write(json.dumps(record) + "\n")
            times = _times(record)
            print(json.dumps({"matrix": record["matrix"], "k": record["k"], "levels": record["levels"],
                              "cusparse_ms": record["cusparse"].get("median_ms"),
                              "default_ms": times.get(record["default"]),
                              "best_ms": min(times.values(), default=None),
                              "measured": sum(e["status"] != "pruned" and "same_plan_as" not in e
                                              for e in record["schemes"]),
                              "pruned": sum(e["status"] == "pruned" for e in record["schemes"]),
                              "truncated": record["truncated"], "elapsed_s": round(record["elapsed_s"], 1)}),
                  flush=True)
        del matrix
    text = summary(records, lofo=not args.no_lofo)
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
