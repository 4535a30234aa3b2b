"""A builder that runs a build function over many schedules in parallel threads."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic

from .interfaces import BuildResult, S


def describe(error: BaseException) -> str:
    """``"TypeName: message"``, the error string of a failed build or run."""
    return f"{type(error).__name__}: {error}"


class ParallelBuilder(Generic[S]):
    """Builds schedules with ``build_fn(schedule) -> artifact`` on ``workers`` threads.

    An exception from ``build_fn`` becomes a :class:`BuildResult` with its error string;
    the other schedules still build. Threads run in parallel as far as ``build_fn``
    releases the GIL (NVRTC's compile does).

    Args:
        build_fn: builds one schedule and returns what the runner needs to run it.
        workers: threads; ``None`` for one per CPU core.
    """

    def __init__(self, build_fn: Callable[[S], Any], workers: int | None = None) -> None:
        if not callable(build_fn):
            raise TypeError(f"build_fn must be callable, got {type(build_fn).__name__}")
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1 or None, got {workers}")
        self.build_fn = build_fn
        self.workers = workers or os.cpu_count() or 1

    def build(self, schedules: Sequence[S]) -> list[BuildResult[S]]:
        """``build_fn`` of each schedule, on ``workers`` threads: one result per schedule, in
        order, an exception becoming a result with its error."""
        if len(schedules) <= 1 or self.workers == 1:
            return [self._build_one(s) for s in schedules]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(schedules))) as pool:
            return list(pool.map(self._build_one, schedules))

    def _build_one(self, schedule: S) -> BuildResult[S]:
        try:
            return BuildResult(schedule, artifact=self.build_fn(schedule))
        except Exception as error:  # a failure is a record, never a stop
            return BuildResult(schedule, error=describe(error))
