"""g-SDDMM front end: ``Z_e = lhs ⊕ rhs`` with operands on ``u``, ``v`` or ``e``, and shorthands."""

from __future__ import annotations

from itertools import permutations

import torch

from . import _calls, _ops, _resolved, backends
from ._checks import (
    broadcast_feature_shape,
    check_choice,
    check_features,
    check_graph,
    check_same_dtype,
    check_schedule,
    graph_override,
    pad_feature_dims,
)
from .algebra import BINARY_OPS, SDDMM_OPS, TARGETS
from .graph import Graph

__all__ = ["gsddmm"]

_TARGET_ROWS = {
    "u": (lambda g: g.num_src, "source nodes"),
    "v": (lambda g: g.num_dst, "destination nodes"),
    "e": (lambda g: g.num_edges, "edges"),
}


def _check_operand(name: str, t, g: Graph, target: str) -> torch.Tensor:
    rows, rows_name = _TARGET_ROWS[target]
    return check_features(name, t, g, rows(g), rows_name)


def gsddmm(
    g: Graph,
    op: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    lhs_target: str = "u",
    rhs_target: str = "v",
    *,
    schedule: object | None = None,
) -> torch.Tensor:
    r"""Generalized sampled dense-dense matrix multiplication, with DGL's semantics.

    .. math::  Z_e = \mathrm{lhs}[t_l(e)] \oplus \mathrm{rhs}[t_r(e)]

    where a target ``t`` picks the source node ``u``, destination node ``v`` or the
    edge ``e`` itself.

    Args:
        g: the graph.
        op: ⊕, one of ``add``, ``sub``, ``mul``, ``div``, ``dot``, ``copy_lhs``, ``copy_rhs``.
            ``dot`` sums over the last feature dimension and keeps it with size 1.
        lhs, rhs: ``[rows, *shape]`` where ``rows`` is ``num_src``, ``num_dst`` or
            ``num_edges`` for target ``u``, ``v``, ``e``. Edge operands are in edge order.
        lhs_target, rhs_target: ``"u"``, ``"v"`` or ``"e"``.
        schedule: for CUDA tensors, force a kernel schedule (a g-SDDMM schedule such as
            :class:`gsparse.SddmmEdge`; anything else is a TypeError on every device); the
            PyTorch-ops backend has no use for it.
            A forced schedule calls the backend directly: no autograd (ValueError if an
            operand requires grad) and no ``torch.compile`` node.

    Returns:
        ``[num_edges, *shape]`` in edge order, ``shape`` the NumPy broadcast of the operand
        shapes (for ``dot``: of all but their last dimension, then a trailing 1). Inside
        ``torch.autocast``, float32 and half operands are first cast to the region's dtype.

    Differentiable in ``lhs`` and ``rhs``: an operand on a node receives the sum of the
    gradients of its edges (a g-SpMM on the graph for ``v``, on the reverse graph for
    ``u``), an operand on the edge its own; broadcast dimensions are summed back.
    """
    key = None
    if schedule is None and type(g) is Graph and _calls.eager():
        key = ("sddmm", op, _calls.facts(lhs), _calls.facts(rhs), lhs_target, rhs_target)
        call = _calls.find(g, key)
        if call is not None:  # validated and resolved by an earlier call with the same facts
            return _resolved.sddmm_resolved(call, lhs, rhs)
    override = graph_override(g)
    if override is not None:
        return override(gsddmm, (g, op, lhs, rhs, lhs_target, rhs_target), {"schedule": schedule})
    check_graph(g)
    if schedule is not None:
        check_schedule(schedule, "sddmm")
    check_choice("op", op, SDDMM_OPS)
    check_choice("lhs_target", lhs_target, TARGETS)
    check_choice("rhs_target", rhs_target, TARGETS)
    binop = BINARY_OPS[op]
    lhs, rhs = _ops.autocast_operands(g.device, lhs, rhs)
    lhs = _check_operand("lhs", lhs, g, lhs_target) if binop.uses_lhs else None
    rhs = _check_operand("rhs", rhs, g, rhs_target) if binop.uses_rhs else None
    check_same_dtype(lhs, rhs)
    if binop.reduces_last_dim:
        # DGL treats 1-D operands as [rows, 1] and squeezes the result back when both are.
        both_flat = lhs.dim() == 1 and rhs.dim() == 1
        lhs = lhs.unsqueeze(-1) if lhs.dim() == 1 else lhs
        rhs = rhs.unsqueeze(-1) if rhs.dim() == 1 else rhs
        if lhs.shape[-1] != rhs.shape[-1]:
            raise ValueError(f"dot needs equal last dimensions, got lhs {list(lhs.shape[1:])} "
                             f"and rhs {list(rhs.shape[1:])}")
        outer = broadcast_feature_shape(tuple(lhs.shape[1:-1]), tuple(rhs.shape[1:-1]))
        ndim = len(outer) + 1
        lhs, rhs = pad_feature_dims(lhs, ndim), pad_feature_dims(rhs, ndim)
        out = _sddmm(g, op, lhs, rhs, lhs_target, rhs_target, (*outer, 1), schedule,
                     None if both_flat else key)
        return out.squeeze(-1) if both_flat else out
    shapes = [tuple(t.shape[1:]) for t in (lhs, rhs) if t is not None]
    out_shape = broadcast_feature_shape(*shapes) if len(shapes) == 2 else shapes[0]
    lhs = None if lhs is None else pad_feature_dims(lhs, len(out_shape))
    rhs = None if rhs is None else pad_feature_dims(rhs, len(out_shape))
    return _sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule, key)


def _sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule, key=None) -> torch.Tensor:
    if key is not None and False not in key and not torch.is_autocast_enabled(g.device.type):
        binop = BINARY_OPS[op]
        shapes = (_calls.shaping(lhs, key[2], binop.uses_lhs),
                  _calls.shaping(rhs, key[3], binop.uses_rhs))
        run = _calls.resolve_sddmm(g, op, lhs, rhs, lhs_target, rhs_target, out_shape)
        call = _calls.store(g, key, _calls.Call(g, run, shapes, out_shape,
                                                (op, lhs_target, rhs_target)))
        return _resolved.sddmm_resolved(call, lhs, rhs)
    if schedule is not None and _ops.needs_grad(lhs, rhs):
        raise ValueError("schedule forces a kernel outside autograd; it cannot be used with "
                         "operands that require grad (detach them or drop schedule)")
    if schedule is not None or _ops.direct_call_ok(lhs, rhs):
        return backends.for_device(g.device).sddmm(
            g, op, _ops.contiguous(lhs), _ops.contiguous(rhs), lhs_target, rhs_target, out_shape,
            schedule)
    return _ops.sddmm(*g.parts, op, lhs, rhs, lhs_target, rhs_target, list(out_shape))


_TARGET_WORDS = {"u": "source node", "v": "destination node", "e": "edge"}
_TARGET_SIZES = {"u": "num_src", "v": "num_dst", "e": "num_edges"}
_TARGET_PLACES = {"u": "the source node of each edge", "v": "the destination node of each edge",
                  "e": "each edge"}


def _binary_shorthand(lhs_target: str, op: str, rhs_target: str):
    def fn(g: Graph, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return gsddmm(g, op, x, y, lhs_target, rhs_target)

    fn.__name__ = fn.__qualname__ = f"{lhs_target}_{op}_{rhs_target}"
    out = "``[num_edges, *shape]`` (``shape`` the broadcast of all but the last dimension, then 1)" \
        if op == "dot" else "``[num_edges, *shape]`` (``shape`` the broadcast of ``x_shape`` and ``y_shape``)"
    fn.__doc__ = (f"g-SDDMM: ``Z_e = x_{lhs_target} {op} y_{rhs_target}`` with ``x`` on "
                  f"{_TARGET_PLACES[lhs_target]} and ``y`` on {_TARGET_PLACES[rhs_target]}.\n\n``x``: ``[{_TARGET_SIZES[lhs_target]}, *x_shape]``; ``y``: "
                  f"``[{_TARGET_SIZES[rhs_target]}, *y_shape]``; returns {out}, in edge order. "
                  f"Same as ``gsddmm(g, '{op}', x, y, '{lhs_target}', '{rhs_target}')``.")
    return fn


def _copy_shorthand(target: str):
    def fn(g: Graph, x: torch.Tensor) -> torch.Tensor:
        return gsddmm(g, "copy_lhs", x, None, target, "v")

    fn.__name__ = fn.__qualname__ = f"copy_{target}"
    fn.__doc__ = (f"Copy ``x``, the {_TARGET_WORDS[target]} features ``[{_TARGET_SIZES[target]}, *shape]``, "
                  f"onto each edge: ``Z_e = x_{target}``, shape ``[num_edges, *shape]``.")
    return fn


SHORTHANDS: dict[str, object] = {}
for _lhs, _rhs in permutations(TARGETS, 2):
    for _op in ("add", "sub", "mul", "div", "dot"):
        _f = _binary_shorthand(_lhs, _op, _rhs)
        SHORTHANDS[_f.__name__] = _f
for _target in ("u", "v"):
    _f = _copy_shorthand(_target)
    SHORTHANDS[_f.__name__] = _f
globals().update(SHORTHANDS)
__all__ += sorted(SHORTHANDS)
