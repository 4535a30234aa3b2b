"""Edge softmax: normalise edge logits over the incoming (or outgoing) edges of each node."""

from __future__ import annotations

import torch

from . import _calls, _ops, backends
from ._checks import check_choice, check_features, check_graph, graph_override
from .graph import Graph

__all__ = ["edge_softmax"]


def edge_softmax(g: Graph, logits: torch.Tensor, norm_by: str = "dst") -> torch.Tensor:
    r"""Softmax of edge logits over the edges that share a destination (or source), as in DGL.

    .. math::  a_e = \frac{\exp(z_e - m_v)}{\sum_{e' \to v} \exp(z_{e'} - m_v)},
               \quad m_v = \max_{e' \to v} z_{e'}

    Args:
        g: the graph.
        logits: ``[num_edges, *shape]`` in edge order, e.g. ``[E, heads, 1]`` for GAT.
        norm_by: ``"dst"`` normalises over each destination's incoming edges, ``"src"``
            over each source's outgoing edges.

    Returns:
        ``[num_edges, *shape]``, same dtype as ``logits`` (half precision computes in float32).
        Inside ``torch.autocast`` the logits are cast to float32 first, as for ``torch.softmax``.

    Differentiable: with ``a`` the output and ``da`` its gradient,
    ``dz_e = a_e (da_e - Σ_{e'} a_{e'} da_{e'})`` over the edges ``e'`` sharing ``e``'s
    destination (or source).
    """
    key = None
    if type(g) is Graph and _calls.eager():
        key = ("softmax", _calls.facts(logits), norm_by)
        call = _calls.find(g, key)
        if call is not None:  # validated and resolved by an earlier call with the same facts
            return _ops.softmax_resolved(call, logits)
    override = graph_override(g)
    if override is not None:
        return override(edge_softmax, (g, logits, norm_by), {})
    check_graph(g)
    check_choice("norm_by", norm_by, ("dst", "src"))
    check_features("logits", logits, g, g.num_edges, "edges")
    if key is not None and False not in key and not torch.is_autocast_enabled(g.device.type):
        call = _calls.store(g, key, _calls.Call(g, _calls.resolve_softmax(g, logits, norm_by),
                                                (None,), tuple(logits.shape[1:]), (norm_by,)))
        return _ops.softmax_resolved(call, logits)
    (logits,) = _ops.autocast_operands(g.device, logits, dtype=torch.float32)
    if _ops.direct_call_ok(logits):
        return backends.for_device(g.device).edge_softmax(g, logits.contiguous(), norm_by)
    return _ops.edge_softmax(*g.parts, logits, norm_by)
