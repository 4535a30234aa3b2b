"""Which CUDA device a call means, as PyTorch numbers them."""

from __future__ import annotations

import torch


def cuda_device_index(device: int | str | torch.device | None) -> int:
    """The CUDA device index of ``device``; None means PyTorch's current device."""
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        device = torch.device(device)
        if device.type != "cuda":
            raise ValueError(f"device must be a CUDA device, got {device}")
        index = torch.cuda.current_device() if device.index is None else device.index
    if index < 0:
        raise ValueError(f"device index must be >= 0, got {index}")
    return index
