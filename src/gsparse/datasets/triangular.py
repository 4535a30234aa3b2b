"""Sparse triangular factors for SpTRSV: seeded generators of the benchmark's matrix families.

Each generator returns a SciPy CSR array (``scipy.sparse.csr_array``, float64, rows'
columns sorted, no duplicates) holding a lower triangular factor, or with ``upper=True``
its transpose. All are vectorised NumPy: 4M-row factors build in seconds (times per
family in docs/sptrsv.md).

Families:

- :func:`laplacian`: the 5-point (2-D) and 7-point (3-D) Laplacians with Dirichlet
  boundaries, optionally with random conductances, as their lower triangle or their
  IC(0) / ILU(0) factors;
- :func:`banded`: random entries within a band below the diagonal;
- :func:`power_law`: the lower triangle of a general sparse matrix whose rows and
  columns have power-law degrees (Chung-Lu), as AG-SpTRSV builds its synthetic matrices;
- :func:`rmat`: the lower triangle of an R-MAT graph (Graph500 parameters);
- :func:`road_grid`: a road-like planar grid with missing streets and a few diagonals;
- :func:`stencil`: the 9-point (2-D) or 27-point (3-D) stencil's pattern on a grid;
- :func:`shuffled`: another factor's pattern, symmetrised and renumbered at random (a mesh
  without a locality-preserving ordering: few, wide levels);
- :func:`graph_lower`: the lower triangle of a given graph's adjacency (real graphs);
- :func:`geometric`: an unstructured mesh-like graph, random points in the unit square or
  cube each joined to its ``k`` nearest neighbours, numbered at random, along a Morton
  curve or cell by cell;
- :func:`community`: the lower triangle of a stochastic-block-model graph (lognormal
  community sizes, a share of the edges inside communities), ordered by community or at
  random;
- :func:`arrow`: a bordered (arrowhead) factor, as circuit and KKT matrices have: a sparse
  banded or skewed body plus a few to a few hundred very long rows, at the end or scattered;
- :func:`tree`: a forest (or several interleaved), each row depending on 1-3 rows within a
  window behind it: deep for a narrow window, shallow for a wide one.

The first eight families of :func:`generate` (:data:`BENCHMARK_FAMILIES`) are the
benchmark's matrix set; the last four (:data:`CORPUS_FAMILIES`) add structures the eight
lack to the scheme selector's training corpus. :data:`FAMILIES` is both.

Except for the Laplacian factors, off-diagonal values are drawn from [1, 2) (as in
AG-SpTRSV) and the diagonal is ``1 + max(row sum, column sum)`` of the off-diagonal
magnitudes: the factor and its transpose are strictly row diagonally dominant, so
``||x||_inf <= ||b||_inf`` for either solve and the solve is well conditioned at any depth.
The Laplacian factors are conditioned like the Laplacian (IC(0) of an M-matrix exists and
is positive).

:func:`generate` draws a family's parameters from a seed for a target number of rows
(:func:`parameters` gives a corpus family's draw); :data:`FAMILIES` names the families it
knows; :func:`corpus_rows` draws a corpus factor's size.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from ..graph import Graph
from .geometric import spread_bits

__all__ = ["laplacian", "banded", "power_law", "rmat", "road_grid", "stencil", "shuffled", "graph_lower",
           "geometric", "community", "arrow", "tree", "generate", "parameters", "corpus_rows", "edge_cases",
           "FAMILIES", "BENCHMARK_FAMILIES", "CORPUS_FAMILIES", "LAPLACIAN_FACTORS"]

LAPLACIAN_FACTORS = ("lower", "ic0", "ilu0")


def _check_size(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_fraction(name: str, value: Any, low: float = 0.0, high: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must lie in [{low}, {high}], got {value}")
    return float(value)


def _oriented(lower: sp.csr_array, upper: bool) -> sp.csr_array:
    if not upper:
        return lower
    out = sp.csr_array(lower.T)
    out.sort_indices()
    return out


def _factor(rows: np.ndarray, cols: np.ndarray, n: int, rng: np.random.Generator, upper: bool) -> sp.csr_array:
    """The dominant factor over the strictly lower entries ``(rows > cols)`` (duplicates
    merged): values in [1, 2), diagonal ``1 + max(row sum, column sum)``."""
    key = np.sort(rows.astype(np.int64) * n + cols.astype(np.int64))
    key = key[np.diff(key, prepend=-1) != 0]  # (NumPy's hashing np.unique is slower here)
    rows, cols = key // n, key % n
    values = 1.0 + rng.random(len(key))
    row_sum = np.bincount(rows, weights=values, minlength=n)
    col_sum = np.bincount(cols, weights=values, minlength=n)
    diagonal = 1.0 + np.maximum(row_sum, col_sum)
    # Entries are sorted by (row, column) and each row's diagonal comes last: the CSR arrays
    # can be written down directly (the earlier rows' diagonals shift entry j by its row).
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    indptr += np.arange(n + 1)
    data = np.empty(len(key) + n)
    indices = np.empty(len(key) + n, dtype=np.int64)
    data[np.arange(len(key)) + rows] = values
    indices[np.arange(len(key)) + rows] = cols
    data[indptr[1:] - 1] = diagonal
    indices[indptr[1:] - 1] = np.arange(n)
    lower = sp.csr_array((data, indices, indptr), shape=(n, n))
    return _oriented(lower, upper)


def _lower_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undirected pairs as (larger, smaller) endpoint, self pairs dropped."""
    keep = a != b
    a, b = a[keep], b[keep]
    return np.maximum(a, b), np.minimum(a, b)


# ---------------------------------------------------------------------- Laplacians


def laplacian(shape: tuple[int, ...], factor: str = "lower", *, seed: int | None = None,
              upper: bool = False) -> sp.csr_array:
    """A factor of the 2-D 5-point or 3-D 7-point Laplacian on a ``shape`` grid.

    Node ``(x, y[, z])`` is row ``x + nx * (y + ny * z)``. Each grid edge (and each edge to
    the Dirichlet boundary) has conductance 1, or a random one in [0.5, 1.5) with ``seed``;
    the matrix is ``A = sum_edges c (e_i - e_j)(e_i - e_j)^T`` plus the boundary terms on the
    diagonal: symmetric positive definite, an M-matrix.

    Args:
        shape: ``(nx, ny)`` or ``(nx, ny, nz)``, each at least 3.
        factor: ``"lower"``: ``tril(A)``; ``"ic0"``: the incomplete Cholesky factor ``L``
            (``A ~ L L^T``, same pattern as ``tril(A)``); ``"ilu0"``: ILU(0)'s unit lower
            factor ``L`` (ones stored on the diagonal; with ``upper`` its ``U``).
        seed: random conductances when given.
        upper: return the upper factor: ``triu(A)``, ``L^T`` of IC(0), ``U`` of ILU(0).

    For these stencils IC(0) and ILU(0) make no fill inside the pattern, so the factors
    follow from the pivots ``d_i = a_ii - sum_{j < i neighbour} a_ij^2 / d_j``, computed one
    anti-diagonal wavefront at a time (every grid dimension must be at least 3 for this to
    be exact). A 2000 x 2000 grid (4M rows) builds in a few seconds.
    """
    if not isinstance(shape, (tuple, list)) or len(shape) not in (2, 3):
        raise ValueError(f"shape must be (nx, ny) or (nx, ny, nz), got {shape!r}")
    dims = tuple(_check_size(f"shape[{i}]", s, 3) for i, s in enumerate(shape))
    if factor not in LAPLACIAN_FACTORS:
        raise ValueError(f"factor must be one of {LAPLACIAN_FACTORS}, got {factor!r}")
    rng = np.random.default_rng(seed)
    n = math.prod(dims)
    coords = np.unravel_index(np.arange(n), dims, order="F")
    strides = np.cumprod((1,) + dims[:-1])
    diagonal = np.zeros(n)
    lower_c = []  # per direction: conductance to the lower neighbour (0 on the boundary)
    for axis in range(len(dims)):
        edge_shape = tuple(s + 1 if a == axis else s for a, s in enumerate(dims))
        c = np.ones(edge_shape) if seed is None else 0.5 + rng.random(edge_shape)
        below = c[tuple(coords[a] for a in range(len(dims)))]  # edge to the lower neighbour
        above = c[tuple(coords[a] + (a == axis) for a in range(len(dims)))]
        diagonal += below + above
        lower_c.append(np.where(coords[axis] > 0, below, 0.0))
    pivots = diagonal if factor == "lower" else _pivots(diagonal, lower_c, strides, coords)
    # The factors as (diagonal, divisor of a_ij in column j) over tril(A)'s pattern; ILU(0)'s
    # U is the transpose of D~ + tril(A, -1).
    if factor == "lower" or (factor == "ilu0" and upper):
        diagonal_values, divisor = pivots, None
    elif factor == "ic0":
        diagonal_values = divisor = np.sqrt(pivots)
    else:
        diagonal_values, divisor = np.ones(n), pivots
    rows, cols, values = [np.arange(n)], [np.arange(n)], [diagonal_values]
    for axis in range(len(dims)):
        i = np.flatnonzero(coords[axis] > 0)
        j = i - strides[axis]
        a = -lower_c[axis][i]
        rows.append(i)
        cols.append(j)
        values.append(a if divisor is None else a / divisor[j])
    lower = sp.csr_array((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
    lower.sort_indices()
    return _oriented(lower, upper)


def _pivots(diagonal: np.ndarray, lower_c: list[np.ndarray], strides: np.ndarray,
            coords: tuple[np.ndarray, ...]) -> np.ndarray:
    """``d_i = a_ii - sum_axis c_axis(i)^2 / d_(i - stride_axis)``, wavefront by wavefront."""
    wave = np.sum(coords, axis=0)
    order = np.argsort(wave, kind="stable")
    bounds = np.searchsorted(wave[order], np.arange(wave.max() + 2))
    pivots = diagonal.copy()
    for s in range(1, len(bounds) - 1):
        nodes = order[bounds[s]:bounds[s + 1]]
        for axis, c in enumerate(lower_c):
            ci = c[nodes]
            inner = ci > 0
            nbr = nodes[inner] - strides[axis]
            pivots[nodes[inner]] -= ci[inner] ** 2 / pivots[nbr]
    return pivots


# ---------------------------------------------------------------------- random factors


def banded(n: int, bandwidth: int, density: float, *, seed: int = 0, upper: bool = False) -> sp.csr_array:
    """Entries ``(i, i - d)`` for ``1 <= d <= bandwidth``, each present with probability
    ``density``; row ``i`` also always depends on row ``i - 1`` (a chain: about ``n``
    levels, the deep end of the matrix set)."""
    n = _check_size("n", n, 1)
    bandwidth = _check_size("bandwidth", bandwidth, 1)
    density = _check_fraction("density", density)
    rng = np.random.default_rng(seed)
    rows, cols = [np.arange(1, n)], [np.arange(n - 1)]
    for d in range(2, min(bandwidth, n - 1) + 1):
        i = d + np.flatnonzero(rng.random(n - d) < density)
        rows.append(i)
        cols.append(i - d)
    return _factor(np.concatenate(rows), np.concatenate(cols), n, rng, upper)


def power_law(n: int, mean_degree: float, exponent: float, *, seed: int = 0,
              upper: bool = False) -> sp.csr_array:
    """The lower triangle of a Chung-Lu matrix: ``n * mean_degree`` entry draws whose rows and
    columns are picked with probability proportional to Pareto weights (density
    ``~ w^-exponent``, ``exponent > 2``) in random node order; each draw ``(r, c)`` lands at
    ``(max, min)``, duplicates merge, so rows average a little under ``mean_degree``
    off-diagonal entries. A few hub columns are read by many rows."""
    n = _check_size("n", n, 2)
    mean_degree = _check_fraction("mean_degree", mean_degree, 0.0, float(n))
    exponent = _check_fraction("exponent", exponent, 2.0 + 1e-9, 10.0)
    rng = np.random.default_rng(seed)
    weights = (1.0 - rng.random(n)) ** (-1.0 / (exponent - 1.0))
    draws = int(round(n * mean_degree))
    # Each endpoint's count per node is multinomial; shuffling one side pairs them at random.
    nodes = np.arange(n, dtype=np.int64)
    a = np.repeat(nodes, rng.multinomial(draws, weights / weights.sum()))
    b = rng.permutation(np.repeat(nodes, rng.multinomial(draws, weights / weights.sum())))
    rows, cols = _lower_pairs(a, b)
    return _factor(rows, cols, n, rng, upper)


def rmat(scale: int, edge_factor: int, *, probabilities: tuple[float, float, float, float] = (0.57, 0.19, 0.19, 0.05),
         seed: int = 0, upper: bool = False) -> sp.csr_array:
    """The lower triangle of an R-MAT graph with ``2**scale`` nodes and ``edge_factor`` edges
    per node (Graph500 defaults ``a, b, c, d``), nodes renumbered at random as in Graph500."""
    scale = _check_size("scale", scale, 1)
    edge_factor = _check_size("edge_factor", edge_factor, 1)
    if len(probabilities) != 4 or abs(sum(probabilities) - 1.0) > 1e-9 or min(probabilities) < 0:
        raise ValueError(f"probabilities must be four non-negative numbers summing to 1, got {probabilities}")
    rng = np.random.default_rng(seed)
    n, draws = 1 << scale, edge_factor << scale
    a_p, b_p, c_p, _ = probabilities
    index = np.uint64 if scale > 32 else np.uint32
    src = np.zeros(draws, dtype=index)
    dst = np.zeros(draws, dtype=index)
    for bit in range(scale):
        # Quadrants [0, a), [a, a+b), [a+b, a+b+c), [a+b+c, 1) set (src, dst) bits 00, 01, 10, 11.
        r = rng.random(draws, dtype=np.float32)
        src |= (r >= a_p + b_p).astype(index) << index(bit)
        dst |= ((r >= a_p) ^ (r >= a_p + b_p) ^ (r >= a_p + b_p + c_p)).astype(index) << index(bit)
    relabel = rng.permutation(n)
    rows, cols = _lower_pairs(relabel[src], relabel[dst])
    return _factor(rows, cols, n, rng, upper)


def road_grid(nx: int, ny: int, *, keep: float = 0.8, diagonals: float = 0.05, seed: int = 0,
              upper: bool = False) -> sp.csr_array:
    """A road-like network: the ``nx x ny`` grid (row-major node order, as road networks
    sorted by position) with each street kept with probability ``keep`` and a diagonal in
    each cell with probability ``diagonals``; degrees 2-4, planar, long dependency chains."""
    nx = _check_size("nx", nx, 2)
    ny = _check_size("ny", ny, 2)
    keep = _check_fraction("keep", keep)
    diagonals = _check_fraction("diagonals", diagonals)
    rng = np.random.default_rng(seed)
    node = np.arange(nx * ny).reshape(ny, nx)
    pairs = [(node[:, 1:], node[:, :-1], keep), (node[1:, :], node[:-1, :], keep),
             (node[1:, 1:], node[:-1, :-1], diagonals)]
    rows, cols = [], []
    for a, b, p in pairs:
        chosen = rng.random(a.shape) < p
        rows.append(a[chosen])
        cols.append(b[chosen])
    return _factor(np.concatenate(rows), np.concatenate(cols), nx * ny, rng, upper)


def stencil(shape: tuple[int, ...], *, seed: int = 0, upper: bool = False) -> sp.csr_array:
    """The 9-point (2-D) or 27-point (3-D) stencil on a ``shape`` grid: each node joined to
    every neighbour in the square or cube around it, diagonals included. Node ``(x, y[, z])``
    is row ``x + nx * (y + ny * z)``; rows hold 4 (2-D) or 13 (3-D) entries below the
    diagonal inside the grid, and each depends on the row before it (a mesh's long chains
    with longer rows than the Laplacians')."""
    if not isinstance(shape, (tuple, list)) or len(shape) not in (2, 3):
        raise ValueError(f"shape must be (nx, ny) or (nx, ny, nz), got {shape!r}")
    dims = tuple(_check_size(f"shape[{i}]", s, 2) for i, s in enumerate(shape))
    n = math.prod(dims)
    coords = np.unravel_index(np.arange(n), dims, order="F")
    strides = np.cumprod((1,) + dims[:-1])
    rows, cols = [], []
    for offset in np.ndindex(*(3,) * len(dims)):
        step = np.array(offset) - 1
        if int(step @ strides) >= 0:  # the upper half and the node itself
            continue
        inside = np.ones(n, dtype=bool)
        for axis, d in enumerate(step):
            inside &= (coords[axis] + d >= 0) & (coords[axis] + d < dims[axis])
        i = np.flatnonzero(inside)
        rows.append(i)
        cols.append(i + int(step @ strides))
    return _factor(np.concatenate(rows), np.concatenate(cols), n, np.random.default_rng(seed), upper)


def shuffled(matrix: sp.sparray, *, seed: int = 0, upper: bool = False) -> sp.csr_array:
    """The pattern of the square ``matrix`` symmetrised, its nodes renumbered by a random
    permutation, as a dominant factor (its lower triangle). A mesh's factor loses its chains:
    a few levels of thousands of rows, neighbours in the order independent (``dep_dist``
    near 0), rows as short as the mesh's."""
    if not sp.issparse(matrix) or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"matrix must be a square SciPy sparse matrix, got {type(matrix).__name__}")
    rng = np.random.default_rng(seed)
    coo = matrix.tocoo()
    relabel = rng.permutation(matrix.shape[0])
    rows, cols = _lower_pairs(relabel[coo.row], relabel[coo.col])
    return _factor(rows, cols, matrix.shape[0], rng, upper)


def graph_lower(graph: Any, *, seed: int = 0, upper: bool = False) -> sp.csr_array:
    """The lower triangle of a graph's symmetrised adjacency, as a factor.

    Args:
        graph: a :class:`gsparse.Graph` (square), a square SciPy sparse matrix, or an edge
            list ``[2, E]`` (NumPy array or torch tensor; nodes ``0 .. max + 1``).
    """
    if isinstance(graph, Graph):
        if graph.num_src != graph.num_dst:
            raise ValueError(f"graph must be square, got {graph.num_src} sources and {graph.num_dst} destinations")
        src, dst = (t.cpu().numpy() for t in graph.edges())
        n = graph.num_src
    elif sp.issparse(graph):
        if graph.shape[0] != graph.shape[1]:
            raise ValueError(f"graph must be a square matrix, got shape {graph.shape}")
        coo = graph.tocoo()
        src, dst, n = coo.row, coo.col, graph.shape[0]
    else:
        edges = np.asarray(graph.cpu() if hasattr(graph, "cpu") else graph)
        if edges.ndim != 2 or edges.shape[0] != 2 or edges.dtype.kind not in "iu":
            raise ValueError(f"graph as an edge list must be an integer array [2, E], got {edges.dtype} "
                             f"of shape {edges.shape}")
        src, dst = edges
        n = int(edges.max()) + 1 if edges.size else 0
    if n == 0:
        raise ValueError("graph has no nodes")
    rows, cols = _lower_pairs(np.asarray(src, np.int64), np.asarray(dst, np.int64))
    return _factor(rows, cols, n, np.random.default_rng(seed), upper)


# ---------------------------------------------------------------------- structurally different families

GEOMETRIC_ORDERINGS = ("random", "morton", "cells")


def geometric(n: int, k: int, dims: int = 2, *, ordering: str = "random", seed: int = 0,
              upper: bool = False) -> sp.csr_array:
    """An unstructured mesh-like graph: ``n`` uniform random points in the unit square
    (``dims`` 2) or cube (3), each joined to its ``k`` nearest neighbours (symmetrised: every
    node has at least ``k`` neighbours, about ``1.3 k`` on average), as the lower triangle.

    ``ordering`` numbers the nodes: ``"random"`` (the order the points were drawn: no
    locality, few wide levels), ``"morton"`` (along the Z-order curve of the points' cells:
    neighbours mostly near in the order, like a mesh numbered by a space-filling curve) or
    ``"cells"`` (by cells of about one point each, sorted along the last axis first: a
    sweep through the domain, so long chains like a grid in natural order)."""
    n = _check_size("n", n, 2)
    k = _check_size("k", k, 1)
    if k >= n:
        raise ValueError(f"k must be < n, got k = {k} for n = {n}")
    if dims not in (2, 3) or isinstance(dims, bool):
        raise ValueError(f"dims must be 2 or 3, got {dims!r}")
    if ordering not in GEOMETRIC_ORDERINGS:
        raise ValueError(f"ordering must be one of {GEOMETRIC_ORDERINGS}, got {ordering!r}")
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    points = rng.random((n, dims))
    # Cells of about one point each; their Morton keys interleave the cell coordinates' bits.
    side = max(1, int(round(n ** (1.0 / dims))))
    cell = np.minimum((points * side).astype(np.int64), side - 1)
    key = torch.zeros(n, dtype=torch.int64)
    for axis in range(dims):
        key |= spread_bits(torch.from_numpy(cell[:, axis]), dims) << axis
    key = key.numpy()
    morton = np.argsort(key, kind="stable")
    # The neighbours are found in Morton order whatever the numbering (a query in the
    # points' random order is 4x slower: every lookup misses the cache), then renumbered.
    _, neighbours = cKDTree(points[morton], balanced_tree=False).query(points[morton], k + 1, workers=-1)
    if ordering == "morton":
        label = np.arange(n, dtype=np.int64)
    elif ordering == "random":  # the order the points were drawn in
        label = morton
    else:  # by cell, the last axis's cell first
        cells = np.zeros(n, dtype=np.int64)
        for axis in reversed(range(dims)):
            cells = cells * side + cell[morton, axis]
        label = np.empty(n, dtype=np.int64)
        label[np.argsort(cells, kind="stable")] = np.arange(n)
    if (neighbours[:, 0] == np.arange(n)).all():  # each point is its own nearest: left out
        neighbours = neighbours[:, 1:]
    rows, cols = _lower_pairs(np.repeat(label, neighbours.shape[1]), label[neighbours.ravel()])
    return _factor(rows, cols, n, rng, upper)


def community(sizes: Any, mean_degree: float, intra: float, *, ordered: bool = True, seed: int = 0,
              upper: bool = False) -> sp.csr_array:
    """The lower triangle of a stochastic-block-model graph: communities of the given
    ``sizes`` (``n = sum(sizes)``, at least two communities), ``n * mean_degree / 2`` edge
    draws (``mean_degree`` neighbours per node before duplicates merge), a share ``intra``
    of them inside a community (both ends uniform in it) and the others between a uniform
    node and a uniform node of another community.

    ``ordered``: nodes numbered community by community (dense diagonal blocks, the blocks
    linked by scattered entries); else renumbered at random (the blocks invisible in the
    pattern, few wide levels)."""
    sizes = np.asarray(sizes)
    if sizes.ndim != 1 or len(sizes) < 2 or sizes.dtype.kind not in "iu" or sizes.min() < 1:
        raise ValueError(f"sizes must be at least two positive integers, got {sizes!r}")
    sizes = sizes.astype(np.int64)
    n = int(sizes.sum())
    mean_degree = _check_fraction("mean_degree", mean_degree, 0.0, float(n))
    intra = _check_fraction("intra", intra)
    rng = np.random.default_rng(seed)
    start = np.zeros(len(sizes), dtype=np.int64)
    np.cumsum(sizes[:-1], out=start[1:])
    member = np.repeat(np.arange(len(sizes)), sizes)
    draws = int(round(n * mean_degree / 2))
    inside = rng.random(draws) < intra
    a = rng.integers(0, n, draws)
    c = member[a]
    # Inside: uniform over a's community; outside: uniform over the nodes after a's
    # community's block, wrapping around (never in it).
    span = np.where(inside, sizes[c], n - sizes[c])
    offset = (rng.random(draws) * span).astype(np.int64)
    b = np.where(inside, start[c] + offset, (start[c] + sizes[c] + offset) % n)
    if not ordered:
        relabel = rng.permutation(n)
        a, b = relabel[a], relabel[b]
    rows, cols = _lower_pairs(a, b)
    return _factor(rows, cols, n, rng, upper)


ARROW_BODIES = ("band", "skewed")


def arrow(n: int, border: int, fill: float, *, body: str = "band", body_degree: float = 2.0,
          bandwidth: int = 16, skew: float = 2.0, scattered: bool = False, border_entries: int | None = None,
          seed: int = 0, upper: bool = False) -> sp.csr_array:
    """A bordered (arrowhead) factor, as circuit and KKT matrices have: a sparse body plus
    ``border`` long rows.

    Body: each row draws Poisson(``body_degree``) columns before it, for ``body="band"``
    uniformly among the ``bandwidth`` rows before it, for ``"skewed"`` at ``floor(i *
    u**skew)`` for row ``i`` and uniform ``u`` (``skew >= 1``: the early rows read by many,
    power-law-like column counts).

    Border: rows ``n - border .. n - 1`` (``scattered``: ``border`` rows drawn at random),
    row ``i`` of them drawing ``min(fill * i, border_entries / border)`` columns uniformly
    before it (with replacement, duplicates merged): each depends on a large share of the
    earlier rows, up to ``border_entries`` (default ``2 n``) entries in all."""
    n = _check_size("n", n, 2)
    border = _check_size("border", border, 1)
    if border >= n:
        raise ValueError(f"border must be < n, got {border} for n = {n}")
    fill = _check_fraction("fill", fill)
    if body not in ARROW_BODIES:
        raise ValueError(f"body must be one of {ARROW_BODIES}, got {body!r}")
    body_degree = _check_fraction("body_degree", body_degree, 0.0, float(n))
    bandwidth = _check_size("bandwidth", bandwidth, 1)
    skew = _check_fraction("skew", skew, 1.0, 100.0)
    border_entries = 2 * n if border_entries is None else _check_size("border_entries", border_entries, 0)
    rng = np.random.default_rng(seed)
    counts = rng.poisson(body_degree, n)
    counts[0] = 0
    rows = np.repeat(np.arange(n, dtype=np.int64), counts)
    if body == "band":
        cols = rows - 1 - (rng.random(len(rows)) * np.minimum(bandwidth, rows)).astype(np.int64)
    else:
        cols = (rows * rng.random(len(rows)) ** skew).astype(np.int64)
    if scattered:
        long_rows = np.sort(1 + rng.choice(n - 1, border, replace=False))
    else:
        long_rows = np.arange(n - border, n, dtype=np.int64)
    long_counts = np.minimum(np.ceil(fill * long_rows), border_entries // border).astype(np.int64)
    border_rows = np.repeat(long_rows, long_counts)
    border_cols = (rng.random(len(border_rows)) * border_rows).astype(np.int64)
    return _factor(np.concatenate([rows, border_rows]), np.concatenate([cols, border_cols]), n, rng, upper)


def tree(n: int, window: int, max_parents: int = 1, *, forests: int = 1, seed: int = 0,
         upper: bool = False) -> sp.csr_array:
    """A forest: row ``i`` depends on 1 to ``max_parents`` (uniform) rows drawn uniformly
    among the ``window`` rows before it (duplicates merged), its tree's first row on none.

    ``window`` sets the depth: 1 is a chain of ``n`` levels; 20K rows with one parent
    take about 8,000 levels at window 4, 600 at window 64 and 60 at window 1,024
    (shallow, bushy trees); with up to three parents about 10,700, 1,300 and 115. ``forests``: that many independent forests interleaved at random (each row's
    forest uniform; the window counts the rows of its own forest), so a row's parents lie
    about ``forests`` times further back."""
    n = _check_size("n", n, 1)
    window = _check_size("window", window, 1)
    max_parents = _check_size("max_parents", max_parents, 1)
    forests = _check_size("forests", forests, 1)
    rng = np.random.default_rng(seed)
    if forests == 1:
        members, local = np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)
    else:
        label = rng.integers(0, forests, n)
        members = np.argsort(label, kind="stable")  # each forest's rows in order
        first = np.searchsorted(label[members], np.arange(forests))
        local = np.empty(n, dtype=np.int64)
        local[members] = np.arange(n) - np.repeat(first, np.bincount(label, minlength=forests))
    counts = np.where(local > 0, rng.integers(1, max_parents + 1, n), 0)
    rows = np.repeat(np.arange(n, dtype=np.int64), counts)
    back = 1 + (rng.random(len(rows)) * np.minimum(window, local[rows])).astype(np.int64)
    # The parent is ``back`` places before the row in its forest's member list.
    position = np.empty(n, dtype=np.int64)
    position[members] = np.arange(n)
    cols = members[position[rows] - back]
    return _factor(rows, cols, n, rng, upper)


# ---------------------------------------------------------------------- edge cases


def edge_cases(n: int = 70, seed: int = 0) -> dict[str, tuple[sp.csr_array, bool]]:
    """Small lower factors whose shapes break kernels with a wrong bound, by name, each with
    whether to solve it with a unit diagonal: one dense row (the last, ``n`` entries), rows
    without off-diagonal entries between rows with one, a diagonal-only factor, a 1 x 1
    factor, a unit-diagonal factor storing no diagonal, and one storing no entry at all.
    All are row and column diagonally dominant (solved either way, well conditioned)."""
    n = _check_size("n", n, 2)
    rng = np.random.default_rng(seed)
    dense_row = sp.lil_array((n, n))
    dense_row.setdiag(3.0)
    dense_row[n - 1, :] = 1.0
    dense_row[n - 1, n - 1] = float(n + 10)
    every_other = np.arange(10 % n, n, 2)
    empty_rows = sp.lil_array((n, n))
    empty_rows.setdiag(2.0)
    empty_rows[every_other, every_other - 10 % n] = 1.0
    strict = sp.tril(sp.random_array((n, n), density=0.1, rng=rng), k=-1)
    strict = strict * (0.5 / max(1.0, abs(strict).sum(axis=0).max(), abs(strict).sum(axis=1).max()))
    return {
        "one dense row": (sp.csr_array(dense_row), False),
        "empty off-diagonal rows": (sp.csr_array(empty_rows), False),
        "diagonal only": (sp.csr_array(sp.diags_array(np.arange(1.0, n + 1))), False),
        "n = 1": (sp.csr_array(np.array([[4.0]])), False),
        "unit, no stored diagonal": (sp.csr_array(strict), True),
        "unit, no entries": (sp.csr_array((n, n)), True),
    }


# ---------------------------------------------------------------------- sampling


# The benchmark's matrix set (the eight families): the default of the GPU tests and
# of recorded digests; their factors never change for a given (rows, seed).
BENCHMARK_FAMILIES = ("laplacian2d", "laplacian3d", "banded", "power_law", "rmat", "road", "stencil", "shuffled")
# Families added for the selector's training corpus: structures the eight lack.
CORPUS_FAMILIES = ("geometric", "community", "arrow", "tree")
FAMILIES = BENCHMARK_FAMILIES + CORPUS_FAMILIES
# The meshes that ``shuffled`` renumbers.
_SHUFFLED_BASES = ("laplacian2d", "laplacian3d", "road", "stencil")


def _grid(rows: int, dims: int, rng: np.random.Generator, minimum: int) -> tuple[int, ...]:
    """A grid of about ``rows`` nodes, aspect up to 2:1."""
    aspect = rng.uniform(1.0, 2.0)
    side = (rows / aspect) ** (1.0 / dims)
    return (max(minimum, round(side * aspect)), *(max(minimum, round(side)) for _ in range(dims - 1)))


def generate(family: str, rows: int, seed: int, *, upper: bool = False) -> sp.csr_array:
    """A factor of ``family`` with about ``rows`` rows and parameters drawn from ``seed``.

    ``laplacian2d``/``laplacian3d``: grid aspect up to 2:1, one of the three factors, random
    conductances half of the time; ``banded``: bandwidth 2-64, density 0.05-0.5;
    ``power_law``: mean degree 2-16, exponent 2.1-3; ``rmat``: ``2**round(log2 rows)``
    nodes, edge factor 2-8; ``road``: streets kept 0.6-0.95, diagonals 0-0.1; ``stencil``:
    2-D or 3-D (even odds), aspect up to 2:1; ``shuffled``: one of laplacian2d,
    laplacian3d, road and stencil drawn as above, renumbered at random.

    The corpus families (:func:`parameters` gives their draw): ``geometric``: 2-D or 3-D
    (even odds), ``k`` 4-12, ordering random, Morton or cells (a third each);
    ``community``: median community size 4-10,000 (log-uniform; sizes lognormal with sigma
    0.25-1.5, at least 2, at most half the rows), mean degree 3-20, intra-community share
    0.5-0.95, ordered by community half of the time; ``arrow``: body band (bandwidth
    2-2,000, log-uniform) or skewed (skew 1-4), even odds, 1-5 body entries per row, border
    3-300 rows (log-uniform, at most a tenth of the rows) each filling 10-90% of the rows
    before it (the border at most ``2 rows`` entries in all), scattered a third of the time;
    ``tree``: window 1-10,000 (log-uniform), 1-3 parents per row at most, one forest half of
    the time, else 2-64 interleaved ones (log-uniform).
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    rows = _check_size("rows", rows, 27)
    if family in CORPUS_FAMILIES:
        build, child, drawn = _corpus_draw(family, rows, seed)
        return build(**drawn, seed=child, upper=upper)
    rng = np.random.default_rng(seed)
    if family in ("laplacian2d", "laplacian3d"):
        shape = _grid(rows, 2 if family == "laplacian2d" else 3, rng, 3)
        factor = LAPLACIAN_FACTORS[rng.integers(3)]
        return laplacian(shape, factor, seed=int(rng.integers(2**31)) if rng.random() < 0.5 else None,
                         upper=upper)
    child = int(rng.integers(2**31))
    if family == "banded":
        bandwidth = int(round(math.exp(rng.uniform(math.log(2), math.log(64)))))
        return banded(rows, bandwidth, rng.uniform(0.05, 0.5), seed=child, upper=upper)
    if family == "power_law":
        return power_law(rows, rng.uniform(2.0, 16.0), rng.uniform(2.1, 3.0), seed=child, upper=upper)
    if family == "rmat":
        return rmat(max(1, round(math.log2(rows))), int(rng.integers(2, 9)), seed=child, upper=upper)
    if family == "stencil":
        return stencil(_grid(rows, 2 if rng.random() < 0.5 else 3, rng, 2), seed=child, upper=upper)
    if family == "shuffled":
        base = generate(_SHUFFLED_BASES[rng.integers(len(_SHUFFLED_BASES))], rows, child)
        return shuffled(base, seed=child, upper=upper)
    side = math.sqrt(rows)
    return road_grid(max(2, round(side)), max(2, round(side)), keep=rng.uniform(0.6, 0.95),
                     diagonals=rng.uniform(0.0, 0.1), seed=child, upper=upper)


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _community_sizes(rows: int, rng: np.random.Generator) -> np.ndarray:
    median = _log_uniform(rng, 4.0, 10_000.0)
    sigma = rng.uniform(0.25, 1.5)
    cap = rows // 2
    chunks, total = [], 0
    while total < rows:  # a few chunks: each draws about twice the communities needed
        count = 2 * int(rows / min(median, cap)) + 16
        chunk = np.clip(np.round(median * np.exp(sigma * rng.standard_normal(count))), 2, cap).astype(np.int64)
        chunks.append(chunk)
        total += int(chunk.sum())
    sizes = np.concatenate(chunks)
    sizes = sizes[:int(np.searchsorted(np.cumsum(sizes), rows)) + 1]
    sizes[-1] -= int(sizes.sum()) - rows
    return sizes


def _corpus_draw(family: str, rows: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
    """``(generator, its seed, its other arguments)`` of a corpus family's factor."""
    rng = np.random.default_rng([seed, zlib.crc32(family.encode())])
    child = int(rng.integers(2**31))
    if family == "geometric":
        return geometric, child, {"n": rows, "k": int(rng.integers(4, 13)), "dims": 2 if rng.random() < 0.5 else 3,
                                  "ordering": GEOMETRIC_ORDERINGS[rng.integers(3)]}
    if family == "community":
        sizes = _community_sizes(rows, rng)
        return community, child, {"sizes": sizes, "mean_degree": rng.uniform(3.0, 20.0),
                                  "intra": rng.uniform(0.5, 0.95), "ordered": bool(rng.random() < 0.5)}
    if family == "arrow":
        return arrow, child, {"n": rows, "border": min(int(round(_log_uniform(rng, 3, 300))), max(1, rows // 10)),
                              "fill": rng.uniform(0.1, 0.9), "body": ARROW_BODIES[rng.integers(2)],
                              "body_degree": rng.uniform(1.0, 5.0),
                              "bandwidth": int(round(_log_uniform(rng, 2, 2000))), "skew": rng.uniform(1.0, 4.0),
                              "scattered": bool(rng.random() < 1 / 3)}
    forests = 1 if rng.random() < 0.5 else int(round(_log_uniform(rng, 2, 64)))
    return tree, child, {"n": rows, "window": int(round(_log_uniform(rng, 1, 10_000))),
                         "max_parents": int(rng.integers(1, 4)), "forests": forests}


def parameters(family: str, rows: int, seed: int) -> dict[str, Any]:
    """The arguments :func:`generate` passes the generator of a corpus family
    (:data:`CORPUS_FAMILIES`) for ``(rows, seed)``, its ``seed`` included."""
    if family not in CORPUS_FAMILIES:
        raise ValueError(f"family must be one of {CORPUS_FAMILIES}, got {family!r}")
    _, child, drawn = _corpus_draw(family, _check_size("rows", rows, 27), seed)
    return {**drawn, "seed": child}


def corpus_rows(family: str, low: int, high: int, seed: int) -> int:
    """The rows of corpus factor ``(family, seed)``: log-uniform in ``[low, high]``, drawn
    from the family's name and the seed (the same pair always gets the same size)."""
    low = _check_size("low", low, 27)
    high = _check_size("high", high, low)
    rng = np.random.default_rng([seed, zlib.crc32(family.encode())])
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
