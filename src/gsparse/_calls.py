"""Calls resolved once per graph: from the facts of a call straight to its bound launch.

A front end validates a call and resolves what runs it: for CUDA tensors the task, the
schedule chosen for it and the launch plan. All of that is a function of facts the host
reads in a microsecond — the operator, and each operand's shape, dtype, device,
contiguity and alignment class (of a CPU tensor, what its backend depends on:
:func:`facts`) — so it is done on a call's first use and kept in the graph's ``calls``
cache under a plain tuple of those facts. A repeated call builds the
tuple, finds its :class:`Call`, and allocates and launches: no validation, task, schedule
lookup or plan lookup again (the same inputs get the same verdict, so validation is kept).

A call remembers the generation of the graph's ``schedules`` and ``plans`` caches when it
was resolved; when either has changed since (a new choice of schedule, plans dropped), the
next call resolves again, so the change takes effect at once.

Only plain eager calls take this path (:func:`eager`): under ``torch.compile``, with fake
or subclass tensors, a dispatch mode, functorch transforms or autocast, calls go through
the front end's full path and the custom ops of :mod:`gsparse._ops`, which trace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from . import backends
from .graph import Graph

__all__ = ["Call", "GraphParts", "eager", "facts", "find", "resolve_gat_attention", "resolve_softmax",
           "resolve_sddmm", "resolve_spmm", "shaping", "store"]

_Tensor = Tensor
_is_compiling = torch.compiler.is_compiling
_functorch_active = torch._C._are_functorch_transforms_active
_dispatch_modes = torch._C._len_torch_dispatch_stack
_autocast_enabled = torch.is_autocast_enabled
_any_autocast_enabled = torch._C._is_any_autocast_enabled
_layout_dependent = backends.LAYOUT_DEPENDENT


def eager() -> bool:
    """Whether a call may take the resolved path: no tracing, mode or transform around it."""
    return not _is_compiling() and _dispatch_modes() == 0 and not _functorch_active()


def facts(t: Any) -> Any:
    """What a call's resolution depends on about operand ``t``: shape, dtype, device,
    contiguity and alignment class (its address modulo 16 bytes, the widest vector); for a
    CPU tensor served by a layout-independent backend (see
    :data:`gsparse.backends.LAYOUT_DEPENDENT`), shape and dtype only. None for None;
    ``False`` for anything but a plain tensor, which never has a resolved call."""
    if t is None:
        return None
    if type(t) is not _Tensor:
        return False
    # Only CPU tensors get the short facts: telling another device type's backend apart
    # would take reading the device's type, which costs more than the facts it saves.
    if t.is_cpu and "cpu" not in _layout_dependent:
        return t.shape, t.dtype
    if t.is_contiguous():
        return t.shape, t.dtype, t.device, t.data_ptr() & 15
    return t.shape, t.dtype, t.device, -1  # made contiguous per call, into aligned storage


def shaping(padded: Tensor | None, given: Any, used: bool) -> Any:
    """How a resolved call shapes an operand (see :attr:`Call.shapes`): False when the
    operator ignores it, else the shape the front end padded it to (``padded``), or None
    when that is the shape it was ``given`` with (its :func:`facts`)."""
    if not used:
        return False
    shape = tuple(padded.shape)
    return None if given is not None and tuple(given[0]) == shape else shape


class GraphParts(tuple):
    """A graph's :attr:`~gsparse.Graph.parts` that also carry the graph (``.graph``): what the
    backward formulas of :mod:`gsparse._ops` take on the eager path, where the graph is at
    hand and need not be found again by the address of its tensors."""

    graph: Graph

    def __new__(cls, g: Graph) -> GraphParts:
        parts = super().__new__(cls, g.parts)
        parts.graph = g
        return parts


class Call:
    """A resolved call: ``run`` takes the operands, shaped as the backends take them, and
    returns the result.

    Attributes:
        run: the bound launch (or the backend's function) for operands with these facts.
        shapes: per operand, None where it is used as given, the feature-padded shape it is
            viewed as first (DGL's broadcasting), or False where the operator ignores it.
        out_shape: the output's feature shape.
        args: the operator's other arguments (``(op, reduce)`` of a g-SpMM, ...).
        parts: the graph's parts with the graph, for the backward pass.
        generation: the graph's ``schedules`` and ``plans`` generations at resolution.
        device_type: where it runs (autocast is checked for this device type).
        extra: what else the owner resolves later (the run with arg indices of a max/min).
        flat_rhs: whether ``run`` takes ``rhs`` in the shape it was given, unpadded (a
            bound run with a true ``flat_rhs`` attribute reads only its elements); autograd's
            formulas still get it padded.
    """

    __slots__ = ("run", "shapes", "out_shape", "args", "parts", "generation", "device_type", "extra",
                 "flat_rhs")

    def __init__(self, g: Graph, run: Callable[..., Any], shapes: tuple[Any, ...],
                 out_shape: tuple[int, ...], args: tuple[Any, ...]) -> None:
        self.run = run
        self.shapes = shapes
        self.out_shape = out_shape
        self.args = args
        self.parts = GraphParts(g)
        self.generation = _generation(g)
        self.device_type = g.device.type
        self.extra: dict[str, Any] = {}
        self.flat_rhs = getattr(run, "flat_rhs", False)

    @property
    def graph(self) -> Graph:
        return self.parts.graph


def _generation(g: Graph) -> int:
    # Both only grow, so their sum changes whenever either does.
    return g.schedules.generation + g.plans.generation


def find(g: Graph, key: tuple) -> Call | None:
    """The call resolved for ``key`` on ``g`` if it still holds (same generations, autocast
    off for its device), else None: the caller then takes its full path."""
    call = g.calls._entries.get(key)
    # _generation(g) inline (a frame less per call). The call's device type only when some
    # autocast is on: its name is parsed per check.
    if (call is None or call.generation != g.schedules.generation + g.plans.generation
            or (_any_autocast_enabled() and _autocast_enabled(call.device_type))):
        return None
    return call


def store(g: Graph, key: tuple, call: Call) -> Call:
    """Keep ``call`` under ``key``; the key must hold facts of plain tensors only."""
    g.calls._entries[key] = call
    return call


def _bind(backend: Any, name: str, fallback: Callable[..., Any], *args: Any) -> Callable[..., Any]:
    bind = getattr(backend, name, None)
    return fallback if bind is None else bind(*args)


def resolve_spmm(g: Graph, op: str, reduce: str, lhs: Tensor | None, rhs: Tensor | None,
                 out_shape: tuple[int, ...], with_arg: bool = False) -> Callable[..., Any]:
    """The backend's g-SpMM bound for operands like these (``run(lhs, rhs)``); see
    :attr:`Call.flat_rhs`."""
    backend = backends.for_device(g.device)

    def run(lhs, rhs):
        return backend.spmm(g, op, reduce, None if lhs is None else lhs.contiguous(),
                            None if rhs is None else rhs.contiguous(), out_shape, with_arg=with_arg)

    return _bind(backend, "bind_spmm", run, g, op, reduce, lhs, rhs, out_shape, with_arg)


def resolve_sddmm(g: Graph, op: str, lhs: Tensor | None, rhs: Tensor | None, lhs_target: str,
                  rhs_target: str, out_shape: tuple[int, ...]) -> Callable[..., Any]:
    """The backend's g-SDDMM bound for operands like these (``run(lhs, rhs)``)."""
    backend = backends.for_device(g.device)

    def run(lhs, rhs):
        return backend.sddmm(g, op, None if lhs is None else lhs.contiguous(),
                             None if rhs is None else rhs.contiguous(), lhs_target, rhs_target,
                             out_shape)

    return _bind(backend, "bind_sddmm", run, g, op, lhs, rhs, lhs_target, rhs_target, out_shape)


def resolve_softmax(g: Graph, logits: Tensor, norm_by: str) -> Callable[..., Any]:
    """The backend's edge softmax bound for logits like these (``run(logits)``)."""
    backend = backends.for_device(g.device)

    def run(logits):
        return backend.edge_softmax(g, logits.contiguous(), norm_by)

    return _bind(backend, "bind_edge_softmax", run, g, logits, norm_by)


def resolve_gat_attention(g: Graph, score_src: Tensor, score_dst: Tensor, edge_scores: Tensor | None,
                          masked: Tensor | None) -> Callable[..., Any]:
    """The backend's GAT attention bound for operands like these
    (``run(score_src, score_dst, edge_scores, masked, negative_slope)``)."""
    backend = backends.for_device(g.device)

    def run(score_src, score_dst, edge_scores, masked, negative_slope):
        return backend.gat_attention(g, score_src.contiguous(), score_dst.contiguous(),
                                     None if edge_scores is None else edge_scores.contiguous(), masked,
                                     negative_slope)

    return _bind(backend, "bind_gat_attention", run, g, score_src, score_dst, edge_scores, masked)
