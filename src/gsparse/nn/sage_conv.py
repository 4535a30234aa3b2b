"""GraphSAGE (Hamilton et al.), with PyG's ``SAGEConv`` interface."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..algebra import REDUCERS
from ..spmm import gspmm
from ._graph import GraphLike, as_graph, check_node_features, projects_first

# PyG's aggregation names and the g-SpMM reducer of each ("add" is PyG's name of the sum).
_AGGREGATORS = {"mean": "mean", "max": "max", "min": "min", "sum": "sum", "add": "sum"}

class SAGEConv(nn.Module):
    r"""The GraphSAGE operator, as PyG's ``SAGEConv``.

    .. math::
        x'_i = W_1 \,\Phi_{j \in N(i)}\, x_j + b + W_2 x_i

    with ``Φ`` the mean, sum, max or min over the in-neighbours (0 for a node without any).
    For mean and sum, ``W_1`` is applied before the aggregation (the same map, since both
    commute with it) when that costs less: fewer features then move over the edges, but
    every source node is projected. On a square graph that is whenever ``out_channels <
    in_channels``; on a sampled block, whose sources outnumber its destinations several
    times, the aggregation usually comes first.

    Args:
        in_channels: size ``F`` of each input node feature, or ``(F_src, F_dst)`` for a
            bipartite graph.
        out_channels: size ``F'`` of each output node feature.
        aggr: ``"mean"``, ``"sum"`` (or PyG's ``"add"``), ``"max"`` or ``"min"``.
        normalize: L2-normalise each output row.
        root_weight: add the node's own transformed features ``W_2 x_i``.
        project: first apply ``x_j ← relu(W_3 x_j + b_3)`` to the source features.
        bias: learn the bias ``b`` (of ``lin_l``).

    Parameters ``lin_l``, ``lin_r`` and ``lin`` (with ``project``) have PyG's names, so a
    PyG ``SAGEConv``'s ``state_dict`` loads as is.
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, aggr: str = "mean",
                 normalize: bool = False, root_weight: bool = True, project: bool = False,
                 bias: bool = True) -> None:
        super().__init__()
        if not isinstance(aggr, str) or aggr not in _AGGREGATORS:
            raise ValueError(f"aggr must be one of {tuple(_AGGREGATORS)}, got {aggr!r}")
        self.in_channels, self.out_channels, self.aggr = in_channels, out_channels, aggr
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        src_channels, dst_channels = (in_channels, in_channels) if isinstance(in_channels, int) \
            else in_channels
        self.lin = nn.Linear(src_channels, src_channels, bias=True) if project else None
        self.lin_l = nn.Linear(src_channels, out_channels, bias=bias)
        self.lin_r = nn.Linear(dst_channels, out_channels, bias=False) if root_weight else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default ``Linear`` initialisation, as PyG's ``SAGEConv``."""
        for lin in (self.lin, self.lin_l, self.lin_r):
            if lin is not None:
                lin.reset_parameters()

    def forward(self, x: torch.Tensor | tuple[torch.Tensor, torch.Tensor | None],
                graph: GraphLike) -> torch.Tensor:
        """Aggregate each node's in-neighbours and add its own transformed features.

        Args:
            x: ``[N, F]`` node features, or a pair ``([N_src, F_src], [N_dst, F_dst])`` for a
                bipartite graph (the second may be ``None`` without ``root_weight``).
            graph: a :class:`gsparse.Graph` (``N_src`` sources, ``N_dst`` destinations), a
                PyG ``edge_index`` ``[2, E]`` or ``EdgeIndex``, or a sparse ``adj_t``
                ``[N_dst, N_src]`` (its values are ignored).

        Returns:
            ``[N_dst, F']``.
        """
        x_src, x_dst = (x, x) if isinstance(x, torch.Tensor) else x
        x_src = check_node_features("x (source nodes)", x_src, self.lin_l.in_features)
        if self.lin_r is not None:
            if x_dst is None:
                raise ValueError("root_weight needs the destination-node features, got None")
            x_dst = check_node_features("x (destination nodes)", x_dst, self.lin_r.in_features)
        if x_dst is not None:
            num_dst = x_dst.shape[0]
        elif isinstance(graph, torch.Tensor):
            num_dst = graph.shape[0] if graph.layout != torch.strided else x_src.shape[0]
        elif hasattr(graph, "sparse_sizes"):  # torch_sparse.SparseTensor adj_t
            num_dst = graph.sparse_sizes()[0]
        else:
            num_dst = graph.num_dst
        g = as_graph(graph, x_src.shape[0], num_dst)
        if self.lin is not None:
            x_src = F.relu(self.lin(x_src))
        lin_l = self.lin_l
        reduce = _AGGREGATORS[self.aggr]
        if not REDUCERS[reduce].keeps_arg and projects_first(
                g.num_src, g.num_dst, g.num_edges, lin_l.in_features, lin_l.out_features):
            out = gspmm(g, "copy_lhs", reduce, F.linear(x_src, lin_l.weight))
            if lin_l.bias is not None:
                out = out + lin_l.bias
        else:
            out = lin_l(gspmm(g, "copy_lhs", reduce, x_src))
        if self.lin_r is not None:
            out = out + self.lin_r(x_dst)
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, aggr={self.aggr}"
