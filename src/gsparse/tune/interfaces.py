"""The tuner's vocabulary: schedules, spaces, build and run records, builders, runners, models.

Each piece is a small protocol so that any part can be swapped or faked in a test, as in TVM
MetaSchedule: a :class:`SearchSpace` says which schedules exist, a search strategy
(:mod:`gsparse.tune.search`) proposes some of them, a :class:`Builder` compiles them, a
:class:`Runner` measures them, a :class:`CostModel` ranks them and a database
(:mod:`gsparse.tune.database`) remembers them.

A *schedule* is any frozen dataclass instance with ``to_json()`` and a classmethod
``from_json(text)``. Its *knobs* are its dataclass fields and its class is its *skeleton*:
two schedules of different classes run different kernels and share no knob by meaning.

A failure to build or to run is data, never an exception that stops tuning: it is a record
(:class:`BuildResult`, :class:`RunResult`) with an error string, and the loop goes on.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

S = TypeVar("S")


@runtime_checkable
class Schedule(Protocol):
    """A frozen dataclass with a JSON round trip: ``type(s).from_json(s.to_json()) == s``."""

    def to_json(self) -> str:
        """The schedule as JSON text."""
        ...

    @classmethod
    def from_json(cls, text: str) -> Schedule:
        """The schedule :meth:`to_json` wrote as ``text``."""
        ...


def check_schedule(schedule: object, name: str = "schedule") -> None:
    """Raise TypeError unless ``schedule`` is a frozen dataclass instance with a JSON round trip."""
    cls = type(schedule)
    if not (dataclasses.is_dataclass(schedule) and not isinstance(schedule, type)):
        raise TypeError(f"{name} must be a frozen dataclass instance, got {cls.__name__}")
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{name} must be a frozen dataclass (hashable), got a mutable {cls.__name__}")
    if not (callable(getattr(schedule, "to_json", None)) and callable(getattr(cls, "from_json", None))):
        raise TypeError(f"{name} must have to_json() and a classmethod from_json(text); "
                        f"{cls.__name__} lacks them")


def knobs(cls: type) -> tuple[str, ...]:
    """The knob names of schedule class ``cls``: its dataclass fields, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls))


@runtime_checkable
class SearchSpace(Protocol[S]):
    """Every valid schedule of one tuning task, after pruning.

    ``candidates()`` lists them in a deterministic order (the same list at every call);
    ``domain(cls, knob)`` is the ordered tuple of values knob ``knob`` of skeleton ``cls``
    takes in this space. The order of a domain is what "near" means when an invalid
    schedule is repaired (:func:`gsparse.tune.repair`), so it should be the knob's
    natural order (1, 2, 4, 8; False, True).
    """

    def candidates(self) -> Sequence[S]:
        """Every schedule of the space, in a deterministic order."""
        ...

    def domain(self, cls: type, knob: str) -> tuple:
        """The ordered values knob ``knob`` of skeleton ``cls`` takes in the space."""
        ...


@dataclasses.dataclass(frozen=True)
class BuildResult(Generic[S]):
    """The outcome of building one schedule: an ``artifact`` to run, or an ``error``."""

    schedule: S
    artifact: Any = None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.error is not None and not isinstance(self.error, str):
            raise TypeError(f"error must be a string or None, got {type(self.error).__name__}")

    @property
    def ok(self) -> bool:
        """Whether the build succeeded (no ``error``)."""
        return self.error is None


@dataclasses.dataclass(frozen=True)
class RunResult(Generic[S]):
    """The outcome of measuring one schedule: repeated times in milliseconds, or an ``error``.

    A result without an error has at least one time, and every time is finite and > 0.
    """

    schedule: S
    times_ms: tuple[float, ...] = ()
    error: str | None = None

    def __post_init__(self) -> None:
        times = tuple(float(t) for t in self.times_ms)
        object.__setattr__(self, "times_ms", times)
        if self.error is not None:
            if not isinstance(self.error, str):
                raise TypeError(f"error must be a string or None, got {type(self.error).__name__}")
            return
        if not times:
            raise ValueError(f"a RunResult without an error needs times_ms; got none for {self.schedule}")
        if not all(math.isfinite(t) and t > 0 for t in times):
            raise ValueError(f"times_ms must be finite and > 0, got {times} for {self.schedule}")

    @property
    def ok(self) -> bool:
        """Whether the measurement succeeded (no ``error``)."""
        return self.error is None

    @property
    def time_ms(self) -> float:
        """The median of the times (``inf`` for a failure), the number the tuner compares."""
        return statistics.median(self.times_ms) if self.ok else math.inf


class Builder(Protocol[S]):
    """Builds schedules (compiles their kernels), many at a time, possibly in parallel."""

    def build(self, schedules: Sequence[S]) -> list[BuildResult[S]]:
        """One result per schedule, in order; a failure is a result with an error, never a raise."""
        ...


class Runner(Protocol[S]):
    """Measures built schedules on the real inputs."""

    def run(self, builds: Sequence[BuildResult[S]]) -> list[RunResult[S]]:
        """One result per successful build, in order; a failure is a result with an error."""
        ...


class CostModel(Protocol):
    """Predicts the relative cost of schedules from their features (lower is faster).

    ``fit(features [n, d], times_ms [n], groups [n])``: ``groups[i]`` names the measurement
    set row ``i`` belongs to (one graph, operator and feature shape): times are compared
    only within a group, so a model may learn the order inside each group and ignore the
    groups' absolute scale. ``predict(features [n, d]) -> [n]`` is then a cost whose order
    within one group is the predicted order of the times.
    """

    def fit(self, features: np.ndarray, times_ms: np.ndarray, groups: np.ndarray) -> None:
        """Train on ``features`` ``[n, d]``, measured ``times_ms`` ``[n]`` and ``groups`` ``[n]``."""
        ...

    def predict(self, features: np.ndarray) -> np.ndarray:
        """``[n]`` predicted costs of ``features`` ``[n, d]`` (lower is faster)."""
        ...

    def save(self, path: str) -> None:
        """Write the trained model to the file ``path``."""
        ...

    def load(self, path: str) -> CostModel:
        """Read a model :meth:`save` wrote into this one, and return it."""
        ...


def check_training_data(
    features: np.ndarray, times_ms: np.ndarray, groups: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(features float64 [n, d], times_ms float64 [n], groups [n])`` checked for a fit.

    Raises ValueError naming the argument when a shape does not match or a time is not a
    finite positive number.
    """
    x = np.asarray(features, dtype=np.float64)
    t = np.asarray(times_ms, dtype=np.float64)
    g = np.asarray(groups)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"features must be a non-empty [n, d] array, got shape {x.shape}")
    n = x.shape[0]
    if t.shape != (n,):
        raise ValueError(f"times_ms must have shape ({n},) like the features' rows, got {t.shape}")
    if g.shape != (n,):
        raise ValueError(f"groups must have shape ({n},) like the features' rows, got {g.shape}")
    if not np.all(np.isfinite(t) & (t > 0)):
        raise ValueError("times_ms must be finite and > 0 (leave failed samples out of training)")
    if not np.all(np.isfinite(x)):
        raise ValueError("features must be finite")
    return x, t, g


def check_features(features: np.ndarray, num_features: int) -> np.ndarray:
    """``features`` as float64 ``[n, num_features]``, or ValueError naming what was given."""
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != num_features:
        raise ValueError(f"features must have shape [n, {num_features}] (the model was fitted "
                         f"on {num_features} features), got {x.shape}")
    return x


def group_rows(groups: np.ndarray) -> list[np.ndarray]:
    """Row indices of each group: groups in sorted order, rows in their original order."""
    _, inverse = np.unique(np.asarray(groups), return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)
