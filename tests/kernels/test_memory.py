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


@pytest.mark.parametrize("shape", [(7,), (5, 3), (4, 1, 3), (2, 3, 4, 5), (3, 1, 1, 2), (0, 4), (6, 2, 1, 1, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_an_allocator_makes_fresh_contiguous_storage_of_its_shape_on_each_call(shape, dtype) -> None:
    new = memory.allocator(shape, dtype, torch.device("cpu"))
    # The first three as allocate() does (the third builds a template), the others from it.
    first, second, third, fourth = new(), new(), new(), new()
    for out in (first, second, third, fourth):
        assert out.shape == shape and out.dtype == dtype and out.device.type == "cpu"
        assert out.is_contiguous() and out.stride() == torch.empty(shape).stride()
    if first.numel():
        fifth = new()
        assert len({out.data_ptr() for out in (first, second, third, fourth, fifth)}) == 5
        fourth.fill_(1)
        fifth.fill_(2)  # no storage is shared: neither write shows in the other
        assert (fourth == 1).all() and (fifth == 2).all()


def test_an_allocator_made_before_a_poisoned_block_poisons_inside_it() -> None:
    new = memory.allocator((3, 2), torch.float32, torch.device("cpu"))
    new_arg = memory.allocator((4,), torch.int64, torch.device("cpu"))
    for _ in range(4):  # past the first calls: allocating from their templates
        new(), new_arg()
    with memory.poisoned() as allocated:
        out, arg = new(), new_arg()
    assert torch.isnan(out).all() and (arg == -7).all()
    assert allocated == [(3, 2), (4,)]
    assert new().shape == (3, 2) and allocated == [(3, 2), (4,)]  # the block no longer logs
