"""Generic operators on a search space: sample, mutate, crossover and repair.

They work on any :class:`~gsparse.tune.interfaces.SearchSpace`, whatever its operator: a
schedule is a frozen dataclass, its knobs are its fields, and ``space.domain(cls, knob)``
gives the ordered values a knob takes. A schedule is *valid* when it is one of
``space.candidates()``.

*Near* is measured on knob positions: knob ``j`` of a schedule of class ``C`` sits at
``p_j = index of its value in domain(C, j) / (len(domain) - 1)`` (0 for a one-value
domain), and the distance between two schedules of one class is the Euclidean
``sqrt(sum_j (p_j - q_j)^2)``, so every knob weighs the same whatever its number of values.
A value missing from a domain sits between its neighbours when values compare, and at
distance 1 from everything when they do not.

Building a :class:`SpaceIndex` over a space costs one pass over its candidates; every
operator accepts either a space or an index, and search strategies keep one index.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Generic

import numpy as np

from .interfaces import S, SearchSpace, check_schedule, knobs


class CandidateSpace(Generic[S]):
    """A search space given by its list of valid schedules.

    Args:
        candidates: the valid schedules, in the order :meth:`candidates` returns them; no
            duplicates.
        domains: optional ``{(cls, knob): values}`` overriding the derived domains.
            A knob's derived domain is the sorted distinct values it takes among the
            candidates of its class (in order of first appearance when the values do not
            compare).
    """

    def __init__(
        self,
        candidates: Iterable[S],
        domains: Mapping[tuple[type, str], Sequence[Any]] | None = None,
    ) -> None:
        self._candidates = tuple(candidates)
        for i, s in enumerate(self._candidates):
            check_schedule(s, f"candidates[{i}]")
        if len(set(self._candidates)) != len(self._candidates):
            seen: set = set()
            twice = next(s for s in self._candidates if s in seen or seen.add(s))
            raise ValueError(f"candidates must be distinct; {twice} appears more than once")
        self._domains: dict[tuple[type, str], tuple] = {}
        for (cls, knob), values in (domains or {}).items():
            self._domains[(cls, knob)] = tuple(values)
        for cls in dict.fromkeys(type(s) for s in self._candidates):
            members = [s for s in self._candidates if type(s) is cls]
            for knob in knobs(cls):
                if (cls, knob) not in self._domains:
                    self._domains[(cls, knob)] = _ordered(getattr(s, knob) for s in members)

    def __len__(self) -> int:
        return len(self._candidates)

    def __repr__(self) -> str:
        classes = sorted({type(s).__name__ for s in self._candidates})
        return f"CandidateSpace({len(self)} candidates of {', '.join(classes)})"

    def candidates(self) -> Sequence[S]:
        """Every schedule of the space, in the order given."""
        return self._candidates

    def domain(self, cls: type, knob: str) -> tuple:
        """The ordered values knob ``knob`` of skeleton ``cls`` takes (KeyError for another knob)."""
        try:
            return self._domains[(cls, knob)]
        except KeyError:
            raise KeyError(f"this space has no knob {knob!r} of {cls.__name__}; it has "
                           f"{sorted(k for c, k in self._domains if c is cls)}") from None


def _ordered(values: Iterable[Any]) -> tuple:
    distinct = tuple(dict.fromkeys(values))
    try:
        return tuple(sorted(distinct))
    except TypeError:
        return distinct


@dataclasses.dataclass(frozen=True)
class _ClassIndex:
    cls: type
    knobs: tuple[str, ...]
    domains: tuple[tuple, ...]
    positions: np.ndarray  # [m] positions in candidates() of this class's candidates
    coords: np.ndarray  # [m, len(knobs)] normalised domain positions


class SpaceIndex(Generic[S]):
    """A :class:`SearchSpace` with its candidates indexed for membership and nearness.

    Is itself a search space (same candidates, same domains), so it can stand wherever
    the space it wraps does.
    """

    def __init__(self, space: SearchSpace[S]) -> None:
        if isinstance(space, SpaceIndex):
            space = space.space
        self.space = space
        self._candidates = tuple(space.candidates())
        if not self._candidates:
            raise ValueError(f"the search space {space!r} has no candidates")
        self._position: dict[S, int] = {}
        for i, s in enumerate(self._candidates):
            check_schedule(s, f"candidates()[{i}]")
            if self._position.setdefault(s, i) != i:
                raise ValueError(f"candidates() must be distinct; {s} appears more than once")
        self._classes: dict[type, _ClassIndex] = {}
        for cls in dict.fromkeys(type(s) for s in self._candidates):
            self._classes[cls] = self._index_class(cls)

    def _index_class(self, cls: type) -> _ClassIndex:
        names = knobs(cls)
        domains = tuple(tuple(self.space.domain(cls, k)) for k in names)
        positions = np.array([i for i, s in enumerate(self._candidates) if type(s) is cls])
        coords = np.empty((len(positions), len(names)))
        for j, (knob, domain) in enumerate(zip(names, domains)):
            where = {v: i for i, v in enumerate(domain)}
            scale = max(len(domain) - 1, 1)
            for row, p in enumerate(positions):
                value = getattr(self._candidates[p], knob)
                if value not in where:
                    raise ValueError(f"candidate {self._candidates[p]} has {knob}={value!r}, which "
                                     f"is not in the space's domain({cls.__name__}, {knob!r}) = {domain}")
                coords[row, j] = where[value] / scale
        return _ClassIndex(cls, names, domains, positions, coords)

    def __len__(self) -> int:
        return len(self._candidates)

    def __contains__(self, schedule: object) -> bool:
        try:
            return schedule in self._position
        except TypeError:
            return False

    def candidates(self) -> Sequence[S]:
        """The indexed space's schedules, in its order."""
        return self._candidates

    def domain(self, cls: type, knob: str) -> tuple:
        """The ordered values knob ``knob`` of skeleton ``cls`` takes in the indexed space."""
        if cls in self._classes and knob in self._classes[cls].knobs:
            return self._classes[cls].domains[self._classes[cls].knobs.index(knob)]
        return tuple(self.space.domain(cls, knob))

    def position(self, schedule: S) -> int:
        """Where ``schedule`` is in :meth:`candidates` (KeyError if it is not valid)."""
        return self._position[schedule]

    def nearest(self, cls: type, values: Mapping[str, Any], excluded: np.ndarray | None = None) -> S | None:
        """The valid candidate nearest to a schedule of class ``cls`` with knob ``values``.

        Candidates of ``cls`` first; only when none is left, those of other classes, compared
        on the knobs they share by name (each knob of theirs that ``values`` lacks counts 1).
        ``excluded`` (bool ``[len(self)]``) removes candidates. Ties go to the earliest in
        :meth:`candidates`. None when every candidate is excluded.
        """
        order = [cls] if cls in self._classes else []
        order += [c for c in self._classes if c is not cls]
        best: tuple[float, int] | None = None
        for c in order:
            index = self._classes[c]
            keep = np.ones(len(index.positions), bool) if excluded is None else ~excluded[index.positions]
            if not keep.any():
                continue
            point = np.array([_coordinate(index.domains[j], values.get(k, _MISSING))
                              for j, k in enumerate(index.knobs)])
            gaps = np.where(np.isnan(point), 1.0, index.coords - point)
            distance = np.where(keep, (gaps * gaps).sum(axis=1), np.inf)
            row = int(np.argmin(distance))
            found = (float(distance[row]), int(index.positions[row]))
            if best is None or found < best:
                best = found
            if c is cls:
                break
        return None if best is None else self._candidates[best[1]]


_MISSING = object()


def _coordinate(domain: tuple, value: Any) -> float:
    """The normalised position of ``value`` in ``domain`` (NaN: unplaceable, distance 1)."""
    scale = max(len(domain) - 1, 1)
    if value is _MISSING:
        return float("nan")
    for i, v in enumerate(domain):
        if _same(v, value):
            return i / scale
    try:
        return (bisect.bisect_left(domain, value) - 0.5) / scale
    except TypeError:
        return float("nan")


def _same(a: Any, b: Any) -> bool:
    """Equal values, with booleans apart from the numbers 0 and 1."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def index(space: SearchSpace[S] | SpaceIndex[S]) -> SpaceIndex[S]:
    """``space`` itself when it is already a :class:`SpaceIndex`, else an index over it."""
    return space if isinstance(space, SpaceIndex) else SpaceIndex(space)


def sample(space: SearchSpace[S], rng: np.random.Generator, k: int) -> list[S]:
    """``min(k, len)`` distinct candidates drawn uniformly without replacement."""
    candidates = space.candidates()
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    picks = rng.choice(len(candidates), size=min(k, len(candidates)), replace=False)
    return [candidates[i] for i in picks]


def mutate(space: SearchSpace[S], schedule: S, rng: np.random.Generator, rate: float) -> S:
    """``schedule`` with each knob, with probability ``rate``, re-drawn from its domain.

    A re-drawn knob takes another value of its domain, uniformly (a one-value domain keeps
    its value). The child may be invalid (see :func:`repair`); only when its class rejects
    the knob values outright (no such object can exist) is it the nearest valid candidate.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    cls = type(schedule)
    values = {k: getattr(schedule, k) for k in knobs(cls)}
    for knob in values:
        if rng.random() >= rate:
            continue
        mine = values[knob]
        others = [v for v in space.domain(cls, knob) if not _same(v, mine)]
        if others:
            values[knob] = others[int(rng.integers(len(others)))]
    return _construct(space, cls, values)


def crossover(space: SearchSpace[S], a: S, b: S, rng: np.random.Generator) -> S:
    """A child of ``a`` and ``b``: each knob from either parent with probability 1/2.

    Parents of different classes share no knob by meaning: the child is then a copy of one
    of them, chosen with probability 1/2. Like :func:`mutate`, the child may be invalid.
    """
    if type(a) is not type(b):
        return a if rng.random() < 0.5 else b
    cls = type(a)
    values = {k: getattr(a if rng.random() < 0.5 else b, k) for k in knobs(cls)}
    return _construct(space, cls, values)


def repair(space: SearchSpace[S], schedule: S, *, exclude: Collection[S] = ()) -> S | None:
    """``schedule`` if it is valid, else the nearest valid candidate (see the module doc).

    Candidates of the schedule's own class come first; ties go to the earliest in
    ``space.candidates()``. Candidates in ``exclude`` are skipped (``schedule`` too, when
    excluded): None when that leaves nothing.
    """
    idx = index(space)
    excluded = None
    if exclude:
        excluded = np.zeros(len(idx), bool)
        for s in exclude:
            if s in idx:
                excluded[idx.position(s)] = True
    if schedule in idx and (excluded is None or not excluded[idx.position(schedule)]):
        return schedule
    cls = type(schedule)
    return idx.nearest(cls, {k: getattr(schedule, k) for k in knobs(cls)}, excluded)


def _construct(space: SearchSpace[S], cls: type, values: dict[str, Any]) -> S:
    try:
        return cls(**values)
    except Exception:  # the class validates in __init__: no such schedule exists
        child = index(space).nearest(cls, values)
        assert child is not None  # nothing is excluded
        return child
