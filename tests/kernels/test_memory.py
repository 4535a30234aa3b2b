"""Storage the generated kernels write: uninitialised, or poisoned in tests."""

from __future__ import annotations

import pytest
import torch

from gsparse.kernels import memory


def test_poisoned_storage_shows_every_element_a_kernel_fails_to_write() -> None:
    with memory.poisoned() as allocated:
        out = memory.allocate((3, 2), torch.float16, torch.device("cpu"))
        arg = memory.allocate((4,), torch.int64, torch.device("cpu"))
    assert out.dtype == torch.float16 and out.shape == (3, 2) and torch.isnan(out).all()
    assert arg.dtype == torch.int64 and (arg == -7).all()
    assert allocated == [(3, 2), (4,)]


def test_outside_a_poisoned_block_nothing_is_logged() -> None:
    with memory.poisoned() as allocated:
        pass
    out = memory.allocate((5,), torch.float32, torch.device("cpu"))
    assert out.shape == (5,) and allocated == []


def test_nested_blocks_each_log_what_they_saw() -> None:
    with memory.poisoned() as outer:
        memory.allocate((1,), torch.float32, torch.device("cpu"))
        with memory.poisoned() as inner:
            memory.allocate((2,), torch.float32, torch.device("cpu"))
        memory.allocate((3,), torch.float32, torch.device("cpu"))
    assert outer == [(1,), (2,), (3,)] and inner == [(2,)]


def test_a_block_left_by_an_exception_stops_poisoning() -> None:
    with pytest.raises(RuntimeError), memory.poisoned() as allocated:
        raise RuntimeError("a kernel failed")
    memory.allocate((2,), torch.float32, torch.device("cpu"))
    assert allocated == []  # the block no longer logs
