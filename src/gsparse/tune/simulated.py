"""A runner that measures nothing: times come from a function of the schedule (for tests)."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import Generic

import numpy as np

from .builder import describe
from .interfaces import BuildResult, RunResult, S


class SimulatedRunner(Generic[S]):
    """Times each built schedule as ``time_fn(schedule) * exp(noise * z)``, ``z ~ N(0, 1)``.

    Args:
        time_fn: the noiseless time of a schedule in milliseconds (> 0). An exception from
            it is recorded as the schedule's error.
        noise: standard deviation of the multiplicative log-normal noise of each repeat.
        repeats: times per schedule.
        fail: schedules that fail to run: a collection of them (error ``"injected failure"``)
            or a function returning an error string, or None for a success.
        seed: seed of the noise.

    Every schedule it ran is appended to ``measured``, so a test can check that
    nothing was measured twice.
    """

    def __init__(
        self,
        time_fn: Callable[[S], float],
        *,
        noise: float = 0.0,
        repeats: int = 3,
        fail: Collection[S] | Callable[[S], str | None] | None = None,
        seed: int = 0,
    ) -> None:
        if noise < 0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        if repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        self.time_fn = time_fn
        self.noise = noise
        self.repeats = repeats
        if fail is None or callable(fail):
            self._fail = fail
        else:
            failing = frozenset(fail)
            self._fail = lambda s: "injected failure" if s in failing else None
        self._rng = np.random.default_rng(seed)
        self.measured: list[S] = []

    def run(self, builds: Sequence[BuildResult[S]]) -> list[RunResult[S]]:
        """One simulated result per build, in order: ``repeats`` noisy times, or the injected error."""
        return [self._run_one(b) for b in builds]

    def _run_one(self, build: BuildResult[S]) -> RunResult[S]:
        if not build.ok:
            return RunResult(build.schedule, error=f"not built: {build.error}")
        self.measured.append(build.schedule)
        try:
            if self._fail is not None and (error := self._fail(build.schedule)):
                return RunResult(build.schedule, error=error)
            base = float(self.time_fn(build.schedule))
            if not (math.isfinite(base) and base > 0):
                raise ValueError(f"time_fn gave {base} ms, expected a finite time > 0")
        except Exception as error:  # a failure is a record, never a stop
            return RunResult(build.schedule, error=describe(error))
        factors = np.exp(self.noise * self._rng.standard_normal(self.repeats))
        return RunResult(build.schedule, times_ms=tuple(base * factors))
