"""Toy schedules, spaces and time landscapes for the tuner's tests.

``Toy`` is a schedule skeleton with four knobs; ``Other`` a second skeleton. The known
landscape :func:`toy_time` has its single optimum at ``Toy(6, 3, True, 4)`` and is smooth
in every knob, the shape a search can climb. :func:`ranking_corpus` makes a training set
for cost models: many graphs (groups) whose fastest schedule depends on the graph.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class Toy:
    a: int = 0
    b: int = 0
    c: bool = False
    d: int = 1

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Toy:
        return cls(**json.loads(text))


@dataclasses.dataclass(frozen=True)
class Other:
    """A second skeleton, sharing the knob name ``a`` with :class:`Toy`."""

    a: int = 0
    lanes: int = 32

    def __post_init__(self) -> None:
        if self.lanes not in (8, 16, 32):
            raise ValueError(f"lanes must be 8, 16 or 32, got {self.lanes}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Other:
        return cls(**json.loads(text))


def toy_candidates() -> list[Toy]:
    """940 valid Toy schedules: a, b in 0..9 with a + b <= 15, c, d in 1..16 (powers of 2)."""
    return [Toy(a, b, c, d) for a in range(10) for b in range(10) for c in (False, True)
            for d in (1, 2, 4, 8, 16) if a + b <= 15]


TOY_OPTIMUM = Toy(6, 3, True, 4)


def toy_time(s: Toy) -> float:
    """Milliseconds: 1 at the optimum, growing smoothly away from it in every knob."""
    return (1.0 + 0.05 * (s.a - 6) ** 2 + 0.05 * (s.b - 3) ** 2 + (0.0 if s.c else 0.3)
            + 0.2 * abs(math.log2(s.d) - 2))


def ranking_corpus(graphs: int, schedules: int, seed: int, noise: float = 0.03):
    """``(features [n, 7], times_ms [n], groups [n])`` of ``graphs`` synthetic graphs.

    Each graph has statistics (rows, mean degree, degree COV, feature length); each of its
    ``schedules`` random schedules has three knobs. The time is the graph's scale times a
    bowl around an optimum that moves with the graph (so a model must learn interactions),
    times log-normal noise. Features: the 4 statistics then the 3 knobs.
    """
    rng = np.random.default_rng(seed)
    rows_ = 10 ** rng.uniform(3, 7, graphs)
    degree = 10 ** rng.uniform(0, 3, graphs)
    cov = rng.uniform(0.0, 3.0, graphs)
    width = rng.integers(1, 513, graphs)
    features, times, groups = [], [], []
    for g in range(graphs):
        lanes = 2 ** rng.integers(0, 6, schedules)            # 1 .. 32
        vector = 2 ** rng.integers(0, 4, schedules)           # 1 .. 8
        balanced = rng.integers(0, 2, schedules)
        best_lanes = np.clip(np.log2(width[g]) - 2, 0, 5)     # wider features: more lanes
        best_vector = np.clip(3 - np.log10(degree[g]), 0, 3)  # long rows: narrower vectors
        bowl = (0.25 * (np.log2(lanes) - best_lanes) ** 2 + 0.3 * (np.log2(vector) - best_vector) ** 2
                + 0.5 * (balanced != (cov[g] > 1.0)))
        scale = rows_[g] * degree[g] * width[g] * 1e-9
        times.append(scale * np.exp(bowl + noise * rng.standard_normal(schedules)))
        stats = np.tile([rows_[g], degree[g], cov[g], width[g]], (schedules, 1))
        features.append(np.column_stack([stats, lanes, vector, balanced]))
        groups.append(np.full(schedules, g))
    return np.concatenate(features), np.concatenate(times), np.concatenate(groups)
