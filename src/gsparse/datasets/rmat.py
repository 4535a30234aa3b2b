"""R-MAT (recursive matrix) graphs, the Kronecker generator of the Graph500 benchmark."""

from __future__ import annotations

import torch

from ..graph import Graph
from ._edges import check_fraction, check_int, check_seed, generator, graph_from_pairs

__all__ = ["rmat_graph"]

GRAPH500 = (0.57, 0.19, 0.19)  # (a, b, c) of the Graph500 specification; d = 1 - a - b - c = 0.05


def rmat_graph(
    scale: int,
    edge_factor: int = 16,
    *,
    a: float = GRAPH500[0],
    b: float = GRAPH500[1],
    c: float = GRAPH500[2],
    simple: bool = False,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """An R-MAT graph on ``2^scale`` nodes with ``edge_factor * 2^scale`` drawn edges.

    Each edge picks one quadrant of the adjacency matrix per level, ``scale`` times: the
    top-left with probability ``a``, top-right ``b``, bottom-left ``c``, bottom-right
    ``d = 1 - a - b - c``; the row bits give the destination, the column bits the source.
    With ``a > d`` low ids collect most edges, so row and column lengths are heavily
    skewed (power-law-like) and node 0 is the biggest hub; apply an ordering
    (:func:`~gsparse.datasets.reorder`) to scatter the hubs, as Graph500 does.

    Args:
        scale: ``log2`` of the node count, in ``[1, 40]``.
        edge_factor: edges drawn per node, ``>= 1``.
        a, b, c: quadrant probabilities, each in ``[0, 1]`` with ``a + b + c <= 1``.
        simple: remove the self loops and repeated edges that R-MAT draws (the result
            then has fewer than ``edge_factor * 2^scale`` edges); ``False`` keeps them.
        seed: random seed.
        device: where the graph is built.
    """
    scale = check_int("scale", scale, 1, 40)
    edge_factor = check_int("edge_factor", edge_factor, 1)
    a, b, c = (check_fraction(name, value) for name, value in (("a", a), ("b", b), ("c", c)))
    if a + b + c > 1 + 1e-12:
        raise ValueError(f"a + b + c must be <= 1 (d = 1 - a - b - c), got {a} + {b} + {c} = {a + b + c}")
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    n = 1 << scale
    num_edges = edge_factor * n
    # Accumulating in int32 while the ids fit halves the memory traffic of the level loop.
    bits = torch.int32 if scale <= 31 else torch.int64
    dst = torch.zeros(num_edges, dtype=bits, device=device)
    src = torch.zeros(num_edges, dtype=bits, device=device)
    # On a CPU, slices of 2^15 edges stay in cache through all the levels and sit below
    # PyTorch's grain for splitting an op across threads, whose barriers stall on a busy
    # machine: twice as fast as whole-array passes there. A GPU takes the whole array.
    chunk = num_edges if device.type == "cuda" else 1 << 15
    u = torch.empty(min(chunk, num_edges), device=device)
    bit = torch.empty(u.shape, dtype=torch.bool, device=device)
    for start in range(0, num_edges, chunk):
        rows, cols = dst[start:start + chunk], src[start:start + chunk]
        draw, chosen = u[: rows.numel()], bit[: rows.numel()]
        for level in range(scale):
            weight = 1 << (scale - 1 - level)
            # Quadrants by a uniform draw: [0, a) top-left, [a, a+b) top-right, [a+b, a+b+c)
            # bottom-left, the rest bottom-right. The row bit is draw >= a+b; moving the
            # bottom half down by b+c makes the column bit draw >= a in both halves.
            draw.uniform_(generator=gen)
            torch.ge(draw, a + b, out=chosen)
            rows.add_(chosen, alpha=weight)
            draw.add_(chosen, alpha=-(b + c))
            torch.ge(draw, a, out=chosen)
            cols.add_(chosen, alpha=weight)
    return graph_from_pairs(dst.long(), src.long(), n, n, simple=simple)
