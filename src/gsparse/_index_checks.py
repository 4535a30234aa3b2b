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


# What building a graph and running one operator on it allocate, about: per node the int64
# in-degree counts, the int64 offsets and their final copy, and one float32 feature in and
# out; per edge the sort order, the int64 sources, the identity it is compared with and the
# final indices and edge ids.
_BYTES_PER_ROW = 32
_BYTES_PER_EDGE = 40
# Below this a graph is built without asking the system how much memory is free.
_ALWAYS_FITS = 1 << 30


def _free_bytes(device: torch.device) -> int | None:
    """Memory free for a new graph on ``device``: the GPU's free bytes and the blocks
    PyTorch's caching allocator holds unused (freed tensors it has not handed back), or the
    host's available memory (Linux ``MemAvailable``, else its physical memory); None when
    unknown."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def check_fits(device: torch.device | str, num_src: int | None, num_dst: int | None,
               num_edges: int = 0) -> None:
    """Refuse, before anything is allocated, a graph that cannot be built and used (one
    feature per node) in the memory free on ``device``: ValueError naming the counts and the
    memory they would need."""
    need = _BYTES_PER_ROW * (max(num_src or 0, num_dst or 0) + 1) + _BYTES_PER_EDGE * num_edges
    if need < _ALWAYS_FITS:
        return
    device = torch.device(device)
    free = _free_bytes(device)
    if free is None or need <= free:
        return
    nodes = (("num_nodes", num_src),) if num_src == num_dst else (("num_src", num_src), ("num_dst", num_dst))
    counts = [f"{name} = {value:,}" for name, value in (*nodes, ("num_edges", num_edges)) if value]
    raise ValueError(f"a graph with {', '.join(counts)} would need about {_gb(need)} to build "
                     f"and use ({_BYTES_PER_ROW} bytes per node, {_BYTES_PER_EDGE} per edge), more than the "
                     f"{_gb(free)} free on {device}; check the node counts")
