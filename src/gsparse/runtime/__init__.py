"""The runtime layer: CUDA C++ -> CUBIN with NVRTC, the disk cache, module loading, launches.

The only part of gsparse that touches CUDA. Everything above it hands over source text and
gets back a :class:`Kernel` to launch with tensors and typed scalars::

    kernel = get_kernel(source, "scale", context=str(schedule))
    kernel.launch(grid, block, [x, out, i32(n), f32(alpha)])

A launch repeated with new tensors is prepared once and then called with them, which skips
converting the other arguments and checking the geometry again::

    scale = kernel.prepare(grid, block, [OPERAND, OPERAND, i32(n), f32(alpha)])
    scale(x, out)

A :class:`ScalarOperand` slot takes a number per call, and ``grid=`` another grid, for a
kernel launched on inputs of any size::

    scale = kernel.prepare(1, block, [OPERAND, OPERAND, ScalarOperand("int32_t"), f32(alpha)])
    scale(x, out, len(x), grid=(len(x) + block - 1) // block)

Compiling needs only NVRTC (``pip install 'gsparse[cuda]'``), not a GPU: pass ``arch=``
to :func:`compile_cuda` to build for ``sm_80`` / ``sm_90`` anywhere and read the resource
report. The bindings are imported on first use, so importing this module never fails.

Compiled programs are cached on disk in :func:`default_cache_dir` (``$GSPARSE_CACHE_DIR``,
else ``$XDG_CACHE_HOME/gsparse`` or ``~/.cache/gsparse``).
"""

from ._arguments import Scalar, ScalarOperand, f32, f64, i32, i64
from ._binary import Binary, Resources
from ._cache import KernelCache, cache_key, default_cache_dir
from ._compile import compile_cuda, device_arch
from ._driver import OPERAND, Kernel, Module, PreparedLaunch, current_stream_handle, get_kernel, load
from ._errors import CompileError, LaunchError
from ._nvrtc import nvrtc_version, supported_archs

__all__ = [
    "Binary",
    "CompileError",
    "Kernel",
    "KernelCache",
    "LaunchError",
    "Module",
    "OPERAND",
    "PreparedLaunch",
    "Resources",
    "Scalar",
    "ScalarOperand",
    "cache_key",
    "compile_cuda",
    "current_stream_handle",
    "default_cache_dir",
    "device_arch",
    "f32",
    "f64",
    "get_kernel",
    "i32",
    "i64",
    "load",
    "nvrtc_version",
    "supported_archs",
]
