"""Validation of index arrays and counts, for the graph's constructors. Errors name the
argument, what was expected and what was given."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def first_true(mask: torch.Tensor) -> int:
    return int(torch.nonzero(mask)[0, 0])


def check_index_tensor(name: str, t: Any, ndim: int) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{name} must have dtype int32 or int64, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(t.shape)}")
    return t


def check_count(name: str, value: Any) -> int:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be non-negative, got {value}")
    return int(value)


def check_range(name: str, t: torch.Tensor, bound: int, bound_name: str) -> None:
    if t.numel() == 0:
        return
    bad = (t < 0) | (t >= bound)
    if bool(bad.any()):
        i = first_true(bad)
        raise ValueError(
            f"{name}[{i}] = {int(t[i])} is out of range: expected 0 <= {name} < {bound_name} = {bound}"
        )
