"""Random sampling of the pruned space: G-Sparse's fast mode."""

from __future__ import annotations

import numpy as np

from ..interfaces import S, SearchSpace
from .base import Scorer, StrategyBase, scores


class RandomSampling(StrategyBase[S]):
    """Proposes candidates in a random order, without repeats, until the space is spent.

    G-Sparse measures three random candidates of the pruned space and keeps the fastest;
    here the budget of the tuning loop says how many.

    Args:
        space: the (pruned) search space.
        seed: seed of the order.
        scorer: optional predicted cost of schedules; with ``pool``, only the ``pool``
            candidates of lowest predicted cost are sampled (then the rest, in random order).
        pool: how many of the best-predicted candidates to sample first; needs ``scorer``.
    """

    def __init__(
        self,
        space: SearchSpace[S],
        *,
        seed: int = 0,
        scorer: Scorer | None = None,
        pool: int | None = None,
    ) -> None:
        super().__init__(space)
        if pool is not None and (scorer is None or pool < 1):
            raise ValueError(f"pool must be None, or >= 1 with a scorer; got pool={pool} "
                             f"and {'a' if scorer else 'no'} scorer")
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(self.index))
        if pool is not None:
            predicted = scores(scorer, self.index.candidates())
            ranked = np.argsort(predicted, kind="stable")
            first = rng.permutation(ranked[:pool])
            order = np.concatenate([first, rng.permutation(ranked[pool:])])
        self._order = order
        self._next = 0

    def propose(self, k: int) -> list[S]:
        """Up to ``k`` schedules never proposed nor observed before; ``[]`` when done."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        candidates = self.index.candidates()
        picked: list[S] = []
        while len(picked) < k and self._next < len(self._order):
            i = self._order[self._next]
            self._next += 1
            picked += self.claim([candidates[i]])
        return picked
