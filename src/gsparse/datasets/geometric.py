"""Point clouds: k-nearest-neighbour graphs, as point-cloud and mesh GNNs build them.

PyG's ``knn_graph`` joins every point to its ``k`` nearest points (DGCNN, PointNet++,
dynamic graph layers). Here row ``v`` holds the ``k`` nearest neighbours of point ``v``:
the neighbours are the sources and the centre the destination, PyG's default flow.

Nodes come in a spatial order, the Z-order (Morton) curve of the points, so nearby points
have nearby ids and a row's sources sit close to it, as after the voxel or Morton sort
that point-cloud pipelines apply.

Neighbours are found without ``O(n^2)`` work by the shifted space-filling-curve search
of Liao, Lopez and Leutenegger (2001), after Chan's shifted quadtrees: the cloud is
sorted along the Morton curves of ``curves`` copies of itself (3 in 2-D, 5 in 3-D)
shifted along the diagonal by ``j / curves`` of its extent; a point's candidates are the
``2 k + 1`` points around it in each of those orders, and it keeps its ``k`` nearest
distinct candidates. A shift that puts two near points in one quadtree cell of about
their distance exists for nearly every pair, so most true neighbours are found and the
others are replaced by points only slightly farther (95-99% recall, see
``docs/datasets.md``). Clouds of at most :data:`EXACT_POINTS` points are searched exactly. Work and
memory are ``O(n k dim)``, in chunks of query points.
"""

from __future__ import annotations

import math

import torch

from ..graph import Graph
from ._edges import check_int, check_seed, generator, graph_from_pairs, graph_from_rows

__all__ = ["EXACT_POINTS", "knn_graph", "point_cloud"]

EXACT_POINTS = 4096
"""Clouds up to this many points get exact nearest neighbours (all points are candidates)."""

_MORTON_BITS = {2: 31, 3: 21}  # bits per axis: codes fit a non-negative int64
_CANDIDATES_PER_CHUNK = 1 << 22
# Odd curve counts: shifts j / curves are never dyadic, so they never realign with the
# quadtree (3-D with 4 curves, shifts of 1/4 and 1/2, found half the neighbours).
_CURVES = {2: 3, 3: 5}  # bounds the [queries, candidates] distance block


def point_cloud(
    num_points: int,
    dim: int = 3,
    clusters: int = 0,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """``[num_points, dim]`` float32 points: uniform in the unit cube, or Gaussian clusters.

    With ``clusters = c >= 1``, ``c`` centres are uniform in the unit cube; cluster ``i``
    takes a share of the points proportional to ``exp(g_i)``, ``g_i ~ N(0, 1)``, and has
    standard deviation ``c^(-1/dim) exp(u_i)``, ``u_i`` uniform in ``[ln 0.05, 0]``: dense
    and sparse clusters (scanned objects, crowds, galaxies) rather than one density.
    """
    num_points = check_int("num_points", num_points, 1)
    dim = check_int("dim", dim, 2, 3)
    clusters = check_int("clusters", clusters, 0)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    if clusters == 0:
        return torch.rand(num_points, dim, generator=gen, device=device)
    centre = torch.rand(clusters, dim, generator=gen, device=device)
    share = torch.cumsum(torch.exp(torch.randn(clusters, generator=gen, device=device, dtype=torch.float64)), 0)
    u = torch.rand(num_points, generator=gen, device=device, dtype=torch.float64) * share[-1]
    cluster = torch.clamp(torch.searchsorted(share, u), max=clusters - 1)
    spread = clusters ** (-1 / dim) * torch.exp(
        math.log(0.05) * torch.rand(clusters, generator=gen, device=device))
    noise = torch.randn(num_points, dim, generator=gen, device=device)
    return centre[cluster] + spread[cluster, None] * noise


def spread_bits(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``x``'s bits moved to every ``dim``-th position (bit ``b`` to bit ``dim * b``): a
    Morton key's coordinate, below 2**32 in 2-D and 2**21 in 3-D."""
    if dim == 2:
        steps = ((16, 0x0000FFFF0000FFFF), (8, 0x00FF00FF00FF00FF), (4, 0x0F0F0F0F0F0F0F0F),
                 (2, 0x3333333333333333), (1, 0x5555555555555555))
    else:
        steps = ((32, 0x001F00000000FFFF), (16, 0x001F0000FF0000FF), (8, 0x100F00F00F00F00F),
                 (4, 0x10C30C30C30C30C3), (2, 0x1249249249249249))
    for shift, mask in steps:
        x = (x | (x << shift)) & mask
    return x


def _morton_order(unit: torch.Tensor, offset: float) -> torch.Tensor:
    """``[n]`` the points sorted along the Morton curve of ``unit + offset``.

    ``unit`` is ``[n, dim]`` in ``[0, 1)``; with ``offset`` in ``[0, 1)`` the shifted cloud
    lies in ``[0, 2)``, quantised to ``2^bits`` levels per axis.
    """
    dim = unit.shape[1]
    bits = _MORTON_BITS[dim]
    q = ((unit.double() + offset) * 2.0 ** (bits - 1)).long()
    code = torch.zeros(unit.shape[0], dtype=torch.int64, device=unit.device)
    for axis in range(dim):
        code |= spread_bits(q[:, axis].contiguous(), dim) << axis
    return torch.sort(code, stable=True).indices


def _unit_cube(points: torch.Tensor) -> torch.Tensor:
    """``points`` scaled into ``[0, 1)`` by one factor for all axes (distances keep their order)."""
    low = points.min(0).values
    extent = float((points.max(0).values - low).max())
    return (points - low) / (extent * (1 + 1e-6) if extent > 0 else 1.0)


def _window_start(position: torch.Tensor, n: int, width: int) -> torch.Tensor:
    """``[q]`` the first curve position of a ``width``-point window centred at ``position``, kept in ``[0, n)``."""
    return torch.clamp(position - width // 2, min=0, max=n - width)


def _candidates(query: torch.Tensor, positions: list[torch.Tensor], orders: list[torch.Tensor],
                width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``([q, curves * width] candidates, same-shape mask of the ones to skip)``.

    ``positions`` and ``orders`` are the shifted curves 1, 2, ...: a node's position along
    each, and the nodes in each curve's order; curve 0 is the node order itself. A candidate is skipped when it is the query or when
    an earlier curve's window already holds it: each window is a range of curve
    positions, so that is a range test on the candidate's position along the earlier
    curve, with no sort of the candidates.
    """
    n = orders[0].numel()
    offsets = torch.arange(width, device=query.device)
    starts = [_window_start(query, n, width)] + [_window_start(position[query], n, width) for position in positions]
    first = starts[0][:, None] + offsets
    candidates, skip = [first], [first == query[:, None]]
    for j, order in enumerate(orders, start=1):
        window = order[starts[j][:, None] + offsets]
        seen = (window >= starts[0][:, None]) & (window < starts[0][:, None] + width)
        for i in range(1, j):
            earlier = torch.take(positions[i - 1], window) - starts[i][:, None]
            seen |= (earlier >= 0) & (earlier < width)
        candidates.append(window)
        skip.append(seen)
    return torch.cat(candidates, 1), torch.cat(skip, 1)


def knn_graph(
    points: torch.Tensor,
    k: int,
    *,
    symmetric: bool = False,
) -> Graph:
    """The k-nearest-neighbour graph of ``points`` (``[n, dim]``, ``dim`` 2 or 3, ``n > k``).

    Nodes are renumbered in the Morton order of the points (node ``i`` is point
    ``order[i]``, the order being unreturned: the graph is what the corpus needs). Row
    ``i`` holds ``k`` distinct sources other than ``i``: its nearest points, exactly for
    ``n <= EXACT_POINTS``, else the nearest among the shifted-curve candidates (see the
    module docstring). ``symmetric=True`` adds every edge's reverse once (the undirected
    kNN graph, ``to_undirected`` in PyG): rows then have ``k`` or more sources.

    Returns:
        A square graph of ``n`` nodes and ``n k`` edges (``symmetric``: between ``n k``
        and ``2 n k``), each row's sources sorted.
    """
    if not isinstance(points, torch.Tensor) or points.dim() != 2 or points.shape[1] not in _MORTON_BITS:
        raise ValueError(f"points must be a [n, 2] or [n, 3] tensor, got "
                         f"{tuple(points.shape) if isinstance(points, torch.Tensor) else type(points).__name__}")
    n, dim = points.shape
    k = check_int("k", k, 1)
    if k >= n:
        raise ValueError(f"k must be below the {n} points (a point is not its own neighbour), got {k}")
    device = points.device
    unit = _unit_cube(points.float())
    unit = unit[_morton_order(unit, 0.0)]  # node i is the i-th point along the curve
    exact = n <= EXACT_POINTS
    axes = [unit[:, a].contiguous() for a in range(dim)]
    curves, width = _CURVES[dim], min(2 * k + 1, n)
    if not exact:
        shifted = [_morton_order(unit, j / curves) for j in range(1, curves)]
        positions = [torch.empty_like(order).scatter_(0, order, torch.arange(n, device=device))
                     for order in shifted]
    chunk = max(1, _CANDIDATES_PER_CHUNK // (n if exact else curves * width))
    sources = []
    for first in range(0, n, chunk):
        query = torch.arange(first, min(first + chunk, n), device=device)
        if exact:
            candidates = torch.arange(n, device=device).expand(query.numel(), n)
            skip = candidates == query[:, None]
        else:
            candidates, skip = _candidates(query, positions, shifted, width)
        distance = sum((torch.take(axis, candidates) - axis[query, None]) ** 2 for axis in axes)
        distance.masked_fill_(skip, math.inf)
        sources.append(candidates.gather(1, torch.topk(distance, k, 1, largest=False).indices))
    col = torch.cat(sources).flatten()
    row = torch.arange(n, device=device).repeat_interleave(k)
    if symmetric:
        return graph_from_pairs(torch.cat([row, col]), torch.cat([col, row]), n, n, simple=True)
    return graph_from_rows(torch.full((n,), k, dtype=torch.int64, device=device), row, col, n)
