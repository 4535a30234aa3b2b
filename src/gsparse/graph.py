"""The graph: a validated CSR over destination rows, with derived structures built lazily.

Row ``v`` of the CSR lists the incoming edges of destination node ``v``: positions
``rowptr[v]:rowptr[v+1]`` of ``col`` hold their source nodes, and ``eid`` maps each
CSR position to the user's edge id (``None`` when the two orders agree). Edge features
are always given and returned in the user's edge order.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from ._index_checks import check_count, check_fits, check_index_tensor, check_range, first_true
from .derived import DerivedCache

__all__ = ["Graph", "GraphStats", "RowStats"]

_INT32_MAX = torch.iinfo(torch.int32).max


# Live graphs by the device and addresses of their rowptr and col. The custom ops
# (gsparse._ops) take a graph's tensors, not the Graph, and find it again here with its
# caches (reverse graph, COO); keyed by address rather than tensor identity so that the
# aliases torch.compile and autograd hand over (detached views of the same memory) still
# find it. Entries die with their graph, and a live graph keeps its tensors, so their
# addresses are not reused meanwhile.
_LIVE: weakref.WeakValueDictionary[tuple[torch.device, int, int], Graph] = weakref.WeakValueDictionary()


def _live_key(rowptr: torch.Tensor, col: torch.Tensor) -> tuple[torch.device, int, int]:
    return rowptr.device, rowptr.data_ptr(), col.data_ptr()


def _same_memory(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.dtype == b.dtype


@dataclass(frozen=True)
class RowStats:
    """Statistics of the row lengths (in-degrees of destination nodes)."""

    mean: float
    max: int
    cov: float  # coefficient of variation: std / mean (0 for an edgeless graph)


@dataclass(frozen=True)
class GraphStats:
    """The sizes and row statistics of a graph: what default rules and spaces read."""

    num_src: int
    num_dst: int
    num_edges: int
    rows: RowStats


def _sparse_coo(tensor: Any, name: str) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """``(row, col, num_rows, num_cols)`` of a 2-D ``torch.sparse`` tensor, in its storage
    order (a CSR's or CSC's compressed index expanded)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(tensor.shape)}")
    rows, cols = tensor.shape
    if tensor.layout == torch.sparse_coo:
        row, col = tensor._indices()
    elif tensor.layout == torch.sparse_csr:
        crow = tensor.crow_indices()
        row = torch.repeat_interleave(torch.arange(rows, device=crow.device, dtype=crow.dtype), crow.diff())
        col = tensor.col_indices()
    elif tensor.layout == torch.sparse_csc:
        ccol = tensor.ccol_indices()
        col = torch.repeat_interleave(torch.arange(cols, device=ccol.device, dtype=ccol.dtype), ccol.diff())
        row = tensor.row_indices()
    else:
        raise ValueError(f"{name} must have layout torch.sparse_coo, torch.sparse_csr or "
                         f"torch.sparse_csc, got {tensor.layout}")
    return row, col, rows, cols


def _is_sparse_tensor_of_torch_sparse(obj: Any) -> bool:
    return type(obj).__name__ == "SparseTensor" and type(obj).__module__.startswith("torch_sparse")


def _index_dtype_for(*counts: int) -> torch.dtype:
    return torch.int32 if max(counts, default=0) <= _INT32_MAX else torch.int64


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
    ) -> None:
        if not _validated:
            raise TypeError(
                "Graph is built with Graph.from_edge_index, from_csr, from_scipy or from_torch_sparse"
            )
        self._rowptr = rowptr
        self._col = col
        self._eid = eid
        self._num_src = num_src
        # Derived structures, one cache per owner (see gsparse.derived).
        self.plans: DerivedCache = DerivedCache("launch plans of the generated kernels, by (task, schedule)")
        self.schedules: DerivedCache = DerivedCache("the schedule chosen for each kernel task")
        self.layouts: DerivedCache = DerivedCache("edge layouts the g-SpMM skeletons walk")
        self.cpu: DerivedCache = DerivedCache("structures of the PyTorch-ops backend")
        self.layers: DerivedCache = DerivedCache("structures of the gsparse.nn layers")
        self.tuning: DerivedCache = DerivedCache("the graph's signature and structure for the tuner")
        if _register:  # the newest graph over these tensors is the one the custom ops find
            _LIVE[_live_key(rowptr, col)] = self

    @property
    def parts(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, int]:
        """``(rowptr, col, eid, num_src)``: what the custom ops take in place of the graph."""
        return self._rowptr, self._col, self._eid, self._num_src

    @classmethod
    def _find(
        cls, rowptr: torch.Tensor, col: torch.Tensor, eid: torch.Tensor | None, num_src: int
    ) -> Graph:
        """The live graph whose :attr:`parts` these are (or alias), else a new graph over them.

        The tensors must come from a validated graph. A new graph starts with empty caches
        and is not registered, so that it cannot displace the live graph of its tensors.
        """
        g = _LIVE.get(_live_key(rowptr, col))
        if (g is not None and g._num_src == num_src and _same_memory(g._rowptr, rowptr)
                and _same_memory(g._col, col) and _same_memory(g._eid, eid)):
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
        rowptr = check_index_tensor("rowptr", rowptr, 1)
        col = check_index_tensor("col", col, 1)
        if rowptr.numel() == 0:
            raise ValueError("rowptr must have at least one entry (num_dst + 1), got 0")
        if col.device != rowptr.device:
            raise ValueError(f"col is on {col.device} but rowptr is on {rowptr.device}")
        num_edges = col.numel()
        if int(rowptr[0]) != 0:
            raise ValueError(f"rowptr[0] must be 0, got {int(rowptr[0])}")
        steps = rowptr[1:] - rowptr[:-1]
        if bool((steps < 0).any()):
            i = first_true(steps < 0)
            raise ValueError(
                f"rowptr must be non-decreasing: rowptr[{i + 1}] = {int(rowptr[i + 1])} "
                f"< rowptr[{i}] = {int(rowptr[i])}"
            )
        if int(rowptr[-1]) != num_edges:
            raise ValueError(
                f"rowptr[-1] = {int(rowptr[-1])} must equal the number of entries of col ({num_edges})"
            )
        if num_src is None:
            num_src = int(col.max()) + 1 if num_edges else 0
        num_src = check_count("num_src", num_src)
        check_fits(rowptr.device, num_src, rowptr.numel() - 1, num_edges)
        check_range("col", col, num_src, "num_src")
        if eid is not None:
            eid = check_index_tensor("eid", eid, 1)
            if eid.device != rowptr.device:
                raise ValueError(f"eid is on {eid.device} but rowptr is on {rowptr.device}")
            if eid.numel() != num_edges:
                raise ValueError(f"eid has {eid.numel()} entries but col has {num_edges}")
            check_range("eid", eid, num_edges, "the number of edges")
            seen = torch.zeros(num_edges, dtype=torch.int32, device=eid.device)
            seen.index_add_(0, eid.long(), torch.ones_like(eid, dtype=torch.int32))
            if bool((seen != 1).any()):
                missing = first_true(seen != 1)
                raise ValueError(f"eid must be a permutation of 0..{num_edges - 1}: edge id {missing} "
                                 f"appears {int(seen[missing])} times")
        num_dst = rowptr.numel() - 1
        return cls._assemble(rowptr, col, eid, num_src, num_dst)

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
        edge_index = check_index_tensor("edge_index", edge_index, 2)
        if edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape [2, E], got {tuple(edge_index.shape)}")
        src, dst = edge_index[0], edge_index[1]
        if num_nodes is not None and (num_src is not None or num_dst is not None):
            raise ValueError(f"give num_nodes (a square graph) or num_src / num_dst (a bipartite "
                             f"one), not both: got num_nodes={num_nodes}, num_src={num_src}, "
                             f"num_dst={num_dst}")
        if num_src is None and num_dst is None:
            if num_nodes is None:
                num_nodes = int(edge_index.max()) + 1 if edge_index.numel() else 0
            num_src = num_dst = check_count("num_nodes", num_nodes)
        return cls._from_coo(src, dst, num_src, num_dst, "edge_index[0]", "edge_index[1]")

    @classmethod
    def from_scipy(cls, matrix: Any) -> Graph:
        """Graph from a SciPy sparse matrix whose rows are sources and columns destinations (DGL).

        Edge ids follow the matrix's storage order (its COO order).
        """
        import scipy.sparse as sp

        if not (sp.issparse(matrix)):
            raise TypeError(f"matrix must be a SciPy sparse matrix or array, got {type(matrix).__name__}")
        coo = matrix.tocoo()
        num_src, num_dst = coo.shape
        src = torch.from_numpy(np.asarray(coo.row, dtype=np.int64))
        dst = torch.from_numpy(np.asarray(coo.col, dtype=np.int64))
        return cls._from_coo(src, dst, num_src, num_dst, "matrix row", "matrix column")

    @classmethod
    def from_torch_sparse(cls, tensor: torch.Tensor) -> Graph:
        """Graph from a 2-D ``torch.sparse`` COO, CSR or CSC tensor ``[num_src, num_dst]``
        whose rows are sources (DGL's adjacency convention).

        Edge ids follow the tensor's storage order, so ``tensor.values()`` are edge features
        in edge order. For PyG's transposed ``adj_t`` (rows are destinations) use
        :meth:`from_pyg`.
        """
        src, dst, num_src, num_dst = _sparse_coo(tensor, "tensor")
        return cls._from_coo(src, dst, num_src, num_dst, "tensor row", "tensor column")

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
        if _is_sparse_tensor_of_torch_sparse(adj):
            rowptr, col, _ = adj.csr()
            num_dst, num_src = adj.sparse_sizes()
            return cls.from_csr(rowptr, col, num_src)
        if not isinstance(adj, torch.Tensor):
            raise TypeError(f"adj must be an edge_index tensor [2, E], a torch.sparse adjacency or a "
                            f"torch_sparse.SparseTensor, got {type(adj).__name__}")
        if adj.layout == torch.sparse_csr:
            num_dst, num_src = adj.shape
            return cls.from_csr(adj.crow_indices(), adj.col_indices(), num_src)
        if adj.layout in (torch.sparse_coo, torch.sparse_csc):
            dst, src, num_dst, num_src = _sparse_coo(adj, "adj")
            return cls._from_coo(src, dst, num_src, num_dst, "adj column", "adj row")
        size = getattr(adj, "sparse_size", None)
        if type(adj) is not torch.Tensor:  # EdgeIndex and other subclasses: as a plain tensor
            adj = adj.as_subclass(torch.Tensor)
        if num_nodes is None and callable(size):
            num_src, num_dst = size()
            if num_src is not None or num_dst is not None:
                if num_src == num_dst:
                    return cls.from_edge_index(adj, num_nodes=num_src)
                return cls.from_edge_index(adj, num_src=num_src, num_dst=num_dst)
        return cls.from_edge_index(adj, num_nodes=num_nodes)

    @classmethod
    def _from_coo(
        cls,
        src: torch.Tensor,
        dst: torch.Tensor,
        num_src: int | None,
        num_dst: int | None,
        src_name: str,
        dst_name: str,
    ) -> Graph:
        num_edges = src.numel()
        num_src = check_count("num_src", num_src if num_src is not None
                               else (int(src.max()) + 1 if num_edges else 0))
        num_dst = check_count("num_dst", num_dst if num_dst is not None
                               else (int(dst.max()) + 1 if num_edges else 0))
        check_fits(src.device, num_src, num_dst, num_edges)
        check_range(src_name, src, num_src, "num_src")
        check_range(dst_name, dst, num_dst, "num_dst")
        dst64 = dst.long()
        # A stable sort keeps each row's edges in the user's order, as DGL's CSR does.
        order = torch.argsort(dst64, stable=True)
        counts = torch.bincount(dst64, minlength=num_dst)
        idx = _index_dtype_for(num_edges, num_src, num_dst)
        rowptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=src.device)
        torch.cumsum(counts, 0, out=rowptr[1:])
        col = src.long()[order]
        identity = torch.arange(num_edges, device=src.device)
        eid = None if bool((order == identity).all()) else order.to(idx)
        return cls._assemble(rowptr.to(idx), col.to(idx), eid, num_src, num_dst)

    @classmethod
    def _assemble(
        cls,
        rowptr: torch.Tensor,
        col: torch.Tensor,
        eid: torch.Tensor | None,
        num_src: int,
        num_dst: int,
    ) -> Graph:
        idx = _index_dtype_for(col.numel(), num_src, num_dst)
        rowptr, col = rowptr.to(idx).contiguous(), col.to(idx).contiguous()
        if eid is not None:
            eid = eid.to(idx).contiguous()
            if bool((eid == torch.arange(eid.numel(), device=eid.device, dtype=idx)).all()):
                eid = None
        return cls(rowptr, col, eid, num_src, _validated=True)

    # ------------------------------------------------------------------ basic properties

    @property
    def num_src(self) -> int:
        return self._num_src

    @property
    def num_dst(self) -> int:
        return self._rowptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self._col.numel()

    @property
    def device(self) -> torch.device:
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

    @cached_property
    def csr_dst(self) -> torch.Tensor:
        """``[E]`` destination node of each CSR position (the row index, expanded)."""
        rows = torch.arange(self.num_dst, device=self.device, dtype=self.index_dtype)
        return torch.repeat_interleave(rows, self.in_degrees(), output_size=self.num_edges)

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
        # The transpose keeps the original edge ids, so one edge-feature tensor serves both.
        order = torch.argsort(self._col.long(), stable=True)
        counts = torch.bincount(self._col.long(), minlength=self.num_src)
        rowptr = torch.zeros(self.num_src + 1, dtype=torch.int64, device=self.device)
        torch.cumsum(counts, 0, out=rowptr[1:])
        col = self.csr_dst[order]
        eid = order if self._eid is None else self._eid.long()[order]
        rev = Graph._assemble(rowptr, col, eid, self.num_dst, self.num_src)
        rev.__dict__["_reverse"] = self
        return rev

    def reverse(self) -> Graph:
        """The transposed graph (edges from destinations to sources), same edge ids. Cached."""
        return self._reverse

    def in_degrees(self) -> torch.Tensor:
        """``[num_dst]`` number of incoming edges of each destination node."""
        return self._rowptr[1:] - self._rowptr[:-1]

    @cached_property
    def _out_degrees(self) -> torch.Tensor:
        return torch.bincount(self._col.long(), minlength=self.num_src).to(self.index_dtype)

    def out_degrees(self) -> torch.Tensor:
        """``[num_src]`` number of outgoing edges of each source node."""
        return self._out_degrees

    @cached_property
    def row_stats(self) -> RowStats:
        """Mean, max and coefficient of variation of the row lengths."""
        deg = self.in_degrees().double()
        if deg.numel() == 0:
            return RowStats(0.0, 0, 0.0)
        mean = float(deg.mean())
        std = float(deg.std(unbiased=False))
        return RowStats(mean, int(deg.max()), std / mean if mean > 0 else 0.0)

    @cached_property
    def stats(self) -> GraphStats:
        """Sizes and row statistics (computing the row statistics reads the device once)."""
        return GraphStats(self.num_src, self.num_dst, self.num_edges, self.row_stats)

    @cached_property
    def degree_sorted_rows(self) -> torch.Tensor:
        """``[num_dst]`` destination rows ordered by decreasing in-degree (stable)."""
        order = torch.argsort(self.in_degrees(), descending=True, stable=True)
        return order.to(self.index_dtype)

    # ------------------------------------------------------------------ conversions

    def to(self, device: torch.device | str) -> Graph:
        """The same graph on ``device``; returns ``self`` when already there."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device == self.device:
            return self
        moved = Graph(
            self._rowptr.to(device),
            self._col.to(device),
            None if self._eid is None else self._eid.to(device),
            self._num_src,
            _validated=True,
        )
        return moved

    def with_index_dtype(self, dtype: torch.dtype) -> Graph:
        """The same graph with ``int32`` or ``int64`` indices (int32 only where counts fit)."""
        if dtype not in (torch.int32, torch.int64):
            raise TypeError(f"dtype must be torch.int32 or torch.int64, got {dtype}")
        if dtype == torch.int32 and _index_dtype_for(self.num_edges, self.num_src, self.num_dst) != dtype:
            raise ValueError(f"{self} has counts beyond the int32 range; it needs int64 indices")
        if dtype == self.index_dtype:
            return self
        return Graph(self._rowptr.to(dtype), self._col.to(dtype),
                     None if self._eid is None else self._eid.to(dtype), self._num_src, _validated=True)

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
        reducers = ("sum", "mean", "max", "min", "first")
        if reduce not in reducers:
            raise ValueError(f"reduce must be one of {reducers}, got {reduce!r}")
        if edge_weight is not None:
            if not isinstance(edge_weight, torch.Tensor):
                raise TypeError(f"edge_weight must be a torch.Tensor, got {type(edge_weight).__name__}")
            if edge_weight.dim() == 0 or edge_weight.shape[0] != self.num_edges:
                raise ValueError(f"edge_weight has shape {tuple(edge_weight.shape)} but the graph has "
                                 f"{self.num_edges} edges")
            if edge_weight.device != self.device:
                raise ValueError(f"edge_weight is on {edge_weight.device} but the graph is on {self.device}")
        dst = self.csr_dst.long()
        src = self._col.long()
        eid = (torch.arange(self.num_edges, device=self.device) if self._eid is None
               else self._eid.long())
        # Sort by (dst, src, edge id) so that duplicates are adjacent and "first" is the lowest id.
        order = torch.argsort(eid)
        order = order[torch.argsort(src[order], stable=True)]
        order = order[torch.argsort(dst[order], stable=True)]
        key = dst[order] * max(self.num_src, 1) + src[order]
        is_new = torch.ones_like(key, dtype=torch.bool)
        is_new[1:] = key[1:] != key[:-1]
        group = torch.cumsum(is_new, 0) - 1
        keep = order[is_new]
        rowptr = torch.zeros(self.num_dst + 1, dtype=torch.int64, device=self.device)
        torch.cumsum(torch.bincount(dst[keep], minlength=self.num_dst), 0, out=rowptr[1:])
        graph = Graph._assemble(rowptr, src[keep], None, self.num_src, self.num_dst)
        if edge_weight is None:
            return graph
        w = edge_weight[eid[order]]
        n = int(keep.numel())
        if reduce == "first":
            return graph, w[is_new]
        index = group.view(-1, *([1] * (w.dim() - 1))).expand_as(w)
        out = torch.zeros((n, *w.shape[1:]), dtype=w.dtype, device=w.device)
        torch_reduce = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}[reduce]
        out.scatter_reduce_(0, index, w, torch_reduce, include_self=False)
        return graph, out
