"""Meshes: 2-D and 3-D lattices with the usual stencils, road-like networks and small worlds.

Node ids are row-major (the last coordinate varies fastest), so in their natural order
these graphs are banded: row ``v``'s sources lie within ``±(stride of the first axis)``
of ``v`` (a small world's ring: within ``k / 2``, but for its rewired edges). Edges go
both ways (the graphs are symmetric) and there are no self loops.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch

from ..graph import Graph
from ._edges import check_fraction, check_int, check_seed, generator, graph_from_pairs

__all__ = ["STENCILS", "lattice_graph", "road_graph", "lattice_edge_count", "small_world_graph"]

STENCILS: dict[int, tuple[tuple[int, ...], ...]] = {
    count: tuple(d for d in itertools.product((-1, 0, 1), repeat=dims)
                 if any(d) and (moore or sum(map(abs, d)) == 1))
    for count, dims, moore in ((4, 2, False), (8, 2, True), (6, 3, False), (26, 3, True))
}
"""Neighbour offsets by stencil, keyed by neighbour count (4, 8, 6 or 26): von Neumann
(axis neighbours) and Moore (every neighbour in the surrounding square or cube); the
dimension follows from the count."""


def _check_shape(shape: Sequence[int], stencil: int) -> tuple[int, ...]:
    if stencil not in STENCILS:
        raise ValueError(f"stencil must be one of {sorted(STENCILS)} neighbours, got {stencil!r}")
    dims = len(STENCILS[stencil][0])
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence) or len(shape) != dims:
        raise ValueError(f"shape must be a sequence of {dims} sizes for the {stencil}-neighbour "
                         f"stencil, got {shape!r}")
    return tuple(check_int(f"shape[{i}]", s, 1) for i, s in enumerate(shape))


def lattice_edge_count(shape: Sequence[int], stencil: int) -> int:
    """Edges of :func:`lattice_graph`: ``sum over offsets d of prod_i (shape_i - |d_i|)``."""
    shape = _check_shape(shape, stencil)
    return sum(math.prod(max(s - abs(o), 0) for s, o in zip(shape, d)) for d in STENCILS[stencil])


def lattice_graph(shape: Sequence[int], stencil: int, *, device: torch.device | str = "cpu") -> Graph:
    """The lattice of ``prod(shape)`` nodes, each joined to its stencil neighbours inside the box.

    Args:
        shape: ``(height, width)`` for the 4- and 8-neighbour stencils, ``(depth, height,
            width)`` for the 6- and 26-neighbour ones; each ``>= 1``.
        stencil: neighbour count, one of :data:`STENCILS`: 4 (2-D, axis neighbours), 8
            (2-D, with diagonals), 6 (3-D, axis neighbours), 26 (3-D, the full cube).
        device: where the graph is built.

    Returns:
        A square graph in row-major node order with :func:`lattice_edge_count` edges;
        interior rows have exactly ``stencil`` sources.
    """
    shape = _check_shape(shape, stencil)
    device = torch.device(device)
    n = math.prod(shape)
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    # Offsets sorted by their id difference keep each row's sources ascending with no sort.
    offsets = sorted(STENCILS[stencil], key=lambda d: sum(o * s for o, s in zip(d, strides)))
    node = torch.arange(n, device=device)
    valid = torch.ones(n, len(offsets), dtype=torch.bool, device=device)
    for axis, (size, stride) in enumerate(zip(shape, strides)):
        coord = torch.div(node, stride, rounding_mode="floor") % size
        step = torch.tensor([d[axis] for d in offsets], device=device)
        moved = coord[:, None] + step[None, :]
        valid &= (moved >= 0) & (moved < size)
    delta = torch.tensor([sum(o * s for o, s in zip(d, strides)) for d in offsets], device=device)
    col = (node[:, None] + delta[None, :])[valid]
    rowptr = torch.zeros(n + 1, dtype=torch.int64, device=device)
    torch.cumsum(valid.sum(1), 0, out=rowptr[1:])
    return Graph.from_csr(rowptr, col, num_src=n)


def road_graph(
    height: int,
    width: int,
    *,
    deletion: float = 0.2,
    shortcuts: float = 0.01,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """A road-like network: a 4-neighbour grid with roads removed and a few long links.

    Each undirected grid edge is removed with probability ``deletion`` (both directions
    together), leaving dead ends and detours; then ``round(shortcuts * height * width)``
    undirected links join uniform random pairs of distinct nodes (highways, bridges), which
    shrink the diameter and break the band structure. Road networks have mean degree about
    2.5 to 3: ``deletion`` 0.25 to 0.4.

    Args:
        height, width: grid size, each ``>= 1``.
        deletion: probability of removing a grid edge, in ``[0, 1]``.
        shortcuts: long links per node, in ``[0, 1]``.
        seed: random seed.
        device: where the graph is built.
    """
    height = check_int("height", height, 1)
    width = check_int("width", width, 1)
    deletion = check_fraction("deletion", deletion)
    shortcuts = check_fraction("shortcuts", shortcuts)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    n = height * width
    node = torch.arange(n, device=device)
    right = node[node % width < width - 1]
    down = node[node < n - width]
    u = torch.cat([right, down])
    v = torch.cat([right + 1, down + width])
    kept = torch.rand(u.numel(), generator=gen, device=device) >= deletion
    u, v = u[kept], v[kept]
    links = round(shortcuts * n) if n > 1 else 0
    if links:
        a = torch.randint(0, n, (links,), generator=gen, device=device)
        b = (a + torch.randint(1, n, (links,), generator=gen, device=device)) % n
        u, v = torch.cat([u, a]), torch.cat([v, b])
    return graph_from_pairs(torch.cat([u, v]), torch.cat([v, u]), n, n)


def small_world_graph(
    num_nodes: int,
    k: int,
    rewire: float,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """A Watts-Strogatz small world: a ring lattice with a share of its edges rewired.

    Node ``v`` is joined to the ``k / 2`` nodes after it on a ring of ``num_nodes``; each
    of these ``num_nodes * k / 2`` undirected edges ``(v, v + j)`` independently has, with
    probability ``rewire``, its far end replaced by a uniform node other than ``v``
    (Watts and Strogatz, 1998). A few long links shrink the ring's diameter to about
    ``log n`` while rows stay near-regular and mostly banded. Edges go both ways; an edge
    rewired onto one that exists is merged with it (rare: about ``k / n`` of the rewired).

    Args:
        num_nodes: nodes on the ring, ``> k``.
        k: ring neighbours of a node, even, ``>= 2``.
        rewire: probability of rewiring an edge, in ``[0, 1]`` (0: the ring lattice).
        seed: random seed.
        device: where the graph is built.

    Returns:
        A square symmetric graph of ``num_nodes`` nodes and ``num_nodes * k`` edges, less
        the merged ones; every row holds exactly ``k`` sources when ``rewire = 0``.
    """
    k = check_int("k", k, 2)
    if k % 2:
        raise ValueError(f"k must be even (k / 2 ring neighbours on each side), got {k}")
    n = check_int("num_nodes", num_nodes, k + 1)
    rewire = check_fraction("rewire", rewire)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    u = torch.arange(n, device=device).repeat_interleave(k // 2)
    v = (u + torch.arange(1, k // 2 + 1, device=device).repeat(n)) % n
    rewired = torch.rand(u.numel(), generator=gen, device=device) < rewire
    far = (u[rewired] + torch.randint(1, n, (int(rewired.sum()),), generator=gen, device=device)) % n
    v = v.masked_scatter(rewired, far)
    return graph_from_pairs(torch.cat([u, v]), torch.cat([v, u]), n, n, simple=True)
