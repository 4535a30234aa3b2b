"""Objects found again through the addresses of their index tensors.

The custom ops (``gsparse::spmm``, ``gsparse::sptrsv``, ...) take tensors, not the
:class:`~gsparse.Graph` or triangular pattern they belong to, and find that object again
here with its caches (reverse graph, plans). The key is the device and the addresses of
two index tensors rather than tensor identity, so that the aliases torch.compile and
autograd hand over (detached views of the same memory) still find it. Entries die with
their object, and a live object keeps its tensors, so their addresses are not reused
meanwhile.
"""

from __future__ import annotations

import weakref
from typing import Generic, TypeVar

import torch

__all__ = ["LiveRegistry", "same_memory", "static_address"]

T = TypeVar("T")


class LiveRegistry(Generic[T]):
    """The newest live object over each pair of index tensors."""

    def __init__(self) -> None:
        self._by_address: weakref.WeakValueDictionary[tuple[torch.device, int, int], T] = (
            weakref.WeakValueDictionary())

    def add(self, first: torch.Tensor, second: torch.Tensor, obj: T) -> None:
        self._by_address[_key(first, second)] = obj

    def get(self, first: torch.Tensor, second: torch.Tensor) -> T | None:
        return self._by_address.get(_key(first, second))


def _key(first: torch.Tensor, second: torch.Tensor) -> tuple[torch.device, int, int]:
    return first.device, first.data_ptr(), second.data_ptr()


def same_memory(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Whether ``a`` and ``b`` view the same memory with the same shape and dtype (or are
    both None)."""
    if a is None or b is None:
        return a is b
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.dtype == b.dtype


def static_address(t: torch.Tensor | None) -> None:
    """Mark an index tensor for torch.compile as an input whose address stays the same
    between calls (``torch._dynamo.mark_static_address``, unguarded). CUDA-graph trees
    (``mode="reduce-overhead"``) then hand it to the custom ops as it is, instead of a copy
    in their own memory pool, whose address would not be found in the registry."""
    if t is not None and getattr(t, "_dynamo_static_input_type", None) is None:
        t._dynamo_static_input_type = "unguarded"
