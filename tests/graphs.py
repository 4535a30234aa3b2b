"""Named graph generators for tests: hypothesis strategies and small fixed shapes."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import gsparse


@st.composite
def edge_lists(draw, max_nodes: int = 12, max_edges: int = 60, square: bool | None = None):
    """``(edge_index [2, E], num_src, num_dst)`` covering the shapes kernels get wrong.

    Includes graphs with no edges, empty rows, one very long row, self loops, duplicate
    edges, bipartite shapes and arbitrary (unsorted) edge order.
    """
    if square is None:
        square = draw(st.booleans())
    num_src = draw(st.integers(0, max_nodes))
    num_dst = num_src if square else draw(st.integers(0, max_nodes))
    if num_src == 0 or num_dst == 0:
        return torch.zeros(2, 0, dtype=torch.int64), num_src, num_dst
    kind = draw(st.sampled_from(["random", "long_row", "duplicates", "self_loops", "none"]))
    num_edges = draw(st.integers(0, max_edges)) if kind != "none" else 0
    src = draw(st.lists(st.integers(0, num_src - 1), min_size=num_edges, max_size=num_edges))
    dst = draw(st.lists(st.integers(0, num_dst - 1), min_size=num_edges, max_size=num_edges))
    if kind == "long_row" and num_edges:
        hub = draw(st.integers(0, num_dst - 1))
        dst = [hub if i % 4 else d for i, d in enumerate(dst)]
    elif kind == "duplicates" and num_edges:
        src = [src[i // 3 * 3] for i in range(num_edges)]
        dst = [dst[i // 3 * 3] for i in range(num_edges)]
    elif kind == "self_loops" and num_edges and square:
        dst = [s if i % 2 else d for i, (s, d) in enumerate(zip(src, dst))]
    return torch.tensor([src, dst], dtype=torch.int64).reshape(2, -1), num_src, num_dst


@st.composite
def graphs(draw, **kwargs) -> gsparse.Graph:
    edge_index, num_src, num_dst = draw(edge_lists(**kwargs))
    return gsparse.Graph.from_edge_index(edge_index, num_src=num_src, num_dst=num_dst)


def random_features(shape, dtype, seed: int, *, away_from_zero: bool = False) -> torch.Tensor:
    """Random values in ±[0.5, 1.5] (away from zero, for divisors) or standard normal."""
    gen = torch.Generator().manual_seed(seed)
    if away_from_zero:
        magnitude = torch.rand(shape, generator=gen, dtype=torch.float64) + 0.5
        sign = torch.randint(0, 2, shape, generator=gen) * 2 - 1
        values = magnitude * sign
    else:
        values = torch.randn(shape, generator=gen, dtype=torch.float64)
    return values.to(dtype)


def named_graph(kind: str, seed: int = 0) -> gsparse.Graph:
    """Named graphs for the kernel tests: "random" (bipartite 150 x 230, 3,000 edges, a longer
    row of about 600 edges, empty rows), "square", "sorted" (edges already in CSR order: no
    edge ids), "int64", "short_rows" (as "random" without the longer row or the empty rows:
    the hand rule walks its rows whole), "long_row" (one 100,000-edge row) and "empty" (no
    edges). All but "sorted" and "empty" have edge ids unlike CSR positions."""
    gen = torch.Generator().manual_seed(seed)
    if kind == "long_row":
        # one 100,000-edge row among short ones, and empty rows
        dst = torch.cat([torch.full((100_000,), 3), torch.randint(0, 40, (2_000,), generator=gen)])
        dst[dst % 7 == 5] = 6
        src = torch.randint(0, 500, (dst.numel(),), generator=gen)
        return gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_src=500, num_dst=40)
    if kind == "empty":
        return gsparse.Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.int64), num_src=7, num_dst=9)
    num_src, num_dst, num_edges = (150, 230, 3_000) if kind != "square" else (200, 200, 3_000)
    dst = torch.randint(0, num_dst, (num_edges,), generator=gen)
    if kind != "short_rows":
        dst[dst % 5 == 0] = 1  # a longer row, and every other row divisible by 5 empty
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    if kind == "sorted":
        dst = dst.sort().values
    g = gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_src=num_src, num_dst=num_dst)
    return g.with_index_dtype(torch.int64) if kind == "int64" else g


def attention_operands(g: gsparse.Graph, shape: tuple[int, ...], dtype: torch.dtype, seed: int,
                       edge: bool, masked: bool) -> tuple:
    """``(score_src, score_dst, edge_scores or None, masked or None)`` for gat_attention: about
    a third of the edges masked, never a row's first in CSR order (no row all ``-inf``)."""
    score_src = random_features((g.num_src, *shape), dtype, seed)
    score_dst = random_features((g.num_dst, *shape), dtype, seed + 1)
    edge_scores = random_features((g.num_edges, *shape), dtype, seed + 2) if edge else None
    mask = None
    if masked:
        rowptr, _, eid, _ = g.parts
        rowptr = rowptr.cpu()
        mask = torch.rand(g.num_edges, generator=torch.Generator().manual_seed(seed + 3)) < 0.35
        mask[rowptr[:-1][rowptr[:-1] < rowptr[1:]].long()] = False
        if eid is not None:
            mask = torch.empty_like(mask).index_copy_(0, eid.cpu().long(), mask)
    return score_src, score_dst, edge_scores, mask
