"""Checks shared by the GPU tests of operands and graphs past 2**31 elements: results of
sampled rows against float64 sums, and a few schedules of every skeleton of a space."""

from __future__ import annotations

import random

import torch

from gsparse import Graph


def row_sums(g: Graph, rows: torch.Tensor, per_edge) -> torch.Tensor:
    """float64 sums over the edges of each of ``rows`` of ``per_edge(positions, sources)``."""
    starts, ends = g.rowptr[rows].long(), g.rowptr[rows + 1].long()
    out = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        positions = torch.arange(start, end, device=g.device)
        out.append(per_edge(positions, g.col[positions].long()).double().sum(0))
    return torch.stack(out)


def assert_close(got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor) -> None:
    """``got`` finite and within 1e-5 of ``want`` relative to ``scale`` (a sum of magnitudes)."""
    assert torch.isfinite(got).all()
    error = ((got.double() - want).abs() / scale.clamp_min(1e-30)).max().item()
    assert error < 1e-5, error


def per_skeleton(space, k: int) -> list:
    """Up to ``k`` schedules of each kind of the space (the same ones on every run)."""
    kinds: dict[type, list] = {}
    for schedule in space:
        kinds.setdefault(type(schedule), []).append(schedule)
    rng = random.Random(0)
    return [s for group in kinds.values() for s in rng.sample(group, min(k, len(group)))]
