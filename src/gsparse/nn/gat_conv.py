"""Graph attention (Veličković et al.), with PyG's ``GATConv`` interface."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..algebra import REDUCERS
from ..attention import gat_attention
from ..spmm import gspmm
from ._graph import (
    GraphLike,
    as_graph,
    check_node_features,
    edge_index_of,
    glorot_,
    self_loops,
)

# PyG's fill_value names of a reduction, onto gsparse's reducers.
_FILL_REDUCERS = {"mean": REDUCERS["mean"], "add": REDUCERS["sum"], "sum": REDUCERS["sum"],
                  "max": REDUCERS["max"], "min": REDUCERS["min"]}


class GATConv(nn.Module):
    r"""Multi-head graph attention, as PyG's ``GATConv``.

    .. math::
        h_i = \Theta x_i \in \mathbb{R}^{H \times C}, \quad
        e_{ij} = \mathrm{LeakyReLU}(a_{src}^\top h_j + a_{dst}^\top h_i
                 + a_{edge}^\top \Theta_e\, f_{ji}), \quad
        \alpha_{ij} = \mathrm{softmax}_{j \in N(i)}(e_{ij}), \quad
        x'_i = \Big\Vert_{k=1}^{H} \sum_{j \in N(i)} \alpha^k_{ij} h^k_j \;(+\, b)

    per head ``k``, where the edge term is present with ``edge_dim`` (``f_{ji}`` the features
    of the edge ``j -> i``); heads are concatenated (``concat``) or averaged. Attention runs
    on the graph's edges with :func:`gsparse.gat_attention` (the logits ``e`` are computed
    where the softmax reads them, never stored) and a fused g-SpMM ``u_mul_e_sum``: per-edge
    messages ``[E, H, C]`` are never materialised.

    Args:
        in_channels: size ``F`` of each input node feature.
        out_channels: size ``C`` of each head's output.
        heads: number ``H`` of attention heads.
        concat: concatenate the heads (output ``H·C``), else average them (output ``C``).
        negative_slope: slope of the LeakyReLU for negative inputs.
        dropout: dropout probability of the attention coefficients in training.
        add_self_loops: replace the graph's self loops by one loop per node (PyG's
            ``remove_self_loops`` + ``add_self_loops``); built once per graph.
        edge_dim: size ``D`` of the edge features ``edge_attr``; ``None``: no edge features.
        fill_value: the features of the added self loops, with ``edge_dim`` and
            ``add_self_loops``: ``"mean"`` (of the node's incoming edges' features, 0
            without any), ``"add"``/``"sum"``, ``"max"``, ``"min"``, a number or a ``[D]``
            tensor.
        bias: learn an additive bias.
        residual: add a learnt linear projection of the input.

    Parameters ``lin.weight``, ``att_src``, ``att_dst``, ``lin_edge.weight``, ``att_edge``,
    ``bias`` and ``res.weight`` have PyG's names and shapes, so a PyG ``GATConv``'s
    ``state_dict`` loads as is.
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: int | None = None, fill_value: float | torch.Tensor | str = "mean",
                 bias: bool = True, residual: bool = False) -> None:
        super().__init__()
        if isinstance(in_channels, (tuple, list)):
            raise TypeError(f"in_channels must be an int: GATConv runs on square graphs (PyG's "
                            f"(F_src, F_dst) pair for bipartite attention is not supported), "
                            f"got {in_channels!r}")
        if heads < 1:
            raise ValueError(f"heads must be >= 1, got {heads}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1], got {dropout}")
        if isinstance(fill_value, str) and fill_value not in _FILL_REDUCERS:
            raise ValueError(f"fill_value must be a number, a tensor or one of {tuple(_FILL_REDUCERS)}, "
                             f"got {fill_value!r}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, negative_slope, dropout
        self.add_self_loops, self.residual = add_self_loops, residual
        self.edge_dim, self.fill_value = edge_dim, fill_value
        total = heads * out_channels if concat else out_channels
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = nn.Linear(edge_dim, heads * out_channels, bias=False)
            self.att_edge = nn.Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge = None
            self.register_parameter("att_edge", None)
        self.res = nn.Linear(in_channels, total, bias=False) if residual else None
        self.bias = nn.Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform weights and attention vectors, zero bias (PyG's initialisation, in
        PyG's order: the same seed gives the same parameters as PyG's ``GATConv``)."""
        glorot_(self.lin.weight)
        if self.lin_edge is not None:
            glorot_(self.lin_edge.weight)
        if self.res is not None:
            glorot_(self.res.weight)
        glorot_(self.att_src)
        glorot_(self.att_dst)
        if self.att_edge is not None:
            glorot_(self.att_edge)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, graph: GraphLike, edge_attr: torch.Tensor | None = None,
                return_attention_weights: bool | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Attend over each node's incoming edges.

        Args:
            x: ``[N, F]`` node features.
            graph: a square :class:`gsparse.Graph` (``N`` nodes), a PyG ``edge_index``
                ``[2, E]`` or ``EdgeIndex``, or a sparse ``adj_t`` ``[N, N]``.
            edge_attr: ``[E, D]`` (or ``[E]`` when ``D = 1``) edge features in edge order;
                needs ``edge_dim``.
            return_attention_weights: if true, also return the attention weights (as PyG
                2.8 does; ``False`` and ``None`` return ``out`` alone).

        Returns:
            ``[N, H·C]`` (``concat``) or ``[N, C]``; with ``return_attention_weights`` the
            pair ``(out, (edge_index, alpha))``: ``edge_index`` ``[2, E']`` int64 are the
            edges attention ran on (with the self loops, in the order of the graph's CSR
            rows), ``alpha`` ``[E', H]`` their weights in that order.
        """
        if isinstance(x, (tuple, list)):
            raise TypeError("x must be one [N, F] tensor: GATConv runs on square graphs (PyG's "
                            "(x_src, x_dst) pair for bipartite attention is not supported)")
        x = check_node_features("x", x, self.in_channels)
        g = as_graph(graph, x.shape[0], x.shape[0])
        h = self.lin(x).view(-1, self.heads, self.out_channels)
        score_src, score_dst = self._scores(h)
        masked = None
        if self.add_self_loops:
            loops = self_loops(g)
            if edge_attr is not None:
                edge_attr = self._edge_features(g, edge_attr)
                edge_attr = torch.cat([edge_attr, self._loop_features(loops, edge_attr)])[loops.origin]
            g, masked = loops.graph, getattr(loops, "masked", None)  # a DistGraph's have no mask
        elif edge_attr is not None:
            edge_attr = self._edge_features(g, edge_attr)
        edge_scores = None
        if edge_attr is not None:
            # a_edge . (Θ_e f) per head, as f times a [D, H] matrix: no [E, H, C] features
            w = self.lin_edge.weight.view(self.heads, self.out_channels, -1)
            edge_scores = edge_attr @ (w * self.att_edge.view(self.heads, self.out_channels, 1)).sum(1).t()
            edge_scores = edge_scores.to(score_src.dtype)
        # masked: a block's own self loops, kept: no attention goes to them
        alpha = gat_attention(g, score_src, score_dst, float(self.negative_slope), edge_scores, masked)
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        out = gspmm(g, "mul", "sum", h, alpha.unsqueeze(-1))
        if self.concat or self.heads == 1:  # one head's mean is the head (but for -0.0, now kept)
            out = out.reshape(-1, self.heads * self.out_channels)
        else:
            out = out.mean(dim=1)
        if self.res is not None:
            out = out + self.res(x)
        if self.bias is not None:
            out = out + self.bias
        if return_attention_weights:
            return out, (edge_index_of(g), alpha)
        return out

    def _scores(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each node's source and destination attention scores ``[N, H]``.

        Contractions, not ``(h * att).sum(-1)``: torch 2.11's inductor tiles the backward of
        that sum into a reduction that faults with a misaligned address on an H100. They
        run in the dtype the product would have, autocast off, so that under autocast
        bf16 features times float32 attention vectors score in float32, as PyG's do.

        Each is what ``einsum("nhc,hc->nh")`` computes, on the same views (so the same
        values): per head, ``[N, C]`` times ``[C, 1]`` in one batched product (a product
        alone where ``C = 1``), without the einsum's other views: a third of the autograd
        nodes, and no ``select`` whose backward writes a zero tensor for ``att``'s gradient.
        """
        dtype = torch.promote_types(h.dtype, self.att_src.dtype)
        nodes, heads, channels = h.shape
        with torch.autocast(h.device.type, enabled=False):
            h = h.to(dtype)
            if channels == 1:
                return tuple((h * att.to(dtype)).view(nodes, heads) for att in (self.att_src, self.att_dst))
            # A permutation of h each: the gradients reach h one by one, as the einsums' do.
            return tuple(torch.bmm(h.permute(1, 0, 2), att.to(dtype).view(heads, channels, 1))
                         .permute(1, 0, 2).view(nodes, heads) for att in (self.att_src, self.att_dst))

    def _edge_features(self, g, edge_attr: torch.Tensor) -> torch.Tensor:
        if self.lin_edge is None:
            raise ValueError("edge_attr needs a GATConv built with edge_dim")
        if not isinstance(edge_attr, torch.Tensor) or not edge_attr.is_floating_point():
            raise TypeError(f"edge_attr must be a floating tensor, got {getattr(edge_attr, 'dtype', type(edge_attr))}")
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.unsqueeze(-1)
        if edge_attr.dim() != 2 or edge_attr.shape != (g.num_edges, self.edge_dim):
            raise ValueError(f"edge_attr must have shape [{g.num_edges}, {self.edge_dim}] (one row "
                             f"per edge), got {tuple(edge_attr.shape)}")
        return edge_attr

    def _loop_features(self, loops, edge_attr: torch.Tensor) -> torch.Tensor:
        """``[N, D]`` features of the added self loops (PyG's ``add_self_loops`` fill)."""
        n = loops.graph.num_dst
        if not isinstance(self.fill_value, str):
            fill = torch.as_tensor(self.fill_value, dtype=edge_attr.dtype, device=edge_attr.device)
            return fill.expand(n, edge_attr.shape[1])
        # Reduce the old edges' features over each node's incoming edges, the self loops
        # excluded: on the graph with one loop per node, where each loop's features are
        # first those of another incoming edge (so max / min are unchanged), or 0 for a sum.
        reducer = _FILL_REDUCERS[self.fill_value]
        placeholder = torch.zeros(n, edge_attr.shape[1], dtype=edge_attr.dtype, device=edge_attr.device)
        features = torch.cat([edge_attr, placeholder])[loops.origin]
        if not reducer.keeps_arg:  # sum or mean
            total = gspmm(loops.graph, "copy_rhs", "sum", None, features)
            if not reducer.divides_by_degree:
                return total
            others = (loops.graph.in_degrees() - 1).clamp(min=1).to(edge_attr.dtype).unsqueeze(-1)
            return total / others
        # max / min: the loop's placeholder must not win; rows with no other edge give 0.
        sign = 1.0 if reducer.selects_by == ">" else -1.0
        lowest = torch.finfo(edge_attr.dtype).min
        features = torch.cat([sign * edge_attr, placeholder.fill_(lowest)])[loops.origin]
        best = gspmm(loops.graph, "copy_rhs", "max", None, features)
        return sign * best.masked_fill(best == lowest, 0.0)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
