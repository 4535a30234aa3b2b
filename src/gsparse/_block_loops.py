"""A sampled block's self-loop graph, and GCN's normalisation of it, in fixed kernels.

GCN and GAT layers propagate over a graph with one self loop per node. A block from
:meth:`gsparse.Graph.from_block` is new every training step, so its loop graph is too:
built with PyTorch operations (:func:`gsparse.nn._graph.self_loops`, GCN's weights in
:mod:`gsparse.nn.gcn_conv`) that is about twenty small launches and allocations per
block: on an H200 machine, about 0.5 ms of host time per GCN layer and step
(docs/performance.md, "what a fresh block costs, cut"). Here the loop graph is one launch
(:file:`kernels/block_loops.cu`, which says what it writes), and GCN's weights two more.
The launches are prepared once per kernel and device
(:class:`~gsparse._prepared.PreparedLaunches`).

Blocks on devices the CUDA backend does not serve take the PyTorch operations, which are
also what the tests hold these kernels to.
"""

from __future__ import annotations

import functools

import torch

from . import backends
from ._graph_build import Csr, index_dtype_for
from ._prepared import PreparedLaunches
from .backends import cuda
from .graph import Graph
from .kernels.source import INDEX_TYPES, PRELUDE, SCALAR_TYPES, TYPE_SUFFIXES, Signature, device_code

BLOCK = 256  # threads per block
MAX_BLOCKS = 4096  # a grid-stride loop covers the rest
CONTEXT = "gsparse block_loops"
WEIGHT_DTYPES = (torch.float32, torch.float64)


@functools.cache
def _loops_signature(index: torch.dtype, loop_index: torch.dtype) -> Signature:
    i, j = INDEX_TYPES[index], INDEX_TYPES[loop_index]
    return Signature(f"block_loops_{TYPE_SUFFIXES[index]}_{TYPE_SUFFIXES[loop_index]}", (
        (f"const {i}* __restrict__", "rowptr"), (f"const {i}* __restrict__", "col"),
        ("long long", "num_rows"), ("long long", "loop_edges"), (f"{j}* __restrict__", "loop_rowptr"),
        (f"{j}* __restrict__", "edges"), ("bool* __restrict__", "masked")))


@functools.cache
def _degrees_signature(loop_index: torch.dtype, dtype: torch.dtype) -> Signature:
    j, t = INDEX_TYPES[loop_index], SCALAR_TYPES[dtype]
    return Signature(f"loop_degrees_{TYPE_SUFFIXES[loop_index]}_{TYPE_SUFFIXES[dtype]}", (
        (f"const {j}* __restrict__", "loop_rowptr"), ("const bool* __restrict__", "masked"),
        ("long long", "num_rows"), ("int", "improved"), (f"{t}* __restrict__", "dinv"),
        (f"{t}* __restrict__", "weight")))


@functools.cache
def _weights_signature(loop_index: torch.dtype, dtype: torch.dtype) -> Signature:
    j, t = INDEX_TYPES[loop_index], SCALAR_TYPES[dtype]
    return Signature(f"loop_weights_{TYPE_SUFFIXES[loop_index]}_{TYPE_SUFFIXES[dtype]}", (
        (f"const {j}* __restrict__", "edges"), ("long long", "loop_edges"),
        (f"const {t}* __restrict__", "dinv"), (f"{t}* __restrict__", "weight")))


def _entry(signature: Signature, call: str) -> str:
    arguments = ", ".join(name for _, name in signature.params)
    return f"{signature.declaration((BLOCK,))}\n{{\n    {call}({arguments});\n}}"


def source(loop_index: torch.dtype) -> str:
    """The program of the kernels whose loop graph has ``loop_index`` indices: one program
    an index type, so that a first block compiles only what it runs (``gsparse
    precompile`` builds both)."""
    entries = []
    for index in (i for i in INDEX_TYPES if i.itemsize <= loop_index.itemsize):
        entries.append(_entry(_loops_signature(index, loop_index),
                              f"block_loops<{INDEX_TYPES[index]}, {INDEX_TYPES[loop_index]}>"))
    for dtype in WEIGHT_DTYPES:
        types = f"{INDEX_TYPES[loop_index]}, {SCALAR_TYPES[dtype]}"
        entries.append(_entry(_degrees_signature(loop_index, dtype), f"loop_degrees<{types}>"))
        entries.append(_entry(_weights_signature(loop_index, dtype), f"loop_weights<{types}>"))
    return "\n".join((PRELUDE, device_code("gsparse.kernels", "block_loops.cu"), "\n\n".join(entries), ""))


PROGRAMS = {index: PreparedLaunches(functools.partial(source, index), CONTEXT, BLOCK)
            for index in INDEX_TYPES}


def runs_here(g: Graph) -> bool:
    """Whether ``g``'s loop graph and weights are this module's launches: a block the CUDA
    backend serves."""
    return g.sync_free and backends.for_device(g.device) is cuda.BACKEND


def loop_index_dtype(g: Graph) -> torch.dtype:
    """The index type of a square block's loop graph: wide enough for its ``E + N`` edges,
    and never narrower than the block's own (a block made int64 by
    :meth:`~gsparse.Graph.with_index_dtype` keeps int64)."""
    if g.index_dtype == torch.int64:
        return torch.int64
    return index_dtype_for(g.num_edges + g.num_dst, g.num_dst, g.num_dst)


def _grid(items: int, threads_each: int = 1) -> int:
    return max(1, min(-(-items * threads_each // BLOCK), MAX_BLOCKS))


def loop_graph(g: Graph) -> tuple[Graph, torch.Tensor, torch.Tensor]:
    """``(graph, edges, masked)`` of a square block (see :file:`kernels/block_loops.cu`):
    the loop graph (:attr:`~gsparse.Graph.sync_free`, its ``csr_dst`` known), its
    ``[2, E + N]`` sources and destinations, and the mask of the block's own loops."""
    n, e, device = g.num_dst, g.num_edges, g.device
    index = loop_index_dtype(g)
    rowptr = torch.empty(n + 1, dtype=index, device=device)
    edges = torch.empty(2, e + n, dtype=index, device=device)
    masked = torch.empty(e + n, dtype=torch.bool, device=device)
    if n:
        PROGRAMS[index](_loops_signature(g.index_dtype, index), device.index)(
            g.rowptr, g.col, n, e + n, rowptr, edges, masked, grid=_grid(n, 32))
    else:
        rowptr.zero_()
    degree = None if g._max_degree is None else g._max_degree + 1
    graph = Graph._made(Csr(rowptr, edges[0], None, n), sync_free=True, max_degree=degree, csr_dst=edges[1])
    return graph, edges, masked


def gcn_weights(graph: Graph, edges: torch.Tensor, masked: torch.Tensor, improved: bool,
                dtype: torch.dtype) -> torch.Tensor:
    """``[E']`` GCN's weight of each edge of a block's loop graph (:func:`loop_graph`), in
    ``dtype`` (one of :data:`WEIGHT_DTYPES`)."""
    n, loop_edges, device = graph.num_dst, graph.num_edges, graph.device
    weight = torch.empty(loop_edges, dtype=dtype, device=device)
    if n:
        launches = PROGRAMS[graph.index_dtype]
        dinv = torch.empty(n, dtype=dtype, device=device)
        launches(_degrees_signature(graph.index_dtype, dtype), device.index)(
            graph.rowptr, masked, n, int(improved), dinv, weight, grid=_grid(n, 32))
        launches(_weights_signature(graph.index_dtype, dtype), device.index)(
            edges, loop_edges, dinv, weight, grid=_grid(loop_edges))
    return weight
