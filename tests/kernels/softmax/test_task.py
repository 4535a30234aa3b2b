"""What an edge softmax call computes: a direction, dtypes and the heads' lanes."""

from __future__ import annotations

import pytest
import torch

from gsparse.kernels.softmax import SoftmaxTask, head_lanes


@pytest.mark.parametrize(("heads", "lanes"), [(1, 1), (2, 2), (3, 4), (8, 8), (20, 32), (100, 32)])
def test_head_lanes(heads: int, lanes: int) -> None:
    assert head_lanes(heads) == lanes
    assert SoftmaxTask("forward", torch.float32, torch.int32, False, heads).lanes == lanes


def test_task_names_a_direction() -> None:
    with pytest.raises(ValueError, match=r"direction must be one of \('forward', 'backward'\), "
                                         r"got 'sideways'"):
        SoftmaxTask("sideways", torch.float32, torch.int32, False, 1)


def test_tasks_are_plan_keys() -> None:
    a = SoftmaxTask("forward", torch.float32, torch.int32, False, 8)
    assert a == SoftmaxTask("forward", torch.float32, torch.int32, False, 8)
    assert len({a, SoftmaxTask("backward", torch.float32, torch.int32, False, 8),
                SoftmaxTask("forward", torch.float32, torch.int32, False, 2)}) == 3
