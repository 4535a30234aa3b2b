"""A stand-in for a loaded kernel, for launch tests that need no GPU."""

import torch

from gsparse.runtime import OPERAND


class RecordingKernel:
    """Records each launch's grid, block and arguments instead of running it.

    A prepared launch records, on each call, its arguments with the operand slots filled in.
    """

    def __init__(self) -> None:
        self.launches: list[tuple] = []
        self.prepared = 0

    def launch(self, grid, block, args, *, shared_bytes=0, stream=None, context=""):
        self.launches.append((grid, block, list(args)))

    def prepare(self, grid, block, args, *, shared_bytes=0, context=""):
        self.prepared += 1
        template = list(args)

        def launch(*operands, stream=None):
            filled = iter(operands)
            args = [next(filled) if arg is OPERAND else arg for arg in template]
            assert next(filled, None) is None, "more operands than slots"
            self.launches.append((grid, block, args))

        return launch


def record_kernel_lookups(monkeypatch, module) -> dict:
    """Replace ``module._kernel`` (a kernels module's cached kernel lookup) by one that
    counts its calls in ``seen["kernels"]`` and returns ``seen["kernel"]``, a
    RecordingKernel; device 0 stands for the current device. Returns ``seen``."""
    seen = {"kernels": 0, "kernel": RecordingKernel()}

    def kernel(algorithm, schedule, device_index):
        seen["kernels"] += 1
        return seen["kernel"], "context"

    monkeypatch.setattr(module, "_kernel", kernel)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return seen
