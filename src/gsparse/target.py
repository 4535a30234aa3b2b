"""The GPU a kernel is generated and scheduled for: one object holding every device fact.

Default rules, spaces and launch plans take a :class:`Target` argument instead of asking
the device themselves, so that they are pure functions of their inputs: tests and the tuner
pass a fixed target (:data:`H100`, :data:`A100`, :data:`H200`), calls on a GPU pass
:func:`Target.of` its device.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import torch

__all__ = ["Target", "A100", "H100", "H200"]


@dataclass(frozen=True)
class Target:
    """The facts about a GPU that code generation, schedules and launches depend on.

    Attributes:
        name: the device's name, for reports (``"NVIDIA H100 80GB HBM3"``).
        arch: the architecture kernels are built for (``"sm_90"``).
        sms: streaming multiprocessors.
        l2_bytes: the L2 cache.
        shared_bytes_per_block: the most dynamic shared memory one block may opt in to.
        warps_per_sm: warps an SM keeps resident at once.
        registers_per_sm: 32-bit registers of an SM's register file (65,536 on every
            architecture gsparse builds for).
    """

    name: str
    arch: str
    sms: int
    l2_bytes: int
    shared_bytes_per_block: int
    warps_per_sm: int
    registers_per_sm: int = 65536

    def __post_init__(self) -> None:
        for field in ("sms", "l2_bytes", "shared_bytes_per_block", "warps_per_sm", "registers_per_sm"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Target.{field} must be a positive int, got {value!r}")
        if not (isinstance(self.arch, str) and self.arch.startswith("sm_")):
            raise ValueError(f"Target.arch must name an architecture such as 'sm_90', got {self.arch!r}")

    @property
    def resident_warps(self) -> int:
        """Warps the whole GPU keeps resident at once."""
        return self.sms * self.warps_per_sm

    def to_json(self) -> dict[str, object]:
        """The fields by name (a JSON-serialisable dict)."""
        return asdict(self)

    @staticmethod
    def of(device: torch.device | str | int | None = None) -> Target:
        """The target of a CUDA device (PyTorch's current one by default), read once per
        device. ValueError for a device that is not a CUDA GPU."""
        if device is None or isinstance(device, int):
            index = torch.cuda.current_device() if device is None else device
        else:
            device = torch.device(device)
            if device.type != "cuda":
                raise ValueError(f"a Target describes a CUDA GPU; device {device} is not one "
                                 f"(pass a fixed Target such as gsparse.target.H100 instead)")
            index = torch.cuda.current_device() if device.index is None else device.index
        return _target_of(index)


@functools.lru_cache(maxsize=None)
def _target_of(index: int) -> Target:
    props = torch.cuda.get_device_properties(index)
    return Target(
        name=props.name,
        arch=f"sm_{props.major}{props.minor}",
        sms=props.multi_processor_count,
        # A device that reports no L2 size is taken to have an H100's: the GPU the rules
        # were measured on.
        l2_bytes=props.L2_cache_size or H100.l2_bytes,
        shared_bytes_per_block=props.shared_memory_per_block_optin,
        warps_per_sm=props.max_threads_per_multi_processor // 32,
        registers_per_sm=getattr(props, "regs_per_multiprocessor", 0) or 65536,
    )


H100 = Target("NVIDIA H100 80GB HBM3", "sm_90", sms=132, l2_bytes=50 << 20,
              shared_bytes_per_block=232_448, warps_per_sm=64)
H200 = Target("NVIDIA H200", "sm_90", sms=132, l2_bytes=60 << 20,
              shared_bytes_per_block=232_448, warps_per_sm=64)
A100 = Target("NVIDIA A100-SXM4-80GB", "sm_80", sms=108, l2_bytes=40 << 20,
              shared_bytes_per_block=166_912, warps_per_sm=64)
