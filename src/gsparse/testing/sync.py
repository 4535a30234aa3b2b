"""Counting the host's waits for a CUDA device, as tests of sync-free code paths do."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

__all__ = ["device_waits"]


def device_waits(fn: Callable[[], object]) -> list[str]:
    """The message of each operation of ``fn()`` that made the host wait for the CUDA device
    (a read back, a blocking copy), as CUDA's sync debug mode reports them: the mode is set
    to warn for the call and restored after."""
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return [str(w.message) for w in caught if "synchroniz" in str(w.message)]
