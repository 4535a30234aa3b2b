"""Lazy access to NVIDIA's CUDA Python bindings.

This is the only module of gsparse that imports ``cuda.bindings``. The import happens on
first use, so ``import gsparse`` works on machines without the bindings or without a GPU;
only a compile or a launch then fails, with a message that says what to install.
"""

from __future__ import annotations

from types import ModuleType

NVRTC_MISSING = "NVRTC is not available: pip install 'gsparse[cuda]'"
DRIVER_MISSING = "the CUDA driver bindings are not available: pip install 'gsparse[cuda]'"


def nvrtc() -> ModuleType:
    """``cuda.bindings.nvrtc``, or RuntimeError when cuda-bindings is not installed."""
    try:
        from cuda.bindings import nvrtc as bindings
    except ImportError as exc:
        raise RuntimeError(NVRTC_MISSING) from exc
    return bindings


def driver() -> ModuleType:
    """``cuda.bindings.driver``, or RuntimeError when cuda-bindings is not installed."""
    try:
        from cuda.bindings import driver as bindings
    except ImportError as exc:
        raise RuntimeError(DRIVER_MISSING) from exc
    return bindings
