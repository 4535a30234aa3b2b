"""Batches of small graphs: the block-diagonal graphs of a mini-batch of molecules.

Graph-level tasks (QM9, ZINC, MUTAG, PROTEINS, the OGB molecule sets) train on batches of
many small graphs; PyG's ``DataLoader`` stacks them into one graph whose adjacency is
block diagonal, graph after graph. Rows are short (bonds are few), blocks are small, and
no edge leaves its graph: a shape none of the other families has.
"""

from __future__ import annotations

import math

import torch

from ..graph import Graph
from ._edges import check_fraction, check_int, check_seed, generator, graph_from_pairs, uniform_below
from .synthetic import _check_real, _midpoint_quantiles, _round_to_total

__all__ = ["MIN_GRAPH_NODES", "small_graph_batch"]

MIN_GRAPH_NODES = 2
"""Nodes of the smallest graph of a batch (a single bond)."""


def _graph_sizes(num_graphs: int, mean_nodes: float, size_cov: float, gen: torch.Generator,
                 device: torch.device) -> torch.Tensor:
    """``[num_graphs]`` int64 sizes, ``MIN_GRAPH_NODES`` plus lognormal quantiles, in random order.

    The lognormal part's COV is scaled so that the sizes have COV about ``size_cov``, and
    it is rounded to keep the total at ``round(num_graphs * mean_nodes)`` nodes, so the
    batch size does not wander.
    """
    extra_total = round(num_graphs * (mean_nodes - MIN_GRAPH_NODES))
    if extra_total == 0:
        return torch.full((num_graphs,), MIN_GRAPH_NODES, dtype=torch.int64, device=device)
    extra_cov = size_cov * mean_nodes / (mean_nodes - MIN_GRAPH_NODES)
    sigma = math.sqrt(math.log1p(extra_cov ** 2))
    w = torch.exp(sigma * torch.special.ndtri(_midpoint_quantiles(num_graphs, device)))
    extra = _round_to_total(w * (extra_total / float(w.sum())), extra_total)
    return MIN_GRAPH_NODES + extra[torch.randperm(num_graphs, generator=gen, device=device)]


def small_graph_batch(
    num_graphs: int,
    mean_nodes: float,
    mean_degree: float,
    *,
    size_cov: float = 0.3,
    self_loops: bool = False,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """A block-diagonal batch of ``num_graphs`` small undirected graphs, molecule-like.

    Graph sizes are ``MIN_GRAPH_NODES`` plus lognormal quantiles of COV ``size_cov``,
    averaging ``mean_nodes`` exactly (QM9: 18 nodes, COV 0.16; PROTEINS: 39, COV 1.2).
    Each graph is a random recursive tree (node ``i`` bonds to a uniform earlier node of
    its graph) plus ``max(0, round(n_g d / 2 - (n_g - 1)))`` extra bonds between uniform
    distinct nodes of the graph (rings), with ``d = mean_degree``; below ``d = 2`` each
    tree bond is kept with probability ``d / 2`` instead (a forest: salts, fragments).
    Repeated bonds are merged, so dense small graphs fall short of ``d`` (at most every
    pair: a complete graph). Bonds go both ways; ``self_loops`` adds ``v -> v`` to every
    node, as GCN normalisation does. Graphs hold consecutive ids, parents before children.

    Args:
        num_graphs: graphs in the batch, ``>= 1``.
        mean_nodes: mean nodes per graph, ``>= MIN_GRAPH_NODES``.
        mean_degree: mean bonds per node ``d`` (in-degree without loops), in ``(0, 64]``.
        size_cov: coefficient of variation of the sizes, in ``[0, 4]``.
        self_loops: add a self loop to every node.
        seed: random seed.
        device: where the graph is built.

    Returns:
        A square graph of ``round(num_graphs * mean_nodes)`` nodes and about
        ``nodes * d`` edges (``nodes * (d + 1)`` with ``self_loops``); no edge joins two
        graphs.
    """
    num_graphs = check_int("num_graphs", num_graphs, 1)
    mean_nodes = _check_real("mean_nodes", mean_nodes)
    if mean_nodes < MIN_GRAPH_NODES:
        raise ValueError(f"mean_nodes must be >= {MIN_GRAPH_NODES}, got {mean_nodes}")
    d = check_fraction("mean_degree", mean_degree, 0.0, 64.0)
    if d == 0:
        raise ValueError("mean_degree must be positive, got 0")
    size_cov = check_fraction("size_cov", size_cov, 0.0, 4.0)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    size = _graph_sizes(num_graphs, mean_nodes, size_cov, gen, device)
    n = int(size.sum())
    start = torch.cumsum(size, 0) - size
    graph = torch.repeat_interleave(torch.arange(num_graphs, device=device), size, output_size=n)
    local = torch.arange(n, device=device) - start[graph]
    child = torch.nonzero(local > 0).flatten()
    parent = start[graph[child]] + uniform_below(local[child], gen)
    if d < 2:
        kept = torch.rand(child.numel(), generator=gen, device=device) < d / 2
        child, parent = child[kept], parent[kept]
    pairs = size * (size - 1) // 2
    rings = torch.clamp(torch.round(size * (d / 2)) - (size - 1), min=0).long()
    rings = torch.minimum(rings, pairs - (size - 1))
    ring_graph = torch.repeat_interleave(torch.arange(num_graphs, device=device), rings,
                                         output_size=int(rings.sum()))
    ring_size = size[ring_graph]
    a = uniform_below(ring_size, gen)
    b = (a + 1 + uniform_below(ring_size - 1, gen)) % ring_size
    u = torch.cat([child, start[ring_graph] + a])
    v = torch.cat([parent, start[ring_graph] + b])
    # One key per undirected bond merges a ring drawn twice or onto a tree bond.
    bond = torch.unique(torch.minimum(u, v) * n + torch.maximum(u, v))
    u, v = torch.div(bond, n, rounding_mode="floor"), bond % n
    dst, src = torch.cat([u, v]), torch.cat([v, u])
    if self_loops:
        node = torch.arange(n, device=device)
        dst, src = torch.cat([dst, node]), torch.cat([src, node])
    return graph_from_pairs(dst, src, n, n)
