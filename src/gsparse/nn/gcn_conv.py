"""Graph convolution (Kipf and Welling), with PyG's ``GCNConv`` interface."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .. import _block_loops as block_loops
from ..derived import derive
from ..graph import Graph
from ..sddmm import gsddmm
from ..spmm import gspmm
from ._graph import GraphLike, check_node_features, glorot_, graph_and_weights, projects_first, self_loops


@dataclass(frozen=True)
class _Normalized:
    """The propagation graph with ``D^{-1/2} Â D^{-1/2}`` as either a node scaling
    ``dinv`` (``[N]``, when every edge of ``Â`` weighs 1: ``out = dinv ⊙ Â (dinv ⊙ h)``) or
    per-edge weights ``weight`` (``[E]``); the other is ``None``."""

    graph: Graph
    dinv: torch.Tensor | None
    weight: torch.Tensor | None


def _masked_loops(loops) -> torch.Tensor | None:
    """The original self loops a block's loop graph keeps and masks (``BlockSelfLoops.masked``);
    None for other graphs, and for a distributed graph's self loops, which have no mask."""
    return getattr(loops, "masked", None)


def _inverse_sqrt(deg: torch.Tensor) -> torch.Tensor:
    dinv = deg.pow(-0.5)
    return dinv.masked_fill(torch.isinf(dinv), 0.0)


def _loop_weights(g: Graph, edge_weight: torch.Tensor | None, fill: float,
                  dtype: torch.dtype) -> tuple[Graph, torch.Tensor]:
    """PyG's ``add_remaining_self_loops``: the graph with one loop per node and the weights
    of its edges: kept edges keep theirs, a loop takes the node's old loop weight, else ``fill``."""
    loops = self_loops(g)
    if edge_weight is None:
        edge_weight = torch.ones(g.num_edges, dtype=dtype, device=g.device)
    loop_weight = torch.full((g.num_dst,), fill, dtype=edge_weight.dtype, device=g.device)
    if g.num_edges:
        loop_weight = torch.where(loops.loop_edge >= 0, edge_weight[loops.loop_edge.clamp(min=0)],
                                  loop_weight)
    weight = torch.cat([edge_weight, loop_weight])[loops.origin]
    masked = _masked_loops(loops)
    if masked is not None:  # the graph's own loops, kept in a block: the new loop replaces them
        weight = weight.masked_fill(masked, 0.0)
    return loops.graph, weight


def _normalize(g: Graph, edge_weight: torch.Tensor | None, improved: bool, add_self_loops: bool,
               dtype: torch.dtype) -> tuple[Graph, torch.Tensor]:
    """``(graph, w)`` with ``w_e = deg(u)^{-1/2} Â_e deg(v)^{-1/2}``, ``deg`` the weighted
    in-degree of ``Â`` (0 where it is 0). Differentiable in ``edge_weight``."""
    if add_self_loops:
        g, w = _loop_weights(g, edge_weight, 2.0 if improved else 1.0, dtype)
    else:
        w = torch.ones(g.num_edges, dtype=dtype, device=g.device) if edge_weight is None else edge_weight
    dinv = _inverse_sqrt(gspmm(g, "copy_rhs", "sum", None, w))
    return g, gsddmm(g, "mul", dinv, dinv, "u", "v") * w


def _unit_weights(g: Graph, improved: bool, add_self_loops: bool) -> bool:
    """Whether every edge of ``Â`` weighs 1: no added loops, or loops of weight 1 (not
    ``improved``, or every node already had a loop, whose weight 1 is kept)."""
    return not (add_self_loops and improved) or bool((self_loops(g).loop_edge >= 0).all())


def _block_weights(g: Graph, improved: bool, dtype: torch.dtype) -> tuple[Graph, torch.Tensor]:
    """:func:`_normalize` of a block without ``edge_weight``, with the same values: two
    launches on a GPU (:mod:`gsparse._block_loops`), PyTorch operations elsewhere; no g-SpMM
    and g-SDDMM resolved on the loop graph, which is new with every block.

    Every weight of ``Â`` is 0 (the block's own loops, masked), 1 (its other edges, and the
    added loops) or 2 (with ``improved``, an added loop at a node without one; a node's own
    loop keeps its weight 1), so the weights are read off the loop graph's mask, and the
    degrees are exact sums in any order. Every row has its loop, so no degree is 0: the
    inverse square root has no infinity to mask.
    """
    loops = self_loops(g)
    graph = loops.graph
    if block_loops.runs_here(g):  # the same values in two launches
        return graph, block_loops.gcn_weights(graph, loops.edges, loops.masked, improved, dtype)
    w = torch.where(loops.masked, 0.0, 1.0).to(dtype)
    if improved:
        w.index_copy_(0, loops.loop_at, torch.where(loops.loop_edge >= 0, 1.0, 2.0).to(dtype))
    deg = torch.zeros(graph.num_dst, dtype=w.dtype, device=w.device).index_add_(0, graph.csr_dst, w)
    # dinv at both ends of every edge in one gather (loops.edges: col and csr_dst); the
    # product of the two rows is dinv[u] * dinv[v], whatever the order.
    ends = deg.pow(-0.5).index_select(0, loops.edges.view(-1)).view(2, -1)
    return graph, ends.prod(0) * w


def _build_normalized(g: Graph, improved: bool, add_self_loops: bool, dtype: torch.dtype) -> _Normalized:
    """The normalisation for features of ``dtype``, computed in that precision as PyG does
    (float32 for half types, whose inverse square roots would lose digits). Not float32
    for every model: a float64 model would get float32 digits, and its results would then
    depend on the device's float32 ``pow`` beyond float64 rounding."""
    precision = torch.float64 if dtype == torch.float64 else torch.float32
    if add_self_loops and _masked_loops(self_loops(g)) is not None:  # a block: weights mask its loops
        graph, w = _block_weights(g, improved, precision)
        return _Normalized(graph, None, _cast(w, dtype))
    if _unit_weights(g, improved, add_self_loops):
        graph = self_loops(g).graph if add_self_loops else g
        return _Normalized(graph, _cast(_inverse_sqrt(graph.in_degrees().to(precision)), dtype), None)
    graph, w = _normalize(g, None, improved, add_self_loops, precision)
    return _Normalized(graph, None, _cast(w, dtype))


def _cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # Not even a no-op .to() call where the dtype is already right: a new block pays for
    # every torch call on its host path (tests/test_nn_blocks.py counts them).
    return t if t.dtype == dtype else t.to(dtype)


class GCNConv(nn.Module):
    r"""The graph convolution of Kipf and Welling, as PyG's ``GCNConv``.

    .. math::
        X' = \hat D^{-1/2} \hat A \hat D^{-1/2} X \Theta^\top + b

    with ``Â = A + I`` (``A + 2I`` when ``improved``; existing self loops are replaced, keeping
    their weight) and ``D̂`` its weighted in-degrees; ``A_{vu}`` is the weight of the edges
    ``u → v`` (1 each, or ``edge_weight``).

    Args:
        in_channels: size ``F`` of each input node feature.
        out_channels: size ``F'`` of each output node feature.
        improved: self loops weigh 2.
        cached: accepted for PyG compatibility; the normalisation of a graph without
            ``edge_weight`` is always computed once per graph and kept with it.
        add_self_loops: add self loops (defaults to ``normalize``).
        normalize: apply the symmetric normalisation; without it ``X' = A X Θ^T + b``.
        bias: learn the additive bias ``b``.

    Parameters ``lin.weight`` ``[F', F]`` and ``bias`` ``[F']`` have PyG's names, so a PyG
    ``GCNConv``'s ``state_dict`` loads as is. ``Θ`` is applied before or after the
    propagation, whichever costs less (the same result): on a square graph, after it unless
    the layer narrows the features (``F' < F``), as DGL's ``GraphConv`` does, so that the
    narrower side moves over the edges.
    """

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False, cached: bool = False,
                 add_self_loops: bool | None = None, normalize: bool = True, bias: bool = True) -> None:
        super().__init__()
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("add_self_loops=True needs normalize=True (as in PyG)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached = improved, cached
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform ``lin.weight``, zero ``bias`` (PyG's initialisation)."""
        glorot_(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, graph: GraphLike,
                edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        """Propagate ``x`` over the normalised graph.

        Args:
            x: ``[N, F]`` node features.
            graph: a square :class:`gsparse.Graph` (``N`` nodes), a PyG ``edge_index``
                ``[2, E]`` or ``EdgeIndex``, or a sparse ``adj_t`` ``[N, N]`` (whose values
                are the edge weights, as in PyG).
            edge_weight: ``[E]`` weight of each edge, in edge order (optional).

        Returns:
            ``[N, F']``.
        """
        x = check_node_features("x", x, self.in_channels)
        g, adjacency_weight = graph_and_weights(graph, x.shape[0], x.shape[0])
        if edge_weight is None:
            edge_weight = adjacency_weight
        if edge_weight is not None and (not isinstance(edge_weight, torch.Tensor) or edge_weight.dim() != 1
                                        or edge_weight.shape[0] != g.num_edges):
            raise ValueError(f"edge_weight must be a tensor of shape [{g.num_edges}] (one weight per "
                             f"edge), got {getattr(edge_weight, 'shape', type(edge_weight).__name__)}")
        # A X Θ^T = (A X) Θ^T: the order that costs less (on a square graph, propagate the
        # narrower side, as DGL's GraphConv does).
        aggregate_first = not projects_first(g.num_src, g.num_dst, g.num_edges, x.shape[-1], self.out_channels)
        h = x if aggregate_first else self.lin(x)
        if not self.normalize:
            out = gspmm(g, "copy_lhs", "sum", h) if edge_weight is None else \
                gspmm(g, "mul", "sum", h, edge_weight.unsqueeze(-1))
        elif edge_weight is not None:
            graph_hat, w = _normalize(g, edge_weight, self.improved, self.add_self_loops, h.dtype)
            out = gspmm(graph_hat, "mul", "sum", h, w.unsqueeze(-1))
        else:
            # The key names the dtype without its module: derive's keys become attribute names.
            key = ("GCNConv", self.improved, self.add_self_loops, str(h.dtype).removeprefix("torch."))
            norm = derive(g.layers, key, _build_normalized, g, self.improved, self.add_self_loops, h.dtype)
            if norm.dinv is not None:
                dinv = norm.dinv.unsqueeze(-1)
                # No name keeps h past its last use: at papers100M sizes each node-by-feature
                # tensor alive at the propagation is a tenth of a rank's peak memory.
                h = h * dinv
                out = gspmm(norm.graph, "copy_lhs", "sum", h)
                del h
                out = out * dinv
            else:
                out = gspmm(norm.graph, "mul", "sum", h, norm.weight.unsqueeze(-1))
        if aggregate_first:
            out = self.lin(out)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"
