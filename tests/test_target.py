"""Target: the GPU facts every rule, space and plan reads, fixed in tests."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import gsparse
from gsparse.target import A100, H100, H200, Target


def test_presets_describe_the_gpus_the_rules_were_measured_on() -> None:
    assert (H100.arch, H100.sms, H100.l2_bytes, H100.shared_bytes_per_block) == \
        ("sm_90", 132, 50 << 20, 232_448)
    assert (A100.arch, A100.sms, A100.l2_bytes, A100.shared_bytes_per_block) == \
        ("sm_80", 108, 40 << 20, 166_912)
    assert H200.arch == "sm_90" and H200.l2_bytes > H100.l2_bytes
    assert H100.resident_warps == 132 * 64
    assert H100.registers_per_sm == A100.registers_per_sm == 65_536
    assert gsparse.Target is Target


def test_a_target_is_a_value_with_a_json_form() -> None:
    assert Target(**H100.to_json()) == H100 and hash(Target(**A100.to_json())) == hash(A100)
    # a document written before the register file was a fact reads as the usual 64K registers
    older = {k: v for k, v in H100.to_json().items() if k != "registers_per_sm"}
    assert Target(**older) == H100
    smaller = dataclasses.replace(H100, shared_bytes_per_block=24 * 1024)
    assert smaller != H100 and smaller.sms == H100.sms
    with pytest.raises(dataclasses.FrozenInstanceError):
        H100.sms = 1  # type: ignore[misc]


@pytest.mark.parametrize(("change", "message"), [
    ({"sms": 0}, "Target.sms must be a positive int, got 0"),
    ({"l2_bytes": -1}, "Target.l2_bytes must be a positive int, got -1"),
    ({"shared_bytes_per_block": 1.5}, "Target.shared_bytes_per_block must be a positive int, got 1.5"),
    ({"warps_per_sm": True}, "Target.warps_per_sm must be a positive int, got True"),
    ({"registers_per_sm": 0}, "Target.registers_per_sm must be a positive int, got 0"),
    ({"arch": "90"}, "Target.arch must name an architecture such as 'sm_90', got '90'"),
])
def test_targets_are_validated(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(H100, **change)


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "meta"])
def test_of_refuses_devices_that_are_not_cuda_gpus(device) -> None:
    with pytest.raises(ValueError, match=r"a Target describes a CUDA GPU; device (cpu|meta) is not "
                                         r"one \(pass a fixed Target such as gsparse.target.H100"):
        Target.of(device)


@pytest.mark.gpu
def test_of_reads_the_current_gpu_once() -> None:
    target = Target.of()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    assert target.arch == f"sm_{props.major}{props.minor}" and target.sms == props.multi_processor_count
    assert Target.of("cuda") is target and Target.of(torch.cuda.current_device()) is target
    assert target.shared_bytes_per_block >= 48 * 1024
