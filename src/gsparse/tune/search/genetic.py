"""G-Sparse's genetic search, as an ask/tell strategy.

Generation 0 is the cost model's ``population`` best-predicted candidates (random ones
without a model), after the best schedules already measured. Each later generation keeps
the ``elite`` fastest members and breeds the rest: two parents drawn by roulette on their
measured speed, ``fitness = (best time / time) ** selection_pressure`` (at the default
pressure 1, G-Sparse's Eq. 3: ``1 / time``; a failure has fitness 0), a uniform
crossover, then each knob mutated with probability ``mutation_rate``. A child that
is invalid, already measured or already bred is moved to the nearest valid candidate that
is neither (:meth:`SpaceIndex.nearest`), so every proposal is new. With the defaults
(16, 6, 3 generations) that is at most 16 + 3 * 10 = 46 measurements.
"""

from __future__ import annotations

import math

import numpy as np

from ..interfaces import S, SearchSpace, knobs
from ..space import crossover, mutate
from .base import Scorer, StrategyBase, scores


class GeneticSearch(StrategyBase[S]):
    """Genetic search over a space, seeded by a scorer's top candidates.

    Args:
        space: the (pruned) search space.
        population: schedules per generation (G-Sparse: 16).
        elite: fastest members kept unchanged into the next generation (G-Sparse: 6).
        generations: generations bred after the first (G-Sparse: 3); then the search is done.
        mutation_rate: probability that a child's knob is re-drawn (G-Sparse: 0.2).
        selection_pressure: exponent of the relative speed in the roulette weights. 1 is
            G-Sparse's ``1 / time``; where times differ by less than a few times, parents
            are then drawn almost uniformly, and a larger exponent favours the fastest.
        scorer: predicted cost of schedules (lower is faster): the first generation is its
            ``population`` best-predicted candidates. Without one, a uniform random sample.
        screen: children bred per free slot of a generation; with a scorer, the
            best-predicted ``population - elite`` of them are measured. 1 (G-Sparse) breeds
            exactly the slots.
        seed: seed of every random choice; the same seed gives the same proposals.
    """

    def __init__(
        self,
        space: SearchSpace[S],
        *,
        population: int = 16,
        elite: int = 6,
        generations: int = 3,
        mutation_rate: float = 0.2,
        selection_pressure: float = 1.0,
        scorer: Scorer | None = None,
        screen: int = 1,
        seed: int = 0,
    ) -> None:
        super().__init__(space)
        if population < 2:
            raise ValueError(f"population must be >= 2, got {population}")
        if not 0 <= elite < population:
            raise ValueError(f"elite must be in [0, population={population}), got {elite}")
        if generations < 0:
            raise ValueError(f"generations must be >= 0, got {generations}")
        if not 0.0 <= mutation_rate <= 1.0:
            raise ValueError(f"mutation_rate must be in [0, 1], got {mutation_rate}")
        if selection_pressure < 0:
            raise ValueError(f"selection_pressure must be >= 0, got {selection_pressure}")
        if screen < 1:
            raise ValueError(f"screen must be >= 1, got {screen}")
        self.population = population
        self.elite = elite
        self.generations = generations
        self.mutation_rate = mutation_rate
        self.selection_pressure = selection_pressure
        self.scorer = scorer
        self.screen = screen
        self.generation = -1  # the generation being measured; -1 before the first
        self._rng = np.random.default_rng(seed)
        self._members: list[S] = []
        self._pending: list[S] = []

    def propose(self, k: int) -> list[S]:
        """Up to ``k`` schedules never proposed nor observed before; ``[]`` when done."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        while not self._pending and self._can_advance():
            members = self._first() if self.generation < 0 else self._breed()
            self.generation += 1
            self._members = members
            self._pending = self.claim([m for m in members if m not in self.results])
        picked, self._pending = self._pending[:k], self._pending[k:]
        return picked

    def _can_advance(self) -> bool:
        if self.generation >= self.generations or self.seen.all():
            return False
        return all(m in self.results for m in self._members)

    def _first(self) -> list[S]:
        measured = sorted((r for r in self.results.values() if r.ok and r.schedule in self.index),
                          key=lambda r: r.time_ms)
        members = [r.schedule for r in measured[: self.population]]
        unseen = self.unseen()
        need = min(self.population - len(members), len(unseen))
        if self.scorer is not None:
            order = np.argsort(scores(self.scorer, unseen), kind="stable")[:need]
        else:
            order = self._rng.choice(len(unseen), size=need, replace=False)
        return members + [unseen[i] for i in order]

    def _breed(self) -> list[S]:
        members = self._members
        times = np.array([self.results[m].time_ms for m in members])
        ranked = np.argsort(times, kind="stable")
        elite = [members[i] for i in ranked[: self.elite] if math.isfinite(times[i])]
        need = self.population - len(elite)
        ok = np.isfinite(times)
        fitness = np.zeros(len(times))
        fitness[ok] = (times[ok].min() / times[ok]) ** self.selection_pressure
        excluded = self.seen.copy()
        children: list[S] = []
        for _ in range(need * self.screen):
            a, b = self._parents(fitness)
            child = crossover(self.index, members[a], members[b], self._rng)
            child = mutate(self.index, child, self._rng, self.mutation_rate)
            if child not in self.index or excluded[self.index.position(child)]:
                values = {name: getattr(child, name) for name in knobs(type(child))}
                child = self.index.nearest(type(child), values, excluded)
                if child is None:
                    break
            excluded[self.index.position(child)] = True
            children.append(child)
        if self.scorer is not None and len(children) > need:
            keep = np.sort(np.argsort(scores(self.scorer, children), kind="stable")[:need])
            children = [children[i] for i in keep]
        return elite + children[:need]

    def _parents(self, fitness: np.ndarray) -> tuple[int, int]:
        """Two members drawn by roulette on ``fitness``, distinct when there are two."""
        weights = fitness if fitness.sum() > 0 else np.ones_like(fitness)
        a = int(self._rng.choice(len(weights), p=weights / weights.sum()))
        rest = weights.copy()
        rest[a] = 0.0
        if rest.sum() == 0:
            rest = np.ones_like(rest)
            rest[a] = 0.0 if len(rest) > 1 else 1.0
        b = int(self._rng.choice(len(rest), p=rest / rest.sum()))
        return a, b
