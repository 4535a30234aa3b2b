"""What every schedule is: a frozen dataclass per skeleton, validated, with a JSON round trip.

A schedule says how an operator's work maps onto the GPU. Each operator has a few
*skeletons* (kernel structures) and one frozen dataclass per skeleton, whose fields are
exactly the knobs that skeleton reads: which kernel runs is the schedule's type, and every
field means something for it. A schedule is a plain value (hashable, comparable); it is
what the space enumerates, the default rule returns, the tuner searches and stores (as
JSON) and the code generator consumes.

Every schedule class registers itself under a name (its ``skeleton``, e.g.
``"spmm.one_pass"``), which its JSON carries, so :func:`gsparse.schedule_from_json` reads any of
them back.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

__all__ = ["Schedule", "SCHEDULES", "schedule_from_json", "one_of"]

# Every schedule class by its skeleton name.
SCHEDULES: dict[str, type[Schedule]] = {}
# Schedules found valid (a plain value's validity never changes), bounded.
_VALID: set[tuple] = set()
_VALID_LIMIT = 4096


class Schedule:
    """The base of the schedule dataclasses (frozen, keyword-only, defaults for most knobs).

    Subclasses set ``skeleton`` and implement :meth:`problems`.
    """

    skeleton: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("skeleton")
        if name is not None:
            if name in SCHEDULES:
                raise TypeError(f"two schedule classes are named {name!r}")
            SCHEDULES[name] = cls

    def problems(self) -> list[str]:
        """Why this schedule can never run (empty when it is valid)."""
        raise NotImplementedError

    def validate(self):
        """``self``, or ValueError listing every problem."""
        # Rules and plans validate the same few schedules on every new graph. Known by their
        # knobs' values and types: 1 == True, but degree_sorted=1 is invalid.
        knobs = tuple(self.__dict__.values())
        key = (type(self), knobs, tuple(map(type, knobs)))
        if key in _VALID:
            return self
        if problems := self.problems():
            raise ValueError(f"invalid {type(self).__name__} {self}: " + "; ".join(problems))
        if len(_VALID) >= _VALID_LIMIT:
            _VALID.clear()
        _VALID.add(key)
        return self

    def knobs(self) -> dict[str, Any]:
        """The schedule's knobs by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def to_json(self) -> str:
        """A JSON object of the skeleton's name and the knobs (sorted keys)."""
        return json.dumps({"skeleton": self.skeleton, **self.knobs()}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str):
        """The schedule written by :meth:`to_json`, which must be of this class (or a
        subclass of it); see :func:`gsparse.schedule_from_json`."""
        schedule = schedule_from_json(text)
        if not isinstance(schedule, cls):
            raise ValueError(f"{text!r} is a {type(schedule).__name__}, not a {cls.__name__}")
        return schedule


def schedule_from_json(text: str) -> Schedule:
    """The schedule written by :meth:`~gsparse.kernels.schedule.Schedule.to_json`, validated.

    ValueError for text that is not a JSON object, an unknown skeleton, unknown or missing
    knobs, or invalid values.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"a schedule is a JSON object, got {text!r} ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"a schedule is a JSON object, got {text!r}")
    name = data.pop("skeleton", None)
    if name not in SCHEDULES:
        raise ValueError(f"schedule {text!r} names skeleton {name!r}; known: {sorted(SCHEDULES)}")
    cls = SCHEDULES[name]
    known = {f.name for f in dataclasses.fields(cls)}
    if unknown := sorted(set(data) - known):
        raise ValueError(f"unknown {cls.__name__} knobs {unknown}; known: {sorted(known)}")
    try:
        schedule = cls(**data)
    except TypeError as error:
        raise ValueError(f"schedule {text!r}: {error}") from None
    return schedule.validate()


def one_of(name: str, value: Any, allowed: tuple[Any, ...]) -> list[str]:
    """``[problem]`` when ``value`` is not one of ``allowed`` (bools are not ints), else []."""
    if isinstance(value, bool) != isinstance(allowed[0], bool) or value not in allowed:
        return [f"{name} must be one of {allowed}, got {value!r}"]
    return []
