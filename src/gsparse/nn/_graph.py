"""What the layers share: turning their graph argument into a Graph, self loops, initialisers.

Structures derived from a graph are built once and kept with the graph
(its ``layers`` cache); graphs built from a PyG ``edge_index`` are kept while
that tensor lives unmodified, so a training loop that passes the same ``edge_index`` every
step builds its CSR once.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import torch

from .._checks import graph_override
from ..graph import Graph


class _EdgeIndexGraphs:
    """Graphs built from ``edge_index`` tensors, by tensor; an entry dies with its tensor and
    is rebuilt when the tensor was modified in place (its version counter moved)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, int, int, int, Graph]] = {}

    def get(self, edge_index: torch.Tensor, num_src: int, num_dst: int) -> Graph:
        key = id(edge_index)
        entry = self._entries.get(key)
        if entry is not None:
            ref, version, cached_src, cached_dst, graph = entry
            if ref() is edge_index and version == edge_index._version and \
                    (cached_src, cached_dst) == (num_src, num_dst):
                return graph
        graph = Graph.from_edge_index(edge_index, num_src=num_src, num_dst=num_dst)
        ref = weakref.ref(edge_index, lambda _, k=key: self._entries.pop(k, None))
        self._entries[key] = (ref, edge_index._version, num_src, num_dst, graph)
        return graph


_EDGE_INDEX_GRAPHS = _EdgeIndexGraphs()


def as_graph(graph: Graph | torch.Tensor, num_src: int, num_dst: int) -> Graph:
    """``graph`` itself, or the Graph of a PyG ``edge_index`` ``[2, E]`` with ``num_src``
    sources and ``num_dst`` destinations (the sizes of the layer's node features).

    A graph-like object with ``__gsparse_function__`` (a ``gsparse.distributed.DistGraph``)
    is returned as is too: the operators hand it their calls.

    Raises ValueError when a Graph's node counts differ from the features' row counts.
    """
    if isinstance(graph, torch.Tensor):
        return _EDGE_INDEX_GRAPHS.get(graph, num_src, num_dst)
    if not isinstance(graph, Graph) and graph_override(graph) is None:
        raise TypeError(f"graph must be a gsparse.Graph or an edge_index tensor [2, E], "
                        f"got {type(graph).__name__}")
    if graph.num_src != num_src:
        raise ValueError(f"the source-node features have {num_src} rows but the graph has "
                         f"{graph.num_src} source nodes")
    if graph.num_dst != num_dst:
        raise ValueError(f"the destination-node features have {num_dst} rows but the graph has "
                         f"{graph.num_dst} destination nodes")
    return graph


def check_node_features(name: str, x: object, channels: int) -> torch.Tensor:
    """``x`` must be a floating ``[N, channels]`` tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.shape[1] != channels:
        raise ValueError(f"{name} must have shape [num_nodes, {channels}], got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {x.dtype}")
    return x


@dataclass(frozen=True)
class SelfLoops:
    """A square graph with exactly one self loop per node, as PyG's layers build it.

    Attributes:
        graph: the original graph's edges that are not self loops, and one loop per node;
            edge ids follow its CSR order (no permutation for the kernels to apply).
        origin: ``[E']`` where each edge comes from: its id ``e`` in the original graph, or
            ``E + i`` for the loop added at node ``i``. Per-edge values of the new graph are
            ``torch.cat([values, loop_values])[origin]``.
        loop_edge: ``[N]`` id in the original graph of the last self loop at each node,
            -1 where there was none (PyG's ``add_remaining_self_loops`` keeps its weight).
        masked: ``[E']`` bool, True on the original graph's own self loops, which ``graph``
            keeps (and the layers must ignore: zero weight, no attention) because removing
            them would need their count on the host; None when they were removed, which is
            always the case but for :attr:`~gsparse.Graph.sync_free` graphs.
    """

    graph: Graph
    origin: torch.Tensor
    loop_edge: torch.Tensor
    masked: torch.Tensor | None = None


def _build_self_loops(g: Graph) -> SelfLoops:
    if g.num_src != g.num_dst:
        raise ValueError(f"self loops need a square graph, got {g.num_src} source and "
                         f"{g.num_dst} destination nodes")
    n = g.num_dst
    src, dst = (t.long() for t in g.edges())
    is_loop = src == dst
    kept = torch.nonzero(~is_loop).flatten()
    nodes = torch.arange(n, device=g.device)
    edge_index = torch.stack([torch.cat([src[kept], nodes]), torch.cat([dst[kept], nodes])])
    staged = Graph.from_edge_index(edge_index, num_nodes=n)
    origin = torch.cat([kept, g.num_edges + nodes])
    if staged.eid is not None:
        origin = origin[staged.eid.long()]
    loops = torch.nonzero(is_loop).flatten()
    loop_edge = torch.full((n,), -1, dtype=torch.int64, device=g.device)
    loop_edge.scatter_reduce_(0, src[loops], loops, "amax")
    graph = Graph.from_csr(staged.rowptr, staged.col, n)
    return SelfLoops(graph, origin, loop_edge)


def _self_loops_on_device(g: Graph) -> SelfLoops:
    """:func:`_build_self_loops` for a graph built without reading the device: every edge is
    kept (its own self loops are ``masked``) and each row gains its loop at its end, so every
    size is known on the host."""
    if g.num_src != g.num_dst:
        raise ValueError(f"self loops need a square graph, got {g.num_src} source and "
                         f"{g.num_dst} destination nodes")
    n, e, device, index = g.num_dst, g.num_edges, g.device, g.index_dtype
    nodes = torch.arange(n + 1, device=device)
    rowptr = g.rowptr.long() + nodes
    dst = g.csr_dst.long()
    moved = torch.arange(e, device=device) + dst  # CSR position p of g, in the new graph
    loop_at = rowptr[1:] - 1
    col = torch.empty(e + n, dtype=index, device=device)
    col[moved] = g.col
    col[loop_at] = nodes[:-1].to(index)
    eid = torch.arange(e, device=device) if g.eid is None else g.eid.long()
    origin = torch.empty(e + n, dtype=torch.int64, device=device)
    origin[moved] = eid
    origin[loop_at] = e + nodes[:-1]
    is_loop = g.col.long() == dst
    masked = torch.zeros(e + n, dtype=torch.bool, device=device)
    masked[moved] = is_loop
    loop_edge = torch.full((n,), -1, dtype=torch.int64, device=device)
    loop_edge.scatter_reduce_(0, dst, torch.where(is_loop, eid, -1), "amax")
    degree = None if g._max_degree is None else g._max_degree + 1
    graph = Graph.from_block_csr(rowptr.to(index), col, num_src=n, max_degree=degree, check=False)
    return SelfLoops(graph, origin, loop_edge, masked)


def self_loops(g: Graph) -> SelfLoops:
    """``g`` with its self loops replaced by one loop per node; built once per graph."""
    override = graph_override(g)
    if override is not None:
        return override(self_loops, (g,), {})
    build = _self_loops_on_device if g.sync_free else _build_self_loops
    return g.layers.get("self_loops", lambda: build(g))


def glorot_(t: torch.Tensor) -> torch.Tensor:
    """Uniform in ``±sqrt(6 / (fan_in + fan_out))`` with the fans the last two dimensions,
    as PyG's ``glorot`` (for ``[1, heads, channels]`` attention vectors too)."""
    bound = math.sqrt(6.0 / (t.shape[-2] + t.shape[-1]))
    with torch.no_grad():
        return t.uniform_(-bound, bound)
