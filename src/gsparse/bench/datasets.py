"""Workload graphs: seeded synthetic generators, named presets, and loaders for real graphs.

Synthetic graphs are square (``num_src == num_dst == num_nodes``) CSRs over destination
rows, built with vectorised torch on the requested device: a 120M-edge graph takes
seconds on a GPU. Two choices shape them:

* the row-length (in-degree) distribution, :class:`LogNormal` or :class:`PowerLaw`;
* the column locality: uniform over all nodes, or :class:`Clustered` around each row's block.

Presets (:data:`PRESETS`) give synthetic stand-ins with the statistics of the source
papers' datasets; :func:`load_graph`, :func:`load_npz` and :func:`real_graph` read real ones.
"""

from __future__ import annotations

import math
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..graph import Graph

__all__ = [
    "LogNormal",
    "PowerLaw",
    "Clustered",
    "synthetic",
    "Preset",
    "PRESETS",
    "SUITES",
    "preset",
    "Dataset",
    "load_npz",
    "load_graph",
    "REAL_GRAPHS",
    "DATA_DIR_ENV",
    "data_dirs",
    "real_graph",
    "scale_for_edges",
    "Workload",
    "workload",
    "describe",
]


# ---------------------------------------------------------------------- distributions


def _check_real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


@dataclass(frozen=True)
class LogNormal:
    """Lognormal row lengths with a given ``mean`` and coefficient of variation ``cov``.

    ``X = exp(mu + sigma Z)`` with ``sigma^2 = ln(1 + cov^2)`` and ``mu = ln(mean) - sigma^2/2``
    has ``E[X] = mean`` and ``std(X)/E[X] = cov``. The generator then calibrates ``sigma``
    so that the *integer* row lengths (after rounding and the cap at ``num_nodes``) keep
    that COV, and fixes the total at ``round(num_nodes * mean)`` edges.
    """

    mean: float
    cov: float

    def __post_init__(self) -> None:
        if _check_real("LogNormal.mean", self.mean) <= 0:
            raise ValueError(f"LogNormal.mean must be positive, got {self.mean}")
        if _check_real("LogNormal.cov", self.cov) < 0:
            raise ValueError(f"LogNormal.cov must be >= 0, got {self.cov}")


@dataclass(frozen=True)
class PowerLaw:
    """Pareto (power-law) row lengths: density ``p(x) ∝ x^-exponent`` for ``x >= x_min``.

    ``x_min`` is set by the mean: ``E[X] = x_min (exponent - 1) / (exponent - 2)``, finite
    only for ``exponent > 2`` (real graphs: about 2 to 3). The tail is
    ``P(X > x) = (x / x_min)^-(exponent - 1)``.
    """

    mean: float
    exponent: float

    def __post_init__(self) -> None:
        if _check_real("PowerLaw.mean", self.mean) <= 0:
            raise ValueError(f"PowerLaw.mean must be positive, got {self.mean}")
        if _check_real("PowerLaw.exponent", self.exponent) <= 2:
            raise ValueError(f"PowerLaw.exponent must be > 2 for the mean to exist, got {self.exponent}")


@dataclass(frozen=True)
class Clustered:
    """Column locality: a ``fraction`` of each row's neighbours lie in its own block.

    Nodes are cut into blocks of ``block_size`` consecutive ids (the last one may be
    shorter); row ``v`` lies in block ``v // block_size``. ``round(fraction * len(v))`` of
    its neighbours are drawn uniformly inside that block, the rest uniformly over the
    nodes outside it, so the in-block fraction is exact per row (up to rounding).
    """

    fraction: float
    block_size: int

    def __post_init__(self) -> None:
        if not 0 <= _check_real("Clustered.fraction", self.fraction) <= 1:
            raise ValueError(f"Clustered.fraction must lie in [0, 1], got {self.fraction}")
        _check_int("Clustered.block_size", self.block_size, 1)


# ---------------------------------------------------------------------- row lengths

# The COV of the integer row lengths lands within this of the request (see _lognormal_lengths).
_COV_RTOL, _COV_ATOL = 0.01, 1e-3
_SIGMA_MAX = 16.0
_BISECT_STEPS = 60


def _midpoint_quantiles(n: int, device: torch.device) -> torch.Tensor:
    """``[n]`` probabilities ``(i + 1/2) / n``: the centres of n equal-probability strata."""
    return (torch.arange(n, dtype=torch.float64, device=device) + 0.5) / n


def _fit_total(w: torch.Tensor, total: int, cap: int) -> torch.Tensor:
    """``x = min(s w, cap)`` with the scale ``s`` that makes ``sum(x) = total`` (water filling).

    ``w`` is ``[n]``, ascending and positive; needs ``total <= n * cap``. With the top ``k``
    entries capped, ``s_k = (total - k cap) / sum(w[:n-k])``; the answer is the smallest
    ``k`` whose largest free entry fits, ``s_k w[n-k-1] <= cap`` (k = n - 1 always does).
    """
    n = w.numel()
    capped = torch.arange(n, device=w.device, dtype=torch.float64)
    last_free = n - 1 - torch.arange(n, device=w.device)
    scale = (total - capped * cap) / torch.cumsum(w, 0)[last_free]
    first_fit = (scale * w[last_free] <= cap).to(torch.uint8).argmax()
    return torch.clamp(scale[first_fit] * w, max=cap)


def _round_to_total(x: torch.Tensor, total: int) -> torch.Tensor:
    """Integers ``[n]`` within 1 of ``x``, summing to exactly ``total`` (cumulative rounding).

    ``len_i = round(C_i) - round(C_{i-1})`` for the prefix sums ``C`` of ``x``: the total is
    kept and, for an integer cap ``c``, ``x_i <= c`` implies ``len_i <= c``.
    """
    bounds = torch.floor(torch.cumsum(x, 0) + 0.5)
    bounds[-1] = total  # the float prefix sum is within far less than 1/2 of it: pin it exactly
    return torch.diff(bounds, prepend=bounds.new_zeros(1)).long()


def _cov(lengths: torch.Tensor) -> float:
    lengths = lengths.double()
    return float(lengths.std(unbiased=False) / lengths.mean())


def _lognormal_lengths(n: int, total: int, cov: float, device: torch.device) -> torch.Tensor:
    """Ascending ``[n]`` lognormal row lengths summing to ``total``, each ``<= n``, with COV ``cov``.

    Lengths are the quantiles of ``exp(sigma Z)`` at the stratum midpoints (``mu`` drops
    out: :func:`_fit_total` rescales). Rounding, the cap and the missing far tail of a
    finite sample all move the COV away from the analytic ``sqrt(exp(sigma^2) - 1)``, so
    ``sigma`` is found by bisection on the COV of the final integer lengths, which grows
    with ``sigma`` from the smallest COV integers with this mean allow towards the cap's
    bound ``sqrt((n - mean) / mean)``.
    """
    z = torch.special.ndtri(_midpoint_quantiles(n, device))

    def lengths(sigma: float) -> torch.Tensor:
        return _round_to_total(_fit_total(torch.exp(sigma * z), total, n), total)

    def close(c: float) -> bool:
        return abs(c - cov) <= _COV_RTOL * cov + _COV_ATOL

    mean = total / n
    result = lengths(0.0)
    smallest = _cov(result)
    if close(smallest):
        return result
    if smallest > cov:
        raise ValueError(f"LogNormal.cov = {cov} is below {smallest:.4g}, the smallest COV that "
                         f"integer row lengths with mean {mean:.6g} can have")
    largest = _cov(lengths(_SIGMA_MAX))
    if largest < cov and not close(largest):
        bound = math.sqrt((n - mean) / mean)
        raise ValueError(f"LogNormal.cov = {cov} is out of reach on num_nodes = {n} with mean {mean:.6g}: "
                         f"rows hold at most num_nodes neighbours, which bounds the COV by "
                         f"sqrt((num_nodes - mean) / mean) = {bound:.4g}")
    lo, hi = 0.0, _SIGMA_MAX
    for _ in range(_BISECT_STEPS):
        mid = (lo + hi) / 2
        result = lengths(mid)
        c = _cov(result)
        if close(c):
            break
        lo, hi = (mid, hi) if c < cov else (lo, mid)
    return result


def _power_law_lengths(n: int, total: int, exponent: float, device: torch.device) -> torch.Tensor:
    """Ascending ``[n]`` Pareto row lengths summing to ``total``, each ``<= n``.

    The Pareto quantile is ``x_min (1 - u)^(-1 / (exponent - 1))``; the scale is fixed by the total.
    """
    u = _midpoint_quantiles(n, device)
    w = torch.exp(-torch.log1p(-u) / (exponent - 1))
    return _round_to_total(_fit_total(w, total, n), total)


# ---------------------------------------------------------------------- columns


def _randint_below(high: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Uniform integers in ``[0, high)`` elementwise (modulo bias below ``high / 2^62``)."""
    draws = torch.randint(0, 2**62, high.shape, generator=gen, device=high.device)
    return torch.remainder(draws, high)


def _reject_duplicates(
    seg: torch.Tensor, size: torch.Tensor, v: torch.Tensor, stride: int, gen: torch.Generator
) -> torch.Tensor:
    """Redraw repeated values within each segment until all are distinct.

    The process treats all values alike, so the final set is a uniform random subset, as
    sampling without replacement gives. Every segment holds at most half its range, so each
    redraw succeeds with probability >= 1/2 and the rounds are few.
    """
    while True:
        sorted_key, order = torch.sort(seg * stride + v)
        again = order[1:][sorted_key[1:] == sorted_key[:-1]]
        if again.numel() == 0:
            return v
        v[again] = _randint_below(size[again], gen)


def _random_subsets(count: torch.Tensor, size: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """For each segment ``s``, ``count[s]`` distinct values of ``[0, size[s])``, segments in order.

    Enumerates every candidate, orders each segment's candidates randomly and keeps the
    first ``count[s]``: exact, and cheap because it is used only where ``count > size / 2``.
    """
    seg = torch.repeat_interleave(torch.arange(size.numel(), device=size.device), size)
    starts = torch.cumsum(size, 0) - size
    value = torch.arange(seg.numel(), device=size.device) - starts[seg]
    order = torch.argsort(torch.rand(seg.numel(), generator=gen, device=size.device, dtype=torch.float64))
    order = order[torch.argsort(seg[order], stable=True)]
    rank = torch.arange(seg.numel(), device=size.device) - starts[seg]  # seg[order] == seg
    return value[order][rank < count[seg]]


def _columns(
    deg: torch.Tensor, locality: Clustered | None, distinct: bool, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(row, col)``, each ``[E]`` int64, grouped by row in order, columns in draw order.

    Each row is cut into segments, each drawing uniformly from a range of nodes: one
    segment ``[0, n)`` for uniform locality; for :class:`Clustered`, the row's block and
    the nodes outside it. A draw ``v`` of a segment maps to node ``lo + v + skip * (v >= hole)``.
    """
    n = deg.numel()
    zeros, full = torch.zeros_like(deg), torch.full_like(deg, n)
    if locality is None:
        counts, lo, size, hole, skip = deg, zeros, full, full, zeros
    else:
        block = locality.block_size
        start = torch.arange(n, device=deg.device) // block * block
        inside = torch.clamp(n - start, max=block)
        outside = n - inside
        # Rows that cannot place their outside share there (too few outside nodes) keep more inside.
        least = torch.clamp(deg - outside, min=0) if distinct else torch.where(outside == 0, deg, zeros)
        most = inside if distinct else deg
        local = torch.minimum(torch.maximum(torch.round(locality.fraction * deg.double()).long(), least), most)
        counts = torch.stack([local, deg - local], 1).flatten()
        lo = torch.stack([start, zeros], 1).flatten()
        size = torch.stack([inside, outside], 1).flatten()
        hole = torch.stack([full, start], 1).flatten()
        skip = torch.stack([zeros, inside], 1).flatten()
    parts = counts.numel() // n
    seg = torch.repeat_interleave(torch.arange(counts.numel(), device=deg.device), counts,
                                  output_size=int(deg.sum()))
    v = _randint_below(size[seg], gen)
    if distinct:
        dense = 2 * counts > size
        dense_slot = dense[seg]
        if bool(dense.any()):
            v[dense_slot] = _random_subsets(counts[dense], size[dense], gen)
        sparse_slot = ~dense_slot
        v[sparse_slot] = _reject_duplicates(seg[sparse_slot], size[seg[sparse_slot]], v[sparse_slot], n, gen)
    col = lo[seg] + v + skip[seg] * (v >= hole[seg])
    return seg // parts, col


# ---------------------------------------------------------------------- synthetic graphs


def synthetic(
    num_nodes: int,
    degree: LogNormal | PowerLaw,
    *,
    locality: Clustered | None = None,
    sort_rows: bool = True,
    allow_duplicates: bool = True,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Graph:
    """A seeded random square graph with the requested row-length statistics.

    Row lengths: the ``num_nodes`` quantiles of ``degree`` at probabilities ``(i + 1/2) / n``,
    scaled to exactly ``round(num_nodes * degree.mean)`` edges, capped at ``num_nodes``,
    rounded to integers, and assigned to rows in a random order. Sampling the quantiles
    rather than i.i.d. draws keeps the mean and COV of the result on the request at any
    size and seed, heavy tails included; for :class:`LogNormal` the COV is calibrated
    (within 1%) after rounding and capping.

    Columns: uniform over all nodes (``locality=None``) or :class:`Clustered`. By default
    they are drawn with replacement, as in the source papers' generators, so a row may
    repeat a neighbour (a multi-edge); ``allow_duplicates=False`` draws each row's
    neighbours without replacement (uniform random subsets).

    Args:
        num_nodes: ``n``, number of nodes (rows and columns).
        degree: row-length distribution; its mean must not exceed ``num_nodes``.
        locality: column locality; ``None`` for uniform columns.
        sort_rows: sort each row's columns ascending (typical CSR input, kinder to caches);
            otherwise each row's columns come in random order.
        allow_duplicates: allow a row to list the same neighbour more than once.
        seed: random seed; the graph is a function of the arguments (and device type).
        device: where the graph is built and lives.

    Returns:
        A :class:`~gsparse.Graph` with ``num_src == num_dst == num_nodes`` and
        ``round(num_nodes * degree.mean)`` edges.
    """
    n = _check_int("num_nodes", num_nodes, 1)
    if not isinstance(degree, (LogNormal, PowerLaw)):
        raise TypeError(f"degree must be a LogNormal or a PowerLaw, got {type(degree).__name__}")
    if locality is not None and not isinstance(locality, Clustered):
        raise TypeError(f"locality must be None (uniform) or a Clustered, got {type(locality).__name__}")
    seed = _check_int("seed", seed, 0)
    device = torch.device(device)
    if degree.mean > n:
        raise ValueError(f"degree.mean = {degree.mean} exceeds num_nodes = {n}: "
                         f"a row holds at most num_nodes neighbours")
    total = round(n * degree.mean)
    if total == 0:
        raise ValueError(f"degree.mean = {degree.mean} on num_nodes = {n} rounds to no edges at all")

    if isinstance(degree, LogNormal):
        lengths = _lognormal_lengths(n, total, degree.cov, device)
    else:
        lengths = _power_law_lengths(n, total, degree.exponent, device)
    gen = torch.Generator(device=device).manual_seed(seed)
    deg = lengths[torch.randperm(n, generator=gen, device=device)]
    row, col = _columns(deg, locality, not allow_duplicates, gen)
    if sort_rows:
        # Rows are already grouped in ascending order, so sorting row * n + col keeps each
        # edge in its row and sorts the columns inside it.
        col = torch.sort(row * n + col).values - row * n
    else:
        key = row * 2**31 + torch.randint(0, 2**31, row.shape, generator=gen, device=device)
        col = col[torch.sort(key).indices]
    rowptr = torch.zeros(n + 1, dtype=torch.int64, device=device)
    torch.cumsum(deg, 0, out=rowptr[1:])
    return Graph.from_csr(rowptr, col, num_src=n)


# ---------------------------------------------------------------------- presets

_DEFAULT_COV = 1.0  # for the SpMM report's graphs, whose row-length COV is not published
_REPORT = "SpMM optimisation report (seed 004)"
_REPORT_DATA = "nodes and nnz of the report's data file"


@dataclass(frozen=True)
class Preset:
    """The statistics of a published graph, for a synthetic stand-in with lognormal rows."""

    name: str
    num_nodes: int
    num_edges: int
    cov: float
    description: str
    source: str

    @property
    def mean(self) -> float:
        """Mean row length ``num_edges / num_nodes``."""
        return self.num_edges / self.num_nodes

    @property
    def degree(self) -> LogNormal:
        return LogNormal(self.mean, self.cov)


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("reddit-like", 232_965, 114_615_892, 1.63,
           "Reddit posts, linked when one user commented on both (Hamilton et al.; DGL Reddit)",
           "G-Sparse, Tables III and V (COV 1.63, mean 492); the report's 'reddit.dgl'"),
    Preset("proteins-like", 132_534, 79_122_504, 1.04,
           "ogbn-proteins: proteins linked by biologically meaningful associations",
           "G-Sparse, Tables III and V (COV 1.04, mean 597); the report's 'protein'"),
    Preset("products-like", 2_449_029, 123_718_280, 1.88,
           "ogbn-products: Amazon products linked when bought together",
           "G-Sparse, Tables III and V (COV 1.88, mean 51); the report's 'products'"),
    Preset("arxiv-like", 169_343, 1_166_243, _DEFAULT_COV,
           "ogbn-arxiv citations; COV not published, default 1.0 (the report notes 36.6% empty "
           "rows and 30 rows over 5000: the real graph is far more skewed)",
           f"{_REPORT} 'arxiv'; {_REPORT_DATA} = ogbn-arxiv (OGB)"),
    Preset("collab-like", 235_868, 2_358_104, _DEFAULT_COV,
           "ogbl-collab co-authorship; COV not published, default 1.0",
           f"{_REPORT} 'collab'; {_REPORT_DATA} = ogbl-collab (OGB), both directions"),
    Preset("citation-like", 2_927_963, 30_387_995, _DEFAULT_COV,
           "ogbl-citation2 citations; COV not published, default 1.0",
           f"{_REPORT} 'citation'; {_REPORT_DATA} = ogbl-citation2 (OGB) training edges"),
    Preset("ddi-like", 4_267, 2_135_822, _DEFAULT_COV,
           "ogbl-ddi drug interactions, dense (mean 500); COV not published, default 1.0",
           f"{_REPORT} 'ddi'; {_REPORT_DATA} = ogbl-ddi (OGB) training edges, both directions"),
    Preset("ppa-like", 576_289, 42_463_862, _DEFAULT_COV,
           "ogbl-ppa protein associations; COV not published, default 1.0",
           f"{_REPORT} 'ppa'; {_REPORT_DATA} = ogbl-ppa (OGB) training edges, both directions"),
    Preset("youtube-like", 1_138_499, 5_980_886, _DEFAULT_COV,
           "YouTube friendships (Tang and Liu); COV not published, default 1.0",
           f"{_REPORT} 'youtube'; {_REPORT_DATA}, both directions"),
    Preset("amazon-like", 1_569_960, 264_339_468, _DEFAULT_COV,
           "AmazonProducts co-purchases (GraphSAINT, via CogDL); COV not published, default 1.0",
           f"{_REPORT} 'amazon_cogdl'; {_REPORT_DATA} = GraphSAINT AmazonProducts"),
    Preset("yelp-like", 716_847, 13_954_819, _DEFAULT_COV,
           "Yelp friendships (GraphSAINT); COV not published, default 1.0",
           f"{_REPORT} 'yelp'; {_REPORT_DATA} = GraphSAINT Yelp"),
    Preset("wikikg2-like", 2_500_604, 16_109_182, _DEFAULT_COV,
           "ogbl-wikikg2 Wikidata triples; COV not published, default 1.0 (the report notes "
           "0.1% of rows over 30 and none over 1000: the real graph is less skewed)",
           f"{_REPORT} 'wikikg2'; {_REPORT_DATA} = ogbl-wikikg2 (OGB) training triples"),
    Preset("am-like", 881_680, 5_668_682, _DEFAULT_COV,
           "AM RDF graph of the Amsterdam Museum (DGL); COV not published, default 1.0",
           f"{_REPORT} 'am'; {_REPORT_DATA} = DGL AMDataset"),
)}

# Named workloads: the graphs of each source document, in its order.
SUITES: dict[str, tuple[str, ...]] = {
    "gsparse": ("reddit-like", "proteins-like", "products-like"),
    "spmm-report": ("arxiv-like", "collab-like", "citation-like", "ddi-like", "proteins-like",
                    "ppa-like", "reddit-like", "products-like", "youtube-like", "amazon-like",
                    "yelp-like", "wikikg2-like", "am-like"),
}


def preset(name: str, *, scale: float = 1.0, seed: int = 0, device: torch.device | str = "cpu") -> Graph:
    """The synthetic stand-in for preset ``name`` (uniform columns, lognormal rows, sorted).

    ``scale`` multiplies the node count (``round(num_nodes * scale)`` nodes) and keeps the
    mean row length and its COV: ``scale=0.05`` gives a quick CPU-sized graph.
    """
    if name not in PRESETS:
        raise ValueError(f"name must be one of {sorted(PRESETS)}, got {name!r}")
    p = PRESETS[name]
    if _check_real("scale", scale) <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    num_nodes = round(p.num_nodes * scale)
    if num_nodes < p.mean:
        raise ValueError(f"scale = {scale} leaves {num_nodes} nodes for {name!r}, fewer than its mean row "
                         f"length {p.mean:.4g}; use scale >= {math.ceil(p.mean) / p.num_nodes:.3g}")
    return synthetic(num_nodes, p.degree, seed=seed, device=device)


def scale_for_edges(name: str, max_edges: int) -> float:
    """A scale for preset ``name`` with at most about ``max_edges`` edges (never above 1).

    Rows must stay a small part of the node count for the row-length distribution to keep
    its shape, so the scale never leaves fewer than 8 times the mean row length in nodes
    (which may exceed ``max_edges`` for the densest presets).
    """
    if name not in PRESETS:
        raise ValueError(f"name must be one of {sorted(PRESETS)}, got {name!r}")
    _check_int("max_edges", max_edges, 1)
    p = PRESETS[name]
    least = 8 * p.mean / p.num_nodes
    return min(1.0, max(max_edges / p.num_edges, least))


# ---------------------------------------------------------------------- real graphs


@dataclass(frozen=True, eq=False)
class Dataset:
    """A real graph with its node data, on the CPU.

    Attributes:
        name: file stem, e.g. ``"cora"``.
        graph: the graph (CSR over destination rows; edge ids follow the file's edge order).
        features: ``[N, F]`` float32 node features, or ``None``.
        labels: ``[N]`` int64 class of each node (``-1`` where unlabelled), or ``None``.
        train_idx, val_idx, test_idx: ``[k]`` int64 node ids of each split, or ``None``.
    """

    name: str
    graph: Graph
    features: torch.Tensor | None
    labels: torch.Tensor | None
    train_idx: torch.Tensor | None
    val_idx: torch.Tensor | None
    test_idx: torch.Tensor | None

    @property
    def num_classes(self) -> int | None:
        """``max(labels) + 1``, or ``None`` without labels."""
        return None if self.labels is None else int(self.labels.max()) + 1


_FEATURE_KEYS = ("x_indptr", "x_indices", "x_data", "x_shape")
_EDGE_LIST_SUFFIXES = (".txt", ".csv", ".edges")
_SUFFIXES = (".npz", ".mtx", *_EDGE_LIST_SUFFIXES)


def _existing_file(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such graph file: {path}")
    return path


def _open_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path} is not a readable .npz file: {e}") from None


def _int_array(path: Path, key: str, arrays: dict[str, np.ndarray], shape: str) -> np.ndarray:
    a = arrays[key]
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{path}: '{key}' must hold integers, got dtype {a.dtype}")
    ndim = 0 if shape == "[]" else shape.count(",") + 1
    if a.ndim != ndim:
        raise ValueError(f"{path}: '{key}' must have shape {shape}, got {a.shape}")
    return a


def _node_ids(path: Path, key: str, arrays: dict[str, np.ndarray], num_nodes: int) -> torch.Tensor | None:
    if key not in arrays:
        return None
    ids = _int_array(path, key, arrays, "[k]")
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        raise ValueError(f"{path}: '{key}' holds node ids outside [0, {num_nodes})")
    return torch.from_numpy(ids.astype(np.int64))


def _features(path: Path, arrays: dict[str, np.ndarray], num_nodes: int) -> torch.Tensor | None:
    present = [key for key in _FEATURE_KEYS if key in arrays]
    if not present:
        return None
    if len(present) != len(_FEATURE_KEYS):
        missing = [key for key in _FEATURE_KEYS if key not in arrays]
        raise ValueError(f"{path}: node features need all of {_FEATURE_KEYS}, missing {missing}")
    import scipy.sparse as sp

    shape = tuple(int(s) for s in _int_array(path, "x_shape", arrays, "[2]"))
    if len(shape) != 2 or shape[0] != num_nodes:
        raise ValueError(f"{path}: 'x_shape' must be [{num_nodes}, F] (one row per node), got {list(shape)}")
    try:
        csr = sp.csr_matrix((arrays["x_data"], arrays["x_indices"], arrays["x_indptr"]), shape=shape)
    except ValueError as e:
        raise ValueError(f"{path}: malformed CSR node features: {e}") from None
    return torch.from_numpy(csr.toarray().astype(np.float32))


def load_npz(path: str | os.PathLike[str]) -> Dataset:
    """Read a graph in the ``.npz`` layout of ``shared/data`` (see its README).

    Arrays: ``edge_index`` ``[2, E]`` integers (row 0 sources, row 1 destinations);
    optional ``num_nodes`` (else ``max(edge_index) + 1``); optional node features as a CSR
    ``x_indptr``, ``x_indices``, ``x_data``, ``x_shape`` (returned dense); optional labels
    ``y`` and splits ``train_idx``, ``val_idx``, ``test_idx``.
    """
    path = _existing_file(path)
    arrays = _open_npz(path)
    if "edge_index" not in arrays:
        raise ValueError(f"{path} has no 'edge_index' array (it holds {sorted(arrays)}); "
                         f"a SciPy sparse matrix .npz loads with load_graph")
    edge_index = _int_array(path, "edge_index", arrays, "[2, E]")
    if edge_index.shape[0] != 2:
        raise ValueError(f"{path}: 'edge_index' must have shape [2, E], got {edge_index.shape}")
    if edge_index.size and edge_index.min() < 0:
        raise ValueError(f"{path}: 'edge_index' holds negative node ids")
    if "num_nodes" in arrays:
        num_nodes = int(_int_array(path, "num_nodes", arrays, "[]"))
    else:
        num_nodes = int(edge_index.max()) + 1 if edge_index.size else 0
    if edge_index.size and edge_index.max() >= num_nodes:
        raise ValueError(f"{path}: 'edge_index' holds node ids >= num_nodes = {num_nodes}")
    graph = Graph.from_edge_index(torch.from_numpy(edge_index.astype(np.int64)), num_nodes, num_nodes)

    labels = None
    if "y" in arrays:
        labels = torch.from_numpy(_int_array(path, "y", arrays, "[N]").astype(np.int64))
        if labels.numel() != num_nodes:
            raise ValueError(f"{path}: 'y' has {labels.numel()} labels but the graph has {num_nodes} nodes")
    return Dataset(
        name=path.stem,
        graph=graph,
        features=_features(path, arrays, num_nodes),
        labels=labels,
        train_idx=_node_ids(path, "train_idx", arrays, num_nodes),
        val_idx=_node_ids(path, "val_idx", arrays, num_nodes),
        test_idx=_node_ids(path, "test_idx", arrays, num_nodes),
    )


def _load_edge_list(path: Path) -> Graph:
    delimiter = "," if path.suffix == ".csv" else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns on an empty file; we raise below
            edges = np.loadtxt(path, dtype=np.int64, comments=("#", "%"), delimiter=delimiter,
                               usecols=(0, 1), ndmin=2)
    except ValueError as e:
        raise ValueError(f"{path} is not an edge list of integer pairs 'source destination': {e}") from None
    if edges.size == 0:
        raise ValueError(f"{path} holds no edges")
    if edges.min() < 0:
        raise ValueError(f"{path}: node ids must be non-negative, found {edges.min()}")
    return Graph.from_edge_index(torch.from_numpy(np.ascontiguousarray(edges.T)))


def _load_mtx(path: Path) -> Graph:
    import scipy.io
    import scipy.sparse as sp

    try:
        matrix = scipy.io.mmread(path)
    except (ValueError, IndexError, TypeError, OSError) as e:
        raise ValueError(f"{path} is not a readable Matrix Market file: {e}") from None
    if not sp.issparse(matrix):
        raise ValueError(f"{path} holds a dense Matrix Market array, not a sparse (coordinate) matrix")
    return Graph.from_scipy(matrix)


def _load_any_npz(path: Path) -> Graph:
    import scipy.sparse as sp

    keys = _open_npz(path)
    if "edge_index" in keys:
        return load_npz(path).graph
    if "format" in keys:  # written by scipy.sparse.save_npz
        return Graph.from_scipy(sp.load_npz(path))
    raise ValueError(f"{path} holds neither an 'edge_index' nor a SciPy sparse matrix "
                     f"(it holds {sorted(keys)})")


def load_graph(path: str | os.PathLike[str]) -> Graph:
    """Read a user's graph file, by extension.

    * ``.npz``: our layout (``edge_index``, see :func:`load_npz`) or ``scipy.sparse.save_npz``;
    * ``.mtx``: Matrix Market coordinate format;
    * ``.txt``, ``.csv``, ``.edges``: one edge per line, ``source destination`` (whitespace,
      or commas for ``.csv``), 0-based ids; lines starting with ``#`` or ``%`` are comments
      and further columns (weights, times) are ignored.

    Matrices follow DGL: rows are sources, columns destinations. Edge ids follow the file order.
    """
    path = _existing_file(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return _load_any_npz(path)
    if suffix == ".mtx":
        return _load_mtx(path)
    if suffix in _EDGE_LIST_SUFFIXES:
        return _load_edge_list(path)
    raise ValueError(f"{path}: unknown graph file extension {path.suffix!r}; expected one of {_SUFFIXES}")


REAL_GRAPHS = ("cora", "citeseer", "pubmed_cites")
DATA_DIR_ENV = "GSPARSE_DATA_DIR"
# src/gsparse/bench/datasets.py -> the checkout's root, when gsparse runs from a source tree.
_REPO_ROOT = Path(__file__).resolve().parents[3]


def data_dirs() -> list[Path]:
    """Where real graphs are looked for, in order.

    ``$GSPARSE_DATA_DIR`` alone when it is set; otherwise ``../shared/data`` relative to the
    repository root (when gsparse runs from a source checkout), then ``./.data`` relative
    to the current directory (an ignored folder a GPU run can carry).
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return [Path(env)]
    candidates = []
    if (_REPO_ROOT / "pyproject.toml").is_file():
        candidates.append(_REPO_ROOT.parent / "shared" / "data")
    candidates.append(Path.cwd() / ".data")
    return candidates


def real_graph(name: str, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """One of :data:`REAL_GRAPHS`, read from ``<dir>/<name>.npz``.

    ``data_dir`` when given, else the first of :func:`data_dirs` that holds the file.
    """
    if name not in REAL_GRAPHS:
        raise ValueError(f"name must be one of {REAL_GRAPHS}, got {name!r}")
    candidates = [Path(data_dir)] if data_dir is not None else data_dirs()
    for directory in candidates:
        if (directory / f"{name}.npz").is_file():
            return load_npz(directory / f"{name}.npz")
    raise FileNotFoundError(f"{name}.npz is in none of {[str(d) for d in candidates]}; "
                            f"pass data_dir or set {DATA_DIR_ENV} to the folder that holds it")


# ---------------------------------------------------------------------- reports


def describe(graph: Graph) -> dict[str, int | float]:
    """Size and row-length statistics of ``graph``, for reports (keys are stable)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a gsparse.Graph, got {type(graph).__name__}")
    stats = graph.row_stats
    return {
        "num_src": graph.num_src,
        "num_dst": graph.num_dst,
        "num_edges": graph.num_edges,
        "row_mean": stats.mean,
        "row_max": stats.max,
        "row_cov": stats.cov,
    }


# ---------------------------------------------------------------------- workloads


@dataclass(frozen=True, eq=False)
class Workload:
    """A named graph to benchmark on, with a line saying where it came from."""

    name: str
    graph: Graph
    source: str


def workload(
    spec: str,
    *,
    scale: float | None = None,
    max_edges: int | None = None,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Workload:
    """Resolve a workload name: a preset, a real graph, or a path to a graph file.

    Args:
        spec: a key of :data:`PRESETS` (synthetic), one of :data:`REAL_GRAPHS` (read from
            :func:`data_dirs`), or a file :func:`load_graph` reads.
        scale: node-count scale of a preset; ``None`` picks :func:`scale_for_edges` with
            ``max_edges`` when that is given, else the full size. Ignored for real graphs
            and files.
        max_edges: see ``scale``.
        seed: seed of a synthetic graph.
        device: where the graph is built (synthetic) or moved to (loaded).
    """
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"spec must be a non-empty workload name or path, got {spec!r}")
    if spec in PRESETS:
        if scale is None:
            scale = 1.0 if max_edges is None else scale_for_edges(spec, max_edges)
        graph = preset(spec, scale=scale, seed=seed, device=device)
        return Workload(spec, graph, f"synthetic preset {spec}, scale {scale:.4g}, seed {seed}: "
                                     f"{PRESETS[spec].source}")
    if spec in REAL_GRAPHS:
        return Workload(spec, real_graph(spec).graph.to(device), f"real graph {spec}.npz")
    path = Path(spec)
    if path.suffix.lower() in _SUFFIXES or path.exists():
        return Workload(path.stem, load_graph(path).to(device), f"file {path}")
    raise ValueError(f"workload {spec!r} is neither a preset {sorted(PRESETS)}, a real graph "
                     f"{list(REAL_GRAPHS)}, nor a graph file ({', '.join(_SUFFIXES)})")
