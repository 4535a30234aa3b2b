"""A kernel loader for launch tests without a GPU: it compiles nothing and records launches."""

from __future__ import annotations

from gsparse.runtime import OPERAND


class RecordingKernel:
    """Stands for a loaded kernel: each call of a prepared launch records ``(grid, block,
    shared_bytes, args)`` with the operand slots filled in, in parameter order."""

    def __init__(self) -> None:
        self.launches: list[tuple] = []
        self.prepared = 0

    def prepare(self, grid, block, args, *, shared_bytes=0, context=""):
        self.prepared += 1
        template = list(args)

        def launch(*operands, stream=None):
            filled = iter(operands)
            args = [next(filled) if arg is OPERAND else arg for arg in template]
            assert next(filled, None) is None, "more operands than slots"
            self.launches.append((grid, block, shared_bytes, args))

        return launch


class RecordingLoader:
    """A :class:`~gsparse.kernels.source.KernelLoader` whose kernels record: ``lookups``
    lists ``(program, name, device_index)`` per prepared launch, :attr:`launches` the launches."""

    def __init__(self) -> None:
        self.kernel_stub = RecordingKernel()
        self.lookups: list[tuple] = []

    def kernel(self, program, name, device_index):
        self.lookups.append((program, name, device_index))
        return self.kernel_stub

    @property
    def launches(self) -> list[tuple]:
        return self.kernel_stub.launches
