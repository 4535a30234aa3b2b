"""Stable sorts of integer keys of any length.

``torch.sort`` sorts at most 2**31 - 1 elements along a dimension, and a graph of int64
indices can have more edges than that. :func:`stable_sort` sorts such arrays in pieces and
places each piece's elements by counting: an element's place is the number of smaller keys,
plus the number of its equal keys in earlier pieces, plus its rank among its equal keys in
its own piece. Up to :data:`_PIECE` elements it is one ``torch.sort``.
:func:`stable_order` is the order alone, for callers that do not read the sorted keys (a
long sort's would be another array as large as the keys).
"""

from __future__ import annotations

import torch

__all__ = ["stable_order", "stable_sort"]

# Elements a piece of a long sort holds: within torch.sort's limit, and small enough that
# a piece's temporaries (about 30 bytes an element) stay a few GB.
_PIECE = 1 << 28


def stable_sort(keys: torch.Tensor, num_keys: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sorted keys, order)`` of the 1-D integer ``keys``, each in ``[0, num_keys)``, as
    ``torch.sort(keys, stable=True)`` returns them (``order`` int64), for any length."""
    if keys.numel() <= _PIECE:
        return torch.sort(keys, stable=True)
    order = stable_order(keys, num_keys)
    return keys[order], order


def stable_order(keys: torch.Tensor, num_keys: int) -> torch.Tensor:
    """The order (int64) of :func:`stable_sort`."""
    if keys.numel() <= _PIECE:
        return torch.sort(keys, stable=True).indices
    device = keys.device
    counts = torch.bincount(keys, minlength=num_keys)
    # where the next element of each key goes: after every smaller key, then after the
    # equal keys of the pieces placed before
    place = torch.cumsum(counts, 0).sub_(counts)
    order = torch.empty(keys.numel(), dtype=torch.int64, device=device)
    for lo in range(0, keys.numel(), _PIECE):
        piece = keys[lo:lo + _PIECE]
        piece_sorted, piece_order = torch.sort(piece, stable=True)
        piece_sorted = piece_sorted.long()
        piece_counts = torch.bincount(piece, minlength=num_keys)
        run_start = torch.cumsum(piece_counts, 0).sub_(piece_counts)  # of each key, in the piece
        rank = torch.arange(piece.numel(), device=device).sub_(run_start[piece_sorted])
        order[place[piece_sorted].add_(rank)] = piece_order.add_(lo)
        place += piece_counts
    return order
