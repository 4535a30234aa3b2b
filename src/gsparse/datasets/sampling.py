"""Mini-batch blocks: the bipartite graphs of GraphSAGE-style neighbour sampling.

Mini-batch training runs each layer on a *block*: a bipartite graph whose destinations
are the nodes that layer computes and whose sources are those nodes followed by the
neighbours sampled for them, relabelled ``0..num_src-1``. A fresh set of blocks comes
every step, so the kernels must be chosen for graphs of this shape (few long-tailed
rows capped at the fanout, ``num_src`` several times ``num_dst``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..graph import Graph
from ._edges import check_int, check_seed, generator, graph_from_rows, rows_of
from .synthetic import _random_subsets, _reject_duplicates

__all__ = ["SampledBlock", "sample_blocks"]


@dataclass(frozen=True, eq=False)
class SampledBlock:
    """One layer's block: ``graph`` and the base-graph id of each of its source nodes.

    ``src_nodes[:graph.num_dst]`` are the destinations (DGL's convention: a block's
    destination nodes are the first of its sources).
    """

    graph: Graph
    src_nodes: torch.Tensor  # [num_src] int64 base-graph ids

    @property
    def dst_nodes(self) -> torch.Tensor:
        """``[num_dst]`` int64 base-graph ids of the destinations."""
        return self.src_nodes[: self.graph.num_dst]


def _sample_positions(degree: torch.Tensor, fanout: int, replace: bool, gen: torch.Generator
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(counts [R], positions [sum counts])``: sampled positions within each row, rows in order.

    Without replacement a row keeps ``min(fanout, degree)`` distinct positions, a uniform
    random subset; with replacement, ``fanout`` uniform positions (none for an empty row).
    """
    counts = torch.where(degree > 0, fanout, 0) if replace else torch.clamp(degree, max=fanout)
    seg = rows_of(counts, int(counts.sum()))
    pos = torch.floor(torch.rand(seg.numel(), generator=gen, device=degree.device, dtype=torch.float64)
                      * degree[seg]).long()
    if not replace:
        dense = 2 * counts > degree  # few candidates: enumerate them (cost < 2 fanout per row)
        dense_slot = dense[seg]
        if bool(dense.any()):
            pos[dense_slot] = _random_subsets(counts[dense], degree[dense], gen)
        sparse_slot = ~dense_slot
        pos[sparse_slot] = _reject_duplicates(seg[sparse_slot], degree[seg[sparse_slot]], pos[sparse_slot],
                                              int(degree.max()) + 1, gen)
    return counts, pos


def sample_blocks(
    graph: Graph,
    seeds: int | torch.Tensor,
    fanouts: Sequence[int],
    *,
    replace: bool = False,
    seed: int = 0,
) -> list[SampledBlock]:
    """Sample neighbours hop by hop from ``seeds`` and return one block per hop.

    Hop ``h`` takes the current destination nodes (the seeds at first), samples up to
    ``fanouts[h]`` in-neighbours of each uniformly (rows of ``graph``), and forms the
    block whose sources are those destinations followed by the newly reached nodes in
    ascending id order; the next hop's destinations are this block's sources.

    Args:
        graph: a square base graph (sources and destinations are the same nodes).
        seeds: a count of destinations drawn uniformly without replacement, or a ``[S]``
            tensor of distinct node ids.
        fanouts: neighbours per destination at each hop, from the seeds outwards, each ``>= 1``.
        replace: sample with replacement (exactly ``fanout`` per non-empty row); by default
            without (``min(fanout, in-degree)`` distinct neighbours, as GraphSAGE does).
        seed: random seed.

    Returns:
        The blocks in the order a model runs them (DGL's): ``blocks[0]`` is the outermost
        hop, ``blocks[-1]`` has the seeds as destinations.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a gsparse.Graph, got {type(graph).__name__}")
    if graph.num_src != graph.num_dst:
        raise ValueError(f"graph must be square to sample hops from, got num_src = {graph.num_src} "
                         f"and num_dst = {graph.num_dst}")
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence) or not fanouts:
        raise ValueError(f"fanouts must be a non-empty sequence of ints, got {fanouts!r}")
    fanouts = [check_int(f"fanouts[{i}]", f, 1) for i, f in enumerate(fanouts)]
    n, device = graph.num_dst, graph.device
    gen = generator(check_seed(seed), device)
    if isinstance(seeds, torch.Tensor):
        if seeds.dim() != 1 or seeds.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"seeds must be a 1-D int tensor of node ids, got {seeds.dtype} "
                             f"of shape {tuple(seeds.shape)}")
        nodes = seeds.to(device=device, dtype=torch.int64)
        if nodes.numel() and bool(((nodes < 0) | (nodes >= n)).any()):
            raise ValueError(f"seeds must be node ids in [0, {n}), got values in "
                             f"[{int(nodes.min())}, {int(nodes.max())}]")
        if torch.unique(nodes).numel() != nodes.numel():
            raise ValueError("seeds must be distinct node ids")
    else:
        count = check_int("seeds", seeds, 1, n)
        nodes = torch.randperm(n, generator=gen, device=device)[:count]
    rowptr, col = graph.rowptr.long(), graph.col.long()
    label = torch.full((n,), -1, dtype=torch.int64, device=device)
    blocks = []
    for fanout in fanouts:
        num_dst = nodes.numel()
        label[nodes] = torch.arange(num_dst, device=device)
        counts, pos = _sample_positions(rowptr[nodes + 1] - rowptr[nodes], fanout, replace, gen)
        row = rows_of(counts, pos.numel())
        sources = col[rowptr[nodes][row] + pos]
        reached = torch.unique(sources)
        new = reached[label[reached] < 0]
        label[new] = torch.arange(num_dst, num_dst + new.numel(), device=device)
        src_nodes = torch.cat([nodes, new])
        blocks.append(SampledBlock(graph_from_rows(counts, row, label[sources], src_nodes.numel()), src_nodes))
        label[src_nodes] = -1
        nodes = src_nodes
    return blocks[::-1]
