"""Loading CUBINs and launching kernels with the CUDA driver API, inside PyTorch's context.

PyTorch allocates tensors and runs its streams in each device's *primary context* (the one
the CUDA runtime uses). Modules are loaded into that same context, so kernels can take
PyTorch's pointers and run on PyTorch's streams. Whenever a different context is current
on the calling thread, ours is pushed for the duration of the call and popped afterwards,
so PyTorch's notion of the current device is never changed behind its back.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import operator
import struct
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from . import _bindings
from ._arguments import POINTER, KernelArgument, ScalarOperand, operand_pointer, to_value
from ._binary import Binary
from ._cache import cache_key
from ._compile import compile_cuda, device_arch
from ._device import cuda_device_index
from ._errors import LaunchError

# Limits common to every architecture NVRTC targets (sm_75 and newer).
_MAX_THREADS_PER_BLOCK = 1024
_MAX_BLOCK = (1024, 1024, 64)
_MAX_GRID = (2**31 - 1, 65535, 65535)
# Dynamic shared memory above this needs the kernel's opt-in attribute raised first.
_DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024

Dim3 = tuple[int, int, int]


def _check(result: tuple, call: str) -> tuple:
    """The values a driver call returned after its status, or RuntimeError if it failed."""
    status, *values = result
    if status != _bindings.driver().CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{call} failed: {_describe(status)}")
    return tuple(values)


def _describe(status: Any) -> str:
    """``CUDA_ERROR_X (the driver's description)``."""
    described, text = _bindings.driver().cuGetErrorString(status)
    if described == _bindings.driver().CUresult.CUDA_SUCCESS and text:
        return f"{status.name} ({text.decode()})"
    return status.name


def _make_current(context: Any) -> bool:
    """Make ``context`` current on this thread; True when it had to be pushed (pop it after)."""
    driver = _bindings.driver()
    (current,) = _check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(current) == int(context):
        return False
    _check(driver.cuCtxPushCurrent(context), "cuCtxPushCurrent")
    return True


@contextlib.contextmanager
def _current(context: Any) -> Iterator[None]:
    """Make ``context`` current on this thread for the block, restoring the previous one."""
    pushed = _make_current(context)
    try:
        yield
    finally:
        if pushed:
            _bindings.driver().cuCtxPopCurrent()


class Kernel:
    """One ``extern "C"`` kernel of a loaded :class:`Module`; made by :meth:`Module.function`."""

    name: str
    device: torch.device

    def __init__(self, name: str, function: Any, device_index: int, context: Any) -> None:
        self.name = name
        self.device = torch.device("cuda", device_index)
        self._function = function
        self._context = context
        self._dynamic_shared_limit = _DEFAULT_DYNAMIC_SHARED_LIMIT

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, device={self.device})"

    def launch(
        self,
        grid: tuple[int, ...] | int,
        block: tuple[int, ...] | int,
        args: Sequence[KernelArgument],
        *,
        shared_bytes: int = 0,
        stream: torch.cuda.Stream | int | None = None,
        context: str = "",
    ) -> None:
        """Launch on ``stream`` (PyTorch's current stream of the kernel's device by default).

        Args:
            grid: blocks in x, or (x, y[, z]); x < 2**31, y and z <= 65535.
            block: threads per block in x, or (x, y[, z]); at most 1024 in all.
            args: the kernel's parameters in order: CUDA tensors on the kernel's device
                (passed as data pointers), None (null pointer), scalars made with
                i32/i64/f32/f64 or NumPy scalars. Bare Python numbers are rejected.
            shared_bytes: dynamic shared memory per block; above 48 KiB the kernel's limit
                is raised first (once per new maximum).
            stream: a ``torch.cuda.Stream`` or a raw ``cudaStream_t`` handle.
            context: what is being launched (e.g. the schedule), quoted in errors.

        The launch is asynchronous: faults inside the kernel surface later, at the next
        synchronizing call. A launch repeated with other tensors is cheaper prepared once
        (:meth:`prepare`).

        Raises:
            LaunchError: bad geometry (checked before the GPU is touched), or the driver
                refused the launch.
            TypeError, ValueError: an argument of no explicit C type, or a tensor on
                another device; the message names its position.
        """
        self.prepare(grid, block, args, shared_bytes=shared_bytes, context=context)(stream=stream)

    def prepare(
        self,
        grid: tuple[int, ...] | int,
        block: tuple[int, ...] | int,
        args: Sequence[KernelArgument | object],
        *,
        shared_bytes: int = 0,
        context: str = "",
    ) -> PreparedLaunch:
        """A launch of this kernel whose geometry is checked and whose arguments are
        converted now; calling it fills in the slots of ``args`` in order (:data:`OPERAND`:
        a tensor or None; :class:`ScalarOperand`: a number) and launches. See :meth:`launch`
        for the arguments.

        For launches repeated with new tensors, where converting every argument would cost
        more than the rest of the call. The prepared launch keeps the tensors of ``args``
        alive and passes their data pointers as they are now.
        """
        grid3 = _dim3(grid if isinstance(grid, int) else tuple(grid))
        block3 = _dim3(block if isinstance(block, int) else tuple(block))
        shared_bytes = operator.index(shared_bytes)
        problem = _geometry_problem(grid3, block3, shared_bytes)
        if problem:
            raise _launch_error(self.name, context, grid3, block3, shared_bytes, problem)
        device_index = self.device.index
        formats, values, slots, tensors = [], [], [], []
        for position, arg in enumerate(args):
            if arg is OPERAND:
                formats.append(POINTER)
                values.append(0)
                slots.append((position, None))
            elif type(arg) is ScalarOperand:
                formats.append(arg.format)
                values.append(0)
                slots.append((position, arg.c_type))
            else:
                form, value = to_value(arg, position, device_index)
                formats.append(form)
                values.append(value)
                if isinstance(arg, torch.Tensor):
                    tensors.append(arg)
        if shared_bytes > self._dynamic_shared_limit:
            with _current(self._context):
                self._raise_shared_limit(shared_bytes, context, grid3, block3)
        return PreparedLaunch(self, grid3, block3, shared_bytes, tuple(formats), values, slots,
                              tensors, context)

    def _raise_shared_limit(self, shared_bytes: int, context: str, grid: Dim3, block: Dim3) -> None:
        """Let the kernel use ``shared_bytes`` of dynamic shared memory (its context current)."""
        driver = _bindings.driver()
        (status,) = driver.cuFuncSetAttribute(
            self._function,
            driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shared_bytes,
        )
        if status != driver.CUresult.CUDA_SUCCESS:
            raise _launch_error(self.name, context, grid, block, shared_bytes,
                                f"the GPU refused {shared_bytes} bytes of dynamic shared memory: "
                                f"{_describe(status)}")
        self._dynamic_shared_limit = shared_bytes


class _Operand:
    def __repr__(self) -> str:
        return "OPERAND"


OPERAND: Any = _Operand()
"""Marks an argument of :meth:`Kernel.prepare` that each call of the launch fills in."""


class PreparedLaunch:
    """A launch of one kernel with fixed geometry and arguments but for its operand slots;
    made by :meth:`Kernel.prepare`. Call it with the operands in slot order (CUDA tensors on
    the kernel's device or None for :data:`OPERAND`, numbers for a :class:`ScalarOperand`),
    optionally ``stream=`` and ``grid=`` (another grid for this call: a kernel of grid-stride
    loops launched on inputs of any size). Safe to call from several threads: a lock covers
    filling the slots and the launch."""

    def __init__(self, kernel: Kernel, grid: Dim3, block: Dim3, shared_bytes: int,
                 formats: tuple[str, ...], values: list[int | float],
                 slots: list[tuple[int, str | None]], tensors: list[torch.Tensor],
                 context: str) -> None:
        self._kernel = kernel
        self._block, self._shared_bytes = block, shared_bytes
        self._context = context
        # One buffer holds kernelParams (a void*[] of each parameter's address) and then the
        # parameters, each in an 8-byte word: one pack writes all of them.
        count = len(formats)
        storage = self._storage = (ctypes.c_uint64 * max(2 * count, 1))()
        self._params_address = base = ctypes.addressof(storage)
        _layout(formats).pack_into(storage, 0, *range(base + 8 * count, base + 16 * count, 8),
                                   *values)
        words = memoryview(storage).cast("B")
        views = {form: words.cast(form) for form in {formats[position] for position, _ in slots}}
        # Each slot as (a view of the words in its format, its item there, position, C type
        # of a scalar or None for a pointer).
        self._slots = []
        for position, c_type in slots:
            view = views[formats[position]]
            self._slots.append((view, (count + position) * 8 // view.itemsize, position, c_type))
        self._operand_count = len(slots)
        self._tensors = tensors  # alive as long as their pointers are in use
        self._lock = threading.Lock()
        # Looked up once: this is the per-call path, where each lookup is a visible share.
        self._device_index = kernel.device.index
        driver = self._driver = _bindings.driver()
        self._get_current = driver.cuCtxGetCurrent
        self._launch = driver.cuLaunchKernel
        self._success = driver.CUresult.CUDA_SUCCESS
        self._context_handle = int(kernel._context)
        self._function_and_geometry = (kernel._function, *grid, *block, shared_bytes)

    def __call__(self, *operands: torch.Tensor | int | float | None,
                 stream: torch.cuda.Stream | int | None = None,
                 grid: tuple[int, ...] | int | None = None) -> None:
        index = self._device_index
        if len(operands) != self._operand_count:
            raise TypeError(f"the launch of '{self._kernel.name}' takes {self._operand_count} "
                            f"operands, got {len(operands)}")
        stream_handle = current_stream_handle(index) if stream is None else _stream_handle(stream, index)
        launch_geometry = self._function_and_geometry if grid is None else self._regrid(grid)
        success = self._success
        with self._lock:
            for (view, item, position, c_type), operand in zip(self._slots, operands):
                if c_type is not None:
                    _fill_scalar(view, item, operand, position, c_type)
                # operand_pointer's common cases inline: a tensor on the kernel's device
                # (get_device() is -1 off CUDA, index never negative), or None.
                elif type(operand) is _Tensor and operand.get_device() == index:
                    view[item] = operand.data_ptr()
                elif operand is None:
                    view[item] = 0
                else:
                    view[item] = operand_pointer(operand, position, index)
            # Ours is the current context unless some library pushed another on this thread:
            # one driver call tells, and _make_current (which raises on failure) pushes.
            status, current = self._get_current()
            pushed = (status != success or int(current) != self._context_handle) and \
                _make_current(self._kernel._context)
            try:
                (status,) = self._launch(*launch_geometry, stream_handle, self._params_address, 0)
            finally:
                if pushed:
                    self._driver.cuCtxPopCurrent()
        if status != success:
            _, *geometry = launch_geometry
            raise _launch_error(self._kernel.name, self._context, tuple(geometry[:3]),
                                tuple(geometry[3:6]), geometry[6],
                                f"the driver returned {_describe(status)}")

    def _regrid(self, grid: tuple[int, ...] | int) -> tuple:
        """The launch's function and geometry with ``grid`` (checked) in place of its own."""
        grid3 = _dim3(grid if isinstance(grid, int) else tuple(grid))
        problem = _geometry_problem(grid3, self._block, self._shared_bytes)
        if problem:
            raise _launch_error(self._kernel.name, self._context, grid3, self._block,
                                self._shared_bytes, problem)
        return (self._kernel._function, *grid3, *self._block, self._shared_bytes)


def _fill_scalar(view: memoryview, item: int, value: int | float, position: int, c_type: str) -> None:
    """Store ``value`` in a scalar slot (its range and type checked by the view)."""
    try:
        view[item] = value
    except (TypeError, ValueError) as error:
        raise type(error)(f"argument {position} is a {c_type} operand slot; got {value!r} "
                          f"({error})") from None


@functools.lru_cache(maxsize=1024)
def _layout(formats: tuple[str, ...]) -> struct.Struct:
    """A launch's storage for parameters of these formats: the address of each, then each
    value in an 8-byte word (native byte order, as the GPU reads it)."""
    words = "".join(form + "x" * (8 - struct.calcsize("=" + form)) for form in formats)
    return struct.Struct("=" + "Q" * len(formats) + words)


_Tensor = torch.Tensor


def _launch_error(
    name: str, context: str, grid: Dim3, block: Dim3, shared_bytes: int, problem: str
) -> LaunchError:
    where = f" [{context}]" if context else ""
    return LaunchError(
        f"cannot launch kernel '{name}'{where}: {problem}; "
        f"grid={grid}, block={block}, shared_bytes={shared_bytes}"
    )


@functools.lru_cache(maxsize=4096)
def _dim3(value: tuple[int, ...] | int) -> Dim3:
    """(x, y, z) from an int or a 1- to 3-tuple, missing dimensions being 1."""
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3:
        raise TypeError(f"grid and block must be an int or 1 to 3 ints, got {value!r}")
    x, y, z = (*(operator.index(d) for d in dims), 1, 1)[:3]
    return x, y, z


@functools.lru_cache(maxsize=4096)
def _geometry_problem(grid: Dim3, block: Dim3, shared_bytes: int) -> str | None:
    """Why this launch geometry can never run, or None."""
    for what, dims, limits in (("grid", grid, _MAX_GRID), ("block", block, _MAX_BLOCK)):
        for axis, size, limit in zip("xyz", dims, limits, strict=True):
            if size < 1:
                return f"{what}.{axis} is {size}; every dimension must be >= 1"
            if size > limit:
                return f"{what}.{axis} is {size}, more than the limit of {limit}"
    threads = block[0] * block[1] * block[2]
    if threads > _MAX_THREADS_PER_BLOCK:
        return f"the block has {threads} threads, more than {_MAX_THREADS_PER_BLOCK}"
    if shared_bytes < 0:
        return f"shared_bytes must be >= 0, got {shared_bytes}"
    return None


def current_stream_handle(device_index: int) -> int:
    """PyTorch's current stream on the device, as a raw handle: without building a
    ``torch.cuda.Stream`` object, which would cost more than the rest of a launch."""
    return torch._C._cuda_getCurrentRawStream(device_index)


def _stream_handle(stream: torch.cuda.Stream | int | None, device_index: int) -> int:
    if stream is None:
        return current_stream_handle(device_index)
    if isinstance(stream, torch.cuda.Stream):
        if stream.device.index != device_index:
            raise ValueError(
                f"stream is on {stream.device}, but the kernel is loaded on cuda:{device_index}"
            )
        return stream.cuda_stream
    if isinstance(stream, int):
        return stream
    raise TypeError(f"stream must be a torch.cuda.Stream, a handle or None, got {stream!r}")


class Module:
    """A CUBIN loaded on one CUDA device, in PyTorch's primary context; made by :func:`load`."""

    binary: Binary
    device: torch.device

    def __init__(self, binary: Binary, device_index: int, handle: Any, context: Any) -> None:
        self.binary = binary
        self.device = torch.device("cuda", device_index)
        self._handle = handle
        self._context = context
        self._kernels: dict[str, Kernel] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"Module(key={self.binary.key[:12]}..., arch={self.binary.arch}, device={self.device})"
        )

    def function(self, name: str) -> Kernel:
        """The kernel ``name`` (the same object on every call, so its settings persist).

        Raises KeyError when the module has no such kernel.
        """
        with self._lock:
            kernel = self._kernels.get(name)
            if kernel is None:
                driver = _bindings.driver()
                with _current(self._context):
                    status, function = driver.cuModuleGetFunction(self._handle, name.encode())
                if status != driver.CUresult.CUDA_SUCCESS:
                    raise KeyError(
                        f"kernel {name!r} is not in the module ({_describe(status)}); "
                        f"its kernels are {sorted(self.binary.resources)}"
                    )
                kernel = self._kernels[name] = Kernel(
                    name, function, self.device.index, self._context
                )
            return kernel


class _LoadedModules:
    """Every module this process has loaded, by (binary key, device), and the contexts they
    live in. Modules stay loaded for the life of the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modules: dict[tuple[str, int], Module] = {}
        self._contexts: dict[int, Any] = {}

    def find(self, key: str, device_index: int) -> Module | None:
        return self._modules.get((key, device_index))

    def load(self, binary: Binary, device_index: int) -> Module:
        with self._lock:
            module = self._modules.get((binary.key, device_index))
            if module is None:
                context = self._primary_context(device_index)
                with _current(context):
                    status, handle = _bindings.driver().cuModuleLoadData(binary.cubin)
                if status != _bindings.driver().CUresult.CUDA_SUCCESS:
                    raise RuntimeError(
                        f"cannot load the {binary.arch} CUBIN (key {binary.key[:12]}...) on "
                        f"cuda:{device_index} ({torch.cuda.get_device_name(device_index)}): "
                        f"{_describe(status)}"
                    )
                module = Module(binary, device_index, handle, context)
                self._modules[(binary.key, device_index)] = module
            return module

    def _primary_context(self, device_index: int) -> Any:
        """The device's primary context, retained once: the one PyTorch's runtime uses."""
        context = self._contexts.get(device_index)
        if context is None:
            driver = _bindings.driver()
            torch.cuda.init()
            _check(driver.cuInit(0), "cuInit")
            (device,) = _check(driver.cuDeviceGet(device_index), "cuDeviceGet")
            (context,) = _check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
            self._contexts[device_index] = context
        return context


_LOADED = _LoadedModules()


def load(binary: Binary, device: int | str | torch.device | None = None) -> Module:
    """Load ``binary`` on a CUDA device (PyTorch's current one by default).

    Loaded modules are kept per (binary.key, device), so loading the same binary again is a
    dictionary lookup. Raises RuntimeError when the CUBIN cannot run on the device (e.g. it
    was built for another architecture family).
    """
    return _LOADED.load(binary, cuda_device_index(device))


def get_kernel(
    source: str,
    name: str,
    *,
    options: Sequence[str] = (),
    context: str = "",
    device: int | str | torch.device | None = None,
) -> Kernel:
    """The kernel ``name`` of ``source``, compiled for ``device`` (cached) and loaded there.

    Once a program is loaded, later calls cost one hash of the source: neither the disk
    cache nor NVRTC is consulted again.
    """
    index = cuda_device_index(device)
    arch = device_arch(index)
    module = _LOADED.find(cache_key(source, arch, options), index)
    if module is None:
        binary = compile_cuda(source, arch=arch, options=options, name=name, context=context)
        module = _LOADED.load(binary, index)
    return module.function(name)
