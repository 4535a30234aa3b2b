"""Seeded synthetic graphs: a row-length distribution and a column locality.

Synthetic graphs are square (``num_src == num_dst == num_nodes``) CSRs over destination
rows, built with vectorised torch on the requested device: a 120M-edge graph takes
seconds on a GPU. Two choices shape them:

* the row-length (in-degree) distribution, :class:`LogNormal` or :class:`PowerLaw`;
* the column locality: uniform over all nodes, or :class:`Clustered` around each row's block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._progress import Progress
from ..graph import Graph

__all__ = ["LogNormal", "PowerLaw", "Clustered", "synthetic"]


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


_PROGRESS_EDGES = 2_000_000


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

    # Seconds of work from a few million edges on (minutes for the full-size presets on a CPU).
    with Progress(4, f"generating a graph of {total:,} edges", "step",
                  show=None if total >= _PROGRESS_EDGES else False) as bar:
        bar.update(0, "row lengths")
        if isinstance(degree, LogNormal):
            lengths = _lognormal_lengths(n, total, degree.cov, device)
        else:
            lengths = _power_law_lengths(n, total, degree.exponent, device)
        gen = torch.Generator(device=device).manual_seed(seed)
        deg = lengths[torch.randperm(n, generator=gen, device=device)]
        bar.update(1, "columns")
        row, col = _columns(deg, locality, not allow_duplicates, gen)
        bar.update(1, "sorting rows")
        if sort_rows:
            # Rows are already grouped in ascending order, so sorting row * n + col keeps each
            # edge in its row and sorts the columns inside it.
            col = torch.sort(row * n + col).values - row * n
        else:
            key = row * 2**31 + torch.randint(0, 2**31, row.shape, generator=gen, device=device)
            col = col[torch.sort(key).indices]
        bar.update(1, "CSR")
        rowptr = torch.zeros(n + 1, dtype=torch.int64, device=device)
        torch.cumsum(deg, 0, out=rowptr[1:])
        graph = Graph.from_csr(rowptr, col, num_src=n)
        bar.update(1)
    return graph


# ---------------------------------------------------------------------- presets

