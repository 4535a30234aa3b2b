"""Structures derived from a graph and kept with it, one cache per owner.

A :class:`~gsparse.Graph` holds a few named caches, each with one owner in the package:
the kernels' launch plans and the schedules chosen for them, the edge layouts the kernels
walk, the CPU backend's structures, the layers' structures. Each is a :class:`DerivedCache`:
entries are built on first use, from the graph alone, and freed with the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, NoReturn, TypeVar

import torch

__all__ = ["DerivedCache", "CompileError", "compile_error", "derive"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class DerivedCache(Generic[K, V]):
    """What one owner derives from a graph, by key.

    Under ``torch.compile`` an entry that exists is read without tracing how it was built.
    A missing one cannot be traced (its size depends on the data): :func:`derive` builds it
    eagerly while the compiler traces, and a plain :meth:`get` raises
    :class:`~gsparse.CompileError` there.

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
            if torch.compiler.is_compiling() and not _building_eagerly:
                compile_error(
                    f"{key!r} ({self.holds}) of this graph is not built yet and cannot be built "
                    f"inside a torch.compile graph (its size depends on the data): build it "
                    f"through gsparse.derived.derive, or run the model once eagerly on this graph")
            found = self._entries[key] = build()
        return found

    def replace(self, key: K, value: V) -> None:
        """Set the entry for ``key``, whatever was there (a new choice of schedule): the next
        call that reads it takes ``value``."""
        self._entries[key] = value
        slot = _slot(key)
        if slot in self.__dict__:  # what a compiled graph reads (see derive)
            self.__dict__[slot] = value
        self.generation += 1

    def clear(self) -> None:
        """Drop every entry (they are rebuilt on next use)."""
        for name in [name for name in self.__dict__ if name.startswith(_SLOT_PREFIX)]:
            del self.__dict__[name]
        self._entries.clear()
        self.generation += 1


_SLOT_PREFIX = "entry "


def _slot(key: Hashable) -> str:
    return f"{_SLOT_PREFIX}{key!r}"


class CompileError(RuntimeError):
    """A gsparse call that ``torch.compile`` cannot trace; the message says what to do."""


def compile_error(message: str) -> NoReturn:
    """Raise :class:`CompileError`; inside ``torch.compile``, so that the compiler passes it
    on as it is (not as an "observed exception" with the message in its debug context)."""
    if torch.compiler.is_compiling():
        _raise_while_tracing(message)
    raise CompileError(message)


def _raise_while_tracing(message: str) -> None:
    # Run eagerly by the compiler while it traces (see _build_while_tracing): the error is
    # raised in the compiler's own frame, as a UserError, which it re-raises unchanged.
    from torch._dynamo.exc import UserError, UserErrorType

    class TracedCompileError(CompileError, UserError):
        def __init__(self, msg: str) -> None:
            UserError.__init__(self, UserErrorType.ANTI_PATTERN, msg)

        def __str__(self) -> str:
            return self.msg

    TracedCompileError.__name__ = TracedCompileError.__qualname__ = "CompileError"
    TracedCompileError.__module__ = "gsparse"
    raise TracedCompileError(message)


_raise_while_tracing._dynamo_marked_constant = True  # type: ignore[attr-defined]


_MISSING = object()
_building_eagerly = False


def _build_while_tracing(cache: DerivedCache, key: Hashable, build: Callable[..., object], *args) -> str:
    # torch.compile runs this function eagerly, on the real graph, while it traces the caller
    # (and guards on the identity of its arguments), so that the entry exists before the
    # traced code reads it. The traced code reads it as an attribute of its own: the compiler
    # keeps what it read of an object, and a dict of entries read before this call would be
    # read again as it was then.
    global _building_eagerly
    before, _building_eagerly = _building_eagerly, True
    try:
        found = cache.get(key, lambda: build(*args))
    finally:
        _building_eagerly = before
    # The entry as an attribute, set here rather than by every eager get: its name is the
    # key's repr, which costs more than the rest of a lookup (a plan's key holds a task and
    # a schedule).
    slot = _slot(key)
    cache.__dict__[slot] = found
    return slot


# torch.compiler.assume_constant_result(_build_while_tracing), without importing the compiler
# (seconds) with gsparse: the decorator sets this one attribute (tests/test_compile.py checks).
_build_while_tracing._dynamo_marked_constant = True  # type: ignore[attr-defined]


def derive(cache: DerivedCache[K, V], key: K, build: Callable[..., V], *args: Any) -> V:
    """``cache.get(key, lambda: build(*args))``, also inside ``torch.compile``: a missing entry
    is then built eagerly while the compiler traces (no eager warm-up run needed), and the
    compiled graph reads it. That takes PyTorch 2.13 or later; before, a missing entry is a
    :class:`CompileError` that asks for one eager call.

    ``build`` is a module-level function and ``args`` graphs and constants (what
    ``torch.compile`` can hand to a function it runs eagerly).
    """
    if torch.compiler.is_compiling() and _BUILDS_WHILE_TRACING:
        return getattr(cache, _build_while_tracing(cache, key, build, *args))
    return cache.get(key, lambda: build(*args))


def _torch_version() -> tuple[int, int]:
    major, minor, *_ = torch.__version__.split(".")
    return int(major), int(minor)


# Building while tracing needs a compiler that runs a constant-result function on
# non-constant arguments: PyTorch 2.13 does; 2.11 stops with AsPythonConstantNotImplemented
# (measured on an H100 machine). Older versions read what exists and need the one eager
# call that builds the rest (CompileError says so).
_BUILDS_WHILE_TRACING = _torch_version() >= (2, 13)
