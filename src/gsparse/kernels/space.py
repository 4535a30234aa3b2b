"""A search space: the valid schedules worth measuring for one task on one graph and target.

Each operator's ``space`` module builds one (pruned by construction to shapes that can
win); the sweep measures all of it, the tuner searches it. Every candidate is valid for
the task it was built for: the validity rules live in the schedule classes and the
operator's space, nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .schedule import Schedule

__all__ = ["Space"]


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
