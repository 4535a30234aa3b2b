"""g-SpMM front end: ``Z_v = Φ_{u ∈ N(v)} (X_u ⊕ Y_e)`` and its DGL shorthands."""

from __future__ import annotations

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
from .algebra import BINARY_OPS, REDUCERS, SPMM_OPS
from .graph import Graph

__all__ = ["gspmm"]


def gspmm(
    g: Graph,
    op: str,
    reduce: str,
    lhs: torch.Tensor | None = None,
    rhs: torch.Tensor | None = None,
    *,
    schedule: object | None = None,
) -> torch.Tensor:
    r"""Generalized sparse-dense matrix multiplication, with DGL's semantics.

    .. math::  Z_v = \Phi_{(u, e, v) \in E} \; X_u \oplus Y_e

    Args:
        g: the graph; messages flow from source ``u`` to destination ``v``.
        op: ⊕, one of ``add``, ``sub``, ``mul``, ``div``, ``copy_lhs``, ``copy_rhs``.
        reduce: Φ, one of ``sum``, ``mean``, ``max``, ``min``. Rows with no incoming
            edges give 0 for every reducer.
        lhs: source-node features ``[num_src, *lhs_shape]`` (unused by ``copy_rhs``).
        rhs: edge features ``[num_edges, *rhs_shape]`` in edge order (unused by ``copy_lhs``).
        schedule: for CUDA tensors, force a kernel schedule instead of the default one
            (a g-SpMM schedule such as :class:`gsparse.SpmmOnePass`; anything else is a
            TypeError on every device); the PyTorch-ops backend has no use for it. A forced schedule calls the backend
            directly: no autograd (ValueError if an operand requires grad) and no
            ``torch.compile`` node. For kernel tests and tuning.

    Returns:
        ``[num_dst, *shape]`` where ``shape`` broadcasts ``lhs_shape`` and ``rhs_shape``
        as NumPy does. Same dtype as the inputs; half precision accumulates in float32.
        Inside ``torch.autocast``, float32 and half operands are first cast to the
        region's dtype, as for a matmul.

    Differentiable in ``lhs`` and ``rhs`` (DGL's gradients): for sum/mean the gradient
    of ``lhs`` is a g-SpMM of the output gradient on the reverse graph (on a sampled
    block, atomic adds over its edges: see the semantics page) and that of ``rhs`` a
    g-SDDMM; for max/min each output element's gradient goes to the operands of
    its winning edge only (the first in CSR order on ties), and empty rows give none.
    """
    key = None
    if schedule is None and type(g) is Graph and _calls.eager():
        key = ("spmm", op, reduce, _calls.facts(lhs), _calls.facts(rhs))
        call = _calls.find(g, key)
        if call is not None:  # validated and resolved by an earlier call with the same facts
            return _resolved.spmm_resolved(call, lhs, rhs)
    override = graph_override(g)
    if override is not None:
        return override(gspmm, (g, op, reduce, lhs, rhs), {"schedule": schedule})
    check_graph(g)
    if schedule is not None:
        check_schedule(schedule, "spmm")
    check_choice("op", op, SPMM_OPS)
    check_choice("reduce", reduce, tuple(REDUCERS))
    binop = BINARY_OPS[op]
    lhs, rhs = _ops.autocast_operands(g.device, lhs, rhs)
    if binop.uses_lhs:
        lhs = check_features("lhs", lhs, g, g.num_src, "source nodes")
    else:
        lhs = None
    if binop.uses_rhs:
        rhs = check_features("rhs", rhs, g, g.num_edges, "edges")
    else:
        rhs = None
    check_same_dtype(lhs, rhs)
    shapes = [tuple(t.shape[1:]) for t in (lhs, rhs) if t is not None]
    out_shape = broadcast_feature_shape(*shapes) if len(shapes) == 2 else shapes[0]
    lhs = None if lhs is None else pad_feature_dims(lhs, len(out_shape))
    rhs = None if rhs is None else pad_feature_dims(rhs, len(out_shape))
    if key is not None and False not in key and not torch.is_autocast_enabled(g.device.type):
        run = _calls.resolve_spmm(g, op, reduce, lhs, rhs, out_shape)
        padded = (_calls.shaping(lhs, key[3], binop.uses_lhs),
                  _calls.shaping(rhs, key[4], binop.uses_rhs))
        call = _calls.store(g, key, _calls.Call(g, run, padded, out_shape, (op, reduce)))
        return _resolved.spmm_resolved(call, lhs, rhs)
    grad = _ops.needs_grad(lhs, rhs)
    if schedule is not None and grad:
        raise ValueError("schedule forces a kernel outside autograd; it cannot be used with "
                         "operands that require grad (detach them or drop schedule)")
    if schedule is not None or _ops.direct_call_ok(lhs, rhs):
        return backends.for_device(g.device).spmm(
            g, op, reduce, _ops.contiguous(lhs), _ops.contiguous(rhs), out_shape, schedule)
    if grad and REDUCERS[reduce].keeps_arg:
        return _ops.spmm_arg(*g.parts, op, reduce, lhs, rhs, list(out_shape), False)[0]
    return _ops.spmm(*g.parts, op, reduce, lhs, rhs, list(out_shape), False)


_SHORTHAND_OPS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div"}


def _binary_shorthand(op: str, reduce: str):
    def fn(g: Graph, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return gspmm(g, op, reduce, x, y)

    fn.__name__ = fn.__qualname__ = f"u_{op}_e_{reduce}"
    fn.__doc__ = (f"g-SpMM: ``Z_v = {reduce}_(u,e,v) (x_u {op} y_e)``.\n\n"
                  f"``x``: ``[num_src, *x_shape]`` node features; ``y``: ``[num_edges, *y_shape]`` "
                  f"edge features, in edge order; returns ``[num_dst, *shape]``, ``shape`` the "
                  f"broadcast of ``x_shape`` and ``y_shape``. Same as ``gspmm(g, '{op}', '{reduce}', x, y)``.")
    return fn


def _copy_shorthand(which: str, reduce: str):
    op = "copy_lhs" if which == "u" else "copy_rhs"

    def fn(g: Graph, x: torch.Tensor) -> torch.Tensor:
        return gspmm(g, op, reduce, x, None) if which == "u" else gspmm(g, op, reduce, None, x)

    what = "source-node features ``[num_src, *shape]``" if which == "u" else \
        "edge features ``[num_edges, *shape]``"
    fn.__name__ = fn.__qualname__ = f"copy_{which}_{reduce}"
    fn.__doc__ = (f"g-SpMM: ``Z_v = {reduce}`` over incoming edges of ``x``, the {what}.\n\n"
                  f"Returns ``[num_dst, *shape]``. Same as ``gspmm(g, '{op}', '{reduce}', ...)``.")
    return fn


SHORTHANDS: dict[str, object] = {}
for _reduce in REDUCERS:
    for _op in _SHORTHAND_OPS:
        _f = _binary_shorthand(_op, _reduce)
        SHORTHANDS[_f.__name__] = _f
    for _which in ("u", "e"):
        _f = _copy_shorthand(_which, _reduce)
        SHORTHANDS[_f.__name__] = _f
globals().update(SHORTHANDS)
__all__ += sorted(SHORTHANDS)
