"""Random graph families: degree laws, bipartite shapes, communities, block models, hubs,
banded matrices, popular sources, citations and co-membership cliques.

Every family is a function of explicit parameters and a ``seed``, built with vectorised
torch on ``device`` (CPU or CUDA; the graph is a function of the arguments and the device
type). Rows are destinations and each row's sources are sorted. Sources are drawn with
replacement, so a row may repeat a source (a multi-edge), as in the source papers'
generators. Node ids come in the family's natural order (communities and blocks hold
consecutive ids); :mod:`~gsparse.datasets.orderings` relabels them.

Row lengths follow a *degree law*: :class:`~gsparse.datasets.LogNormal`,
:class:`~gsparse.datasets.PowerLaw` or :class:`Regular`, realised as the law's quantiles
at ``(i + 1/2) / num_rows`` (so the mean is exact and the shape holds at any size),
assigned to rows in a random order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..graph import Graph
from ._edges import (check_fraction, check_int, check_seed, generator, graph_from_pairs, graph_from_rows,
                     rows_of, uniform_below)
from .synthetic import LogNormal, PowerLaw, _check_real, _fit_total, _midpoint_quantiles, _round_to_total

__all__ = ["Regular", "DegreeLaw", "random_graph", "community_graph", "block_model_graph", "hub_graph",
           "banded_graph", "popular_graph", "citation_graph", "clique_graph"]


@dataclass(frozen=True)
class Regular:
    """Near-constant row lengths: spread evenly over ``[mean - jitter, mean + jitter]``.

    ``jitter = 0`` with an integer ``mean`` gives every row exactly ``mean`` sources; a
    fractional mean mixes ``floor(mean)`` and ``ceil(mean)``.
    """

    mean: float
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if _check_real("Regular.mean", self.mean) <= 0:
            raise ValueError(f"Regular.mean must be positive, got {self.mean}")
        if not 0 <= _check_real("Regular.jitter", self.jitter) <= self.mean:
            raise ValueError(f"Regular.jitter must lie in [0, mean = {self.mean}], got {self.jitter}")


DegreeLaw = LogNormal | PowerLaw | Regular
"""A row-length (in-degree) law: :class:`LogNormal`, :class:`PowerLaw` or :class:`Regular`."""


def _row_lengths(degree: DegreeLaw, num_rows: int, cap: int, gen: torch.Generator,
                 device: torch.device) -> torch.Tensor:
    """``[num_rows]`` int64 row lengths in random row order, summing to ``round(num_rows * mean)``.

    Quantiles ``w_i`` of the law at ``(i + 1/2) / num_rows``, scaled to the total with no
    row above ``cap`` (the number of sources; see ``_fit_total``), rounded keeping the
    total. LogNormal: ``w = exp(sigma z)`` with ``sigma^2 = ln(1 + cov^2)``, so the COV of
    the lengths is ``cov`` up to rounding, the cap and the finite sample's missing tail.
    PowerLaw: ``w = (1 - u)^(-1 / (exponent - 1))``.
    """
    if not isinstance(degree, (LogNormal, PowerLaw, Regular)):
        raise TypeError(f"degree must be a LogNormal, PowerLaw or Regular, got {type(degree).__name__}")
    if degree.mean > cap:
        raise ValueError(f"degree.mean = {degree.mean} exceeds num_src = {cap}: "
                         f"a row's sources are drawn from num_src nodes")
    total = round(num_rows * degree.mean)
    if total == 0:
        raise ValueError(f"degree.mean = {degree.mean} on {num_rows} rows rounds to no edges at all")
    u = _midpoint_quantiles(num_rows, device)
    if isinstance(degree, LogNormal):
        w = torch.exp(math.sqrt(math.log1p(degree.cov ** 2)) * torch.special.ndtri(u))
    elif isinstance(degree, PowerLaw):
        w = torch.exp(-torch.log1p(-u) / (degree.exponent - 1))
    else:
        w = 1 + (degree.jitter / degree.mean) * (2 * u - 1)
    lengths = _round_to_total(_fit_total(w, total, cap), total)
    return lengths[torch.randperm(num_rows, generator=gen, device=device)]


def random_graph(
    num_dst: int,
    degree: DegreeLaw,
    *,
    num_src: int | None = None,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """Row lengths from ``degree``, sources uniform over ``num_src`` nodes.

    Square with ``num_src = None`` (the default); bipartite otherwise, tall
    (``num_src >> num_dst``: few rows, many candidate sources, little reuse of each) or
    wide (``num_src << num_dst``: every source read by many rows).

    Args:
        num_dst: destination nodes (rows), ``>= 1``.
        degree: row-length law; ``degree.mean <= num_src``.
        num_src: source nodes, ``>= 1``; ``None`` for ``num_dst``.
        seed: random seed.
        device: where the graph is built.

    Returns:
        A graph with ``round(num_dst * degree.mean)`` edges.
    """
    num_dst = check_int("num_dst", num_dst, 1)
    num_src = num_dst if num_src is None else check_int("num_src", num_src, 1)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    lengths = _row_lengths(degree, num_dst, num_src, gen, device)
    num_edges = int(lengths.sum())
    col = torch.randint(0, num_src, (num_edges,), generator=gen, device=device)
    return graph_from_rows(lengths, rows_of(lengths, num_edges), col, num_src)


def community_graph(
    num_nodes: int,
    degree: DegreeLaw,
    community_size: int,
    inside_probability: float,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """Communities of consecutive ids; each source lies in its row's community with probability p.

    Node ``v`` belongs to community ``v // community_size`` (the last may be smaller).
    Each edge of row ``v`` independently draws its source uniformly inside ``v``'s
    community with probability ``p = inside_probability``, else uniformly among the nodes
    outside it; so the expected share of in-community edges is exactly ``p`` (all of them
    when one community holds every node).

    Args:
        num_nodes: nodes (rows and sources), ``>= 1``.
        degree: row-length law; ``degree.mean <= num_nodes``.
        community_size: nodes per community, ``>= 1``.
        inside_probability: ``p`` in ``[0, 1]``.
        seed: random seed.
        device: where the graph is built.
    """
    n = check_int("num_nodes", num_nodes, 1)
    size = check_int("community_size", community_size, 1)
    p = check_fraction("inside_probability", inside_probability)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    lengths = _row_lengths(degree, n, n, gen, device)
    num_edges = int(lengths.sum())
    start = torch.div(torch.arange(n, device=device), size, rounding_mode="floor") * size
    inside_count = torch.clamp(n - start, max=size)
    outside_count = n - inside_count
    inside = torch.binomial(lengths.double(), torch.full((n,), p, dtype=torch.float64, device=device),
                            generator=gen).long()
    inside = torch.where(outside_count == 0, lengths, inside)
    # Each row is two segments, its community then the rest; a draw v of a segment is the
    # node first + v + skip * (v >= hole), which for the rest skips the community's ids.
    zeros = torch.zeros_like(start)
    counts = torch.stack([inside, lengths - inside], 1).flatten()
    first = torch.stack([start, zeros], 1).flatten()
    span = torch.stack([inside_count, torch.clamp(outside_count, min=1)], 1).flatten()
    hole = torch.stack([torch.full_like(start, n), start], 1).flatten()
    skip = torch.stack([zeros, inside_count], 1).flatten()
    seg = rows_of(counts, num_edges)
    v = uniform_below(span[seg], gen)
    col = first[seg] + v + skip[seg] * (v >= hole[seg])
    return graph_from_rows(lengths, torch.div(seg, 2, rounding_mode="floor"), col, n)


def block_model_graph(
    num_nodes: int,
    num_edges: int,
    num_blocks: int,
    *,
    size_spread: float = 1.0,
    within_fraction: float = 0.7,
    affinity_spread: float = 1.0,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """A stochastic block model with unequal blocks of consecutive ids and uneven affinities.

    Block sizes are ``1 + `` shares of ``num_nodes - num_blocks`` proportional to the
    lognormal quantiles ``exp(size_spread z)``, in a random block order. Edge counts per
    (destination block ``a``, source block ``b``) are fixed, ``E_ab ∝ n_a s_ab``: every
    node expects the same in-degree, a row takes ``within_fraction`` of its sources from
    its own block (``s_aa``) and the rest from block ``b != a`` with weight
    ``n_b exp(affinity_spread g_ab)``, ``g_ab ~ N(0, 1)`` (``affinity_spread = 0``: in
    proportion to block size). Each edge of a block pair then joins a uniform destination
    of ``a`` to a uniform source of ``b``, so in-degrees within a block are multinomial.

    Args:
        num_nodes: nodes, ``>= num_blocks``.
        num_edges: edges, ``>= 1``.
        num_blocks: blocks, ``>= 1``.
        size_spread: lognormal sigma of the block sizes (0: equal sizes), in ``[0, 4]``.
        within_fraction: share of each row's sources in its own block, in ``[0, 1]``
            (1 when there is a single block).
        affinity_spread: lognormal sigma of the between-block weights, in ``[0, 4]``.
        seed: random seed.
        device: where the graph is built.
    """
    n = check_int("num_nodes", num_nodes, 1)
    num_edges = check_int("num_edges", num_edges, 1)
    k = check_int("num_blocks", num_blocks, 1, n)
    size_spread = check_fraction("size_spread", size_spread, 0.0, 4.0)
    q = check_fraction("within_fraction", within_fraction)
    affinity_spread = check_fraction("affinity_spread", affinity_spread, 0.0, 4.0)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    w = torch.exp(size_spread * torch.special.ndtri(_midpoint_quantiles(k, device)))
    sizes = 1 + _round_to_total(w * ((n - k) / w.sum()), n - k)
    sizes = sizes[torch.randperm(k, generator=gen, device=device)]
    starts = torch.cumsum(sizes, 0) - sizes
    if k == 1:
        share = torch.ones(1, 1, dtype=torch.float64, device=device)
    else:
        affinity = torch.exp(affinity_spread * torch.randn(k, k, generator=gen, device=device,
                                                           dtype=torch.float64))
        affinity.fill_diagonal_(0)
        others = sizes.double()[None, :] * affinity
        share = (1 - q) * others / others.sum(1, keepdim=True)
        share.diagonal().fill_(q)
    weight = sizes.double()[:, None] / n * share
    counts = _round_to_total(weight.flatten() * (num_edges / weight.sum()), num_edges)
    pair = torch.repeat_interleave(torch.arange(k * k, device=device), counts, output_size=num_edges)
    a = torch.div(pair, k, rounding_mode="floor")
    b = pair - a * k
    dst = starts[a] + uniform_below(sizes[a], gen)
    src = starts[b] + uniform_below(sizes[b], gen)
    return graph_from_pairs(dst, src, n, n)


def hub_graph(
    num_nodes: int,
    degree: DegreeLaw,
    *,
    hub_rows: int = 4,
    hub_row_degree: int = 100_000,
    hub_columns: int = 4,
    hub_column_share: float = 0.5,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """Short rows with a few giant rows (in-hubs) and a few sources shared by many rows (out-hubs).

    Row lengths follow ``degree``; ``hub_rows`` random rows get ``hub_row_degree`` more
    sources; all sources are uniform. Then each of ``hub_columns`` random source nodes
    joins each row independently with probability ``hub_column_share``, so it feeds
    about that share of all rows.

    Args:
        num_nodes: nodes, ``>= 1``.
        degree: law of the ordinary rows; ``degree.mean <= num_nodes``.
        hub_rows: giant rows, in ``[0, num_nodes]``.
        hub_row_degree: extra sources of each giant row, in ``[0, num_nodes]``.
        hub_columns: shared sources, in ``[0, num_nodes]``.
        hub_column_share: probability that a shared source joins a row, in ``[0, 1]``.
        seed: random seed.
        device: where the graph is built.

    Returns:
        A graph with ``round(num_nodes * degree.mean) + hub_rows * hub_row_degree`` edges
        plus about ``num_nodes * hub_columns * hub_column_share``.
    """
    n = check_int("num_nodes", num_nodes, 1)
    hub_rows = check_int("hub_rows", hub_rows, 0, n)
    hub_row_degree = check_int("hub_row_degree", hub_row_degree, 0, n)
    hub_columns = check_int("hub_columns", hub_columns, 0, n)
    share = check_fraction("hub_column_share", hub_column_share)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    lengths = _row_lengths(degree, n, n, gen, device)
    lengths[torch.randperm(n, generator=gen, device=device)[:hub_rows]] += hub_row_degree
    num_edges = int(lengths.sum())
    dst = [rows_of(lengths, num_edges)]
    src = [torch.randint(0, n, (num_edges,), generator=gen, device=device)]
    for hub in torch.randperm(n, generator=gen, device=device)[:hub_columns]:
        joined = torch.nonzero(torch.rand(n, generator=gen, device=device) < share).flatten()
        dst.append(joined)
        src.append(hub.expand(joined.numel()))
    return graph_from_pairs(torch.cat(dst), torch.cat(src), n, n)


def banded_graph(
    num_nodes: int,
    degree: DegreeLaw,
    bandwidth: int,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """A banded matrix: every source of row ``v`` lies within ``bandwidth`` ids of ``v``.

    Row lengths follow ``degree``; each source is ``v + d`` with ``d`` uniform in
    ``[-bandwidth, bandwidth]``, wrapped around the ends (``mod num_nodes``), as a finite
    element or sequence matrix in a bandwidth-reducing order reads its neighbours.

    Args:
        num_nodes: nodes (rows and sources), ``>= 1``.
        degree: row-length law; ``degree.mean <= num_nodes``.
        bandwidth: half-width of the band, ``>= 0``.
        seed: random seed.
        device: where the graph is built.
    """
    n = check_int("num_nodes", num_nodes, 1)
    width = min(check_int("bandwidth", bandwidth, 0), n // 2)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    lengths = _row_lengths(degree, n, n, gen, device)
    num_edges = int(lengths.sum())
    row = rows_of(lengths, num_edges)
    offset = uniform_below(torch.full((num_edges,), 2 * width + 1, device=device), gen) - width
    return graph_from_rows(lengths, row, torch.remainder(row + offset, n), n)


def popular_graph(
    num_dst: int,
    degree: DegreeLaw,
    popularity: float,
    *,
    num_src: int | None = None,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """Row lengths from ``degree``, sources drawn by Zipf popularity: a few sources feed most rows.

    The source of popularity rank ``k`` (1-based, ranks given to the ids in a random order)
    is drawn with probability proportional to ``k ** -popularity``, as the items of a
    recommendation graph are: column lengths skewed, row lengths as the law says.

    Args:
        num_dst: destination nodes (rows), ``>= 1``.
        degree: row-length law; ``degree.mean <= num_src``.
        popularity: Zipf exponent, ``>= 0`` (0: uniform sources).
        num_src: source nodes, ``>= 1``; ``None`` for ``num_dst``.
        seed: random seed.
        device: where the graph is built.
    """
    num_dst = check_int("num_dst", num_dst, 1)
    num_src = num_dst if num_src is None else check_int("num_src", num_src, 1)
    if _check_real("popularity", popularity) < 0:
        raise ValueError(f"popularity must be >= 0, got {popularity}")
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    lengths = _row_lengths(degree, num_dst, num_src, gen, device)
    num_edges = int(lengths.sum())
    col = _zipf_draws(num_src, popularity, num_edges, gen)
    return graph_from_rows(lengths, rows_of(lengths, num_edges), col, num_src)


def _weighted_draws(weights: torch.Tensor, count: int, gen: torch.Generator) -> torch.Tensor:
    """``[count]`` int64 indices into ``weights`` (positive float64), each drawn with
    probability proportional to its weight."""
    cdf = torch.cumsum(weights, 0)
    draws = torch.rand(count, generator=gen, device=weights.device, dtype=torch.float64) * cdf[-1]
    return torch.clamp(torch.searchsorted(cdf, draws), max=len(weights) - 1)


def _zipf_draws(num_nodes: int, popularity: float, count: int, gen: torch.Generator) -> torch.Tensor:
    """``[count]`` node ids drawn by Zipf popularity: the node of rank ``k`` (1-based, ranks
    given to the ids in a random order) with weight ``k ** -popularity``."""
    device = gen.device
    weights = torch.arange(1, num_nodes + 1, device=device, dtype=torch.float64) ** -float(popularity)
    rank = _weighted_draws(weights, count, gen)
    return torch.randperm(num_nodes, generator=gen, device=device)[rank]


# Preferential draws see the citation counts as of the start of their round: the ids are
# cut into this many rounds of equal size, one vectorised step each.
CITATION_ROUNDS = 32


def citation_graph(
    num_nodes: int,
    degree: DegreeLaw,
    preferential: float,
    window: int,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """Papers in arrival order, each citing earlier ones: row ``i``'s sources are ids below ``i``.

    Reference lists (row lengths) follow ``degree``, each capped at the papers before it
    (so paper 0 cites none). A share ``preferential`` of the citations goes to earlier
    papers in proportion to the citations they already hold plus one (Price's model: the
    cited get cited more), the rest uniformly to the ``window`` papers just before the
    citing one (a field's recent work). So old papers become hubs of long columns while
    rows stay as the law says, and in natural order the graph is strictly lower
    triangular. Preferential draws see the counts as of the start of their round of
    ``num_nodes / CITATION_ROUNDS`` papers (the first round's draw uniformly from the
    papers before them), so that the graph builds in ``CITATION_ROUNDS`` (32) steps.

    Args:
        num_nodes: papers, ``>= 2``.
        degree: reference-list law; ``degree.mean < num_nodes``.
        preferential: share of citations drawn by citations held, in ``[0, 1]``.
        window: how many of the papers just before a paper its other citations come
            from, ``>= 1``.
        seed: random seed.
        device: where the graph is built.
    """
    num_nodes = check_int("num_nodes", num_nodes, 2)
    preferential = check_fraction("preferential", preferential)
    window = check_int("window", window, 1)
    if isinstance(degree, (LogNormal, PowerLaw, Regular)) and not degree.mean < num_nodes:
        raise ValueError(f"degree.mean must be below num_nodes = {num_nodes} (a paper cites only papers "
                         f"before it), got {degree.mean}")
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    ids = torch.arange(num_nodes, device=device)
    lengths = torch.minimum(_row_lengths(degree, num_nodes, num_nodes - 1, gen, device), ids)
    num_edges = int(lengths.sum())
    row = rows_of(lengths, num_edges)
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.int64, device=device)
    torch.cumsum(lengths, 0, out=rowptr[1:])
    # Recent work: uniform over [row - window, row), within the papers that exist.
    first = torch.clamp(row - window, min=0)
    col = first + uniform_below(row - first, gen)
    chosen = torch.rand(num_edges, generator=gen, device=device) < preferential
    cited = torch.zeros(num_nodes, dtype=torch.float64, device=device)
    starts = [round(k * num_nodes / CITATION_ROUNDS) for k in range(CITATION_ROUNDS + 1)]
    for start, end in zip(starts, starts[1:]):
        lo, hi = int(rowptr[start]), int(rowptr[end])
        if hi > lo:
            picks = lo + torch.nonzero(chosen[lo:hi]).view(-1)
            # the first round has no counts yet: any earlier paper
            col[picks] = (_weighted_draws(cited[:start] + 1, len(picks), gen) if start > 0
                          else uniform_below(row[picks], gen))
        cited += torch.bincount(col[lo:hi], minlength=num_nodes).to(torch.float64)
    return graph_from_rows(lengths, row, col, num_nodes)


def clique_graph(
    num_nodes: int,
    group_sizes: torch.Tensor,
    *,
    popularity: float = 0.0,
    local_share: float = 0.0,
    window: int = 1024,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """Groups (papers' authors, baskets' items) each joining all their members: the
    clique expansion of a random hypergraph, as co-authorship and co-purchase graphs are.

    A group draws its members from the ``window`` ids around a random centre (wrapped at
    the ends) with probability ``local_share`` (a field, a shop's aisle), else from all
    nodes by Zipf popularity (the node of rank ``k`` with weight ``k ** -popularity``,
    ranks given to the ids at random: prolific authors, best sellers). Every pair of a
    group's members is an edge both ways; pairs met in several groups, and a member drawn
    twice, count once, so the graph is symmetric and simple, with dense overlapping blocks
    no other family has.

    Args:
        num_nodes: nodes, ``>= 2``.
        group_sizes: ``[groups]`` integer sizes, each in ``[2, num_nodes]``; a group of
            ``s`` members makes at most ``s (s - 1)`` edges.
        popularity: Zipf exponent of the non-local draws, ``>= 0`` (0: uniform).
        local_share: share of groups drawn from a window, in ``[0, 1]``.
        window: ids a local group draws from, ``>= 2``.
        seed: random seed.
        device: where the graph is built.
    """
    num_nodes = check_int("num_nodes", num_nodes, 2)
    sizes = torch.as_tensor(group_sizes, device=device)
    if sizes.ndim != 1 or sizes.numel() == 0 or sizes.dtype.is_floating_point or sizes.dtype == torch.bool:
        raise ValueError(f"group_sizes must be a non-empty 1-D integer tensor, got {sizes.dtype} of shape "
                         f"{tuple(sizes.shape)}")
    sizes = sizes.long()
    if int(sizes.min()) < 2 or int(sizes.max()) > num_nodes:
        raise ValueError(f"group_sizes must lie in [2, num_nodes = {num_nodes}], got sizes from "
                         f"{int(sizes.min())} to {int(sizes.max())}")
    if _check_real("popularity", popularity) < 0:
        raise ValueError(f"popularity must be >= 0, got {popularity}")
    local_share = check_fraction("local_share", local_share)
    window = check_int("window", window, 2)
    device = torch.device(device)
    gen = generator(check_seed(seed), device)
    num_groups, slots = len(sizes), int(sizes.sum())
    group = torch.repeat_interleave(torch.arange(num_groups, device=device), sizes, output_size=slots)
    # Members: local groups within their window, the others by popularity.
    centre = uniform_below(torch.full((num_groups,), num_nodes, device=device), gen)
    span = min(window, num_nodes)
    local = (torch.rand(num_groups, generator=gen, device=device) < local_share)[group]
    near = (centre[group] - span // 2 + uniform_below(torch.full((slots,), span, device=device), gen)) % num_nodes
    member = torch.where(local, near, _zipf_draws(num_nodes, popularity, slots, gen))
    # Every (slot, slot of the same group) pair: slot i repeated by its group's size,
    # partnered with each slot of the group in turn.
    first_slot = torch.cumsum(sizes, 0) - sizes
    repeats = sizes[group]
    pairs = int(repeats.sum())
    this = torch.repeat_interleave(torch.arange(slots, device=device), repeats, output_size=pairs)
    start_of_run = torch.repeat_interleave(torch.cumsum(repeats, 0) - repeats, repeats, output_size=pairs)
    other = first_slot[group[this]] + torch.arange(pairs, device=device) - start_of_run
    return graph_from_pairs(member[this], member[other], num_nodes, num_nodes, simple=True)
