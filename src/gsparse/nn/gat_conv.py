"""Graph attention (Veličković et al.), with PyG's ``GATConv`` interface."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..graph import Graph
from ..sddmm import gsddmm
from ..softmax import edge_softmax
from ..spmm import gspmm
from ._graph import as_graph, check_node_features, glorot_, self_loops


class GATConv(nn.Module):
    r"""Multi-head graph attention, as PyG's ``GATConv`` (without edge features).

    .. math::
        h_i = \Theta x_i \in \mathbb{R}^{H \times C}, \quad
        e_{ij} = \mathrm{LeakyReLU}(a_{src}^\top h_j + a_{dst}^\top h_i), \quad
        \alpha_{ij} = \mathrm{softmax}_{j \in N(i)}(e_{ij}), \quad
        x'_i = \Big\Vert_{k=1}^{H} \sum_{j \in N(i)} \alpha^k_{ij} h^k_j \;(+\, b)

    per head ``k``; heads are concatenated (``concat``) or averaged. Attention runs on the
    graph's edges with g-SDDMM (``e``, ``[E, H]``), :func:`gsparse.edge_softmax` and a fused
    g-SpMM ``u_mul_e_sum``: per-edge messages ``[E, H, C]`` are never materialised.

    Args:
        in_channels: size ``F`` of each input node feature.
        out_channels: size ``C`` of each head's output.
        heads: number ``H`` of attention heads.
        concat: concatenate the heads (output ``H·C``), else average them (output ``C``).
        negative_slope: slope of the LeakyReLU for negative inputs.
        dropout: dropout probability of the attention coefficients in training.
        add_self_loops: replace the graph's self loops by one loop per node (PyG's
            ``remove_self_loops`` + ``add_self_loops``); built once per graph.
        bias: learn an additive bias.
        residual: add a learnt linear projection of the input.

    Shapes:
        ``x`` ``[N, F]``, ``graph`` a square :class:`gsparse.Graph` or a PyG ``edge_index``
        ``[2, E]`` -> ``[N, H·C]`` (``concat``) or ``[N, C]``.

    Parameters ``lin.weight``, ``att_src``, ``att_dst``, ``bias`` and ``res.weight`` have
    PyG's names and shapes, so a PyG ``GATConv``'s ``state_dict`` loads as is.
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 bias: bool = True, residual: bool = False) -> None:
        super().__init__()
        if heads < 1:
            raise ValueError(f"heads must be >= 1, got {heads}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1], got {dropout}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, negative_slope, dropout
        self.add_self_loops, self.residual = add_self_loops, residual
        total = heads * out_channels if concat else out_channels
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        self.res = nn.Linear(in_channels, total, bias=False) if residual else None
        self.bias = nn.Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform weights and attention vectors, zero bias (PyG's initialisation)."""
        for t in (self.lin.weight, self.att_src, self.att_dst):
            glorot_(t)
        if self.res is not None:
            glorot_(self.res.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, graph: Graph | torch.Tensor) -> torch.Tensor:
        x = check_node_features("x", x, self.in_channels)
        g = as_graph(graph, x.shape[0], x.shape[0])
        masked = None
        if self.add_self_loops:
            loops = self_loops(g)
            g, masked = loops.graph, getattr(loops, "masked", None)  # a DistGraph's have no mask
        h = self.lin(x).view(-1, self.heads, self.out_channels)
        score_src = (h * self.att_src).sum(-1)
        score_dst = (h * self.att_dst).sum(-1)
        logits = F.leaky_relu(gsddmm(g, "add", score_src, score_dst, "u", "v"), self.negative_slope)
        if masked is not None:  # a block's own self loops, kept: no attention goes to them
            logits = logits.masked_fill(masked.unsqueeze(-1), float("-inf"))
        alpha = F.dropout(edge_softmax(g, logits), p=self.dropout, training=self.training)
        out = gspmm(g, "mul", "sum", h, alpha.unsqueeze(-1))
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(dim=1)
        if self.res is not None:
            out = out + self.res(x)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
