"""Edge softmax: normalise edge logits over the incoming (or outgoing) edges of each node."""

from __future__ import annotations

import torch

from . import _calls, _ops, _resolved, backends
from ._checks import check_choice, check_features, check_graph, graph_override
from .graph import Graph

__all__ = ["edge_softmax"]


def edge_softmax(g: Graph, logits: torch.Tensor, eids: torch.Tensor | None = None,
                 norm_by: str = "dst") -> torch.Tensor:
    r"""Softmax of edge logits over the edges that share a destination (or source), as in DGL.

    .. math::  a_e = \frac{\exp(z_e - m_v)}{\sum_{e' \to v} \exp(z_{e'} - m_v)},
               \quad m_v = \max_{e' \to v} z_{e'}

    Args:
        g: the graph.
        logits: ``[num_edges, *shape]`` in edge order, e.g. ``[E, heads, 1]`` for GAT; with
            ``eids``, ``[len(eids), *shape]``, one row per listed edge.
        eids: ``[k]`` int64 or int32 edge ids (DGL's ``eids``): the softmax runs over those
            edges only, as on the edge subgraph they form; ``None``: every edge.
        norm_by: ``"dst"`` normalises over each destination's incoming edges, ``"src"``
            over each source's outgoing edges.

    Returns:
        ``[num_edges, *shape]`` (``[len(eids), *shape]`` with ``eids``), same dtype as
        ``logits`` (half precision computes in float32). Inside ``torch.autocast`` the
        logits are cast to float32 first, as for ``torch.softmax``.

    Differentiable: with ``a`` the output and ``da`` its gradient,
    ``dz_e = a_e (da_e - Σ_{e'} a_{e'} da_{e'})`` over the edges ``e'`` sharing ``e``'s
    destination (or source).
    """
    if eids is not None:
        return _edge_softmax_of(g, logits, eids, norm_by)
    key = None
    if type(g) is Graph and _calls.eager():
        key = ("softmax", _calls.facts(logits), norm_by)
        call = _calls.find(g, key)
        if call is not None:  # validated and resolved by an earlier call with the same facts
            return _resolved.softmax_resolved(call, logits)
    override = graph_override(g)
    if override is not None:
        return override(edge_softmax, (g, logits), {"norm_by": norm_by})
    check_graph(g)
    check_choice("norm_by", norm_by, ("dst", "src"))
    check_features("logits", logits, g, g.num_edges, "edges")
    if key is not None and False not in key and not torch.is_autocast_enabled(g.device.type):
        call = _calls.store(g, key, _calls.Call(g, _calls.resolve_softmax(g, logits, norm_by),
                                                (None,), tuple(logits.shape[1:]), (norm_by,)))
        return _resolved.softmax_resolved(call, logits)
    (logits,) = _ops.autocast_operands(g.device, logits, dtype=torch.float32)
    if _ops.direct_call_ok(logits):
        return backends.for_device(g.device).edge_softmax(g, logits.contiguous(), norm_by)
    return _ops.edge_softmax(*g.parts, logits, norm_by)


def _endpoint(g: Graph, norm_by: str) -> torch.Tensor:
    """``[E]`` int64 destination (``"dst"``) or source of each edge in edge order, from the
    graph's CSR alone (traceable: no cached structure is built)."""
    rowptr, col, eid, _ = g.parts
    if norm_by == "dst":
        rows = torch.arange(rowptr.shape[0] - 1, device=rowptr.device)
        in_csr_order = torch.repeat_interleave(rows, rowptr.diff().long(), output_size=col.shape[0])
    else:
        in_csr_order = col.long()
    if eid is None:
        return in_csr_order
    return torch.empty_like(in_csr_order).index_copy_(0, eid.long(), in_csr_order)


def _edge_softmax_of(g: Graph, logits: torch.Tensor, eids: torch.Tensor, norm_by: str) -> torch.Tensor:
    """Edge softmax over the edges ``eids`` only, in dense PyTorch ops (autograd does the rest)."""
    if isinstance(eids, str):
        raise TypeError(f"eids must be a tensor of edge ids, got {eids!r}: as in DGL, the third "
                        f"argument is eids; pass norm_by={eids!r} by keyword")
    if graph_override(g) is not None:
        raise NotImplementedError("edge_softmax with eids is not available on a distributed graph")
    check_graph(g)
    check_choice("norm_by", norm_by, ("dst", "src"))
    if not isinstance(eids, torch.Tensor) or eids.dim() != 1 or eids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"eids must be a 1-D int32 or int64 tensor of edge ids, got "
                        f"{getattr(eids, 'dtype', type(eids).__name__)} of shape {tuple(getattr(eids, 'shape', ()))}")
    if eids.device != g.device:
        raise ValueError(f"eids is on {eids.device} but the graph is on {g.device}")
    check_features("logits", logits, g, eids.shape[0], "edges listed in eids")
    if not torch.compiler.is_compiling() and eids.numel() and \
            bool(((eids < 0) | (eids >= g.num_edges)).any()):
        raise ValueError(f"eids holds edge ids outside [0, {g.num_edges})")
    (z,) = _ops.autocast_operands(g.device, logits, dtype=torch.float32)
    x = z.float() if z.dtype in (torch.float16, torch.bfloat16) else z
    group = _endpoint(g, norm_by).index_select(0, eids.long())
    rows = g.num_dst if norm_by == "dst" else g.num_src
    index = group.view(-1, *([1] * (x.dim() - 1))).expand_as(x)
    # The row maximum only keeps exp() in range: it carries no gradient.
    row_max = x.new_full((rows, *x.shape[1:]), float("-inf")).scatter_reduce(
        0, index, x.detach(), "amax", include_self=True)
    exp = torch.exp(x - row_max.index_select(0, group))
    row_sum = x.new_zeros((rows, *x.shape[1:])).index_add(0, group, exp)
    return (exp / row_sum.index_select(0, group)).to(z.dtype)
