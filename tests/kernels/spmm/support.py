"""Tasks, statistics, algorithms and graphs the g-SpMM tests share."""

from __future__ import annotations

import math

import torch

import gsparse
from gsparse.algebra import BINARY_OPS, REDUCERS, SPMM_OPS
from gsparse.graph import GraphStats, RowStats
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels.operands import VECTOR_BYTES, Layout
from gsparse.kernels.spmm import SpmmAlgorithm, SpmmTask
from gsparse.target import H100
from gsparse.testing.reference import gspmm_ref

from graphs import named_graph, random_features
from kernels.support import TOLERANCE, sample

FEATURE_LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

# (lhs feature shape, rhs feature shape): full/full, full/scalar, broadcast both ways.
SHAPES = {
    "full": ((3, 8), (3, 8)),
    "scalar": ((3, 8), (1, 1)),
    "indexed": ((1, 8), (3, 1)),
}


def task(op: str = "copy_lhs", reduce: str = "sum", features: int = 8,
         dtype: torch.dtype = torch.float32, *, lhs_shape: tuple[int, ...] | None = None,
         rhs_shape: tuple[int, ...] | None = None, index_dtype: torch.dtype = torch.int32,
         has_eid: bool = False, with_arg: bool = False, vector_ok: int | None = None) -> SpmmTask:
    """A task of ``features`` output features; each operand the op reads is full-shape
    unless its shape is given. ``vector_ok`` defaults to the widest vector (16 bytes) that
    divides the features: freshly allocated, aligned operands."""
    binop = BINARY_OPS[op]
    if vector_ok is None:
        vector_ok = max(w for w in (1, 2, 4, 8)
                        if w * dtype.itemsize <= VECTOR_BYTES and features % w == 0)
    return SpmmTask(
        op=op, reduce=reduce,
        lhs_shape=(lhs_shape or (features,)) if binop.uses_lhs else None,
        rhs_shape=(rhs_shape or (features,)) if binop.uses_rhs else None,
        out_shape=(features,), dtype=dtype, index_dtype=index_dtype, has_eid=has_eid,
        with_arg=with_arg, vector_ok=vector_ok)


def stats(num_src: int, num_dst: int, num_edges: int, *, max_degree: int | None = None,
          cov: float = 0.0) -> GraphStats:
    """Statistics of a graph with these sizes (mean row: edges over rows), without the graph."""
    mean = num_edges / max(num_dst, 1)
    return GraphStats(num_src, num_dst, num_edges,
                      RowStats(mean, math.ceil(mean) if max_degree is None else max_degree, cov))


# The H100 cells of docs/performance.md ("short row splits") where no schedule of the space
# without short chunks reached 1.1x cuSPARSE. Per graph: (sources, rows, edges, mean row,
# longest row, row COV), and its cells as (op, features, dtype, the fastest chunk length of
# 32 to 512 edges with the cell's best knobs); a mul multiplies by a scalar per edge.
PROBE_GRAPHS = {
    "community": ((426, 426, 107_004, 251.2, 426, 0.59),
                  [("copy_lhs", 32, torch.float32, 32), ("mul", 32, torch.float32, 32)]),
    "power_law": ((1_336, 1_336, 112_550, 84.2, 1_336, 1.97),
                  [("copy_lhs", 32, torch.float32, 32), ("mul", 256, torch.float32, 64)]),
    "bipartite": ((113_168, 3_608, 123_870, 34.3, 5_549, 3.54),
                  [("mul", 32, torch.float32, 32), ("mul", 64, torch.bfloat16, 64)]),
    "hubs": ((38_605, 38_605, 220_970, 5.7, 3_618, 5.56),
             [("copy_lhs", 100, torch.float32, 128), ("mul", 128, torch.float32, 128)]),
    "banded": ((71_173, 71_173, 2_185_757, 30.7, 1_830, 1.47),
               [("mul", 64, torch.float32, 512), ("mul", 256, torch.float32, 256)]),
}


def probe_stats(name: str) -> GraphStats:
    """The statistics of probe graph ``name`` (:data:`PROBE_GRAPHS`)."""
    (src, rows, edges, mean, longest, cov), _ = PROBE_GRAPHS[name]
    return GraphStats(src, rows, edges, RowStats(mean, longest, cov))


def probe_cells() -> list[tuple[str, SpmmTask, int]]:
    """``(graph, task, fastest chunk length)`` of the ten probe cells."""
    return [(name, task(op, "sum", features, dtype, rhs_shape=(1,) if op == "mul" else None), best)
            for name, (_, cells) in PROBE_GRAPHS.items() for op, features, dtype, best in cells]


def space(g: gsparse.Graph, features: int, dtype: torch.dtype = torch.float32, op: str = "copy_lhs",
          reduce: str = "sum", **knobs) -> list:
    """The candidates of :func:`task` on ``g`` on an H100, as a list."""
    return list(spmm_kernels.schedule_space(task(op, reduce, features, dtype, **knobs), g.stats, H100))


def algorithms(seed: int, k: int) -> list[SpmmAlgorithm]:
    """``k`` algorithms sampled from every op, reducer, dtype, index type, layout and arg."""
    layouts = [Layout.FULL, Layout.SCALAR, Layout.INDEXED]
    every = []
    for op in SPMM_OPS:
        binop = BINARY_OPS[op]
        for reduce in REDUCERS:
            for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
                for index_dtype in (torch.int32, torch.int64):
                    for lhs in layouts if binop.uses_lhs else [None]:
                        for rhs in layouts if binop.uses_rhs else [None]:
                            for with_arg in (False, True) if REDUCERS[reduce].keeps_arg else (False,):
                                every.append(SpmmAlgorithm(op, reduce, lhs, rhs, dtype,
                                                           index_dtype, has_eid=binop.uses_rhs,
                                                           with_arg=with_arg))
    return sample(every, k, seed)


def skewed_graph(split: int, seed: int = 0) -> gsparse.Graph:
    """Rows of every length the work list treats differently for chunks of ``split`` edges:
    empty, exactly ``split``, ``split + 1``, exactly ``2 * split``, ``30 * split + 7`` (31
    chunks), then 60 rows of 0 to 7 edges. Edges in random order: edge ids differ from CSR
    positions."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.cat([torch.tensor([0, split, split + 1, 0, 2 * split, 30 * split + 7]),
                         torch.randint(0, 8, (60,), generator=gen)])
    dst = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    src = torch.randint(0, 150, (dst.numel(),), generator=gen)
    order = torch.randperm(dst.numel(), generator=gen)
    edge_index = torch.stack([src[order], dst[order]])
    return gsparse.Graph.from_edge_index(edge_index, num_src=150, num_dst=lengths.numel())


def wide_graph() -> gsparse.Graph:
    """3,000 sources: three 1,024-row column tiles; empty rows; a longer row."""
    gen = torch.Generator().manual_seed(5)
    src = torch.randint(0, 3_000, (20_000,), generator=gen)
    dst = torch.randint(0, 230, (20_000,), generator=gen)
    dst[dst % 5 == 0] = 1
    return gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_src=3_000, num_dst=230)


def output_tiled_graphs() -> dict[str, gsparse.Graph]:
    """The graphs the output-tiled skeleton is checked on, beside the named ones."""
    gen = torch.Generator().manual_seed(11)
    hub_dst = torch.cat([torch.full((5_000,), 7), torch.randint(0, 300, (4_000,), generator=gen)])
    return {
        "random": named_graph("random"),  # 150 x 230, empty rows, a longer row, edge ids
        "int64": named_graph("int64"),
        "empty": named_graph("empty"),
        # 3,000 sources (several tiles under a small shared memory), a 5,000-edge row
        "hub": gsparse.Graph.from_edge_index(torch.stack([
            torch.randint(0, 3_000, (hub_dst.numel(),), generator=gen), hub_dst]), num_src=3_000, num_dst=300),
        # most rows empty: row ranges are cut by edges, then capped by rows
        "sparse_rows": gsparse.Graph.from_edge_index(torch.stack([
            torch.randint(0, 40, (200,), generator=gen),
            torch.randint(0, 20, (200,), generator=gen) * 500]), num_src=40, num_dst=10_000),
    }


# --- GPU checks ---------------------------------------------------------------------------


def operands(g: gsparse.Graph, op: str, lhs_shape, rhs_shape, dtype, seed: int):
    """Random ``lhs`` and ``rhs`` on the CPU (None where the op reads none); divisors away
    from zero."""
    binop = BINARY_OPS[op]
    lhs = random_features((g.num_src, *lhs_shape), dtype, seed) if binop.uses_lhs else None
    rhs = (random_features((g.num_edges, *rhs_shape), dtype, seed + 1, away_from_zero=op == "div")
           if binop.uses_rhs else None)
    return lhs, rhs


def operand_task(g: gsparse.Graph, op: str, reduce: str, lhs, rhs, with_arg: bool = False) -> SpmmTask:
    """The task the front end builds for a call on these operands (of the output's rank)."""
    shapes = [tuple(t.shape[1:]) for t in (lhs, rhs) if t is not None]
    out_shape = tuple(torch.broadcast_shapes(*shapes))
    return spmm_kernels.task_for(g, op, reduce, lhs, rhs, out_shape, with_arg)


def check(g: gsparse.Graph, op: str, reduce: str, lhs, rhs, schedule=None, *, expected=None,
          atol=None) -> None:
    """The front end on the GPU (under ``schedule``) against the float64 reference."""
    cuda = g.to("cuda")
    out = gsparse.gspmm(cuda, op, reduce,
                        None if lhs is None else lhs.cuda(), None if rhs is None else rhs.cuda(),
                        schedule=schedule)
    if expected is None:
        expected = gspmm_ref(g, op, reduce, lhs, rhs)
    dtype = (lhs if lhs is not None else rhs).dtype
    tolerance = dict(TOLERANCE[dtype])
    if atol is not None:
        tolerance["atol"] = atol
    torch.testing.assert_close(out.cpu().double(), expected.to(dtype).double(),
                               **tolerance, msg=lambda m: f"{op}/{reduce} {schedule}: {m}")
