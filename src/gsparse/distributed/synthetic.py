"""Synthetic graphs generated one rank's rows at a time: graphs no machine holds whole.

:func:`local_rows` draws this rank's rows of a seeded random square graph under a range
partition, directly as a CSR with global source ids (what
:meth:`~gsparse.distributed.DistGraph.from_local_csr` takes): no rank ever builds the rest
of the graph. Row lengths are lognormal with the requested mean and coefficient of
variation; a ``remote_fraction`` of each rank's edges read sources drawn uniformly over
all nodes, the rest sources drawn uniformly over the rank's own range, the locality
a good partition of a real graph gives (the halo is then about ``remote_fraction`` of
the edges). :data:`PAPERS100M` holds ogbn-papers100M's sizes.
"""

from __future__ import annotations

import math

import torch

from .partition import Partition

__all__ = ["PAPERS100M", "equal_ranges", "local_rows"]

# ogbn-papers100M (OGB): nodes, directed edges, features, classes.
PAPERS100M = {"num_nodes": 111_059_956, "num_edges": 1_615_685_872, "num_features": 128, "num_classes": 172}


def equal_ranges(num_nodes: int, num_parts: int) -> Partition:
    """``num_parts`` contiguous ranges of ``num_nodes // num_parts`` nodes (the first ones
    one more when it does not divide): the partition :func:`local_rows` generates under."""
    bounds = [num_nodes * r // num_parts for r in range(num_parts + 1)]
    return Partition.from_bounds(bounds, "range")


def local_rows(partition: Partition, rank: int, num_edges: int, *, cov: float = 1.0,
               remote_fraction: float = 0.1, seed: int = 0,
               device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``(rowptr, col)``: rank ``rank``'s rows of a random graph with about ``num_edges`` edges.

    Args:
        partition: a range partition of the nodes (:func:`equal_ranges`).
        rank: whose rows to draw.
        num_edges: edges of the whole graph; this rank draws about its rows' share.
        cov: coefficient of variation of the row lengths (lognormal).
        remote_fraction: the probability that an edge's source is drawn over all nodes
            rather than over this rank's range.
        seed: the graph is a function of the arguments (and the device type): rank ``r``'s
            rows depend on ``(seed, r)`` only.
        device: where to draw and return them.

    Returns:
        ``rowptr`` ``[rows + 1]`` int64 and ``col`` ``[E_r]`` int64 global source ids.
    """
    if partition.bounds is None:
        raise ValueError("local_rows needs a range partition (equal_ranges), got an assignment")
    if not 0.0 <= remote_fraction <= 1.0:
        raise ValueError(f"remote_fraction must lie in [0, 1], got {remote_fraction}")
    if cov < 0:
        raise ValueError(f"cov must be >= 0, got {cov}")
    device = torch.device(device)
    lo, hi = int(partition.bounds[rank]), int(partition.bounds[rank + 1])
    rows, n = hi - lo, partition.num_nodes
    gen = torch.Generator(device=device).manual_seed(seed * 1_000_003 + rank)
    mean = num_edges / max(n, 1)
    sigma = math.sqrt(math.log1p(cov * cov))
    mu = math.log(mean) - sigma * sigma / 2 if mean > 0 else 0.0
    lengths = torch.empty(rows, device=device)
    if rows and mean > 0:
        lengths.log_normal_(mu, sigma, generator=gen)
    deg = lengths.round().clamp(max=n).long() if mean > 0 else torch.zeros(rows, dtype=torch.long, device=device)
    rowptr = torch.zeros(rows + 1, dtype=torch.int64, device=device)
    torch.cumsum(deg, 0, out=rowptr[1:])
    total = int(rowptr[-1])
    remote = torch.rand(total, generator=gen, device=device) < remote_fraction
    anywhere = torch.randint(0, max(n, 1), (total,), generator=gen, device=device)
    nearby = torch.randint(lo, max(hi, lo + 1), (total,), generator=gen, device=device)
    col = torch.where(remote, anywhere, nearby)
    return rowptr, col
