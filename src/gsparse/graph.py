"""The graph: a validated CSR over destination rows, with derived structures built lazily.

Row ``v`` of the CSR lists the incoming edges of destination node ``v``: positions
``rowptr[v]:rowptr[v+1]`` of ``col`` hold their source nodes, and ``eid`` maps each
CSR position to the user's edge id (``None`` when the two orders agree). Edge features
are always given and returned in the user's edge order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

import torch

from . import _graph_build as build
from ._live import LiveRegistry, same_memory, static_address
from .derived import DerivedCache

__all__ = ["Graph", "GraphStats", "RowStats"]

# The custom ops (gsparse._ops) find a graph again from its rowptr and col.
_LIVE: LiveRegistry[Graph] = LiveRegistry()

HOST_STATISTICS_SIZE = 1 << 18
"""Structures of at most this many elements of a GPU graph that is not
:attr:`Graph.sync_free` (row statistics, degree order, :attr:`Graph.csr_dst`,
:func:`gsparse.datasets.describe_structure`) are computed on the host from one copy: a
process's first use of each PyTorch reduction, scan or sort on a GPU costs 10-70 ms (lazy
loading; 530 ms of a Cora-sized graph's first call on an H100), the host 55 ns per edge."""


@dataclass(frozen=True)
class RowStats:
    """Statistics of the row lengths (in-degrees of destination nodes).

    ``exact`` is False for what the host knows of a graph built without reading the device
    (:meth:`Graph.from_block`): there ``mean`` is exact (edges over rows), ``max`` an upper
    bound (the caller's ``max_degree``, else the number of edges) and ``cov`` unknown (NaN,
    so that every ``cov > x`` test is False). Rules read such statistics conservatively.
    """

    mean: float
    max: int
    cov: float  # coefficient of variation: std / mean (0 for an edgeless graph)
    exact: bool = True


@dataclass(frozen=True)
class GraphStats:
    """The sizes and row statistics of a graph: what default rules and spaces read."""

    num_src: int
    num_dst: int
    num_edges: int
    rows: RowStats


class Graph:
    """A directed graph with ``num_src`` source and ``num_dst`` destination nodes.

    Stored as CSR over destination rows (incoming edges). Bipartite graphs
    (``num_src != num_dst``) are supported everywhere. Duplicate edges are kept as
    multi-edges, as in DGL; :meth:`coalesce` merges them on request.

    Build one with :meth:`from_edge_index` (PyG's ``edge_index``), :meth:`from_pyg` (any
    graph argument of a PyG layer: ``edge_index``, ``EdgeIndex``, a sparse ``adj_t``),
    :meth:`from_csr`, :meth:`from_scipy` or :meth:`from_torch_sparse`; all inputs are
    validated once, here.

    Example::

        edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])   # sources, destinations
        g = gsparse.Graph.from_edge_index(edge_index)        # 3 nodes, square
        g = gsparse.Graph.from_edge_index(edge_index, num_nodes=5)
        block = gsparse.Graph.from_edge_index(edge_index, num_src=4, num_dst=3)  # bipartite
    """

    def __init__(
        self,
        rowptr: torch.Tensor,
        col: torch.Tensor,
        eid: torch.Tensor | None,
        num_src: int,
        *,
        _validated: bool = False,
        _register: bool = True,
        _sync_free: bool = False,
        _max_degree: int | None = None,
    ) -> None:
        if not _validated:
            raise TypeError(
                "Graph is built with Graph.from_edge_index, from_csr, from_scipy or from_torch_sparse"
            )
        self._rowptr = rowptr
        self._col = col
        self._eid = eid
        self._num_src = num_src
        # Built by from_block / from_block_csr: nothing derived from the graph reads the device.
        self._sync_free = _sync_free
        self._max_degree = _max_degree
        # Derived structures, one cache per owner (see gsparse.derived).
        self.plans: DerivedCache = DerivedCache("launch plans of the generated kernels, by (task, schedule)")
        self.schedules: DerivedCache = DerivedCache("the schedule chosen for each kernel task")
        self.layouts: DerivedCache = DerivedCache("edge layouts the g-SpMM skeletons walk")
        self.cpu: DerivedCache = DerivedCache("structures of the PyTorch-ops backend")
        self.layers: DerivedCache = DerivedCache("structures of the gsparse.nn layers")
        self.tuning: DerivedCache = DerivedCache("the graph's signature and structure for the tuner")
        self.calls: DerivedCache = DerivedCache("the front ends' calls resolved to their launches, "
                                                "by the facts of the call")
        for t in (rowptr, col, eid):
            static_address(t)
        if _register:  # the newest graph over these tensors is the one the custom ops find
            _LIVE.add(rowptr, col, self)

    @property
    def parts(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, int]:
        """``(rowptr [num_dst + 1], col [E], eid [E] or None, num_src)``, what the custom ops
        take in place of the graph."""
        return self._rowptr, self._col, self._eid, self._num_src

    @classmethod
    def _find(
        cls, rowptr: torch.Tensor, col: torch.Tensor, eid: torch.Tensor | None, num_src: int
    ) -> Graph:
        """The live graph whose :attr:`parts` these are (or alias), else a new graph over them.

        The tensors must come from a validated graph. A new graph starts with empty caches
        and is not registered, so that it cannot displace the live graph of its tensors.
        """
        g = _LIVE.get(rowptr, col)
        if (g is not None and g._num_src == num_src and same_memory(g._rowptr, rowptr)
                and same_memory(g._col, col) and same_memory(g._eid, eid)):
            return g
        return cls(rowptr, col, eid, num_src, _validated=True, _register=False)

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_csr(
        cls,
        rowptr: torch.Tensor,
        col: torch.Tensor,
        num_src: int | None = None,
        eid: torch.Tensor | None = None,
    ) -> Graph:
        """Graph from a CSR whose rows are destination nodes and whose ``col`` holds sources.

        Args:
            rowptr: ``[num_dst + 1]`` non-decreasing offsets starting at 0 and ending at ``E``.
            col: ``[E]`` source node of each CSR position.
            num_src: number of source nodes; defaults to ``max(col) + 1`` (0 with no edges).
            eid: ``[E]`` user edge id of each CSR position, a permutation of ``0..E-1``;
                ``None`` means CSR order is the edge order.
        """
        return cls._made(build.from_csr(rowptr, col, num_src, eid))

    @classmethod
    def from_edge_index(
        cls,
        edge_index: torch.Tensor,
        num_nodes: int | None = None,
        *,
        num_src: int | None = None,
        num_dst: int | None = None,
    ) -> Graph:
        """Graph from a ``[2, E]`` edge list (PyG convention: row 0 sources, row 1 destinations).

        Square by default, as in PyG and DGL: ``num_nodes`` nodes, or one more than the
        largest index in either row (0 with no edges). A bipartite graph is built only when
        ``num_src`` and/or ``num_dst`` are given (each defaults to one more than the largest
        index of its own row). Edge ``i`` keeps id ``i``.
        """
        return cls._made(build.from_edge_index(edge_index, num_nodes, num_src, num_dst))

    @classmethod
    def from_scipy(cls, matrix: Any) -> Graph:
        """Graph from a SciPy sparse matrix whose rows are sources and columns destinations (DGL).

        Edge ids follow the matrix's storage order (its COO order).
        """
        return cls._made(build.from_scipy(matrix))

    @classmethod
    def from_torch_sparse(cls, tensor: torch.Tensor) -> Graph:
        """Graph from a 2-D ``torch.sparse`` COO, CSR or CSC tensor ``[num_src, num_dst]``
        whose rows are sources (DGL's adjacency convention).

        Edge ids follow the tensor's storage order, so ``tensor.values()`` are edge features
        in edge order. For PyG's transposed ``adj_t`` (rows are destinations) use
        :meth:`from_pyg`.
        """
        return cls._made(build.from_torch_sparse(tensor))

    @classmethod
    def from_pyg(cls, adj: Any, num_nodes: int | None = None) -> Graph:
        """Graph from any graph argument of a PyG layer, in PyG's conventions.

        Args:
            adj: one of

                * an ``edge_index`` ``[2, E]`` tensor (row 0 sources, row 1 destinations),
                  or PyG's ``EdgeIndex`` (its ``sparse_size`` gives the node counts);
                * a ``torch.sparse`` COO, CSR or CSC ``adj_t`` ``[num_dst, num_src]``: PyG's
                  *transposed* adjacency, whose rows are destinations (``adj_t[v, u]`` is
                  the edge ``u -> v``); a CSR ``adj_t`` is taken as is, without sorting;
                * a ``torch_sparse.SparseTensor`` ``adj_t``, likewise transposed.
            num_nodes: for an ``edge_index``: the node count of the square graph (default:
                the ``EdgeIndex``'s size, else one more than the largest index).

        Returns:
            The graph. Edge ids follow ``edge_index``'s columns or the adjacency's storage
            order, so ``adj_t.values()`` (or a ``SparseTensor``'s ``storage.value()``) are
            edge weights in edge order.
        """
        return cls._made(build.from_pyg(adj, num_nodes))

    @classmethod
    def _made(cls, csr: build.Csr, *, sync_free: bool = False, max_degree: int | None = None,
              csr_dst: torch.Tensor | None = None) -> Graph:
        g = cls(*csr, _validated=True, _sync_free=sync_free, _max_degree=max_degree)
        if csr_dst is not None:  # known where the CSR was built: its rows need no expanding
            g.__dict__["csr_dst"] = csr_dst
        return g

    # ------------------------------------------------------------------ sampled blocks

    @classmethod
    def from_block(
        cls,
        edge_index: torch.Tensor,
        *,
        num_src: int,
        num_dst: int,
        dst_sorted: bool = False,
        max_degree: int | None = None,
        check: bool = True,
    ) -> Graph:
        """A sampled block from a ``[2, E]`` edge list, built on its device without reading it back.

        For mini-batch training, where a sampler hands over fresh bipartite graphs every
        step and knows their sizes: PyG's ``NeighborLoader`` (the sampled ``edge_index``
        with the node counts of the layer's hops), DGL's blocks. Row 0 holds sources, row 1
        destinations; edge ``i`` keeps id ``i``. The result is the same graph as
        ``from_edge_index(edge_index, num_src=num_src, num_dst=num_dst)``, but nothing here
        or in what is derived from it later (reverse graph, degrees, statistics, schedules,
        launch plans) waits for the device: the statistics the schedule rules read are what
        the host knows (:class:`RowStats` with ``exact=False``).

        Args:
            edge_index: ``[2, E]`` int32 or int64 on any device.
            num_src, num_dst: the block's node counts.
            dst_sorted: the edges arrive sorted by destination (``edge_index[1]``
                non-decreasing), as PyG's and DGL's neighbour samplers produce them: the CSR
                is then read off without a sort, and edge ids are CSR positions.
            max_degree: an upper bound on every destination's number of edges, when the
                caller knows one (a sampler's fanout); the schedule rules use it. On a GPU
                it also spares edges in any order their sort: up to 1,024 (on rows that fill
                a fair share of it), they are filed by destination in two launches, each row
                then put back in edge order.
            check: validate the indices (below). ``False`` trusts the caller: an index out
                of range then makes the kernels read out of bounds. (On a GPU, a block
                sorted by destination or filed by it is checked anyway, by the launch that
                builds it.)

        Validation: on the CPU, indices out of range, unsorted destinations under
        ``dst_sorted`` and rows longer than ``max_degree`` raise ValueError at once. On a GPU
        the same conditions are checked by the device, in the launch that reads a sorted
        block off (or files a shuffled one, or checks it after its sort), ordered on the
        stream before any kernel reads the graph, so that the host never waits: a violation
        is a device-side assertion (the kernel prints the bad index), reported at the next
        synchronisation, and the CUDA context cannot be used afterwards. That is the price
        of a step that never waits. To find the culprit without losing the context, build
        the same block with :meth:`from_edge_index`, whose errors name the bad index.
        """
        csr, max_degree, csr_dst = build.block_from_edge_index(edge_index, num_src, num_dst,
                                                               dst_sorted, max_degree, check)
        return cls._made(csr, sync_free=True, max_degree=max_degree, csr_dst=csr_dst)


    @classmethod
    def from_block_csr(
        cls,
        rowptr: torch.Tensor,
        col: torch.Tensor,
        *,
        num_src: int,
        eid: torch.Tensor | None = None,
        max_degree: int | None = None,
        check: bool = True,
    ) -> Graph:
        """A sampled block from the CSR over destinations a sampler produced, built on its
        device without reading it back (see :meth:`from_block`).

        This is the CSC of the adjacency ``[num_src, num_dst]`` (``colptr`` over
        destinations, ``row`` holding sources: DGL's blocks, PyG's ``adj_t``): the same
        arguments as :meth:`from_csr`, with ``num_src`` required. ``rowptr`` has
        ``num_dst + 1`` entries; ``eid`` (optional) gives each CSR position's edge id.

        ``check`` validates on the device as :meth:`from_block` does: ``rowptr`` starts at
        0, never decreases and ends at ``E``; ``col`` in ``[0, num_src)``; ``eid`` within
        ``[0, E)`` (that it is a permutation is not checked: it costs a scatter, and a
        repeated id only misplaces results, it reads nothing out of bounds); rows no longer
        than ``max_degree``.
        """
        csr, max_degree = build.block_from_csr(rowptr, col, num_src, eid, max_degree, check)
        return cls._made(csr, sync_free=True, max_degree=max_degree)


    @property
    def sync_free(self) -> bool:
        """Whether the graph was built by :meth:`from_block` or :meth:`from_block_csr` (or
        derived from such a graph): then nothing derived from it reads the device back, and
        its :attr:`stats` are what the host knows."""
        return self._sync_free

    # ------------------------------------------------------------------ basic properties

    @property
    def num_src(self) -> int:
        """Number of source nodes (the rows of source-node features)."""
        return self._num_src

    @property
    def num_dst(self) -> int:
        """Number of destination nodes, the CSR rows (the rows of every output)."""
        return self._rowptr.numel() - 1

    @property
    def num_edges(self) -> int:
        """Number of edges ``E`` (the rows of edge features)."""
        return self._col.numel()

    @property
    def device(self) -> torch.device:
        """The device of the graph's index tensors, where its operands must live."""
        return self._rowptr.device

    @property
    def index_dtype(self) -> torch.dtype:
        """int32 unless a count exceeds its range, then int64."""
        return self._rowptr.dtype

    @property
    def rowptr(self) -> torch.Tensor:
        """``[num_dst + 1]`` CSR offsets over destination rows."""
        return self._rowptr

    @property
    def col(self) -> torch.Tensor:
        """``[E]`` source node of each CSR position."""
        return self._col

    @property
    def eid(self) -> torch.Tensor | None:
        """``[E]`` user edge id of each CSR position, or ``None`` when CSR order is edge order."""
        return self._eid

    def __repr__(self) -> str:
        return (f"Graph(num_src={self.num_src}, num_dst={self.num_dst}, num_edges={self.num_edges}, "
                f"index_dtype={self.index_dtype}, device={self.device})")

    # ------------------------------------------------------------------ derived structures

    def _in_degrees_for(self, size: int) -> torch.Tensor:
        """:meth:`in_degrees` where a structure of ``size`` elements is derived (on the host:
        HOST_STATISTICS_SIZE)."""
        small = self.device.type != "cpu" and not self._sync_free and size <= HOST_STATISTICS_SIZE
        rowptr = self._rowptr.cpu() if small else self._rowptr
        return rowptr[1:] - rowptr[:-1]

    @cached_property
    def csr_dst(self) -> torch.Tensor:
        """``[E]`` destination node of each CSR position (the row index, expanded)."""
        degrees = self._in_degrees_for(self.num_edges)
        rows = torch.arange(self.num_dst, device=degrees.device, dtype=self.index_dtype)
        return torch.repeat_interleave(rows, degrees, output_size=self.num_edges).to(self.device)

    @cached_property
    def _coo(self) -> tuple[torch.Tensor, torch.Tensor]:
        col, dst = self._col.long(), self.csr_dst.long()
        if self._eid is None:
            return col, dst
        eid = self._eid.long()
        return torch.empty_like(col).index_copy_(0, eid, col), torch.empty_like(dst).index_copy_(0, eid, dst)

    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(src, dst)``, each ``[E]`` int64, in the user's edge order (as PyG's
        ``edge_index[0]`` and ``edge_index[1]``). Cached."""
        return self._coo

    @property
    def edge_index(self) -> torch.Tensor:
        """``[2, E]`` int64 edge list in the user's edge order (row 0 sources, row 1
        destinations): the PyG ``edge_index`` of this graph."""
        return torch.stack(self._coo)

    @cached_property
    def _reverse(self) -> Graph:
        if self._sync_free:
            csr, rows = build.transpose_on_device(self._col, self._eid, self.num_src, self.num_dst,
                                                  self.csr_dst)
            rev = Graph._made(csr, sync_free=True, csr_dst=rows)
        else:
            rev = Graph._made(build.transpose(self._rowptr, self._col, self._eid, self.num_src, self.csr_dst))
        rev.__dict__["_reverse"] = self
        return rev

    def reverse(self) -> Graph:
        """The transposed graph (edges from destinations to sources), same edge ids. Cached."""
        return self._reverse

    @property
    def reverse_built(self) -> bool:
        """Whether :meth:`reverse` has been built (it is kept from then on)."""
        return "_reverse" in self.__dict__

    def in_degrees(self) -> torch.Tensor:
        """``[num_dst]`` number of incoming edges of each destination node."""
        return self._rowptr[1:] - self._rowptr[:-1]

    @cached_property
    def _out_degrees(self) -> torch.Tensor:
        if self._sync_free:  # a scatter of known size, where bincount would read its size back
            ones = torch.ones_like(self._col)
            return torch.zeros(self.num_src, dtype=self.index_dtype, device=self.device).index_add_(
                0, self._col, ones)
        return torch.bincount(self._col.long(), minlength=self.num_src).to(self.index_dtype)

    def out_degrees(self) -> torch.Tensor:
        """``[num_src]`` number of outgoing edges of each source node."""
        return self._out_degrees

    @cached_property
    def row_stats(self) -> RowStats:
        """Mean, max and coefficient of variation of the row lengths."""
        deg = self._in_degrees_for(self.num_dst).double()
        if deg.numel() == 0:
            return RowStats(0.0, 0, 0.0)
        mean = float(deg.mean())
        std = float(deg.std(unbiased=False))
        return RowStats(mean, int(deg.max()), std / mean if mean > 0 else 0.0)

    @cached_property
    def stats(self) -> GraphStats:
        """The sizes and row statistics the schedule rules read.

        For a graph from the constructors that validate on the host, :attr:`row_stats`
        (computing them reads the device once). For a :attr:`sync_free` graph, what the host
        knows, read without waiting for the device: the mean row length, the caller's
        ``max_degree`` (else the number of edges) as an upper bound of the longest row, and
        no coefficient of variation (``RowStats.exact`` is False). A block lives for one
        step, so statistics computed on the device and copied back asynchronously would
        arrive after the calls that need them.
        """
        if not self._sync_free:
            return GraphStats(self.num_src, self.num_dst, self.num_edges, self.row_stats)
        if self.num_edges == 0:  # every row is empty: known exactly
            return GraphStats(self.num_src, self.num_dst, 0, RowStats(0.0, 0, 0.0))
        bound = self.num_edges if self._max_degree is None else min(self._max_degree, self.num_edges)
        rows = RowStats(self.num_edges / max(self.num_dst, 1), bound, float("nan"), exact=False)
        return GraphStats(self.num_src, self.num_dst, self.num_edges, rows)

    @cached_property
    def degree_sorted_rows(self) -> torch.Tensor:
        """``[num_dst]`` destination rows ordered by decreasing in-degree (stable)."""
        order = torch.argsort(self._in_degrees_for(self.num_dst), descending=True, stable=True)
        return order.to(self.index_dtype).to(self.device)

    # ------------------------------------------------------------------ conversions

    def to(self, device: torch.device | str) -> Graph:
        """The same graph on ``device``; returns ``self`` when already there."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device == self.device:
            return self
        return self._converted(lambda t: t.to(device))

    def with_index_dtype(self, dtype: torch.dtype) -> Graph:
        """The same graph with ``int32`` or ``int64`` indices (int32 only where counts fit)."""
        if dtype not in (torch.int32, torch.int64):
            raise TypeError(f"dtype must be torch.int32 or torch.int64, got {dtype}")
        if dtype == torch.int32 and build.index_dtype_for(self.num_edges, self.num_src, self.num_dst) != dtype:
            raise ValueError(f"{self} has counts beyond the int32 range; it needs int64 indices")
        if dtype == self.index_dtype:
            return self
        return self._converted(lambda t: t.to(dtype))

    def _converted(self, convert: Callable[[torch.Tensor], torch.Tensor]) -> Graph:
        csr = build.Csr(convert(self._rowptr), convert(self._col),
                        None if self._eid is None else convert(self._eid), self._num_src)
        return Graph._made(csr, sync_free=self._sync_free, max_degree=self._max_degree)

    def coalesce(
        self, edge_weight: torch.Tensor | None = None, reduce: str = "sum"
    ) -> Graph | tuple[Graph, torch.Tensor]:
        """Merge duplicate edges ``(u, v)`` into one, as PyG's ``coalesce``.

        Args:
            edge_weight: optional ``[E, *shape]`` weights in edge order.
            reduce: how the weights of merged edges combine: ``"sum"``, ``"mean"``,
                ``"max"``, ``"min"`` or ``"first"`` (keep the weight of the lowest edge id).

        Returns:
            As PyG: the coalesced graph alone when ``edge_weight`` is ``None``, else the pair
            ``(graph, weights)`` with ``weights`` ``[E', *shape]``. The new graph's edges are
            sorted by destination, then source; its edge ids follow that order.
        """
        csr, weights = build.coalesce(self._rowptr, self._col, self._eid, self.num_src, self.csr_dst,
                                      edge_weight, reduce)
        graph = Graph._made(csr)
        return graph if edge_weight is None else (graph, weights)
