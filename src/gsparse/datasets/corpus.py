"""The graph corpus: a registry of families with randomised parameters, and a seeded stream of graphs.

A :class:`Family` is a parameter space (each parameter a :class:`Range` or a
:class:`Choice`) and a builder that turns parameters and a target edge count into a
graph. ``FAMILIES[name].draw(rng)`` samples parameters; ``.build(parameters, seed=...)``
makes the graph. :func:`corpus` yields graphs of any subset of families, spread
log-uniformly in size, reproducibly for a seed. Train a model on some families and judge
it on the others: graphs of a family it never saw are the test that matters.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..graph import Graph
from ._edges import check_int
from .batched import MIN_GRAPH_NODES, small_graph_batch
from .families import (Regular, banded_graph, block_model_graph, citation_graph, clique_graph, community_graph,
                       hub_graph, popular_graph, random_graph)
from .geometric import EXACT_POINTS, knn_graph, point_cloud
from .lattices import lattice_edge_count, lattice_graph, road_graph, small_world_graph
from .orderings import ORDERINGS, reorder
from .rmat import rmat_graph
from .sampling import sample_blocks
from .synthetic import LogNormal, PowerLaw

__all__ = ["Range", "Choice", "Family", "FAMILIES", "corpus"]


@dataclass(frozen=True)
class Range:
    """A real (or, with ``integer``, whole) parameter drawn from ``[low, high]``, log-uniform if ``log``."""

    low: float
    high: float
    log: bool = False
    integer: bool = False

    def sample(self, rng: np.random.Generator) -> float | int:
        """One value drawn with ``rng``."""
        if self.log:
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            value = rng.uniform(self.low, self.high)
        return min(max(round(value), int(self.low)), int(self.high)) if self.integer else float(value)

    def __contains__(self, value: Any) -> bool:
        return self.low <= value <= self.high and (not self.integer or float(value).is_integer())


@dataclass(frozen=True)
class Choice:
    """A parameter drawn from ``options``, with probabilities ``weights`` (uniform if ``None``)."""

    options: tuple[Any, ...]
    weights: tuple[float, ...] | None = None

    def sample(self, rng: np.random.Generator) -> Any:
        """One of ``options`` drawn with ``rng`` (by ``weights`` when given)."""
        p = None if self.weights is None else np.asarray(self.weights) / sum(self.weights)
        return self.options[int(rng.choice(len(self.options), p=p))]

    def __contains__(self, value: Any) -> bool:
        return value in self.options


# Every family is also drawn under a node ordering; the natural one is the generator's.
ORDERING = Choice(ORDERINGS, (0.4, 0.2, 0.2, 0.2))
MIN_EDGES, MAX_EDGES = 1_000, 100_000_000

Builder = Callable[[Mapping[str, Any], int, int, torch.device, "int | None"], Graph]


@dataclass(frozen=True)
class Family:
    """A graph family: its parameter space and how to build a graph of about ``num_edges`` edges.

    ``builder`` gets ``(parameters, num_edges, seed, device, max_edges)``; every family's
    space also holds ``ordering`` (one of :data:`~gsparse.datasets.ORDERINGS`), applied
    after building.
    """

    name: str
    description: str
    space: Mapping[str, Range | Choice]
    builder: Builder = field(repr=False)

    def draw(self, rng: np.random.Generator, *, num_edges: int | None = None,
             min_edges: int = MIN_EDGES, max_edges: int = MAX_EDGES) -> dict[str, Any]:
        """Parameters: ``num_edges`` (given, or log-uniform in ``[min_edges, max_edges]``) and the space's."""
        if num_edges is None:
            num_edges = Range(min_edges, max_edges, log=True, integer=True).sample(rng)
        parameters: dict[str, Any] = {"num_edges": check_int("num_edges", num_edges, 1)}
        parameters.update((name, dist.sample(rng)) for name, dist in self.space.items())
        parameters["ordering"] = ORDERING.sample(rng)
        return parameters

    def build(self, parameters: Mapping[str, Any], *, seed: int = 0, device: torch.device | str = "cpu",
              max_edges: int | None = None) -> Graph:
        """The graph of ``parameters`` with about ``min(num_edges, max_edges)`` edges.

        Families whose size is discrete (lattices, R-MAT's powers of two, a sampled block's
        seeds) or random (road deletions, shared hub sources) land near the target; see
        ``docs/datasets.md`` for each family's rule.
        """
        missing = [name for name in ("num_edges", "ordering", *self.space) if name not in parameters]
        if missing:
            raise ValueError(f"parameters of family {self.name!r} lack {missing}; draw them with "
                             f"FAMILIES[{self.name!r}].draw(rng)")
        num_edges = check_int("parameters['num_edges']", parameters["num_edges"], 1)
        if max_edges is not None:
            num_edges = min(num_edges, check_int("max_edges", max_edges, 1))
        device = torch.device(device)
        graph = self.builder(parameters, num_edges, seed, device, max_edges)
        return reorder(graph, parameters["ordering"], seed=seed + 1)


# ---------------------------------------------------------------------- builders
# Each maps a target edge count to the family's sizes, and caps row means at
# sqrt(num_edges) so that a row's mean length fits the node count even at a thousand edges.


def _nodes(num_edges: int, mean: float) -> tuple[int, float]:
    """``(n, num_edges / n)``: ``n`` rows of mean about ``mean``, with ``n >= sqrt(num_edges)``."""
    n = max(math.ceil(math.sqrt(num_edges)), round(num_edges / mean))
    return n, num_edges / n


def _degree_law(law: str, mean: float, p: Mapping[str, Any]) -> LogNormal | PowerLaw | Regular:
    if law == "lognormal":
        return LogNormal(mean, p["cov"])
    if law == "power_law":
        return PowerLaw(mean, p["exponent"])
    return Regular(mean, p["jitter"] * mean)


def _law_builder(law: str) -> Builder:
    def build(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
        n, mean = _nodes(num_edges, p["mean_degree"])
        return random_graph(n, _degree_law(law, mean, p), seed=seed, device=device)
    return build


def _community(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    n, mean = _nodes(num_edges, p["mean_degree"])
    size = max(1, min(p["community_size"], n // 4))  # at least four communities
    return community_graph(n, LogNormal(mean, p["cov"]), size, p["inside_probability"], seed=seed, device=device)


def _block_model(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    n, _mean = _nodes(num_edges, p["mean_degree"])
    return block_model_graph(n, num_edges, min(p["num_blocks"], n), size_spread=p["size_spread"],
                             within_fraction=p["within_fraction"], affinity_spread=p["affinity_spread"],
                             seed=seed, device=device)


def _hubs(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    # Giant rows take at most half the edges; the rest is split between ordinary rows and
    # the shared sources, ``n (mean + hub_columns * share)``.
    mean = min(p["mean_degree"], math.sqrt(num_edges / 2))
    hub_degree = min(p["hub_row_degree"], num_edges // (2 * p["hub_rows"]))
    per_row = mean + p["hub_columns"] * p["hub_column_share"]
    n = round((num_edges - p["hub_rows"] * hub_degree) / per_row)
    if hub_degree > n:  # a giant row reads each node at most once on average: n (per_row + hub_rows) edges
        n = round(num_edges / (per_row + p["hub_rows"]))
        hub_degree = n
    n = max(n, math.ceil(mean), p["hub_rows"])
    return hub_graph(n, LogNormal(mean, p["cov"]), hub_rows=p["hub_rows"], hub_row_degree=min(hub_degree, n),
                     hub_columns=min(p["hub_columns"], n), hub_column_share=p["hub_column_share"],
                     seed=seed, device=device)


def _rmat(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    scale = max(1, math.floor(math.log2(max(num_edges / p["edge_factor"], 2))))
    return rmat_graph(scale, max(1, num_edges >> scale), a=p["a"], b=p["b"], c=p["c"], simple=p["simple"],
                      seed=seed, device=device)


def _largest(count: Callable[[int], int], num_edges: int) -> int:
    """The largest ``k >= 1`` with ``count(k) <= num_edges`` (1 if none), ``count`` increasing."""
    lo, hi = 1, 2
    while count(hi) <= num_edges:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) <= num_edges else (lo, mid)
    return lo


def _lattice(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    stencil, aspect = p["stencil"], p["aspect"]
    planar = stencil in (4, 8)

    def shape(k: int, long_side: int | None = None) -> tuple[int, ...]:
        long_side = max(1, round(aspect * k)) if long_side is None else long_side
        return (k, long_side) if planar else (k, k, long_side)

    # The largest box of this aspect, then its long side stretched to the edge budget.
    k = _largest(lambda k: lattice_edge_count(shape(k), stencil), num_edges)
    long_side = _largest(lambda w: lattice_edge_count(shape(k, w), stencil), num_edges)
    return lattice_graph(shape(k, long_side), stencil, device=device)


def _road(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    nodes = num_edges / (4 * (1 - p["deletion"]) + 2 * p["shortcuts"])
    height = max(1, math.floor(math.sqrt(nodes / p["aspect"])))
    width = max(1, math.floor(nodes / height))
    return road_graph(height, width, deletion=p["deletion"], shortcuts=p["shortcuts"], seed=seed, device=device)


def _bipartite(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    ratio = p["src_per_dst"]
    # A mean of at least src_per_dst keeps num_src <= num_edges (the source features stay
    # proportional to the edges, as in a sampled block), and at most sqrt(src_per_dst E)
    # keeps it <= num_src.
    mean = min(max(p["mean_degree"], ratio, 1.0), math.sqrt(ratio * num_edges))
    num_dst = max(1, round(num_edges / mean))
    num_src = max(1, round(ratio * num_dst))
    law = _degree_law(p["law"], min(num_edges / num_dst, num_src), p)
    return random_graph(num_dst, law, num_src=num_src, seed=seed, device=device)


def _banded(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    n, mean = _nodes(num_edges, p["mean_degree"])
    return banded_graph(n, LogNormal(mean, p["cov"]), p["bandwidth"], seed=seed, device=device)


def _popular(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    # Sized as _bipartite: num_src <= num_edges, and a row's mean length <= num_src.
    ratio = p["src_per_dst"]
    mean = min(max(p["mean_degree"], ratio, 1.0), math.sqrt(ratio * num_edges))
    num_dst = max(1, round(num_edges / mean))
    num_src = max(1, round(ratio * num_dst))
    law = LogNormal(min(num_edges / num_dst, num_src), p["cov"])
    return popular_graph(num_dst, law, p["popularity"], num_src=num_src, seed=seed, device=device)


def _sampled(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device,
             max_edges: int | None) -> Graph:
    fanout, hops, mean = p["fanout"], p["hops"], p["base_mean_degree"]
    # Enough base nodes that sampling min(fanout, degree) sources of every node would give
    # twice the block's edges, and at least four times its edges; within max_edges (else
    # 16 times the block's edges).
    base_edges = max(4 * num_edges, math.ceil(2 * num_edges * mean / min(fanout, mean)))
    base_edges = min(base_edges, 16 * num_edges if max_edges is None else max(max_edges, num_edges))
    n, mean = _nodes(base_edges, mean)
    if p["base"] == "power_law":
        base = random_graph(n, PowerLaw(mean, 2.5), seed=seed, device=device)
    elif p["base"] == "community":
        base = community_graph(n, LogNormal(mean, 1.0), 4096, 0.8, seed=seed, device=device)
    else:
        scale = max(1, math.ceil(math.log2(n)))
        base = rmat_graph(scale, max(1, base_edges >> scale), seed=seed, device=device)
        base = reorder(base, "random", seed=seed)  # spread the hubs over the id range, as Graph500 does
    # The input block has at most seeds * (1 + fanout)^(hops - 1) destinations of fanout
    # sources each; overlap and rows shorter than the fanout make it smaller, so the seed
    # count is then corrected by the measured edges per seed (aiming at 85% of the target
    # so that the noise of the next draw stays below it), up to three times.
    reach = fanout * (1 + fanout) ** (hops - 1) if p["layer"] == "input" else fanout
    seeds = max(1, min(base.num_dst, round(num_edges / reach)))
    for attempt in range(4):
        blocks = sample_blocks(base, seeds, [fanout] * hops, seed=seed + 2 + attempt)
        block = (blocks[0] if p["layer"] == "input" else blocks[-1]).graph
        ratio = block.num_edges / num_edges
        corrected = max(1, min(base.num_dst, round(0.85 * seeds / max(ratio, 1e-9))))
        if 0.6 <= ratio <= 1.0 or corrected == seeds:
            break
        seeds = corrected
    return block


def _citation(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    # Paper i cites at most i papers, so n papers hold at most n (n - 1) / 2 citations: at
    # least 2 sqrt(E) papers, twice the other families' floor, keep the rows' mean within
    # a quarter of the papers.
    n = max(2, math.ceil(2 * math.sqrt(num_edges)), round(num_edges / p["mean_degree"]))
    mean = num_edges / n
    # The first rows fall short of the law, about mean^2 / 2 edges in all, so the rows'
    # mean is raised by that much.
    mean = min(mean * (1 + mean / (2 * n)), (n - 1) / 2)
    return citation_graph(n, LogNormal(mean, p["cov"]), p["preferential"], p["window"], seed=seed, device=device)


def _cliques(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    # Lognormal group sizes, none making more than a quarter of the edges (a group of s
    # makes s (s - 1)), drawn once; the groups are a prefix of them.
    largest = max(2, min(_MAX_GROUP, math.floor(math.sqrt(num_edges / 4)) + 1))
    mean, cov = min(p["mean_size"], largest), p["size_cov"]
    sigma = math.sqrt(math.log1p(cov * cov))
    rng = np.random.default_rng(seed)
    sizes = np.empty(0, dtype=np.int64)
    while (sizes * (sizes - 1)).sum() < 2 * num_edges:
        draws = mean * np.exp(sigma * rng.standard_normal(max(16, num_edges // 64)) - sigma * sigma / 2)
        sizes = np.concatenate([sizes, np.clip(np.round(draws), 2, largest).astype(np.int64)])
    reach = np.cumsum(sizes * (sizes - 1))
    # At least 4 sqrt(E) nodes: on fewer, pairs met twice would eat most of the edges.
    groups = int(np.searchsorted(reach, num_edges, side="right"))
    nodes = max(largest, round(groups * mean / p["memberships"]), math.ceil(4 * math.sqrt(num_edges)))

    def build(target: float) -> Graph:
        count = max(1, int(np.searchsorted(reach, target, side="right")))
        return clique_graph(nodes, torch.from_numpy(sizes[:count]), popularity=p["popularity"],
                            local_share=p["local_share"], window=p["window"], seed=seed, device=device)

    # The groups' pairs stop at E; pairs met twice make fewer, so one more prefix makes up
    # the measured share, aiming a little low (kept only where it stays within 5% of E).
    g = build(num_edges)
    if g.num_edges < 0.9 * num_edges:
        again = build(min(reach[-1], 0.97 * num_edges * num_edges / max(g.num_edges, 1)))
        g = again if again.num_edges <= 1.05 * num_edges else g
    return g


_MAX_GROUP = 128


def _knn(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    def graph(n: int, k: int) -> Graph:
        clusters = p["clusters"] if p["points"] == "clustered" else 0
        return knn_graph(point_cloud(n, p["dim"], clusters, seed=seed, device=device), k,
                         symmetric=p["symmetric"])

    k = max(1, min(p["k"], math.floor(math.sqrt(num_edges))))
    n = max(k + 1, round(num_edges / k))
    if p["symmetric"]:
        # Symmetrising adds 7-30% of n k edges (more when clustered, fewer at large k and
        # on tiny clouds): measured on a pilot cloud of the same kind, exact and cheap.
        pilot = min(n, EXACT_POINTS // 2)
        growth = graph(pilot, min(k, pilot - 1)).num_edges / (pilot * min(k, pilot - 1))
        n = max(k + 1, round(num_edges / (growth * k)))
    return graph(n, k)


def _molecules(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    d, loops = p["mean_degree"], int(p["self_loops"])
    mean_nodes = min(p["mean_nodes"], max(MIN_GRAPH_NODES, math.sqrt(num_edges)))
    per_graph = mean_nodes * (d + loops) - (d if d < 2 else 0)  # below d = 2: a forest of n - 1 tree bonds

    def batch(graphs: int) -> Graph:
        return small_graph_batch(graphs, mean_nodes, d, size_cov=p["size_cov"], self_loops=p["self_loops"],
                                 seed=seed, device=device)

    graphs = max(1, round(num_edges / per_graph))
    g = batch(graphs)
    # Merged bonds leave small dense graphs short of d: correct the count once by the
    # measured edges per graph, aiming a little low so that the noise stays below E.
    if g.num_edges < 0.9 * num_edges:
        g = batch(max(1, round(0.98 * graphs * num_edges / max(g.num_edges, 1))))
    return g


def _small_world(p: Mapping[str, Any], num_edges: int, seed: int, device: torch.device, _: int | None) -> Graph:
    k = 2 * max(1, min(p["ring_neighbours"], math.floor(math.sqrt(num_edges) / 2)))
    return small_world_graph(max(k + 1, round(num_edges / k)), k, p["rewire"], seed=seed, device=device)


_LOGNORMAL_COV = Range(0.2, 2.5)
_POWER_LAW_EXPONENT = Range(2.1, 3.5)
_REGULAR_JITTER = Range(0.0, 0.5)

FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("lognormal", "square, lognormal row lengths, uniform sources",
           {"mean_degree": Range(2, 512, log=True), "cov": _LOGNORMAL_COV}, _law_builder("lognormal")),
    Family("power_law", "square, Pareto row lengths (heavy tail), uniform sources",
           {"mean_degree": Range(2, 256, log=True), "exponent": _POWER_LAW_EXPONENT}, _law_builder("power_law")),
    Family("regular", "square, near-constant row lengths, uniform sources",
           {"mean_degree": Range(1, 128, log=True), "jitter": _REGULAR_JITTER}, _law_builder("regular")),
    Family("community", "square, sources inside the row's community of consecutive ids with probability p",
           {"mean_degree": Range(4, 512, log=True), "cov": Range(0.2, 2.0),
            "community_size": Range(64, 65536, log=True, integer=True),
            "inside_probability": Range(0.3, 0.98)}, _community),
    Family("block_model", "stochastic block model, unequal blocks, uneven block affinities",
           {"mean_degree": Range(4, 256, log=True), "num_blocks": Range(2, 1024, log=True, integer=True),
            "size_spread": Range(0.0, 2.5), "within_fraction": Range(0.3, 0.95),
            "affinity_spread": Range(0.0, 2.0)}, _block_model),
    Family("hubs", "short rows, a few giant rows and a few sources read by a large share of rows",
           {"mean_degree": Range(2, 32, log=True), "cov": Range(0.1, 1.0),
            "hub_rows": Range(1, 16, log=True, integer=True),
            "hub_row_degree": Range(1_000, 300_000, log=True, integer=True),
            "hub_columns": Range(0, 8, integer=True), "hub_column_share": Range(0.05, 0.8)}, _hubs),
    Family("rmat", "R-MAT / Kronecker (Graph500-like skew), duplicates and self loops kept or removed",
           {"edge_factor": Range(4, 64, log=True, integer=True), "a": Range(0.45, 0.6),
            "b": Range(0.1, 0.19), "c": Range(0.1, 0.19), "simple": Choice((False, True))}, _rmat),
    Family("lattice", "2-D and 3-D lattices, 4/8/6/26-neighbour stencils, elongated boxes",
           {"stencil": Choice((4, 8, 6, 26)), "aspect": Range(1, 16, log=True)}, _lattice),
    Family("road", "2-D grid with random road deletions and a few long-range shortcuts",
           {"deletion": Range(0.05, 0.4), "shortcuts": Range(0.0, 0.02), "aspect": Range(1, 4, log=True)}, _road),
    Family("bipartite", "num_src != num_dst (tall and wide), any degree law, uniform sources",
           {"law": Choice(("lognormal", "power_law", "regular")), "src_per_dst": Range(0.01, 100, log=True),
            "mean_degree": Range(2, 128, log=True), "cov": _LOGNORMAL_COV,
            "exponent": _POWER_LAW_EXPONENT, "jitter": _REGULAR_JITTER}, _bipartite),
    Family("banded", "square, every source within a band of ids around its row (wrapped at the ends)",
           {"mean_degree": Range(2, 256, log=True), "cov": Range(0.1, 1.5),
            "bandwidth": Range(4, 65536, log=True, integer=True)}, _banded),
    Family("popular", "tall or wide, lognormal row lengths, Zipf-popular sources (few sources feed most rows)",
           {"src_per_dst": Range(0.1, 10, log=True), "mean_degree": Range(2, 128, log=True),
            "cov": Range(0.2, 1.5), "popularity": Range(0.5, 1.3)}, _popular),
    Family("sampled", "mini-batch blocks of uniform neighbour sampling from a larger base graph",
           {"base": Choice(("power_law", "community", "rmat")), "base_mean_degree": Range(8, 64, log=True),
            "hops": Range(1, 3, integer=True), "fanout": Range(2, 32, log=True, integer=True),
            "layer": Choice(("input", "output"))}, _sampled),
    Family("knn", "k nearest neighbours of a 2-D or 3-D point cloud (uniform or clustered), Morton order",
           {"k": Range(4, 64, log=True, integer=True), "dim": Range(2, 3, integer=True),
            "points": Choice(("uniform", "clustered")), "clusters": Range(1, 1024, log=True, integer=True),
            "symmetric": Choice((False, True))}, _knn),
    Family("molecules", "block-diagonal batch of small sparse graphs (trees plus rings), as a molecule loader",
           {"mean_nodes": Range(8, 300, log=True), "size_cov": Range(0.1, 1.2),
            "mean_degree": Range(1.5, 6, log=True), "self_loops": Choice((False, True))}, _molecules),
    Family("citation", "papers in arrival order citing earlier ones, by citations held (Price's model) or recency",
           {"mean_degree": Range(2, 64, log=True), "cov": Range(0.2, 1.5), "preferential": Range(0.0, 1.0),
            "window": Range(16, 1_000_000, log=True, integer=True)}, _citation),
    Family("cliques", "groups joining all their members (co-authorship, co-purchase), local or by popularity",
           {"mean_size": Range(2.5, 24, log=True), "size_cov": Range(0.2, 1.5),
            "memberships": Range(1, 12, log=True), "popularity": Range(0.0, 1.1), "local_share": Range(0.0, 1.0),
            "window": Range(16, 65536, log=True, integer=True)}, _cliques),
    Family("small_world", "Watts-Strogatz ring lattice with a share of its edges rewired to uniform nodes",
           {"ring_neighbours": Range(1, 32, log=True, integer=True), "rewire": Range(0.001, 0.5, log=True)},
           _small_world),
)}
"""Every :class:`Family` of the tuning corpus by name (see ``docs/datasets.md``)."""


def corpus(
    families: Iterable[str] | None = None,
    count: int = 4,
    *,
    seed: int = 0,
    min_edges: int = MIN_EDGES,
    max_edges: int = 10_000_000,
    device: torch.device | str = "cpu",
) -> Iterator[tuple[str, dict[str, Any], Graph]]:
    """Yield ``count`` graphs of each family as ``(name, parameters, graph)``, deterministically.

    Sizes are stratified log-uniformly: a family's ``i``-th graph (in a random order)
    targets ``exp`` of a uniform draw from the ``i``-th of ``count`` equal slices of
    ``[log min_edges, log max_edges]``. Graphs come round-robin over the families, so a
    stream cut short still covers them all. A family's graphs depend only on its name,
    ``seed``, ``count`` and the edge range, not on the other families requested.
    ``parameters["seed"]`` is the seed the graph was built with:
    ``FAMILIES[name].build(parameters, seed=parameters["seed"], max_edges=max_edges)``
    rebuilds it.

    Args:
        families: names of :data:`FAMILIES`; ``None`` for all.
        count: graphs per family, ``>= 1``.
        seed: corpus seed, ``>= 0``.
        min_edges, max_edges: target edge range, ``1 <= min_edges <= max_edges``.
        device: where the graphs are built.
    """
    names = list(FAMILIES) if families is None else list(families)
    unknown = [name for name in names if name not in FAMILIES]
    if unknown or not names:
        raise ValueError(f"families must be a non-empty selection of {sorted(FAMILIES)}, got {names}")
    count = check_int("count", count, 1)
    seed = check_int("seed", seed, 0)
    min_edges = check_int("min_edges", min_edges, 1)
    max_edges = check_int("max_edges", max_edges, min_edges)
    drawn = {}
    for name in names:
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        slices = (rng.permutation(count) + rng.uniform(size=count)) / count
        sizes = np.exp(math.log(min_edges) + slices * (math.log(max_edges) - math.log(min_edges)))
        drawn[name] = []
        for size in sizes:
            parameters = FAMILIES[name].draw(rng, num_edges=min(max_edges, max(min_edges, round(size))))
            parameters["seed"] = int(rng.integers(0, 2**31))
            drawn[name].append(parameters)
    for i in range(count):
        for name in names:
            parameters = drawn[name][i]
            graph = FAMILIES[name].build(parameters, seed=parameters["seed"], device=device, max_edges=max_edges)
            yield name, dict(parameters), graph
