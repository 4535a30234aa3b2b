"""From drawn edges to a :class:`~gsparse.Graph`: the steps every graph family shares.

The families draw destinations and sources as int64 tensors on the target device; the
helpers here turn them into a CSR with each row's sources sorted ascending (the usual
CSR input, kinder to caches), without Python loops over rows or edges.
"""

from __future__ import annotations

from typing import Any

import torch

from ..graph import Graph
from .synthetic import _check_int, _check_real

__all__: list[str] = []


def check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """``value`` as an int in ``[minimum, maximum]``, else an error naming ``name``."""
    value = _check_int(name, value, minimum)
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_fraction(name: str, value: Any, low: float = 0.0, high: float = 1.0) -> float:
    """``value`` as a float in ``[low, high]``, else an error naming ``name``."""
    value = _check_real(name, value)
    if not low <= value <= high:
        raise ValueError(f"{name} must lie in [{low}, {high}], got {value}")
    return value


def check_seed(seed: Any) -> int:
    return _check_int("seed", seed, 0)


def generator(seed: int, device: torch.device) -> torch.Generator:
    """A torch generator on ``device`` seeded with ``seed`` (the graph is a function of it)."""
    return torch.Generator(device=device).manual_seed(seed)


def uniform_below(high: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``[*high.shape]`` int64 uniform in ``[0, high)`` elementwise; needs ``high >= 1``.

    From float64 draws: the bias is below ``high / 2^53``, far less than any test resolves,
    and it is half the cost of exact 62-bit integer draws.
    """
    u = torch.rand(high.shape, generator=gen, device=high.device, dtype=torch.float64)
    return torch.minimum((u * high).long(), high - 1)


def rows_of(lengths: torch.Tensor, num_edges: int) -> torch.Tensor:
    """``[E]`` int64 row of each edge for rows of the given ``[num_rows]`` lengths, in order."""
    rows = torch.arange(lengths.numel(), device=lengths.device)
    return torch.repeat_interleave(rows, lengths, output_size=num_edges)


def graph_from_rows(lengths: torch.Tensor, row: torch.Tensor, col: torch.Tensor, num_src: int) -> Graph:
    """The graph whose row ``r`` holds the ``lengths[r]`` sources ``col[row == r]``.

    ``row`` (``[E]``, from :func:`rows_of`) is grouped in ascending order; the sources are
    sorted within each row by one sort of ``row * num_src + col``.
    """
    col = torch.sort(row * num_src + col).values - row * num_src
    rowptr = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
    torch.cumsum(lengths, 0, out=rowptr[1:])
    return Graph.from_csr(rowptr, col, num_src=num_src)


def graph_from_pairs(
    dst: torch.Tensor, src: torch.Tensor, num_dst: int, num_src: int, *, simple: bool = False
) -> Graph:
    """The graph of the edges ``src[i] -> dst[i]`` (``[E]`` int64 each), in CSR order.

    ``simple=True`` removes self loops (``src == dst``, meaningful on square graphs) and
    keeps one copy of each repeated edge.
    """
    if simple:
        loop = dst == src
        dst, src = dst[~loop], src[~loop]
    key = torch.sort(dst * num_src + src).values
    if simple:
        key = torch.unique_consecutive(key)
    dst = torch.div(key, num_src, rounding_mode="floor")
    src = key - dst * num_src
    bounds = torch.arange(num_dst + 1, device=key.device)
    rowptr = torch.searchsorted(dst, bounds)
    return Graph.from_csr(rowptr, src, num_src=num_src)

