"""A search space: the valid schedules worth measuring for one task on one graph and target.

Each operator's ``space`` module builds one (pruned by construction to shapes that can
win); the sweep measures all of it, the tuner searches it. Every candidate is valid for
the task it was built for: the validity rules live in the schedule classes and the
operator's space, nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from .schedule import Schedule

__all__ = ["KnobCandidates", "Space", "with_row"]

Facts = TypeVar("Facts")


@dataclass(frozen=True)
class Space:
    """The candidates of a space, in a fixed order, without duplicates (a
    :class:`gsparse.tune.SearchSpace`)."""

    schedules: tuple[Schedule, ...]

    def __init__(self, schedules: Sequence[Schedule]) -> None:
        object.__setattr__(self, "schedules", tuple(dict.fromkeys(schedules)))

    def __len__(self) -> int:
        return len(self.schedules)

    def __iter__(self) -> Iterator[Schedule]:
        return iter(self.schedules)

    def __contains__(self, schedule: object) -> bool:
        return schedule in self.schedules

    def candidates(self) -> tuple[Schedule, ...]:
        """Every schedule of the space, in its fixed order."""
        return self.schedules

    def skeletons(self) -> list[type[Schedule]]:
        """The schedule classes present, in order of first appearance."""
        return list(dict.fromkeys(type(s) for s in self.schedules))

    def domain(self, cls: type[Schedule], knob: str) -> tuple:
        """The values ``knob`` takes among the candidates of class ``cls``, sorted."""
        return tuple(sorted({getattr(s, knob) for s in self.schedules if type(s) is cls}))


@dataclass(frozen=True, eq=False)
class KnobCandidates(Generic[Facts]):
    """A task's candidates as rows of knobs (an operator's ``knob_table``), the row of the
    hand rule's pick among them, and the operator's facts of them that no graph changes
    (kept with the table: every new graph of the task, every mini-batch block under the
    model policy, asks for them again)."""

    table: np.ndarray
    default: int
    facts: Facts


def with_row(table: np.ndarray, row: tuple) -> tuple[np.ndarray, int]:
    """``table`` (rows of knobs) with ``row`` appended where it lacks it, and where ``row``
    is in it: the hand rule's pick is always a candidate, so a search never starts behind
    it."""
    found = (table == row).all(axis=1).nonzero()[0]
    if len(found):
        return table, int(found[0])
    return np.concatenate([table, np.asarray([row], dtype=table.dtype)]), len(table)
