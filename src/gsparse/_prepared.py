"""Launches of a fixed program's kernels, prepared once per kernel and device.

The fixed programs (the checks of sampled blocks, the gather of a batch's features) are
launched on every training step with new tensors and sizes. Binding and converting a
one-off launch's arguments would cost the host more than the launch itself (about 20 µs of
30 on an H200 machine), so each kernel is compiled (or fetched from the disk cache) and
prepared on its device's first call, with every parameter a slot, the sizes included; a
call then fills the slots and passes its grid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from . import runtime

if TYPE_CHECKING:
    from .kernels.source import Signature


class PreparedLaunches:
    """The prepared launches of the kernels of ``source()`` (one program), by (kernel name,
    device index), each of ``block`` threads; ``context`` names the program in errors."""

    def __init__(self, source: Callable[[], str], context: str, block: int) -> None:
        self.source, self.context, self.block = source, context, block
        self._prepared: dict[tuple[str, int], runtime.PreparedLaunch] = {}

    def __call__(self, signature: Signature, device_index: int) -> runtime.PreparedLaunch:
        launch = self._prepared.get((signature.name, device_index))
        if launch is None:
            kernel = runtime.get_kernel(self.source(), signature.name, context=self.context,
                                        device=device_index)
            slots = signature.arguments({pname: runtime.OPERAND for _, pname in signature.params})
            launch = self._prepared[(signature.name, device_index)] = kernel.prepare(
                1, self.block, slots, context=self.context)
        return launch
