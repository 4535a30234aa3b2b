"""The scatter of the ``PyG`` baseline: PyG's own when installed, else PyTorch's."""

from __future__ import annotations

import importlib.util

import torch

from ..algebra import REDUCERS

__all__ = ["pyg_backend", "scatter", "torch_scatter"]


def pyg_backend() -> str:
    """Which scatter the ``pyg`` baseline uses: PyG's when installed, else PyTorch's."""
    if importlib.util.find_spec("torch_geometric") is None:
        return "torch index_add_ (torch_geometric not installed)"
    import torch_geometric

    return f"torch_geometric.utils.scatter {torch_geometric.__version__}"


def scatter(src: torch.Tensor, index: torch.Tensor, size: int, reduce: str = "sum") -> torch.Tensor:
    """PyG's scatter along dim 0 (``sum``, ``mean`` or ``max``; rows that receive nothing are
    0), or :func:`torch_scatter` when PyG is not installed."""
    if importlib.util.find_spec("torch_geometric") is not None:
        from torch_geometric.utils import scatter

        return scatter(src, index, dim=0, dim_size=size, reduce=reduce)
    return torch_scatter(src, index, size, reduce)


def torch_scatter(src: torch.Tensor, index: torch.Tensor, size: int, reduce: str) -> torch.Tensor:
    """``sum``, ``mean`` or ``max`` of ``src``'s rows into ``size`` rows by ``index``, with
    PyTorch ops; rows that receive nothing are 0 (as in DGL and PyG)."""
    reducer = REDUCERS[reduce]
    out = torch.zeros((size, *src.shape[1:]), dtype=src.dtype, device=src.device)
    if reducer.keeps_arg:
        full_index = index.view(-1, *[1] * (src.dim() - 1)).expand_as(src)
        return out.scatter_reduce_(0, full_index, src, reducer.scatter_reduce, include_self=False)
    out.index_add_(0, index, src)
    if reducer.divides_by_degree:
        count = torch.bincount(index, minlength=size).clamp_(min=1)
        out /= count.view(-1, *[1] * (src.dim() - 1)).to(src.dtype)
    return out
