"""What the layers share: turning their graph argument into a Graph, self loops, initialisers.

Structures derived from a graph are built once and kept with the graph (its ``layers``
cache), also when the model runs under ``torch.compile`` (see :func:`gsparse.derived.derive`).
Graphs built from a PyG ``edge_index`` or sparse ``adj_t`` are kept while that tensor lives
unmodified, so a training loop that passes the same tensor every step builds its CSR once.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from .. import _block_loops as block_loops
from .._checks import graph_override
from .._graph_build import Csr
from ..derived import compile_error, derive
from ..graph import Graph

GraphLike = Any
"""What a layer takes as its graph: a :class:`gsparse.Graph`, a PyG ``edge_index`` ``[2, E]``
or ``EdgeIndex``, a ``torch.sparse`` ``adj_t`` ``[N_dst, N_src]`` (COO, CSR or CSC; PyG's
transposed adjacency) or a ``torch_sparse.SparseTensor`` ``adj_t``."""


@dataclass(frozen=True)
class _Built:
    graph: Graph
    weights: torch.Tensor | None  # a sparse adjacency's values in edge order, None if all 1


def _build(adj: Any, num_src: int, num_dst: int) -> _Built:
    if isinstance(adj, torch.Tensor) and adj.layout == torch.strided:
        plain = adj if type(adj) is torch.Tensor else adj.as_subclass(torch.Tensor)  # EdgeIndex
        return _Built(Graph.from_edge_index(plain, num_src=num_src, num_dst=num_dst), None)
    graph = Graph.from_pyg(adj)
    _check_counts(graph, num_src, num_dst)
    if isinstance(adj, torch.Tensor):
        values = adj._values() if adj.layout == torch.sparse_coo else adj.values()
    else:  # torch_sparse.SparseTensor: values in its CSR order, which is the graph's edge order
        values = adj.storage.value()
    if values is not None and (values.dim() != 1 or bool((values == 1).all())):
        values = None
    return _Built(graph, values)


class _AdjacencyGraphs:
    """Graphs built from PyG graph arguments, by object; an entry dies with its object and
    is rebuilt when a tensor was modified in place (its version counter moved)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, int, int, int, _Built]] = {}

    def get(self, adj: Any, num_src: int, num_dst: int) -> _Built:
        key = id(adj)
        version = getattr(adj, "_version", 0)
        entry = self._entries.get(key)
        if entry is not None:
            ref, seen_version, cached_src, cached_dst, built = entry
            if ref() is adj and seen_version == version and (cached_src, cached_dst) == (num_src, num_dst):
                return built
        built = _build(adj, num_src, num_dst)
        ref = weakref.ref(adj, lambda _, k=key: self._entries.pop(k, None))
        self._entries[key] = (ref, version, num_src, num_dst, built)
        return built


_ADJACENCY_GRAPHS = _AdjacencyGraphs()


def _check_counts(graph: Graph, num_src: int, num_dst: int) -> None:
    if graph.num_src != num_src:
        raise ValueError(f"the source-node features have {num_src} rows but the graph has "
                         f"{graph.num_src} source nodes")
    if graph.num_dst != num_dst:
        raise ValueError(f"the destination-node features have {num_dst} rows but the graph has "
                         f"{graph.num_dst} destination nodes")


def graph_and_weights(graph: GraphLike, num_src: int, num_dst: int) -> tuple[Graph, torch.Tensor | None]:
    """The Graph of a layer's graph argument (see :data:`GraphLike`) with ``num_src``
    sources and ``num_dst`` destinations (the sizes of the layer's node features), and the
    edge weights a sparse adjacency carries (``None`` for other arguments, or when they are
    all 1).

    A graph-like object with ``__gsparse_function__`` (a ``gsparse.distributed.DistGraph``)
    is returned as is too: the operators hand it their calls.

    Raises:
        ValueError: the graph's node counts differ from the features' row counts.
        TypeError: ``graph`` is none of these.
        gsparse.CompileError: anything but a Graph inside ``torch.compile``.
    """
    if isinstance(graph, Graph) or graph_override(graph) is not None:
        _check_counts(graph, num_src, num_dst)
        return graph, None
    if not (isinstance(graph, torch.Tensor) or type(graph).__name__ == "SparseTensor"):
        raise TypeError(f"graph must be a gsparse.Graph, an edge_index tensor [2, E], a torch.sparse "
                        f"adj_t or a torch_sparse.SparseTensor, got {type(graph).__name__}")
    if torch.compiler.is_compiling():
        compile_error(
            f"a gsparse layer got a {type(graph).__name__} as its graph inside torch.compile, where a "
            f"graph cannot be built (its size depends on the data): build it once outside the "
            f"compiled model, g = gsparse.Graph.from_pyg(edge_index) (or Graph.from_edge_index), "
            f"and pass g")
    built = _ADJACENCY_GRAPHS.get(graph, num_src, num_dst)
    return built.graph, built.weights


def as_graph(graph: GraphLike, num_src: int, num_dst: int) -> Graph:
    """The Graph of a layer's graph argument: :func:`graph_and_weights` without the weights."""
    return graph_and_weights(graph, num_src, num_dst)[0]


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

    A :attr:`~gsparse.Graph.sync_free` graph gets a :class:`BlockSelfLoops` instead, which
    has these attributes and ``masked``: ``[E']`` bool, True on the original graph's own
    self loops, which its ``graph`` keeps (and the layers must ignore: zero weight, no
    attention) because removing them would need their count on the host.
    """

    graph: Graph
    origin: torch.Tensor
    loop_edge: torch.Tensor


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


@dataclass(frozen=True)
class BlockSelfLoops:
    """:class:`SelfLoops` of a graph built without reading the device (a sampled block):
    every edge is kept (its own self loops are ``masked``) and each row gains its loop at
    its end, so every size is known on the host.

    ``graph`` and ``masked`` are built with it; ``origin`` and ``loop_edge`` are computed
    from the placement on each read (a few scatters): GCN without edge weights and GAT
    without edge features never read them, and a block serves one step.

    Attributes:
        graph, masked: as :class:`SelfLoops`.
        edges: ``[2, E']`` the loop graph's ``col`` and ``csr_dst``, which are its rows
            (one gather reads a node value at both ends of every edge).
        col, dst, eid: the block's :attr:`~gsparse.Graph.col`, ``csr_dst`` and ``eid``.
    """

    graph: Graph
    masked: torch.Tensor
    edges: torch.Tensor
    col: torch.Tensor
    dst: torch.Tensor
    eid: torch.Tensor | None

    @property
    def loop_at(self) -> torch.Tensor:
        """``[N]`` int64 CSR position in ``graph`` of the loop added at each node."""
        return self.graph.rowptr[1:].long() - 1

    @property
    def moved(self) -> torch.Tensor:
        """``[E]`` int64 CSR position in ``graph`` of each CSR position of the block (edge
        ``p`` of row ``v`` moves to ``p + v``)."""
        return torch.arange(self.col.numel(), device=self.col.device) + self.dst

    def _edge_ids(self) -> torch.Tensor:
        """``[E]`` int64 edge id of each of the block's CSR positions."""
        if self.eid is None:
            return torch.arange(self.col.numel(), device=self.col.device)
        return self.eid.long()

    @property
    def origin(self) -> torch.Tensor:
        e, loop_at = self.col.numel(), self.loop_at
        n = loop_at.numel()
        origin = torch.empty(e + n, dtype=torch.int64, device=self.col.device)
        origin.index_copy_(0, self.moved, self._edge_ids())
        return origin.index_copy_(0, loop_at, torch.arange(e, e + n, device=self.col.device))

    @property
    def loop_edge(self) -> torch.Tensor:
        loop_ids = torch.where(self.col == self.dst, self._edge_ids(), -1)
        loop_edge = torch.full((self.graph.num_dst,), -1, dtype=torch.int64, device=self.col.device)
        return loop_edge.scatter_reduce_(0, self.dst.long(), loop_ids, "amax")


def _loop_graph_in_torch(g: Graph) -> tuple[Graph, torch.Tensor, torch.Tensor]:
    """:func:`gsparse._block_loops.loop_graph` in PyTorch operations, for blocks on devices
    the CUDA backend does not serve: edge ``p`` of row ``v`` moves to ``p + v``, the loop of
    row ``v`` goes to ``rowptr[v + 1] + v``, scatters of known size."""
    n, e, device = g.num_dst, g.num_edges, g.device
    index = block_loops.loop_index_dtype(g)
    nodes = torch.arange(n + 1, device=device, dtype=index)
    rowptr = g.rowptr.to(index) + nodes
    loop_at = rowptr[1:].long() - 1
    dst = g.csr_dst
    moved = torch.arange(e, device=device) + dst  # int64
    # Its col and its destinations (Graph.csr_dst) as one tensor's rows: one scatter of
    # the block's, one of the loops' (expanding its rows would take a repeat_interleave).
    edges = torch.empty(2, e + n, dtype=index, device=device)
    edges.index_copy_(1, moved, torch.stack([g.col, dst]).to(index))
    edges.index_copy_(1, loop_at, nodes[:-1].expand(2, n))
    col, loop_dst = edges
    masked = (col == loop_dst).index_fill_(0, loop_at, False)  # the block's own loops
    degree = None if g._max_degree is None else g._max_degree + 1
    graph = Graph._made(Csr(rowptr, col, None, n), sync_free=True, max_degree=degree, csr_dst=loop_dst)
    return graph, edges, masked


def _self_loops_on_device(g: Graph) -> BlockSelfLoops:
    """:func:`_build_self_loops` for a graph built without reading the device (see
    :class:`BlockSelfLoops`): one launch on a GPU (:mod:`gsparse._block_loops`)."""
    if g.num_src != g.num_dst:
        raise ValueError(f"self loops need a square graph, got {g.num_src} source and "
                         f"{g.num_dst} destination nodes")
    graph, edges, masked = block_loops.loop_graph(g) if block_loops.runs_here(g) else _loop_graph_in_torch(g)
    return BlockSelfLoops(graph, masked, edges, g.col, g.csr_dst, g.eid)


def self_loops(g: Graph) -> SelfLoops | BlockSelfLoops:
    """``g`` with its self loops replaced by one loop per node; built once per graph."""
    override = graph_override(g)
    if override is not None:
        return override(self_loops, (g,), {})
    return derive(g.layers, "self_loops", _self_loops_of, g)


def _self_loops_of(g: Graph) -> SelfLoops | BlockSelfLoops:
    return _self_loops_on_device(g) if g.sync_free else _build_self_loops(g)


def _stack_edges(g: Graph) -> torch.Tensor:
    return g.edge_index


def edge_index_of(g: Graph) -> torch.Tensor:
    """``[2, E]`` int64 edges of ``g`` in edge order (PyG's ``edge_index``); built once per graph."""
    return derive(g.layers, "edge_index", _stack_edges, g)


def glorot_(t: torch.Tensor) -> torch.Tensor:
    """Uniform in ``±sqrt(6 / (fan_in + fan_out))`` with the fans the last two dimensions,
    as PyG's ``glorot`` (for ``[1, heads, channels]`` attention vectors too)."""
    bound = math.sqrt(6.0 / (t.shape[-2] + t.shape[-1]))
    with torch.no_grad():
        return t.uniform_(-bound, bound)


# What moving one feature of one edge costs, in multiply-adds of a dense product: a
# gathered fp32 element takes ~2 ps of an H100 (a row gather runs at ~2 TB/s), a
# multiply-add ~0.04 ps (~50 TFLOP/s in fp32). Only the order of magnitude matters: the two
# orders differ by several times wherever the choice matters.
_EDGE_FEATURE_COST = 50


def projects_first(num_src: int, num_dst: int, num_edges: int, in_features: int,
                   out_features: int) -> bool:
    """Whether a layer's linear map costs less before its aggregation (``num_src`` rows
    projected, ``out_features`` moved per edge) than after it (``num_dst`` rows,
    ``in_features``): the two orders give the same result for sums and means."""
    product = in_features * out_features
    before = num_src * product + _EDGE_FEATURE_COST * num_edges * out_features
    after = num_dst * product + _EDGE_FEATURE_COST * num_edges * in_features
    return before < after
