"""A kernel loader that records launches instead of running them, for plan tests without a GPU.

Plans are built with ``build_plan(..., loader=RecordingLoader())``: every kernel a plan
prepares is looked up through the loader, and every call of the plan records, per kernel,
the launch it would make, with each argument under its parameter name and the operand
slots filled in by that call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gsparse.runtime import OPERAND, Scalar, ScalarOperand


@dataclass(frozen=True)
class Launch:
    """One recorded launch.

    Attributes:
        grid, block, shared_bytes: its geometry, as the plan gave it.
        args: every argument by parameter name: tensors (or None) as passed, scalars as
            Python numbers.
        c_types: the C type of each scalar argument (``"int32_t"``, ``"int64_t"``, ...).
    """

    grid: Any
    block: Any
    shared_bytes: int
    args: dict[str, Any]
    c_types: dict[str, str]


class RecordingLoader:
    """A :class:`gsparse.kernels.source.KernelLoader` whose kernels record their launches.

    Attributes:
        loaded: the kernel names looked up, in order (a plan looks each kernel up once).
        prepared: the kernel names of the launches prepared, in order.
        order: the kernel names of the launches made, in order.
        launches: each kernel's launches, by kernel name.
    """

    def __init__(self) -> None:
        self.loaded: list[str] = []
        self.prepared: list[str] = []
        self.order: list[str] = []
        self.launches: dict[str, list[Launch]] = {}

    def kernel(self, program, name: str, device_index: int) -> _RecordingKernel:
        self.loaded.append(name)
        return _RecordingKernel(self, name, [pname for _, pname in program.kernels[name].params])

    def only(self, name: str) -> Launch:
        """The one launch of kernel ``name`` (AssertionError unless there is exactly one)."""
        launches = self.launches.get(name, [])
        assert len(launches) == 1, f"{name} launched {len(launches)} times, not once"
        return launches[0]

    def clear(self) -> None:
        """Forget the launches made so far (not the lookups)."""
        self.order.clear()
        self.launches.clear()


class _RecordingKernel:
    def __init__(self, loader: RecordingLoader, name: str, params: list[str]) -> None:
        self._loader = loader
        self._name = name
        self._params = params

    def prepare(self, grid, block, args, *, shared_bytes: int = 0, context: str = ""):
        assert len(args) == len(self._params), "one argument per parameter"
        self._loader.prepared.append(self._name)
        template = list(args)

        def launch(*operands, grid=grid):
            filled = iter(operands)
            values = [next(filled) if arg is OPERAND else
                      Scalar(arg.c_type, next(filled)) if isinstance(arg, ScalarOperand) else arg
                      for arg in template]
            assert next(filled, None) is None, "more operands than slots"
            record = Launch(
                grid, block, shared_bytes,
                args={p: v.value if isinstance(v, Scalar) else v for p, v in zip(self._params, values)},
                c_types={p: v.c_type for p, v in zip(self._params, values) if isinstance(v, Scalar)},
            )
            self._loader.order.append(self._name)
            self._loader.launches.setdefault(self._name, []).append(record)

        return launch
