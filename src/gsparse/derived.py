"""Structures derived from a graph and kept with it, one cache per owner.

A :class:`~gsparse.Graph` holds a few named caches, each with one owner in the package:
the kernels' launch plans and the schedules chosen for them, the edge layouts the kernels
walk, the CPU backend's structures, the layers' structures. Each is a :class:`DerivedCache`:
entries are built on first use, from the graph alone, and freed with the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import torch

__all__ = ["DerivedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class DerivedCache(Generic[K, V]):
    """What one owner derives from a graph, by key.

    Under ``torch.compile`` an entry that exists is read without tracing how it was built;
    a missing one is a RuntimeError there, since building is data-dependent: run the model
    once eagerly on the graph first.

    :attr:`generation` counts the changes to entries already given out (:meth:`replace`,
    :meth:`clear`), so that whoever keeps what it derived from an entry (the front ends'
    resolved calls) knows when to derive it again.
    """

    def __init__(self, holds: str) -> None:
        self.holds = holds
        self._entries: dict[K, V] = {}
        self.generation = 0

    def __repr__(self) -> str:
        return f"DerivedCache({self.holds!r}, {len(self._entries)} entries)"

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def get(self, key: K, build: Callable[[], V]) -> V:
        """The entry for ``key``, built by ``build()`` on the first call."""
        found = self._entries.get(key, _MISSING)
        if found is _MISSING:
            if torch.compiler.is_compiling():
                raise RuntimeError(
                    f"{key!r} ({self.holds}) of this graph is not built yet and cannot be built "
                    f"under torch.compile (its size depends on the data): run the model once "
                    f"eagerly on this graph first")
            found = self._entries[key] = build()
        return found

    def replace(self, key: K, value: V) -> None:
        """Set the entry for ``key``, whatever was there (a new choice of schedule): the next
        call that reads it takes ``value``."""
        self._entries[key] = value
        self.generation += 1

    def clear(self) -> None:
        """Drop every entry (they are rebuilt on next use)."""
        self._entries.clear()
        self.generation += 1


_MISSING = object()
