"""Sampled blocks on a GPU, checked without a host wait: a block sorted by destination is
read off and checked in one launch, a shuffled block of bounded rows bucketed in two (its
checks included), and any other checked in one launch after its sort.

``Graph.from_block`` and ``Graph.from_block_csr`` validate on the device so that a training
step never waits for a verdict. Done with PyTorch operations, that is about ten small
launches (reductions, comparisons, ``_assert_async``) whose host overhead costs more than
building the block; :file:`kernels/block_checks.cu` checks every rule in one pass and stops
with a device-side assertion (after printing the bad index) on a violation. The kernels are
compiled once per GPU architecture through the disk cache, like every generated kernel.

A block whose edges arrive in any order would otherwise be sorted by destination, and
``torch.sort`` alone costs the host more than the rest of the block (about 80 µs of host
time for 141K edges: its allocations and six launches). With a bound on the rows (a
sampler's fanout), :func:`bucket_edges` files each edge in its row's slot instead, and puts
every row back in edge order: two launches and a cumulative sum, the checks included.
"""

from __future__ import annotations

import functools
import importlib.resources
from typing import TYPE_CHECKING, Any

import torch

from ._prepared import PreparedLaunches

if TYPE_CHECKING:
    from .kernels.source import Signature

BLOCK = 256  # threads per block
MAX_BLOCKS = 1024  # a grid-stride loop covers the rest


# The signatures are made on first use: gsparse.kernels imports the graph, which imports this.
@functools.cache
def _edges_signature(edges: torch.dtype, sorted_dst: torch.dtype) -> Signature:
    from .kernels.source import INDEX_TYPES, TYPE_SUFFIXES, Signature

    return Signature(f"check_edges_{TYPE_SUFFIXES[edges]}_{TYPE_SUFFIXES[sorted_dst]}", (
        (f"const {INDEX_TYPES[edges]}* __restrict__", "edges"), ("long long", "row_stride"),
        ("long long", "stride"), (f"const {INDEX_TYPES[sorted_dst]}* __restrict__", "sorted"),
        ("long long", "num_edges"), ("long long", "num_src"), ("long long", "num_dst"),
        ("long long", "max_degree")))


@functools.cache
def _sorted_signature(edges: torch.dtype, index: torch.dtype) -> Signature:
    from .kernels.source import INDEX_TYPES, TYPE_SUFFIXES, Signature

    pointer = f"{INDEX_TYPES[index]}* __restrict__"
    return Signature(f"sorted_edges_{TYPE_SUFFIXES[edges]}_{TYPE_SUFFIXES[index]}", (
        (f"const {INDEX_TYPES[edges]}* __restrict__", "edges"), ("long long", "row_stride"),
        ("long long", "stride"), (pointer, "rowptr"), (pointer, "col"), (pointer, "rows"),
        ("long long", "num_edges"), ("long long", "num_src"), ("long long", "num_dst"),
        ("long long", "max_degree")))


@functools.cache
def _count_signature(edges: torch.dtype, index: torch.dtype) -> Signature:
    from .kernels.source import INDEX_TYPES, TYPE_SUFFIXES, Signature

    return Signature(f"count_edges_{TYPE_SUFFIXES[edges]}_{TYPE_SUFFIXES[index]}", (
        (f"const {INDEX_TYPES[edges]}* __restrict__", "edges"), ("long long", "row_stride"),
        ("long long", "stride"), (f"{INDEX_TYPES[index]}* __restrict__", "counts"),
        (f"{INDEX_TYPES[index]}* __restrict__", "table"), ("long long", "num_edges"),
        ("long long", "num_src"), ("long long", "num_dst"), ("long long", "max_degree")))


@functools.cache
def _order_signature(edges: torch.dtype, index: torch.dtype) -> Signature:
    from .kernels.source import INDEX_TYPES, TYPE_SUFFIXES, Signature

    pointer, const = f"{INDEX_TYPES[index]}* __restrict__", f"const {INDEX_TYPES[index]}* __restrict__"
    return Signature(f"order_rows_{TYPE_SUFFIXES[edges]}_{TYPE_SUFFIXES[index]}", (
        (f"const {INDEX_TYPES[edges]}* __restrict__", "edges"), ("long long", "stride"),
        (const, "table"), (const, "rowptr"), (pointer, "col"), (pointer, "eid"), (pointer, "rows"),
        ("long long", "num_dst"), ("long long", "max_degree")))


@functools.cache
def _csr_signature(index: torch.dtype) -> Signature:
    from .kernels.source import INDEX_TYPES, TYPE_SUFFIXES, Signature

    pointer = f"const {INDEX_TYPES[index]}* __restrict__"
    return Signature(f"check_csr_{TYPE_SUFFIXES[index]}", (
        (pointer, "rowptr"), (pointer, "col"), (pointer, "eid"), ("long long", "num_dst"),
        ("long long", "num_edges"), ("long long", "num_src"), ("long long", "max_degree")))



CONTEXT = "gsparse block checks"


def source() -> str:
    """The program of the check kernels (``gsparse precompile`` builds it too)."""
    from .kernels.source import INDEX_TYPES

    body = importlib.resources.files("gsparse.kernels").joinpath("block_checks.cu").read_text()
    entries = [_entry(_edges_signature(k, s), "check_edges") for k in INDEX_TYPES for s in INDEX_TYPES]
    entries += [_entry(_csr_signature(i), "check_csr") for i in INDEX_TYPES]
    entries += [_entry(_sorted_signature(k, i), "sorted_edges") for k in INDEX_TYPES for i in INDEX_TYPES]
    entries += [_entry(_count_signature(k, i), "count_edges") for k in INDEX_TYPES for i in INDEX_TYPES]
    entries += [_entry(_order_signature(k, i), "order_rows") for k in INDEX_TYPES for i in INDEX_TYPES]
    return body + "\n" + "\n\n".join(entries) + "\n"


def _entry(signature: Signature, template: str) -> str:
    arguments = ", ".join(name for _, name in signature.params)
    return f"{signature.declaration((BLOCK,))}\n{{\n    {template}({arguments});\n}}"


KERNELS = PreparedLaunches(source, CONTEXT, BLOCK)


def on_gpu(tensor: torch.Tensor) -> bool:
    """Whether the checks of a block on ``tensor``'s device are this module's launch."""
    return tensor.is_cuda


def _launch(signature: Signature, device: torch.device, positions: int, values: dict[str, Any]) -> None:
    blocks = min(max(-(-positions // BLOCK), 1), MAX_BLOCKS)
    KERNELS(signature, device.index)(*signature.ordered(values), grid=blocks)


def check_edges(edge_index: torch.Tensor, sorted_dst: torch.Tensor | None, num_src: int,
                num_dst: int, max_degree: int | None) -> None:
    """Assert on the device that ``edge_index`` (``[2, E]`` in any order, as the user gave
    it) has sources in ``[0, num_src)``, destinations in ``[0, num_dst)`` and, when
    ``max_degree`` is given, that no destination appears more than ``max_degree`` times in
    ``sorted_dst`` (the destinations sorted)."""
    sorted_dst = None if max_degree is None else sorted_dst
    if sorted_dst is not None and not sorted_dst.is_contiguous():
        raise ValueError("the sorted destinations must be contiguous: the kernel reads them densely")
    signature = _edges_signature(edge_index.dtype,
                                 edge_index.dtype if sorted_dst is None else sorted_dst.dtype)
    row_stride, stride = edge_index.stride()
    num_edges = edge_index.shape[1]
    _launch(signature, edge_index.device, num_edges, dict(
        edges=edge_index, row_stride=row_stride, stride=stride, sorted=sorted_dst, num_edges=num_edges,
        num_src=num_src, num_dst=num_dst, max_degree=-1 if max_degree is None else max_degree))


def sorted_edges(edge_index: torch.Tensor, num_src: int, num_dst: int, max_degree: int | None,
                 index: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The CSR of a block from its ``[2, E]`` edge list sorted by destination (``rowptr``,
    ``col`` and each position's row, in ``index``), read off in one launch that asserts the
    checks of :func:`check_edges`, the order of the destinations and rows of at most
    ``max_degree`` edges."""
    device, num_edges = edge_index.device, edge_index.shape[1]
    row_stride, stride = edge_index.stride()
    (col, rows), rowptr = _edge_arrays(2, num_edges, num_dst + 1, index, device)
    _launch(_sorted_signature(edge_index.dtype, index), device, max(num_edges, num_dst + 1), dict(
        edges=edge_index, row_stride=row_stride, stride=stride, rowptr=rowptr, col=col, rows=rows,
        num_edges=num_edges, num_src=num_src, num_dst=num_dst,
        max_degree=-1 if max_degree is None else max_degree))
    return rowptr, col, rows


def _edge_arrays(count: int, num_edges: int, tail: int, index: torch.dtype,
                 device: torch.device) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """``count`` arrays of ``num_edges`` indices and one of ``tail``, in one allocation:
    each host operation costs a GPU machine 10-20 µs, more than a block's kernels. Each
    array starts at a multiple of 256 bytes, as aligned as its own."""
    padded = -(-num_edges // 64) * 64
    # One split makes every view: cheaper than slicing each.
    parts = torch.empty(count * padded + tail, dtype=index, device=device).split_with_sizes(
        (num_edges, padded - num_edges) * count + (tail,))
    return parts[0:-1:2], parts[-1]


def check_csr(rowptr: torch.Tensor, col: torch.Tensor, eid: torch.Tensor | None, num_src: int,
              max_degree: int | None) -> None:
    """Assert on the device that ``rowptr`` runs from 0 to ``len(col)`` without decreasing
    (in steps of at most ``max_degree`` when given), ``col`` is in ``[0, num_src)`` and
    ``eid`` (when given) in ``[0, len(col))``. The indices are read as given: of mixed
    dtypes, all are read as int64."""
    parts = (rowptr, col) if eid is None else (rowptr, col, eid)
    dtype = torch.int64 if any(t.dtype == torch.int64 for t in parts) else torch.int32
    rowptr, col = rowptr.to(dtype).contiguous(), col.to(dtype).contiguous()
    eid = None if eid is None else eid.to(dtype).contiguous()
    num_dst, num_edges = rowptr.shape[0] - 1, col.shape[0]
    _launch(_csr_signature(dtype), rowptr.device, max(num_dst, num_edges, 1), dict(
        rowptr=rowptr, col=col, eid=eid, num_dst=num_dst, num_edges=num_edges, num_src=num_src,
        max_degree=-1 if max_degree is None else max_degree))


# A row's edges are ranked by comparing each with all the others: fine for a sampler's
# fanouts, quadratic for long rows, which the sort serves better.
BUCKET_MAX_DEGREE = 1024
# The table holds num_dst * max_degree slots: a loose bound on sparse rows sorts instead.
BUCKET_TABLE_SLOTS_PER_EDGE = 4


def buckets(num_edges: int, num_dst: int, max_degree: int | None) -> bool:
    """Whether :func:`bucket_edges` builds a block of this size in place of a sort."""
    return (max_degree is not None and 0 < max_degree <= BUCKET_MAX_DEGREE and num_edges > 0
            and num_dst * max_degree <= BUCKET_TABLE_SLOTS_PER_EDGE * num_edges + 65_536)


def bucket_edges(edge_index: torch.Tensor, num_src: int, num_dst: int, max_degree: int,
                 index: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The CSR of a block from its ``[2, E]`` edge list in any order (``rowptr``, ``col``,
    ``eid`` and each position's row, in ``index``), as a stable sort by destination makes
    it, with the checks of :func:`check_edges` (always: they come with the counting) and
    rows of at most ``max_degree`` edges asserted. See :func:`buckets` for where it serves."""
    device, num_edges = edge_index.device, edge_index.shape[1]
    row_stride, stride = edge_index.stride()
    # The counts are rowptr[1:], summed in place into the offsets.
    rowptr = torch.zeros(num_dst + 1, dtype=index, device=device)
    (col, eid, rows), table = _edge_arrays(3, num_edges, num_dst * max_degree, index, device)
    _launch(_count_signature(edge_index.dtype, index), device, num_edges, dict(
        edges=edge_index, row_stride=row_stride, stride=stride, counts=rowptr[1:], table=table,
        num_edges=num_edges, num_src=num_src, num_dst=num_dst, max_degree=max_degree))
    rowptr[1:].cumsum_(0)
    _launch(_order_signature(edge_index.dtype, index), device, 32 * num_dst, dict(
        edges=edge_index, stride=stride, table=table, rowptr=rowptr, col=col, eid=eid, rows=rows,
        num_dst=num_dst, max_degree=max_degree))
    return rowptr, col, eid, rows
