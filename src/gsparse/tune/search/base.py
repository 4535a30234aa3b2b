"""The search strategy interface: an ask/tell loop over one search space.

``propose(k)`` asks for up to ``k`` schedules to measure, never one proposed or observed
before; an empty list means the strategy is done. ``observe(results)`` tells it what they
measured (failures included, as results with an error). Results of earlier runs (from the
database) may be observed before the first proposal: they are then never proposed again.

A strategy may use a *scorer*: a function from schedules to predicted costs (lower is
faster), usually a cost model over features (:func:`model_scorer`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Protocol

import numpy as np

from ..interfaces import CostModel, RunResult, S, SearchSpace
from ..space import SpaceIndex, index

Scorer = Callable[[Sequence[S]], np.ndarray]
"""A function from ``n`` schedules to their ``[n]`` predicted costs (lower is faster)."""


class SearchStrategy(Protocol[S]):
    """Proposes schedules of one space to measure and learns from their results (see the
    module docstring)."""

    def propose(self, k: int) -> list[S]:
        """Up to ``k`` schedules never proposed nor observed before; ``[]`` when done."""
        ...

    def observe(self, results: Sequence[RunResult[S]]) -> None:
        """Take in measured results (failures included); their schedules are not proposed again."""
        ...


def model_scorer(model: CostModel, featurize: Callable[[Sequence[S]], np.ndarray]) -> Scorer:
    """A scorer that predicts with ``model`` on ``featurize(schedules)`` (``[n, d]``)."""

    def score(schedules: Sequence[S]) -> np.ndarray:
        return np.asarray(model.predict(featurize(schedules)), dtype=np.float64)

    return score


def scores(scorer: Scorer, schedules: Sequence[S]) -> np.ndarray:
    """``scorer(schedules)`` as float64 ``[len(schedules)]``, or ValueError saying what it gave."""
    predicted = np.asarray(scorer(schedules), dtype=np.float64)
    if predicted.shape != (len(schedules),):
        raise ValueError(f"the scorer must return one cost per schedule, shape ({len(schedules)},); "
                         f"got {predicted.shape}")
    return predicted


class StrategyBase(Generic[S]):
    """What every strategy keeps: the space's index, what was proposed, what was measured.

    ``seen[i]`` is True once candidate ``i`` was proposed or observed; :meth:`claim` hands
    out only unseen schedules, which is how no schedule is measured twice.
    """

    def __init__(self, space: SearchSpace[S]) -> None:
        self.index: SpaceIndex[S] = index(space)
        self.seen = np.zeros(len(self.index), bool)
        self.results: dict[S, RunResult[S]] = {}

    def observe(self, results: Sequence[RunResult[S]]) -> None:
        """Record ``results`` and mark their schedules seen."""
        for result in results:
            self.results[result.schedule] = result
            if result.schedule in self.index:
                self.seen[self.index.position(result.schedule)] = True

    def claim(self, schedules: Sequence[S]) -> list[S]:
        """The schedules of ``schedules`` not seen yet (in order, once each), now seen."""
        fresh = []
        for s in schedules:
            i = self.index.position(s)
            if not self.seen[i]:
                self.seen[i] = True
                fresh.append(s)
        return fresh

    def unseen(self) -> list[S]:
        """Candidates never proposed nor observed, in the space's order."""
        candidates = self.index.candidates()
        return [candidates[i] for i in np.flatnonzero(~self.seen)]

    def best(self) -> RunResult[S] | None:
        """The fastest successful result observed so far (None if none succeeded)."""
        ok = [r for r in self.results.values() if r.ok]
        return min(ok, key=lambda r: r.time_ms) if ok else None
