"""GAT's attention coefficients: the edge softmax of LeakyReLU-activated score sums, fused."""

from __future__ import annotations

import torch

from . import _calls, _ops, _resolved, backends
from ._checks import check_gat_operands, check_graph, graph_override
from .graph import Graph

__all__ = ["gat_attention"]


def gat_attention(g: Graph, score_src: torch.Tensor, score_dst: torch.Tensor, negative_slope: float = 0.2,
                  edge_scores: torch.Tensor | None = None, masked: torch.Tensor | None = None) -> torch.Tensor:
    r"""GAT's attention over each node's incoming edges, as ``edge_softmax`` of the scores.

    .. math::  z_e = \mathrm{LeakyReLU}(s^{src}_u + s^{dst}_v + s^{e}_e),
               \quad a_e = \frac{\exp(z_e)}{\sum_{e' \to v} \exp(z_{e'})}

    for each edge ``e = (u, v)``. It computes what ``edge_softmax(g, leaky_relu(gsddmm(g,
    "add", score_src, score_dst) + edge_scores, negative_slope))`` computes, rounded the
    same way, in one pass that never stores a logit; its gradient is one pass too (plus a
    g-SpMM of the reverse graph for ``score_src``).

    Args:
        g: the graph.
        score_src: ``[num_src, *shape]`` each source node's score, e.g. ``[N, heads]`` for
            GAT's ``(W h_u) · a_src`` per head.
        score_dst: ``[num_dst, *shape]`` each destination node's score, same dtype.
        negative_slope: the LeakyReLU's slope for negative logits.
        edge_scores: ``[num_edges, *shape]`` a score per edge added to the logits (GAT with
            edge features), in edge order; ``None`` for none.
        masked: ``[num_edges]`` bool in edge order: edges that take no attention (their
            logits are ``-inf``) but stay in the graph; ``None`` for none. A destination whose
            edges are all masked gets NaN, as ``edge_softmax`` of ``-inf`` logits does.

    Returns:
        ``[num_edges, *shape]`` in edge order, the scores' dtype. Inside ``torch.autocast``
        the scores are cast to float32 first, as for ``edge_softmax``.

    Differentiable with respect to the three scores (``masked`` edges get no gradient).
    """
    key = None
    if type(g) is Graph and _calls.eager():
        key = ("gat", _calls.facts(score_src), _calls.facts(score_dst), _calls.facts(edge_scores),
               _calls.facts(masked))
        call = _calls.find(g, key)
        if call is not None and type(negative_slope) is float:  # validated by an earlier call
            return _resolved.gat_attention_resolved(call, score_src, score_dst, edge_scores, masked,
                                                    negative_slope)
    override = graph_override(g)
    if override is not None:
        return override(gat_attention, (g, score_src, score_dst),
                        {"negative_slope": negative_slope, "edge_scores": edge_scores, "masked": masked})
    check_gat_operands(check_graph(g), score_src, score_dst, negative_slope, edge_scores, masked)
    negative_slope = float(negative_slope)
    if key is not None and False not in key and not torch.is_autocast_enabled(g.device.type):
        call = _calls.store(g, key, _calls.Call(
            g, _calls.resolve_gat_attention(g, score_src, score_dst, edge_scores, masked),
            (None, None, None, None), (g.num_edges, *score_src.shape[1:]), ()))
        return _resolved.gat_attention_resolved(call, score_src, score_dst, edge_scores, masked,
                                                negative_slope)
    score_src, score_dst, edge_scores = _ops.autocast_operands(g.device, score_src, score_dst, edge_scores,
                                                               dtype=torch.float32)
    if _ops.direct_call_ok(score_src, score_dst, edge_scores, masked):
        return backends.for_device(g.device).gat_attention(
            g, score_src.contiguous(), score_dst.contiguous(), _ops.contiguous(edge_scores), masked,
            negative_slope)
    return _ops.gat_attention(*g.parts, score_src, score_dst, edge_scores, masked, negative_slope)
