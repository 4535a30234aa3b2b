"""Access to NVIDIA's CUDA Python bindings.

This is the only module of gsparse that imports ``cuda.bindings``. ``import gsparse`` works
on machines without the bindings or without a GPU: only a compile or a launch then fails,
with a message that says what to install.

The driver bindings and ``cuda.pathfinder`` (which they find libcuda with) are imported
with this module where they are installed, as PyTorch 2.13 itself does: their import (70-90
ms on an H100 host) is then paid by ``import gsparse``, not by the first kernel launch,
whose latency ``gsparse precompile`` exists to cut. NVRTC is imported on first use: a
process whose kernels are all in the disk cache never needs it (see ``_toolchain``).
"""

from __future__ import annotations

from types import ModuleType

NVRTC_MISSING = "NVRTC is not available: pip install 'gsparse[cuda]'"
DRIVER_MISSING = "the CUDA driver bindings are not available: pip install 'gsparse[cuda]'"

try:
    from cuda.bindings import driver as _driver

    # What some versions of the bindings import only at their first call, to find libcuda.
    import cuda.pathfinder  # noqa: F401
except ImportError:
    _driver = None


def nvrtc() -> ModuleType:
    """``cuda.bindings.nvrtc``, or RuntimeError when cuda-bindings is not installed."""
    try:
        from cuda.bindings import nvrtc as bindings
    except ImportError as exc:
        raise RuntimeError(NVRTC_MISSING) from exc
    return bindings


def driver() -> ModuleType:
    """``cuda.bindings.driver``, or RuntimeError when cuda-bindings is not installed."""
    if _driver is None:
        raise RuntimeError(DRIVER_MISSING)
    return _driver
