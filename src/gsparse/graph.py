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


def _static_address(t: torch.Tensor | None) -> None:
    """Mark a graph tensor for torch.compile as an input whose address stays the same between
    calls (``torch._dynamo.mark_static_address``, unguarded). CUDA-graph trees
    (``mode="reduce-overhead"``) then hand it to the custom ops as it is, instead of a copy
    in their own memory pool, whose address would not find the graph in :data:`_LIVE`."""
    if t is not None and getattr(t, "_dynamo_static_input_type", None) is None:
        t._dynamo_static_input_type = "unguarded"


def _same_memory(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.dtype == b.dtype


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


def _check_on_device(ok: torch.Tensor, message: str) -> None:
    """Raise ValueError(``message``) unless the 0-d bool ``ok`` holds: at once on the CPU,
    as a device-side assertion on a GPU (the host does not wait for the verdict)."""
    if ok.device.type == "cpu":
        if not bool(ok):
            raise ValueError(message)
    else:
        torch._assert_async(ok, message)


def _offsets(sorted_keys: torch.Tensor, count: int) -> torch.Tensor:
    """``[count + 1]`` CSR offsets of keys sorted in ``[0, count)``: entry ``k`` is the
    number of keys below ``k``. A search, not a ``bincount``, whose output size would
    depend on the data (and make CUDA wait for it)."""
    bounds = torch.arange(count + 1, device=sorted_keys.device, dtype=sorted_keys.dtype)
    return torch.searchsorted(sorted_keys, bounds, out_int32=sorted_keys.dtype == torch.int32)


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
            _static_address(t)
        if _register:  # the newest graph over these tensors is the one the custom ops find
            _LIVE[_live_key(rowptr, col)] = self

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
                caller knows one (a sampler's fanout); the schedule rules use it.
            check: validate the indices (below). ``False`` trusts the caller: an index out
                of range then makes the kernels read out of bounds.

        Validation: on the CPU, indices out of range, unsorted destinations under
        ``dst_sorted`` and rows longer than ``max_degree`` raise ValueError at once. On a GPU
        the same conditions are checked by the device (``torch._assert_async``), in order on
        the stream before any kernel reads the graph, so that the host never waits: a
        violation is a device-side assertion, reported at the next synchronisation, and
        the CUDA context cannot be used afterwards. That is the price of a step that never
        waits; the checks cost about ten small launches. To find the culprit, build the
        same block with :meth:`from_edge_index`, whose errors name the bad index.
        """
        edge_index = check_index_tensor("edge_index", edge_index, 2)
        if edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape [2, E], got {tuple(edge_index.shape)}")
        num_src, num_dst = check_count("num_src", num_src), check_count("num_dst", num_dst)
        max_degree = None if max_degree is None else check_count("max_degree", max_degree)
        num_edges = edge_index.shape[1]
        idx = _index_dtype_for(num_edges, num_src, num_dst)
        indices = edge_index.to(idx, memory_format=torch.contiguous_format)
        src, dst = indices[0], indices[1]
        ok = None
        if check and num_edges:
            low, high = torch.aminmax(edge_index, dim=1)
            ok = (low.min() >= 0) & (high[0] < num_src) & (high[1] < num_dst)
            if dst_sorted:
                ok &= (edge_index[1, 1:] >= edge_index[1, :-1]).all()
            _check_on_device(ok, "from_block: edge_index has an index out of range (0 <= "
                             f"edge_index[0] < num_src = {num_src}, 0 <= edge_index[1] < num_dst = "
                             f"{num_dst})" + (" or destinations out of order (dst_sorted=True)"
                                              if dst_sorted else ""))
        if dst_sorted:
            col, eid, sorted_dst = src, None, dst
        else:
            # A stable sort keeps each row's edges in the user's order, as from_edge_index.
            sorted_dst, order = torch.sort(dst, stable=True)
            col, eid = src.index_select(0, order), order.to(idx)
        rowptr = _offsets(sorted_dst, num_dst)
        if check and num_edges and num_dst and max_degree is not None:
            _check_on_device((rowptr[1:] - rowptr[:-1]).max() <= max_degree,
                             f"from_block: a destination has more than max_degree = {max_degree} edges")
        return cls(rowptr, col, eid, num_src, _validated=True, _sync_free=True, _max_degree=max_degree)

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
        rowptr = check_index_tensor("rowptr", rowptr, 1)
        col = check_index_tensor("col", col, 1)
        if rowptr.numel() == 0:
            raise ValueError("rowptr must have at least one entry (num_dst + 1), got 0")
        if col.device != rowptr.device:
            raise ValueError(f"col is on {col.device} but rowptr is on {rowptr.device}")
        num_src = check_count("num_src", num_src)
        max_degree = None if max_degree is None else check_count("max_degree", max_degree)
        num_edges, num_dst = col.numel(), rowptr.numel() - 1
        if eid is not None:
            eid = check_index_tensor("eid", eid, 1)
            if eid.device != rowptr.device:
                raise ValueError(f"eid is on {eid.device} but rowptr is on {rowptr.device}")
            if eid.numel() != num_edges:
                raise ValueError(f"eid has {eid.numel()} entries but col has {num_edges}")
        if check:
            steps = rowptr[1:] - rowptr[:-1]
            ok = (rowptr[0] == 0) & (rowptr[-1] == num_edges)
            if num_dst:
                ok &= steps.min() >= 0
                if max_degree is not None:
                    ok &= steps.max() <= max_degree
            if num_edges:
                low, high = torch.aminmax(col)
                ok &= (low >= 0) & (high < num_src)
                if eid is not None:
                    low, high = torch.aminmax(eid)
                    ok &= (low >= 0) & (high < num_edges)
            _check_on_device(ok, f"from_block_csr: rowptr must run from 0 to len(col) = {num_edges} "
                                 f"without decreasing, with col in [0, num_src = {num_src}) and eid in "
                                 f"[0, {num_edges})" + ("" if max_degree is None else
                                                        f" and rows of at most {max_degree} edges"))
        idx = _index_dtype_for(num_edges, num_src, num_dst)
        return cls(rowptr.to(idx).contiguous(), col.to(idx).contiguous(),
                   None if eid is None else eid.to(idx).contiguous(), num_src, _validated=True,
                   _sync_free=True, _max_degree=max_degree)

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
        if self._sync_free:
            rev = self._reverse_on_device()
            rev.__dict__["_reverse"] = self
            return rev
        order = torch.argsort(self._col.long(), stable=True)
        counts = torch.bincount(self._col.long(), minlength=self.num_src)
        rowptr = torch.zeros(self.num_src + 1, dtype=torch.int64, device=self.device)
        torch.cumsum(counts, 0, out=rowptr[1:])
        col = self.csr_dst[order]
        eid = order if self._eid is None else self._eid.long()[order]
        rev = Graph._assemble(rowptr, col, eid, self.num_dst, self.num_src)
        rev.__dict__["_reverse"] = self
        return rev

    def _reverse_on_device(self) -> Graph:
        """The transpose of a block, built without reading the device (its edge ids stay,
        even where they are CSR positions: knowing that would take a read)."""
        sorted_src, order = torch.sort(self._col, stable=True)
        col = self.csr_dst.index_select(0, order)
        eid = order.to(self.index_dtype) if self._eid is None else self._eid.index_select(0, order)
        return Graph(_offsets(sorted_src, self.num_src), col, eid, self.num_dst, _validated=True,
                     _sync_free=True)

    def reverse(self) -> Graph:
        """The transposed graph (edges from destinations to sources), same edge ids. Cached."""
        return self._reverse

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
        deg = self.in_degrees().double()
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
            _sync_free=self._sync_free,
            _max_degree=self._max_degree,
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
                     None if self._eid is None else self._eid.to(dtype), self._num_src, _validated=True,
                     _sync_free=self._sync_free, _max_degree=self._max_degree)

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
