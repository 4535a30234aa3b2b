"""Node orderings: relabel a graph's nodes to change where its sources sit in memory.

The same graph runs at very different speeds under different node ids: ids decide which
rows share a block of threads (row-length balance) and how far apart a row's sources lie
(cache reuse of the gathered features). So every family is also drawn reordered.

An ordering is ``(dst_order, src_order)``: new destination ``i`` is old destination
``dst_order[i]``, likewise for sources. A square graph's sources and destinations are the
same nodes and get one permutation (a node relabelling); a bipartite graph's two sides are
permuted separately.
"""

from __future__ import annotations

import torch

from ..graph import Graph
from ._edges import check_seed, generator, graph_from_rows, rows_of

__all__ = ["ORDERINGS", "node_order", "relabel", "reorder"]

ORDERINGS = ("natural", "random", "degree", "rcm")
"""The node orderings :func:`node_order` and :func:`reorder` take (see ``docs/datasets.md``)."""


def _undirected(graph: Graph) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(rowptr, col, N)``: the graph with edges both ways, over ``N`` nodes.

    Square: nodes are the graph's nodes. Bipartite: destinations are ``0..num_dst-1`` and
    source ``j`` is ``num_dst + j``.
    """
    offset = 0 if graph.num_src == graph.num_dst else graph.num_dst
    count = graph.num_src + offset
    dst = graph.csr_dst.long()
    src = graph.col.long() + offset
    key = torch.sort(torch.cat([dst * count + src, src * count + dst])).values
    a = torch.div(key, count, rounding_mode="floor")
    rowptr = torch.searchsorted(a, torch.arange(count + 1, device=key.device))
    return rowptr, key - a * count, count


def _components(rowptr: torch.Tensor, col: torch.Tensor, count: int) -> torch.Tensor:
    """``[N]`` the smallest node id of each node's connected component.

    Labels are parent pointers into a forest, always to a node of the same component with
    a smaller or equal id. Each round hooks every tree's root under the smallest root seen
    across its edges, then jumps pointers until every node points at its root; at the
    fixed point the two ends of every edge share a root, the smallest id of the
    component. Hooking roots rather than nodes merges whole trees at once, so the rounds
    stay few: under ten on randomly relabelled meshes of a million nodes, where hooking
    single nodes took thirty times longer.
    """
    row = rows_of(rowptr[1:] - rowptr[:-1], col.numel())
    label = torch.arange(count, device=col.device)
    while True:
        hooked = label.scatter_reduce(0, label[row], label[col], "amin")
        while True:
            jumped = hooked[hooked]
            if torch.equal(jumped, hooked):
                break
            hooked = jumped
        if torch.equal(hooked, label):
            return label
        label = hooked


def _cuthill_mckee(rowptr: torch.Tensor, col: torch.Tensor, count: int) -> torch.Tensor:
    """``[N]`` Cuthill-McKee order: breadth-first from a lowest-degree node of each component.

    All components advance together, one level per step. A node of level ``k + 1`` is
    placed by its first-placed neighbour in level ``k`` (its parent), ties by increasing
    degree then id, which is the queue order of sequential Cuthill-McKee; levels keep
    components in order of their smallest id, and a final stable sort by component makes
    each component contiguous.
    """
    device = col.device
    if count == 0:
        return torch.zeros(0, dtype=torch.int64, device=device)
    degree = rowptr[1:] - rowptr[:-1]
    label = _components(rowptr, col, count)
    node = torch.arange(count, device=device)
    root_key = torch.full((count,), count * (int(degree.max()) + 1), device=device)
    root_key.scatter_reduce_(0, label, degree * count + node, "amin")
    frontier = (root_key % count)[label == node]  # components in order of their smallest id
    visited = torch.zeros(count, dtype=torch.bool, device=device)
    visited[frontier] = True
    levels = [frontier]
    while frontier.numel():
        lengths = degree[frontier]
        parent = rows_of(lengths, int(lengths.sum()))
        first = rowptr[frontier] - (torch.cumsum(lengths, 0) - lengths)
        reached = col[first[parent] + torch.arange(parent.numel(), device=device)]
        fresh = ~visited[reached]
        reached, parent = reached[fresh], parent[fresh]
        key = torch.sort(reached * frontier.numel() + parent).values
        reached = torch.div(key, frontier.numel(), rounding_mode="floor")
        parent = key - reached * frontier.numel()
        once = torch.ones_like(reached, dtype=torch.bool)
        once[1:] = reached[1:] != reached[:-1]
        reached, parent = reached[once], parent[once]
        order = torch.argsort(degree[reached], stable=True)
        order = order[torch.argsort(parent[order], stable=True)]
        frontier = reached[order]
        visited[frontier] = True
        levels.append(frontier)
    order = torch.cat(levels)
    return order[torch.argsort(label[order], stable=True)]


def node_order(graph: Graph, ordering: str, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dst_order [num_dst], src_order [num_src])``, int64, for one of :data:`ORDERINGS`.

    * ``"natural"``: the identity (the generator's ids: communities, blocks and lattice
      rows contiguous).
    * ``"random"``: a uniform random permutation (no locality left).
    * ``"degree"``: destinations by decreasing in-degree; sources of a bipartite graph by
      decreasing out-degree (ties by id). Long rows come first, as a load-balancing
      kernel would order them.
    * ``"rcm"``: reverse Cuthill-McKee over the undirected graph (both sides of a
      bipartite graph together): neighbours get nearby ids, shrinking the bandwidth.

    Square graphs get ``dst_order is src_order``.
    """
    if ordering not in ORDERINGS:
        raise ValueError(f"ordering must be one of {ORDERINGS}, got {ordering!r}")
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a gsparse.Graph, got {type(graph).__name__}")
    square = graph.num_src == graph.num_dst
    device = graph.device
    if ordering == "natural":
        dst = torch.arange(graph.num_dst, device=device)
        src = dst if square else torch.arange(graph.num_src, device=device)
    elif ordering == "random":
        gen = generator(check_seed(seed), device)
        dst = torch.randperm(graph.num_dst, generator=gen, device=device)
        src = dst if square else torch.randperm(graph.num_src, generator=gen, device=device)
    elif ordering == "degree":
        dst = torch.argsort(graph.in_degrees(), descending=True, stable=True)
        src = dst if square else torch.argsort(graph.out_degrees(), descending=True, stable=True)
    else:
        order = torch.flip(_cuthill_mckee(*_undirected(graph)), [0])
        if square:
            dst = src = order
        else:
            dst = order[order < graph.num_dst]
            src = order[order >= graph.num_dst] - graph.num_dst
    return dst.long(), src.long()


def relabel(graph: Graph, dst_order: torch.Tensor, src_order: torch.Tensor) -> Graph:
    """The graph with destination ``dst_order[i]`` renamed ``i`` and source ``src_order[j]`` renamed ``j``.

    Keeps the edge multiset (up to the renaming); rows keep their sources sorted, and the
    new graph's edge ids follow its CSR order.
    """
    for name, order, size in (("dst_order", dst_order, graph.num_dst), ("src_order", src_order, graph.num_src)):
        if not isinstance(order, torch.Tensor) or order.shape != (size,):
            raise ValueError(f"{name} must be a tensor of shape ({size},), got "
                             f"{tuple(order.shape) if isinstance(order, torch.Tensor) else type(order).__name__}")
        if size and not torch.equal(torch.sort(order.long()).values, torch.arange(size, device=order.device)):
            raise ValueError(f"{name} must be a permutation of 0..{size - 1}")
    src_position = torch.empty(graph.num_src, dtype=torch.int64, device=graph.device)
    src_position[src_order.long()] = torch.arange(graph.num_src, device=graph.device)
    rowptr = graph.rowptr.long()
    lengths = (rowptr[1:] - rowptr[:-1])[dst_order]
    row = rows_of(lengths, graph.num_edges)
    first = rowptr[dst_order] - (torch.cumsum(lengths, 0) - lengths)
    old = first[row] + torch.arange(graph.num_edges, device=graph.device)
    return graph_from_rows(lengths, row, src_position[graph.col.long()[old]], graph.num_src)


def reorder(graph: Graph, ordering: str, *, seed: int = 0) -> Graph:
    """``graph`` relabelled by :func:`node_order` (``"natural"`` returns it unchanged)."""
    if ordering == "natural":
        return graph
    return relabel(graph, *node_order(graph, ordering, seed=seed))
