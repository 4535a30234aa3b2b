"""What the kernel tests of every operator share: sampling, tolerances, compile checks."""

from __future__ import annotations

import random

import pytest
import torch

from gsparse.runtime import Binary, nvrtc_version

needs_nvrtc = pytest.mark.skipif(nvrtc_version() is None, reason="needs NVRTC")
gpu = pytest.mark.gpu

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# g-SpMM and g-SDDMM results against the float64 reference.
TOLERANCE = {
    torch.float16: {"rtol": 2e-3, "atol": 2e-3},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2},
    torch.float32: {"rtol": 1e-5, "atol": 1e-4},
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
}


def sample(items, k: int, seed: int) -> list:
    """``k`` of ``items`` (all of them when fewer), the same ones on every run."""
    items = list(items)
    return random.Random(seed).sample(items, min(k, len(items)))


def assert_no_spills(binary: Binary, name: str, threads: int | None = None) -> None:
    """Kernel ``name`` of ``binary`` keeps everything in registers, and (given its block
    size) its registers fit the block: ``__launch_bounds__`` did its job."""
    resources = binary.resources[name]
    assert resources.spill_stores == 0 and resources.spill_loads == 0, binary.log
    assert resources.stack_bytes == 0, binary.log
    if threads is not None:
        assert resources.registers * threads <= 65536
