"""g-SpMM, g-SDDMM, edge softmax and GAT's attention on a DistGraph: DGL's semantics, one
rank's rows each.

Each operator takes this rank's features (source ``[num_src, ...]``, destination
``[num_dst, ...]``, edges ``[num_edges, ...]`` in its edge order), checks them as the
single-process operator does, and returns this rank's part of the single-process result:
the rows of ``dst_nodes`` (g-SpMM) or its edges (g-SDDMM, edge softmax). Source
features are exchanged only when the operator reads them and some rank has a halo:

* ``exchange="overlap"``: the halo exchange starts, the *inner* edges (sources of mine)
  are computed meanwhile, then the *boundary* edges once the halo arrived; the two
  partial results are combined (sum/mean: added, then divided by the in-degree; max/min:
  the larger/smaller where a row has edges in both parts). In the backward pass the
  halo's gradient is sent back to its owners while the inner edges' gradients are computed.
* ``exchange="halo"``: exchange, then one pass over ``[my sources | halo]``.
* ``exchange="allgather"``: the naive baseline: all-gather every source row, then one pass.

Gradients match the single-process ones. One difference is possible with ``"overlap"``
and max/min: when the winning values of a row's inner and boundary edges are exactly
equal, the inner edge wins, where a single process picks the first in CSR order (the
output is the same; the gradient goes to the other of two tied operands). ``"halo"`` and
``"allgather"`` break ties as a single process does.
"""

from __future__ import annotations

import torch

from .. import edge_softmax as _edge_softmax
from .. import gsddmm as _gsddmm
from .. import gspmm as _gspmm
from .._checks import (
    broadcast_feature_shape,
    check_choice,
    check_features,
    check_gat_operands,
    check_same_dtype,
)
from ..algebra import BINARY_OPS, REDUCERS, SDDMM_OPS, SPMM_OPS, TARGETS
from . import exchange as ex
from .dist_graph import DistGraph

__all__ = ["gspmm", "gsddmm", "edge_softmax", "gat_attention"]


def _check_graph(g: object) -> DistGraph:
    if not isinstance(g, DistGraph):
        raise TypeError(f"g must be a gsparse.distributed.DistGraph, got {type(g).__name__}")
    return g


def _rows(g: DistGraph, target: str) -> tuple[int, str]:
    return {"u": (g.num_src, "source nodes"), "v": (g.num_dst, "destination nodes"),
            "e": (g.num_edges, "edges")}[target]


def _extended(g: DistGraph, x: torch.Tensor):
    """``(graph, features)`` for one pass over all my edges: the local graph with
    ``[x | halo]``, or the all-gathered graph and matrix."""
    if not g.plan.active:
        return g.local, x
    if g.exchange == "allgather":
        return g.gathered, ex.allgather(g.plan, x)
    return g.local, torch.cat([x, ex.gather(g.plan, x)])


def _row_mask(graph, like: torch.Tensor) -> torch.Tensor:
    return (graph.in_degrees() > 0).view(-1, *([1] * (like.dim() - 1)))


def gspmm(g: DistGraph, op: str, reduce: str, lhs: torch.Tensor | None = None,
          rhs: torch.Tensor | None = None) -> torch.Tensor:
    r"""Distributed g-SpMM: ``Z_v = Φ_{(u, e, v)} X_u ⊕ Y_e`` for this rank's rows ``v``.

    Args as :func:`gsparse.gspmm`, on this rank's share: ``lhs`` ``[num_src, *lhs_shape]``
    (this rank's source nodes), ``rhs`` ``[num_edges, *rhs_shape]`` (its edges).

    Returns:
        ``[num_dst, *shape]``, the rows ``g.dst_nodes`` of the single-process result.

    Differentiable in ``lhs`` and ``rhs``; gradients of halo rows are summed at their owners.
    Collective when ``op`` reads ``lhs``: every rank of the group must call it (and
    backpropagate through it) in the same order.
    """
    _check_graph(g)
    check_choice("op", op, SPMM_OPS)
    check_choice("reduce", reduce, tuple(REDUCERS))
    binop = BINARY_OPS[op]
    lhs = check_features("lhs", lhs, g, g.num_src, "source nodes") if binop.uses_lhs else None
    rhs = check_features("rhs", rhs, g, g.num_edges, "edges") if binop.uses_rhs else None
    check_same_dtype(lhs, rhs)
    if lhs is not None and rhs is not None:
        broadcast_feature_shape(tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    if lhs is None or not g.plan.active:
        return _gspmm(g.local, op, reduce, lhs, rhs)
    if g.exchange != "overlap":
        graph, x = _extended(g, lhs)
        return _gspmm(graph, op, reduce, x, rhs)
    pending = ex.start_gather(g.plan, lhs)
    (inner, inner_edges), (outer, outer_edges) = g.inner, g.boundary
    reducer = REDUCERS[reduce]
    # The two halves' sums are added before a mean divides by the whole row's degree.
    part = "sum" if reducer.divides_by_degree else reduce
    rhs_in = None if rhs is None else rhs[inner_edges]
    rhs_out = None if rhs is None else rhs[outer_edges]
    z_in = _gspmm(inner, op, part, pending.source, rhs_in)
    z_out = _gspmm(outer, op, part, pending.wait(), rhs_out)
    # The received halo is freed here unless a backward keeps it, and each partial result
    # once combined: at papers100M sizes each is as large as the layer's input.
    del pending
    if not reducer.keeps_arg:
        # Summed into z_in where autograd allows it: a fresh tensor (not a view a backend
        # reshaped to the feature shape), which no backward of a sum reads.
        z = z_in.add_(z_out) if z_in._base is None else z_in + z_out
        del z_in, z_out
        if reducer.divides_by_degree:
            deg = g.in_degrees().clamp(min=1).to(z.dtype)
            z = z / deg.view(-1, *([1] * (z.dim() - 1)))
        return z
    has_in, has_out = _row_mask(inner, z_in), _row_mask(outer, z_out)
    # ties: the inner edge wins
    better = z_out > z_in if reducer.selects_by == ">" else z_out < z_in
    take_out = has_out & (~has_in | better)
    return torch.where(take_out, z_out, z_in)


def _sddmm_shape_checks(op: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None) -> None:
    """The shape errors of :func:`gsparse.gsddmm`, raised before anything is exchanged."""
    if lhs is None or rhs is None:
        return
    if BINARY_OPS[op].reduces_last_dim:
        l_shape = tuple(lhs.shape[1:]) or (1,)
        r_shape = tuple(rhs.shape[1:]) or (1,)
        if l_shape[-1] != r_shape[-1]:
            raise ValueError(f"dot needs equal last dimensions, got lhs {list(lhs.shape[1:])} "
                             f"and rhs {list(rhs.shape[1:])}")
        broadcast_feature_shape(l_shape[:-1], r_shape[:-1])
    else:
        broadcast_feature_shape(tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))


def gsddmm(g: DistGraph, op: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None,
           lhs_target: str = "u", rhs_target: str = "v") -> torch.Tensor:
    r"""Distributed g-SDDMM: ``Z_e = lhs[t_l(e)] ⊕ rhs[t_r(e)]`` for this rank's edges.

    Args as :func:`gsparse.gsddmm`, on this rank's share: an operand on ``u`` is
    ``[num_src, ...]`` (this rank's source nodes), on ``v`` ``[num_dst, ...]``, on ``e``
    ``[num_edges, ...]``.

    Returns:
        ``[num_edges, *shape]`` in this rank's edge order.

    Differentiable; collective when an operand it reads is on ``u``.
    """
    _check_graph(g)
    check_choice("op", op, SDDMM_OPS)
    check_choice("lhs_target", lhs_target, TARGETS)
    check_choice("rhs_target", rhs_target, TARGETS)
    binop = BINARY_OPS[op]
    if binop.uses_lhs:
        lhs = check_features("lhs", lhs, g, *_rows(g, lhs_target))
    if binop.uses_rhs:
        rhs = check_features("rhs", rhs, g, *_rows(g, rhs_target))
    lhs, rhs = (lhs if binop.uses_lhs else None), (rhs if binop.uses_rhs else None)
    check_same_dtype(lhs, rhs)
    _sddmm_shape_checks(op, lhs, rhs)
    reads_u = [t for t, target in ((lhs, lhs_target), (rhs, rhs_target)) if t is not None and target == "u"]
    if not reads_u or not g.plan.active:
        return _gsddmm(g.local, op, lhs, rhs, lhs_target, rhs_target)
    if g.exchange != "overlap":
        graph = g.local
        operands = []
        for t, target in ((lhs, lhs_target), (rhs, rhs_target)):
            if t is not None and target == "u":
                graph, t = _extended(g, t)
            operands.append(t)
        return _gsddmm(graph, op, operands[0], operands[1], lhs_target, rhs_target)
    # An operand on u read twice (u_dot_u) is exchanged once.
    pendings = {id(t): ex.start_gather(g.plan, t) for t in reads_u}
    (inner, inner_edges), (outer, outer_edges) = g.inner, g.boundary

    def part(t, target, edges, halo):
        if t is None:
            return None
        if target == "e":
            return t[edges]
        if target == "u":
            return pendings[id(t)].wait() if halo else pendings[id(t)].source
        return t

    z_in = _gsddmm(inner, op, part(lhs, lhs_target, inner_edges, False),
                   part(rhs, rhs_target, inner_edges, False), lhs_target, rhs_target)
    z_out = _gsddmm(outer, op, part(lhs, lhs_target, outer_edges, True),
                    part(rhs, rhs_target, outer_edges, True), lhs_target, rhs_target)
    return torch.cat([z_in, z_out])[g.edge_merge]


def edge_softmax(g: DistGraph, logits: torch.Tensor, eids: None = None, norm_by: str = "dst") -> torch.Tensor:
    r"""Distributed edge softmax over the edges sharing a destination (or a source).

    .. math::  a_e = \exp(z_e - m) / \textstyle\sum_{e'} \exp(z_{e'} - m)

    Args as :func:`gsparse.edge_softmax`; ``logits`` ``[num_edges, *shape]`` in this rank's
    edge order. ``norm_by="dst"`` needs no communication (a row's edges are all on its
    rank). ``norm_by="src"`` does: each rank reduces its edges per source node, the
    partial maxima and sums go to the source's owner and the totals come back
    (collective, four exchanges; differentiable through the sums). ``eids`` (a subset of
    the edges) is not available on a distributed graph.
    """
    _check_graph(g)
    if isinstance(eids, str):  # gsparse.edge_softmax's error for DGL's positional norm_by
        raise TypeError(f"eids must be a tensor of edge ids, got {eids!r}: as in DGL, the third "
                        f"argument is eids; pass norm_by={eids!r} by keyword")
    if eids is not None:
        raise NotImplementedError("edge_softmax with eids is not available on a distributed graph")
    check_choice("norm_by", norm_by, ("dst", "src"))
    check_features("logits", logits, g, g.num_edges, "edges")
    if norm_by == "dst" or not g.plan.active:
        return _edge_softmax(g.local, logits, norm_by=norm_by)
    # As gsparse.edge_softmax: half precision and autocast compute in float32; the
    # autocast result stays float32.
    dtype = logits.dtype
    if torch.is_autocast_enabled(g.device.type) and dtype != torch.float64:
        dtype = torch.float32
    z = logits if logits.dtype == torch.float64 else logits.float()
    with torch.autocast(g.device.type, enabled=False):
        return _src_softmax(g, z).to(dtype)


def _src_softmax(g: DistGraph, z: torch.Tensor) -> torch.Tensor:
    reverse = g.local.reverse()  # rows: [my sources | halo]
    n = g.num_src
    with torch.no_grad():  # the shift cancels in the softmax: a constant for autograd
        part_max = _gspmm(reverse, "copy_rhs", "max", None, z)
        part_max = part_max.masked_fill(~_row_mask(reverse, part_max), float("-inf"))
        top = torch.maximum(part_max[:n], ex.scatter(g.plan, part_max[n:], "amax"))
        top = torch.cat([top, ex.gather(g.plan, top)])
    e = torch.exp(_gsddmm(g.local, "sub", z, top.masked_fill(torch.isinf(top), 0), "e", "u"))
    part_sum = _gspmm(reverse, "copy_rhs", "sum", None, e)
    total = part_sum[:n] + ex.scatter(g.plan, part_sum[n:])
    total = torch.cat([total, ex.gather(g.plan, total)])
    return _gsddmm(g.local, "div", e, total, "e", "u")


def gat_attention(g: DistGraph, score_src: torch.Tensor, score_dst: torch.Tensor, negative_slope: float = 0.2,
                  edge_scores: torch.Tensor | None = None, masked: torch.Tensor | None = None) -> torch.Tensor:
    """``gsparse.gat_attention`` on this rank's edges, as the operations it fuses: the scores'
    sums (:func:`gsddmm`, which exchanges the sources' halo), the LeakyReLU, the mask and
    :func:`edge_softmax`. ``score_src`` ``[num_src, *shape]`` (this rank's sources),
    ``score_dst`` ``[num_dst, *shape]``, ``edge_scores`` ``[num_edges, *shape]`` and
    ``masked`` ``[num_edges]`` (bool) in this rank's edge order; returns ``[num_edges, *shape]``."""
    check_gat_operands(_check_graph(g), score_src, score_dst, negative_slope, edge_scores, masked)
    logits = gsddmm(g, "add", score_src, score_dst, "u", "v")
    if edge_scores is not None:
        logits = logits + edge_scores
    logits = torch.nn.functional.leaky_relu(logits, negative_slope)
    if masked is not None:
        logits = logits.masked_fill(masked.view(-1, *([1] * (logits.dim() - 1))), float("-inf"))
    return edge_softmax(g, logits)
