"""The tuning loop: a strategy proposes, the builder builds, the runner measures, the
database remembers, until the budget is spent or the strategy has nothing left; then,
optionally, the finalists are measured again side by side."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, Generic

import numpy as np

from .database import Sample, TuningDatabase, TuningKey
from .interfaces import Builder, BuildResult, Runner, RunResult, S, SearchSpace
from .search.base import SearchStrategy

CONFIRM_FINALISTS = 4
"""How many finalists gsparse's tuners measure again (:func:`tune`'s ``confirm``): the
``"tune"`` policy of g-SpMM and g-SDDMM and ``TriangularSolver.tune``. On held-out graphs a
candidate timed once during the search was 15% off its time in a sweep (a g-SDDMM cell of
run 6, ``docs/performance.md``), enough to choose the wrong one."""
CONFIRM_MARGIN = 1.10
"""Schedules measured within this factor of the fastest are finalists: a ranking that close
can be a measurement's noise, one further apart is not worth the confirmation's time."""
CONFIRM_ROUNDS = 3
"""Rounds of a confirmation: each measures every finalist once, in a rotated order."""


@dataclasses.dataclass(frozen=True)
class TuneResult(Generic[S]):
    """What one call of :func:`tune` found.

    Attributes:
        best: the fastest schedule measured for the key, in this call or before it (None
            when every candidate failed).
        time_ms: its median time (``inf`` when ``best`` is None).
        results: the results of this call, in measurement order (failures included).
        reused: results of earlier calls read from the database and not measured again.
        confirmed: the finalists' results when they were measured again side by side (see
            :func:`tune`'s ``confirm``), each with the times of every round; empty otherwise.
    """

    best: S | None
    time_ms: float
    results: tuple[RunResult[S], ...]
    reused: tuple[RunResult[S], ...] = ()
    confirmed: tuple[RunResult[S], ...] = ()

    @property
    def measured(self) -> int:
        """How many schedules this call measured (failures included)."""
        return len(self.results)

    @property
    def failed(self) -> int:
        """How many of them failed to build or run."""
        return sum(not r.ok for r in self.results)


def tune(
    space: SearchSpace[S],
    strategy: SearchStrategy[S],
    builder: Builder[S],
    runner: Runner[S],
    database: TuningDatabase,
    key: TuningKey,
    budget: int,
    *,
    featurize: Callable[[Sequence[S]], np.ndarray] | None = None,
    batch: int = 16,
    reuse: bool = True,
    progress: bool | None = None,
    confirm: int = 0,
) -> TuneResult[S]:
    """Measure up to ``budget`` new schedules of ``space`` and return the fastest.

    Each round asks ``strategy`` for up to ``batch`` schedules, builds them, runs the ones
    that built, records every outcome in ``database`` under ``key`` (a build failure as a
    sample with its error) and tells ``strategy``. The search never measures a schedule twice:
    with ``reuse`` the samples already in the database for ``key`` are told to the strategy
    first, so they are neither measured again nor counted in the budget.

    Args:
        space: the search space the strategy searches (its classes decode stored samples).
        featurize: features ``[n, d]`` of schedules, stored with each sample for retraining.
        batch: most schedules built and run per round.
        reuse: read earlier samples of ``key`` from the database first.
        progress: show a progress bar on stderr; None shows it only when stderr is a terminal.
        confirm: after the search, measure again the up to ``confirm`` fastest schedules
            within ``CONFIRM_MARGIN`` (10%) of the fastest, ``CONFIRM_ROUNDS`` (3) rounds in
            turn, and return (and record as the key's best) the one with the lowest median
            over those rounds. Each candidate was first timed once, at its own moment of the
            search (the GPU's clocks and the L2 differ from one moment to the next), so two
            candidates a few percent apart may swap; side by side they are compared under the
            same conditions. 0 or 1: no confirmation, and no schedule is measured twice.
    """
    if confirm < 0:
        raise ValueError(f"confirm must be >= 0, got {confirm}")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    classes = {type(s) for s in space.candidates()}
    reused = tuple(_previous(database, key, classes)) if reuse else ()
    if reused:
        strategy.observe(reused)
    done: set[S] = {r.schedule for r in reused}
    results: list[RunResult[S]] = []
    bar = _Progress(budget, key.operator, progress)
    try:
        while len(results) < budget:
            proposed = [s for s in strategy.propose(min(batch, budget - len(results))) if s not in done]
            if not proposed:
                break
            done.update(proposed)
            round_results = _measure(proposed, builder, runner)
            features = _features(featurize, proposed) if featurize is not None else None
            for i, result in enumerate(round_results):
                database.commit_sample(key, result.schedule, times_ms=result.times_ms, error=result.error,
                                       features=None if features is None else features[i])
            strategy.observe(round_results)
            results += round_results
            bar.update(len(round_results), _fastest([*reused, *results]))
    finally:
        bar.close()
    best = _fastest([*reused, *results])
    confirmed: tuple[RunResult[S], ...] = ()
    finalists = _finalists([*reused, *results], confirm)
    if len(finalists) > 1:
        confirmed = _confirm(finalists, runner)
        ok = [r for r in confirmed if r.ok]
        if ok:
            database.commit_confirmation(key, [(r.schedule, r.times_ms) for r in ok])
            best = min(ok, key=lambda r: r.time_ms)
    return TuneResult(best.schedule if best else None, best.time_ms if best else math.inf,
                      tuple(results), reused, confirmed)


def _finalists(results: Sequence[RunResult[S]], most: int) -> list[S]:
    """The up to ``most`` fastest successful schedules within CONFIRM_MARGIN of the fastest."""
    ok = sorted((r for r in results if r.ok), key=lambda r: r.time_ms)
    if most < 2 or not ok:
        return []
    return [r.schedule for r in ok[:most] if r.time_ms <= CONFIRM_MARGIN * ok[0].time_ms]


def _confirm(finalists: list[S], runner: Runner[S]) -> list[RunResult[S]]:
    """Each finalist's times over CONFIRM_ROUNDS rounds, in turn with the others (a failure
    in any round makes it a failed result)."""
    times: dict[S, list[float]] = {s: [] for s in finalists}
    errors: dict[S, str] = {}
    for round_ in range(CONFIRM_ROUNDS):
        shift = round_ % len(finalists)
        for schedule in finalists[shift:] + finalists[:shift]:
            if schedule in errors:
                continue
            [result] = runner.run([BuildResult(schedule)])
            if result.schedule != schedule:
                raise RuntimeError("the runner must return one result per successful build, in order")
            if result.ok:
                times[schedule] += result.times_ms
            else:
                errors[schedule] = result.error or "failed"
    return [RunResult(s, error=f"confirmation failed: {errors[s]}") if s in errors else RunResult(s, tuple(times[s]))
            for s in finalists]


def _measure(schedules: list[S], builder: Builder[S], runner: Runner[S]) -> list[RunResult[S]]:
    """Results of ``schedules`` in their order; a build failure is a failed result."""
    builds = builder.build(schedules)
    if [b.schedule for b in builds] != schedules:
        raise RuntimeError("the builder must return one result per schedule, in order")
    built = [b for b in builds if b.ok]
    runs = iter(runner.run(built))
    results = []
    for b in builds:
        result = next(runs, None) if b.ok else RunResult(b.schedule, error=f"build failed: {b.error}")
        if result is None or result.schedule != b.schedule:
            raise RuntimeError("the runner must return one result per successful build, in order")
        results.append(result)
    return results


def _features(featurize: Callable[[Sequence[S]], np.ndarray], schedules: list[S]) -> np.ndarray:
    features = np.asarray(featurize(schedules), dtype=np.float64)
    if features.ndim != 2 or features.shape[0] != len(schedules):
        raise ValueError(f"featurize must return [n, d] features for n = {len(schedules)} schedules, "
                         f"got shape {features.shape}")
    return features


def _previous(database: TuningDatabase, key: TuningKey, classes: set[type]) -> list[RunResult[Any]]:
    """The samples of ``key`` whose schedule class is in the space and whose JSON still
    decodes, as results (the last sample of a schedule wins)."""
    names = {c.__name__ for c in classes}
    latest: dict[Any, Sample] = {}
    for sample in database.samples(key):
        if sample.schedule_class not in names:
            continue
        try:
            latest[sample.schedule(classes)] = sample
        except (ValueError, TypeError):  # knobs this version no longer reads: measure afresh
            continue
    return [RunResult(s, times_ms=sample.times_ms, error=sample.error) for s, sample in latest.items()]


def _fastest(results: Sequence[RunResult[S]]) -> RunResult[S] | None:
    ok = [r for r in results if r.ok]
    return min(ok, key=lambda r: r.time_ms) if ok else None


class _Progress:
    """A tqdm bar when tqdm is installed, else one rewritten line; nothing when not shown."""

    def __init__(self, total: int, label: str, show: bool | None) -> None:
        self.shown = sys.stderr.isatty() if show is None else show
        self.total, self.label, self.count = total, label, 0
        self._bar = None
        if self.shown:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self._bar = tqdm(total=total, desc=f"tuning {label}", unit="schedule", file=sys.stderr)

    def update(self, n: int, best: RunResult | None) -> None:
        self.count += n
        if not self.shown:
            return
        text = f"best {best.time_ms:.4g} ms" if best else "no success yet"
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)
            self._bar.update(n)
        else:
            sys.stderr.write(f"\rtuning {self.label}: {self.count}/{self.total} measured, {text}")
            sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.shown and self.count:
            sys.stderr.write("\n")
