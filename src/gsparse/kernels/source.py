"""What every generated program shares: C type names, shipped device code, kernel
signatures, and the program object that ties a source to its kernels.

A kernel's parameters are declared once, as a :class:`Signature`: it prints the C
parameter list into the source and binds launch arguments by name, so a generator and its
launcher cannot disagree on their order. Scalars are converted to the C type the signature
declares (a Python int for a ``long long`` parameter becomes an int64), tensors are passed
as pointers, None as a null pointer, and :data:`OPERAND` marks an argument (a pointer or a
scalar) each call of a prepared launch fills in::

    SCALE = Signature("scale", [("const float* __restrict__", "x"), ("float* __restrict__", "out"),
                                ("long long", "n")])
    source = f"{SCALE.declaration(bounds=(256,))} {{ ... }}"
    launch = program.prepare("scale", device, grid, 256, x=OPERAND, out=OPERAND, n=len(x))
    launch(x=x, out=y)
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from .. import runtime

__all__ = [
    "ACCUMULATOR_TYPES",
    "INDEX_TYPES",
    "OPERAND",
    "PRELUDE",
    "SCALAR_TYPES",
    "TYPE_SUFFIXES",
    "KernelLoader",
    "Launch",
    "LaunchTemplate",
    "Program",
    "RUNTIME_LOADER",
    "Signature",
    "device_code",
    "device_index",
    "elementwise_expr",
    "identity_expr",
    "indent",
    "refuse_capture",
]

# C type of a feature element, and of its accumulator (half precision accumulates in fp32).
SCALAR_TYPES: dict[torch.dtype, str] = {
    torch.float16: "__half",
    torch.bfloat16: "__nv_bfloat16",
    torch.float32: "float",
    torch.float64: "double",
}
ACCUMULATOR_TYPES: dict[torch.dtype, str] = {
    torch.float16: "float",
    torch.bfloat16: "float",
    torch.float32: "float",
    torch.float64: "double",
}
INDEX_TYPES: dict[torch.dtype, str] = {torch.int32: "int", torch.int64: "long long"}
# How a fixed program's kernel names spell the element and index types they are made for.
TYPE_SUFFIXES: dict[torch.dtype, str] = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
                                         torch.float64: "f64", torch.int32: "i32", torch.int64: "i64"}

OPERAND = runtime.OPERAND


@functools.cache
def device_code(package: str, name: str) -> str:
    """The text of ``name``, fixed device code shipped in ``package`` (a ``.cu``/``.cuh``)."""
    return importlib.resources.files(package).joinpath(name).read_text()


# Spliced at the top of every program: storage <-> accumulator conversions, vector access.
PRELUDE = device_code(__package__, "prelude.cuh")


def device_index(device: torch.device) -> int:
    """The CUDA device index of tensors on ``device`` (always set for a CUDA tensor), or -1
    for any other device: plans built there only serve loaders that never launch (tests)."""
    return device.index if device.type == "cuda" else -1


def refuse_capture(g: Any, what: object) -> None:
    """RuntimeError when PyTorch's current stream on ``g``'s device is capturing a CUDA graph
    and ``g`` is a graph whose first calls may wait for the device.

    Choosing a schedule and building a launch plan happen on a call's first use. On a graph
    built by reading the device they may read it again, which a capture does not allow. A
    graph built without reading it (``g.sync_free``: a sampled block) chooses from what the
    host knows and builds its layouts with kernels on the stream, so its first calls may be
    captured, as a training step built on fresh blocks of static sizes is; the kernels
    themselves must have been loaded before (:class:`_RuntimeLoader` says so otherwise).
    Called only where plans are built, so a captured call whose plan exists costs nothing
    more.
    """
    if g.device.type == "cuda" and not g.sync_free and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            f"gsparse: the launch plan of {what} is built on its first call on a graph, and that "
            f"call came while a CUDA graph was being captured, where building it (schedule "
            f"choice, kernel loading, graph layouts) is not allowed. Run the same call once "
            f"before capturing: torch.compile(mode='reduce-overhead') warms up eagerly first, "
            f"so does a warm-up iteration before torch.cuda.graph")


def indent(text: str, spaces: int) -> str:
    """``text`` with every non-empty line indented by ``spaces``."""
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())


def elementwise_expr(expr: str) -> str:
    """``a + b`` -> ``a[i] + b[i]``: an algebra table's C expression over element ``i``."""
    return " ".join(f"{token}[i]" if token in ("a", "b") else token for token in expr.split(" "))


def identity_expr(value: float) -> str:
    """A reducer's identity as an expression of the accumulator type ``A``."""
    return {
        0.0: "A(0)",
        float("-inf"): "A(-__int_as_float(0x7f800000))",
        float("inf"): "A(__int_as_float(0x7f800000))",
    }[value]


# How a Python value becomes a by-value argument of each scalar C type a signature declares.
_SCALARS = {"int": runtime.i32, "long long": runtime.i64, "float": runtime.f32, "double": runtime.f64}
# Scalars are plain values, and plans of new graphs pass the same sizes again and again: the
# conversions of plain ints and floats are kept (anything else is converted each time).
_RECENT_SCALARS = {c_type: functools.lru_cache(maxsize=1024, typed=True)(convert)
                   for c_type, convert in _SCALARS.items()}
_SCALAR_C_TYPES = {"int": "int32_t", "long long": "int64_t", "float": "float", "double": "double"}
_SCALAR_OPERANDS = {exact: runtime.ScalarOperand(exact) for exact in _SCALAR_C_TYPES.values()}
_WRAP = 100  # columns of a printed parameter list


@dataclass(frozen=True)
class Signature:
    """A kernel's name and its parameters, ``(C type, name)`` in order.

    Pointer parameters (a ``*`` in their type) take tensors, None or :data:`OPERAND`;
    scalar parameters take Python numbers (or :class:`~gsparse.runtime.Scalar` of their
    exact C type), converted to the declared type, or :data:`OPERAND` (a number each call).
    """

    name: str
    params: tuple[tuple[str, str], ...]

    def __init__(self, name: str, params: Sequence[tuple[str, str]]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "params", tuple((c_type, pname) for c_type, pname in params))
        names = [pname for _, pname in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"kernel {name!r} declares a parameter twice: {names}")
        for c_type, pname in self.params:
            if "*" not in c_type and c_type not in _SCALARS:
                raise ValueError(f"parameter {pname!r} of {name!r} has type {c_type!r}: a pointer "
                                 f"or one of {sorted(_SCALARS)}")
        # Looked up once: every launch plan of a new graph binds its arguments by name.
        object.__setattr__(self, "_declared", frozenset(names))
        object.__setattr__(self, "_scalars", tuple(
            None if "*" in c_type else (_SCALARS[c_type], _RECENT_SCALARS[c_type], _SCALAR_C_TYPES[c_type])
            for c_type, _ in self.params))

    def declaration(self, bounds: tuple[int, ...] | None = None) -> str:
        """``extern "C" __global__ void [__launch_bounds__(...)]`` and the name with its
        parameter list, wrapped at 100 columns."""
        head = 'extern "C" __global__ void'
        if bounds:
            head += f" __launch_bounds__({', '.join(map(str, bounds))})"
        opening = f"{self.name}("
        lines = [opening]
        for i, (c_type, pname) in enumerate(self.params):
            item = f"{c_type} {pname}" + (")" if i == len(self.params) - 1 else ",")
            if lines[-1] == opening:
                lines[-1] += item
            elif len(lines[-1]) + 1 + len(item) > _WRAP:
                lines.append(" " * len(opening) + item)
            else:
                lines[-1] += " " + item
        if not self.params:
            lines = [f"{self.name}()"]
        return head + "\n" + "\n".join(lines)

    def arguments(self, values: Mapping[str, Any]) -> list[Any]:
        """The launch arguments in parameter order, from ``values`` by name.

        Raises TypeError naming any parameter missing from ``values``, any name the
        signature does not declare, and a scalar given to a pointer or the reverse.
        """
        return [self.argument(index, value) for index, value in enumerate(self.ordered(values))]

    def ordered(self, values: Mapping[str, Any]) -> list[Any]:
        """``values`` in parameter order, as they are (for a launch whose parameters are all
        :data:`OPERAND`); TypeError naming any parameter missing or not declared."""
        if values.keys() != self._declared:
            if missing := [pname for _, pname in self.params if pname not in values]:
                raise TypeError(f"kernel {self.name!r}: no value for {missing}")
            unknown = sorted(set(values) - self._declared)
            raise TypeError(f"kernel {self.name!r} has no parameters {unknown}; it takes "
                            f"{[pname for _, pname in self.params]}")
        return [values[pname] for _, pname in self.params]

    def argument(self, index: int, value: Any) -> Any:
        """``value`` as the launch argument of parameter ``index``; TypeError or ValueError
        naming the parameter when it cannot be one."""
        scalar = self._scalars[index]
        # The common kinds first (a plan binds a dozen arguments per graph): a tensor, None
        # or OPERAND for a pointer, a plain number for a scalar.
        if scalar is None:
            if value is None or value is OPERAND or type(value) is _Tensor:
                return value
        elif type(value) is int or type(value) is float:
            try:
                return scalar[1](value)
            except (TypeError, ValueError):
                pass  # _argument raises, naming the parameter
        c_type, pname = self.params[index]
        return _argument(self.name, c_type, pname, value, scalar)


_Tensor = torch.Tensor


def _argument(kernel: str, c_type: str, name: str, value: Any, scalar: tuple | None) -> Any:
    """``value`` as the launch argument of parameter ``name``; ``scalar`` is None for a
    pointer, else ``(converter, its cached twin for plain numbers, its C type)``."""
    if scalar is None:
        if value is None or value is OPERAND or isinstance(value, _Tensor):
            return value
        raise TypeError(f"kernel {kernel!r}: pointer parameter {name!r} ({c_type}) takes a tensor, "
                        f"None or OPERAND, got {type(value).__name__}")
    convert, recent, exact = scalar
    if isinstance(value, runtime.Scalar):
        if value.c_type != exact:
            raise TypeError(f"kernel {kernel!r}: parameter {name!r} is a {c_type}, got a "
                            f"{value.c_type} scalar")
        return value
    if value is OPERAND:
        return _SCALAR_OPERANDS[exact]
    if value is None or isinstance(value, _Tensor):
        raise TypeError(f"kernel {kernel!r}: scalar parameter {name!r} ({c_type}) takes a number, "
                        f"got {value!r}")
    try:
        return recent(value) if type(value) is int or type(value) is float else convert(value)
    except (TypeError, ValueError) as error:
        raise type(error)(f"kernel {kernel!r}: parameter {name!r} ({c_type}): {error}") from None


class Launch:
    """A prepared launch whose :data:`OPERAND` parameters each call passes by name."""

    def __init__(self, prepared: Any, operands: tuple[str, ...]) -> None:
        self._prepared = prepared
        self._operands = operands

    @property
    def operands(self) -> tuple[str, ...]:
        """The parameters each call fills in, in order."""
        return self._operands

    def __call__(self, **operands: torch.Tensor | None) -> None:
        if len(operands) != len(self._operands) or any(n not in operands for n in self._operands):
            raise TypeError(f"this launch takes the operands {list(self._operands)}, "
                            f"got {sorted(operands)}")
        self._prepared(*[operands[name] for name in self._operands])

    def positional(self, *names: str) -> Callable[..., None]:
        """The launch as a function of ``names`` given by position, a superset of its
        operands (the others are ignored): for per-call paths, which pass the same operands
        every time and need no keyword handling."""
        if names == self._operands:
            # A runtime launch's bound __call__: calling the instance itself costs a slot
            # lookup and an argument tuple more per call.
            prepared = self._prepared
            return prepared.__call__ if isinstance(prepared, runtime.PreparedLaunch) else prepared
        index = _positions(self._operands, names)
        prepared = self._prepared

        def launch(*values: torch.Tensor | None) -> None:
            prepared(*[values[i] for i in index])

        return launch


@functools.lru_cache(maxsize=256)
def _positions(operands: tuple[str, ...], names: tuple[str, ...]) -> tuple[int, ...]:
    """Where each of ``operands`` is among ``names`` (TypeError when one is not)."""
    if missing := [name for name in operands if name not in names]:
        raise TypeError(f"this launch takes the operands {list(operands)}; {missing} "
                        f"are not among {list(names)}")
    return tuple(names.index(name) for name in operands)


class KernelLoader(Protocol):
    """Turns a program's kernel into something that prepares launches: the runtime on a
    GPU, a recorder in tests."""

    def kernel(self, program: Program, name: str, device_index: int) -> Any: ...


class _RuntimeLoader:
    """Compiles (through the disk cache) and loads kernels on a CUDA device, once per
    program, kernel and device: later lookups skip hashing the source."""

    def kernel(self, program: Program, name: str, device_index: int) -> runtime.Kernel:
        key = (name, device_index)
        found = program.loaded.get(key)
        if found is None:
            if torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing():
                # Compiling and loading a module is no stream work: a capture cannot hold it.
                raise RuntimeError(
                    f"gsparse: kernel {name} ({program.context}) is first needed while a CUDA "
                    f"graph is being captured, where it cannot be compiled or loaded. Run the "
                    f"same step once before capturing (a warm-up iteration before "
                    f"torch.cuda.graph), so that its kernels are loaded")
            found = program.loaded[key] = runtime.get_kernel(
                program.source, name, context=program.context, device=device_index)
        return found


RUNTIME_LOADER: KernelLoader = _RuntimeLoader()


@dataclass(frozen=True, eq=False)
class Program:
    """Generated CUDA C++ and the signatures of its kernels.

    Attributes:
        source: the whole program.
        kernels: the signature of each ``extern "C"`` kernel, by name.
        context: what the program computes and how (algorithm and schedule), quoted in
            compile and launch errors.
        loaded: kernels loaded so far, by (name, device index); filled by the loader.
    """

    source: str
    kernels: Mapping[str, Signature]
    context: str
    loaded: dict[tuple[str, int], Any] = field(default_factory=dict, repr=False)

    def prepare(self, name: str, device_index: int, grid: tuple[int, ...] | int, block: int, *,
                shared_bytes: int = 0, loader: KernelLoader = RUNTIME_LOADER,
                **arguments: Any) -> Launch:
        """A launch of kernel ``name`` with every parameter given by name (see
        :meth:`Signature.arguments`); call it with the :data:`OPERAND` ones."""
        return LaunchTemplate(self, name, (), **arguments).prepare(
            device_index, grid, block, shared_bytes=shared_bytes, loader=loader)


class LaunchTemplate:
    """The launches of one kernel of ``program`` that differ only in a graph's arguments
    (``graph``, by name) and the :data:`OPERAND` ones, each call's: every other argument is
    bound here, once. A plan keeps one per task, schedule and device, so that the plan of a
    new graph binds only that graph's values (:meth:`prepare`).

    A graph that serves one training step (a sampler's block) takes them at every call of
    one launch prepared for all such graphs (``prepare(..., late=True)``): preparing a
    launch per graph cost more host time than the graph's one or two calls of it."""

    def __init__(self, program: Program, name: str, graph: Sequence[str], **fixed: Any) -> None:
        signature = program.kernels[name]
        where = {pname: index for index, (_, pname) in enumerate(signature.params)}
        self.program, self.name, self.graph = program, name, tuple(graph)
        self._signature = signature
        self._slots = tuple(where[pname] for pname in self.graph)
        # The graph's slots hold placeholders of their kind (a null pointer, a zero) until a
        # graph's values replace them.
        self._args = signature.arguments(
            {**fixed, **{pname: None if "*" in signature.params[where[pname]][0] else 0
                         for pname in self.graph}})
        self.operands = tuple(pname for (_, pname), arg in zip(signature.params, self._args, strict=True)
                              if arg is OPERAND or type(arg) is runtime.ScalarOperand)
        self._late: dict[tuple[int, int, int], _LateLaunch] = {}

    def prepare(self, device_index: int, grid: tuple[int, ...] | int, block: int, *values: Any,
                shared_bytes: int = 0, loader: KernelLoader = RUNTIME_LOADER, late: bool = False) -> Launch:
        """The launch on a graph whose arguments are ``values``, in the order of ``graph``
        (see :meth:`Program.prepare`); with ``late``, through the launch shared by every
        graph's values (see the class docstring)."""
        if late:
            return self._late_launch(device_index, block, shared_bytes, loader).bind(values, grid)
        args = self._args.copy()
        argument = self._signature.argument
        for slot, value in zip(self._slots, values, strict=True):
            args[slot] = argument(slot, value)
        kernel = loader.kernel(self.program, self.name, device_index)
        prepared = kernel.prepare(grid, block, args, shared_bytes=shared_bytes,
                                  context=self.program.context)
        return Launch(prepared, self.operands)

    def _late_launch(self, device_index: int, block: int, shared_bytes: int,
                     loader: KernelLoader) -> _LateLaunch:
        """The launch whose graph arguments are operands too, prepared once per device,
        block size and dynamic shared memory (and loader: tests record theirs)."""
        key = (device_index, block, shared_bytes)
        late = self._late.get(key)
        if late is None or late.loader is not loader:
            args = self._args.copy()
            for slot in self._slots:
                args[slot] = self._signature.argument(slot, OPERAND)
            kernel = loader.kernel(self.program, self.name, device_index)
            prepared = kernel.prepare(1, block, args, shared_bytes=shared_bytes, context=self.program.context)
            # Each slot of the shared launch, in parameter order: a graph value (its place in
            # ``graph``) or a call's operand (its place in ``operands``).
            graph_at = {slot: index for index, slot in enumerate(self._slots)}
            picks, operand = [], 0
            for position, arg in enumerate(args):
                if arg is OPERAND or type(arg) is runtime.ScalarOperand:
                    if position in graph_at:
                        picks.append((True, graph_at[position]))
                    else:
                        picks.append((False, operand))
                        operand += 1
            late = self._late[key] = _LateLaunch(prepared, loader, tuple(picks), self.operands)
        return late


class _LateLaunch:
    """A launch prepared with every graph argument an operand: :meth:`bind` gives one graph's
    :class:`Launch`, whose calls pass that graph's values with their operands."""

    __slots__ = ("prepared", "loader", "picks", "operands", "_picks_by_names")

    def __init__(self, prepared: Any, loader: KernelLoader, picks: tuple[tuple[bool, int], ...],
                 operands: tuple[str, ...]) -> None:
        self.prepared, self.loader, self.picks, self.operands = prepared, loader, picks, operands
        self._picks_by_names: dict[tuple[str, ...], tuple[tuple[bool, int], ...]] = {}

    def bind(self, values: tuple[Any, ...], grid: tuple[int, ...] | int) -> Launch:
        return _BoundLaunch(self, values, grid)

    def picks_for(self, names: tuple[str, ...]) -> tuple[tuple[bool, int], ...]:
        """Each slot's source for calls that pass ``names`` in that order: a graph value (its
        place among the bound graph's values) or a call's argument (its place among them).
        The same for every graph bound, so worked out once per order of names."""
        picks = self._picks_by_names.get(names)
        if picks is None:
            at = _positions(self.operands, names)
            picks = self._picks_by_names[names] = tuple(
                (True, index) if of_graph else (False, at[index]) for of_graph, index in self.picks)
        return picks


class _BoundLaunch(Launch):
    """One graph's launch through a :class:`_LateLaunch`: its positional form fills the
    shared launch's slots from the graph's values and the call's operands in one pass."""

    def __init__(self, late: _LateLaunch, values: tuple[Any, ...], grid: tuple[int, ...] | int) -> None:
        self._late, self._values, self._grid = late, values, grid
        super().__init__(self._positional(late.operands), late.operands)

    def positional(self, *names: str) -> Callable[..., None]:
        return self._positional(names)

    def _positional(self, names: tuple[str, ...]) -> Callable[..., None]:
        prepared, values, grid = self._late.prepared, self._values, self._grid
        picks = self._late.picks_for(names)

        def launch(*operands: Any) -> None:
            prepared(*[values[index] if of_graph else operands[index] for of_graph, index in picks],
                     grid=grid)

        return launch
