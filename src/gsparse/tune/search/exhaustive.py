"""Exhaustive search: measure every candidate of a space, the oracle other searches are
judged against.

Every candidate is screened with a couple of timed calls (right after its result was
checked, which warmed it up); the fastest few, the finalists, are then timed with the whole
budget. A candidate whose measurement fails keeps its failure as its record, and the
search goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["FINALISTS", "exhaustive_search"]

S = TypeVar("S")
# Candidates timed with the full budget after screening.
FINALISTS = 6

Measurement = dict[str, Any]  # {"status": "ok", "median_ms": ...} or {"status": ..., "message": ...}


def exhaustive_search(candidates: Sequence[S], screen: Callable[[S], Measurement],
                      measure: Callable[[S], Measurement],
                      finalists: int = FINALISTS) -> list[Measurement]:
    """One record per candidate, in order.

    ``screen(s)`` and ``measure(s)`` check and time candidate ``s``, returning a record
    whose ``status`` is ``"ok"`` with a ``median_ms``, or a failure. A screened record keeps
    its quick time as ``screen_ms``; the ``finalists`` fastest are measured again and get
    ``median_ms`` (and whatever else ``measure`` reports).
    """
    records = [dict(screen(s)) for s in candidates]
    for record in records:
        if record.get("status") == "ok":
            record["screen_ms"] = record.pop("median_ms")
    screened = sorted((i for i, r in enumerate(records) if r.get("status") == "ok"),
                      key=lambda i: records[i]["screen_ms"])
    for i in screened[:finalists]:
        records[i].update(measure(candidates[i]))
    return records
