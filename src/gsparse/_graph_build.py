"""From what users and samplers hand over to a validated CSR over destination rows.

Every function here returns :class:`Csr`, the parts a :class:`~gsparse.graph.Graph` is made
of, after checking its inputs once: the host-side constructors raise at once and name the
bad index; the block constructors check on the device so that the host never waits: on a
GPU in the launches that build the block, or in one launch of a check kernel after a sort
(:mod:`._block_checks`), elsewhere with PyTorch operations (raising at once on the CPU).
The graph's public constructors document the arguments.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from . import _block_checks as block_checks
from ._sorting import stable_order, stable_sort
from ._index_checks import check_count, check_fits, check_index_tensor, check_range, first_true

_INT32_MAX = torch.iinfo(torch.int32).max


class Csr(NamedTuple):
    """A validated CSR over destination rows, in the graph's index dtype."""

    rowptr: torch.Tensor
    col: torch.Tensor
    eid: torch.Tensor | None  # None when CSR order is the user's edge order
    num_src: int


def index_dtype_for(*counts: int) -> torch.dtype:
    return torch.int32 if max(counts, default=0) <= _INT32_MAX else torch.int64


def check_on_device(ok: torch.Tensor, message: str) -> None:
    """Raise ValueError(``message``) unless the 0-d bool ``ok`` holds: at once on the CPU,
    as a device-side assertion on a GPU (the host does not wait for the verdict)."""
    if ok.device.type == "cpu":
        if not bool(ok):
            raise ValueError(message)
    else:
        torch._assert_async(ok, message)


def offsets(sorted_keys: torch.Tensor, count: int) -> torch.Tensor:
    """``[count + 1]`` CSR offsets of keys sorted in ``[0, count)``: entry ``k`` is the
    number of keys below ``k``. A search, not a ``bincount``, whose output size would
    depend on the data (and make CUDA wait for it)."""
    bounds = torch.arange(count + 1, device=sorted_keys.device, dtype=sorted_keys.dtype)
    return torch.searchsorted(sorted_keys, bounds, out_int32=sorted_keys.dtype == torch.int32)


def assemble(rowptr: torch.Tensor, col: torch.Tensor, eid: torch.Tensor | None,
             num_src: int, num_dst: int) -> Csr:
    """Parts already checked, in the index dtype the counts need; an identity ``eid`` is dropped."""
    idx = index_dtype_for(col.numel(), num_src, num_dst)
    rowptr, col = rowptr.to(idx).contiguous(), col.to(idx).contiguous()
    if eid is not None:
        eid = eid.to(idx).contiguous()
        if bool((eid == torch.arange(eid.numel(), device=eid.device, dtype=idx)).all()):
            eid = None
    return Csr(rowptr, col, eid, num_src)


# ---------------------------------------------------------------------- host-validated inputs

def from_csr(rowptr: Any, col: Any, num_src: Any, eid: Any) -> Csr:
    rowptr, col = _checked_csr_arrays(rowptr, col)
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
        eid = _checked_eid(eid, rowptr.device, num_edges)
        check_range("eid", eid, num_edges, "the number of edges")
        seen = torch.zeros(num_edges, dtype=torch.int32, device=eid.device)
        seen.index_add_(0, eid.long(), torch.ones_like(eid, dtype=torch.int32))
        if bool((seen != 1).any()):
            missing = first_true(seen != 1)
            raise ValueError(f"eid must be a permutation of 0..{num_edges - 1}: edge id {missing} "
                             f"appears {int(seen[missing])} times")
    return assemble(rowptr, col, eid, num_src, rowptr.numel() - 1)


def from_edge_index(edge_index: Any, num_nodes: Any, num_src: Any, num_dst: Any) -> Csr:
    edge_index = check_index_tensor("edge_index", edge_index, 2)
    if edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {tuple(edge_index.shape)}")
    if num_nodes is not None and (num_src is not None or num_dst is not None):
        raise ValueError(f"give num_nodes (a square graph) or num_src / num_dst (a bipartite "
                         f"one), not both: got num_nodes={num_nodes}, num_src={num_src}, "
                         f"num_dst={num_dst}")
    if num_src is None and num_dst is None:
        if num_nodes is None:
            num_nodes = int(edge_index.max()) + 1 if edge_index.numel() else 0
        num_src = num_dst = check_count("num_nodes", num_nodes)
    return from_coo(edge_index[0], edge_index[1], num_src, num_dst, "edge_index[0]", "edge_index[1]")


def from_scipy(matrix: Any) -> Csr:
    import scipy.sparse as sp

    if not sp.issparse(matrix):
        raise TypeError(f"matrix must be a SciPy sparse matrix or array, got {type(matrix).__name__}")
    coo = matrix.tocoo()
    num_src, num_dst = coo.shape
    src = torch.from_numpy(np.asarray(coo.row, dtype=np.int64))
    dst = torch.from_numpy(np.asarray(coo.col, dtype=np.int64))
    return from_coo(src, dst, num_src, num_dst, "matrix row", "matrix column")


def from_torch_sparse(tensor: Any) -> Csr:
    src, dst, num_src, num_dst = _sparse_coo(tensor, "tensor")
    return from_coo(src, dst, num_src, num_dst, "tensor row", "tensor column")


def from_pyg(adj: Any, num_nodes: Any) -> Csr:
    if type(adj).__name__ == "SparseTensor" and type(adj).__module__.startswith("torch_sparse"):
        rowptr, col, _ = adj.csr()
        num_dst, num_src = adj.sparse_sizes()
        return from_csr(rowptr, col, num_src, None)
    if not isinstance(adj, torch.Tensor):
        raise TypeError(f"adj must be an edge_index tensor [2, E], a torch.sparse adjacency or a "
                        f"torch_sparse.SparseTensor, got {type(adj).__name__}")
    if adj.layout == torch.sparse_csr:
        num_dst, num_src = adj.shape
        return from_csr(adj.crow_indices(), adj.col_indices(), num_src, None)
    if adj.layout in (torch.sparse_coo, torch.sparse_csc):
        dst, src, num_dst, num_src = _sparse_coo(adj, "adj")
        return from_coo(src, dst, num_src, num_dst, "adj column", "adj row")
    size = getattr(adj, "sparse_size", None)
    if type(adj) is not torch.Tensor:  # EdgeIndex and other subclasses: as a plain tensor
        adj = adj.as_subclass(torch.Tensor)
    if num_nodes is None and callable(size):
        num_src, num_dst = size()
        if num_src is not None or num_dst is not None:
            if num_src == num_dst:
                return from_edge_index(adj, num_src, None, None)
            return from_edge_index(adj, None, num_src, num_dst)
    return from_edge_index(adj, num_nodes, None, None)


def from_coo(src: torch.Tensor, dst: torch.Tensor, num_src: Any, num_dst: Any,
             src_name: str, dst_name: str) -> Csr:
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
    order = stable_order(dst64, num_dst)
    rowptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=src.device)
    torch.cumsum(torch.bincount(dst64, minlength=num_dst), 0, out=rowptr[1:])
    # a permutation in increasing order is the identity: the user's order is CSR order
    eid = None if bool((order[1:] > order[:-1]).all()) else order
    return assemble(rowptr, src.long()[order], eid, num_src, num_dst)


def _checked_csr_arrays(rowptr: Any, col: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``rowptr`` and ``col`` as index tensors of one device, ``rowptr`` not empty (their
    values are checked by the caller: on the host, or on the device for a block)."""
    rowptr = check_index_tensor("rowptr", rowptr, 1)
    col = check_index_tensor("col", col, 1)
    if rowptr.numel() == 0:
        raise ValueError("rowptr must have at least one entry (num_dst + 1), got 0")
    if col.device != rowptr.device:
        raise ValueError(f"col is on {col.device} but rowptr is on {rowptr.device}")
    return rowptr, col


def _checked_eid(eid: Any, device: torch.device, num_edges: int) -> torch.Tensor:
    eid = check_index_tensor("eid", eid, 1)
    if eid.device != device:
        raise ValueError(f"eid is on {eid.device} but rowptr is on {device}")
    if eid.numel() != num_edges:
        raise ValueError(f"eid has {eid.numel()} entries but col has {num_edges}")
    return eid


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


# ---------------------------------------------------------------------- sampled blocks

def block_from_edge_index(edge_index: Any, num_src: Any, num_dst: Any, dst_sorted: bool,
                          max_degree: Any, check: bool) -> tuple[Csr, int | None, torch.Tensor]:
    """The CSR of a block, its checked ``max_degree`` and the destination of each CSR
    position (the graph's ``csr_dst``, known here: the sorted destinations), built without
    reading the device."""
    edge_index = check_index_tensor("edge_index", edge_index, 2)
    if edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {tuple(edge_index.shape)}")
    num_src, num_dst = check_count("num_src", num_src), check_count("num_dst", num_dst)
    max_degree = None if max_degree is None else check_count("max_degree", max_degree)
    num_edges = edge_index.shape[1]
    idx = index_dtype_for(num_edges, num_src, num_dst)
    if block_checks.on_gpu(edge_index):
        # Both launches check as they build, at no cost the host would notice: with or
        # without `check`.
        if dst_sorted and num_edges > 0:
            rowptr, col, rows = block_checks.sorted_edges(edge_index, num_src, num_dst, max_degree, idx)
            return Csr(rowptr, col, None, num_src), max_degree, rows
        if not dst_sorted and block_checks.buckets(num_edges, num_dst, max_degree):
            rowptr, col, eid, rows = block_checks.bucket_edges(edge_index, num_src, num_dst, max_degree, idx)
            return Csr(rowptr, col, eid, num_src), max_degree, rows
    # .to() returns a tensor of the right dtype as it is (a transposed [E, 2] view stays
    # strided): the rows must be contiguous, they become the CSR's col and the checks' input.
    indices = edge_index.to(idx).contiguous()
    src, dst = indices[0], indices[1]
    if dst_sorted:
        col, eid, sorted_dst = src, None, dst
    else:
        # A stable sort keeps each row's edges in the user's order, as from_edge_index.
        sorted_dst, order = torch.sort(dst, stable=True)
        col, eid = src.index_select(0, order), order.to(idx)
    check = check and num_edges > 0
    on_gpu = check and block_checks.on_gpu(edge_index)
    if on_gpu:  # one launch, before any kernel reads the block
        block_checks.check_edges(edge_index, sorted_dst, num_src, num_dst, max_degree)
    elif check:
        low, high = torch.aminmax(edge_index, dim=1)
        ok = (low.min() >= 0) & (high[0] < num_src) & (high[1] < num_dst)
        if dst_sorted:
            ok &= (edge_index[1, 1:] >= edge_index[1, :-1]).all()
        check_on_device(ok, "from_block: edge_index has an index out of range (0 <= "
                        f"edge_index[0] < num_src = {num_src}, 0 <= edge_index[1] < num_dst = "
                        f"{num_dst})" + (" or destinations out of order (dst_sorted=True)"
                                         if dst_sorted else ""))
    rowptr = offsets(sorted_dst, num_dst)
    if check and not on_gpu and num_dst and max_degree is not None:
        check_on_device((rowptr[1:] - rowptr[:-1]).max() <= max_degree,
                        f"from_block: a destination has more than max_degree = {max_degree} edges")
    return Csr(rowptr, col, eid, num_src), max_degree, sorted_dst


def block_from_csr(rowptr: Any, col: Any, num_src: Any, eid: Any, max_degree: Any,
                   check: bool) -> tuple[Csr, int | None]:
    """A block's CSR as a sampler produced it and its checked ``max_degree``, checked on
    the device."""
    rowptr, col = _checked_csr_arrays(rowptr, col)
    num_src = check_count("num_src", num_src)
    max_degree = None if max_degree is None else check_count("max_degree", max_degree)
    num_edges, num_dst = col.numel(), rowptr.numel() - 1
    if eid is not None:
        eid = _checked_eid(eid, rowptr.device, num_edges)
    if check and block_checks.on_gpu(rowptr):  # one launch
        block_checks.check_csr(rowptr, col, eid, num_src, max_degree)
    elif check:
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
        check_on_device(ok, f"from_block_csr: rowptr must run from 0 to len(col) = {num_edges} "
                            f"without decreasing, with col in [0, num_src = {num_src}) and eid in "
                            f"[0, {num_edges})" + ("" if max_degree is None else
                                                   f" and rows of at most {max_degree} edges"))
    idx = index_dtype_for(num_edges, num_src, num_dst)
    return Csr(rowptr.to(idx).contiguous(), col.to(idx).contiguous(),
               None if eid is None else eid.to(idx).contiguous(), num_src), max_degree


# ---------------------------------------------------------------------- graphs from graphs

def transpose(rowptr: torch.Tensor, col: torch.Tensor, eid: torch.Tensor | None, num_src: int,
              csr_dst: torch.Tensor) -> Csr:
    """The CSR of the reversed graph, keeping the original edge ids (one edge-feature tensor
    serves both directions)."""
    num_dst = rowptr.numel() - 1
    order = stable_order(col, num_src)
    rev_rowptr = torch.zeros(num_src + 1, dtype=torch.int64, device=col.device)
    torch.cumsum(torch.bincount(col.long(), minlength=num_src), 0, out=rev_rowptr[1:])
    rev_eid = order if eid is None else eid.long()[order]
    return assemble(rev_rowptr, csr_dst[order], rev_eid, num_dst, num_src)


def transpose_on_device(col: torch.Tensor, eid: torch.Tensor | None, num_src: int, num_dst: int,
                        csr_dst: torch.Tensor) -> tuple[Csr, torch.Tensor]:
    """The transpose of a block, built without reading the device (its edge ids stay, even
    where they are CSR positions: knowing that would take a read), and the destination of
    each of its CSR positions (its ``csr_dst``: the sorted sources)."""
    sorted_src, order = stable_sort(col, num_src)
    rev_eid = order.to(col.dtype) if eid is None else eid.index_select(0, order)
    csr = Csr(offsets(sorted_src, num_src), csr_dst.index_select(0, order), rev_eid, num_dst)
    return csr, sorted_src


COALESCE_REDUCERS = ("sum", "mean", "max", "min", "first")


def coalesce(rowptr: torch.Tensor, col: torch.Tensor, eid: torch.Tensor | None, num_src: int,
             csr_dst: torch.Tensor, edge_weight: torch.Tensor | None,
             reduce: str) -> tuple[Csr, torch.Tensor | None]:
    """Duplicate edges merged (see :meth:`~gsparse.graph.Graph.coalesce`), with the merged
    weights when ``edge_weight`` is given."""
    num_dst, num_edges, device = rowptr.numel() - 1, col.numel(), col.device
    if reduce not in COALESCE_REDUCERS:
        raise ValueError(f"reduce must be one of {COALESCE_REDUCERS}, got {reduce!r}")
    if edge_weight is not None:
        if not isinstance(edge_weight, torch.Tensor):
            raise TypeError(f"edge_weight must be a torch.Tensor, got {type(edge_weight).__name__}")
        if edge_weight.dim() == 0 or edge_weight.shape[0] != num_edges:
            raise ValueError(f"edge_weight has shape {tuple(edge_weight.shape)} but the graph has "
                             f"{num_edges} edges")
        if edge_weight.device != device:
            raise ValueError(f"edge_weight is on {edge_weight.device} but the graph is on {device}")
    dst, src = csr_dst.long(), col.long()
    ids = torch.arange(num_edges, device=device) if eid is None else eid.long()
    # Sort by (dst, src, edge id) so that duplicates are adjacent and "first" is the lowest id.
    order = stable_order(ids, num_edges)
    order = order[stable_order(src[order], num_src)]
    order = order[stable_order(dst[order], num_dst)]
    key = dst[order] * max(num_src, 1) + src[order]
    is_new = torch.ones_like(key, dtype=torch.bool)
    is_new[1:] = key[1:] != key[:-1]
    keep = order[is_new]
    new_rowptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=device)
    torch.cumsum(torch.bincount(dst[keep], minlength=num_dst), 0, out=new_rowptr[1:])
    csr = assemble(new_rowptr, src[keep], None, num_src, num_dst)
    if edge_weight is None:
        return csr, None
    w = edge_weight[ids[order]]
    if reduce == "first":
        return csr, w[is_new]
    group = torch.cumsum(is_new, 0) - 1
    index = group.view(-1, *([1] * (w.dim() - 1))).expand_as(w)
    out = torch.zeros((int(keep.numel()), *w.shape[1:]), dtype=w.dtype, device=w.device)
    torch_reduce = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}[reduce]
    out.scatter_reduce_(0, index, w, torch_reduce, include_self=False)
    return csr, out
