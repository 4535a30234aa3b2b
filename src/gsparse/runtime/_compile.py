"""CUDA C++ source -> :class:`Binary`, through the disk cache."""

from __future__ import annotations

import enum
import warnings
from collections.abc import Sequence
from typing import Final, Literal

import torch

from . import _nvrtc, _toolchain
from ._binary import Binary, read_resources
from ._cache import KernelCache, cache_key
from ._device import cuda_device_index


class _Default(enum.Enum):
    CACHE = enum.auto()


# compile_cuda's default: a KernelCache in default_cache_dir(), made at call time so that
# $GSPARSE_CACHE_DIR is read when compiling, not when gsparse is imported.
_DEFAULT_CACHE: Final = _Default.CACHE


def device_arch(device: int | str | torch.device | None = None) -> str:
    """The architecture to build for the given GPU (PyTorch's current one by default).

    The GPU's compute capability, e.g. ``"sm_90"`` for an H100. When the installed NVRTC
    is older than the GPU, the newest architecture NVRTC supports within the GPU's family
    (same major version) is used: such a CUBIN runs on the GPU, one of another family does
    not, so that case raises RuntimeError asking for a newer NVRTC.
    """
    if not torch.cuda.is_available():
        raise RuntimeError(
            "no CUDA GPU is available to pick an architecture for; pass arch='sm_90' "
            "(or another) to compile without one"
        )
    major, minor = torch.cuda.get_device_capability(cuda_device_index(device))
    capability = 10 * major + minor
    usable = [n for n in _toolchain.facts().archs if n // 10 == major and n <= capability]
    if not usable:
        supported = _nvrtc.supported_archs()  # loads NVRTC: a RuntimeError saying how to install it if missing
        raise RuntimeError(
            f"the GPU is sm_{capability} but NVRTC {_nvrtc.nvrtc_version()} only builds for "
            f"{supported}; install a newer nvidia-cuda-nvrtc"
        )
    return f"sm_{max(usable)}"


def compile_cuda(
    source: str,
    *,
    arch: str | None = None,
    options: Sequence[str] = (),
    name: str = "gsparse",
    context: str = "",
    cache: KernelCache | None | Literal[_Default.CACHE] = _DEFAULT_CACHE,
) -> Binary:
    """Compile CUDA C++ to a CUBIN with NVRTC, or fetch it from the kernel cache.

    Args:
        source: the program; kernels meant to be launched are ``extern "C" __global__`` so
            their names are plain. ``cuda_fp16.h`` / ``cuda_bf16.h`` can be included.
        arch: a real architecture (``"sm_80"``, ``"sm_90"``); None means
            :func:`device_arch` of the current GPU. No GPU is needed when it is given.
        options: extra NVRTC options, after the defaults ``-std=c++17 -default-device
            --ptxas-options=-v`` (and ``--no-cache`` from NVRTC 12.9 on, so that ptxas's
            resource report is in every log) and the CUDA header path. Fast math is off
            unless asked for.
        name: the program's name: NVRTC's log refers to ``<name>.cu``.
        context: what produced the source (e.g. the schedule), quoted in a CompileError.
        cache: where to look the program up and store it; the default is a
            :class:`KernelCache` in :func:`default_cache_dir`, None compiles every time.

    A cache hit returns without invoking NVRTC. A cache that cannot be written (read-only
    or full disk) gives a RuntimeWarning, not an error: the compiled program is returned.

    Raises:
        CompileError: NVRTC rejected the source or an option.
        ValueError: ``arch`` is not a real architecture that NVRTC targets.
        RuntimeError: NVRTC is not installed, or its log lacks ptxas's resource report of a
            kernel of the CUBIN (NVRTC handed back a build of its own cache).
    """
    if arch is None:
        arch = device_arch()
    _nvrtc.arch_number(arch)  # rejects "compute_90" and typos before any cache lookup
    options = tuple(options)
    store = KernelCache() if cache is _DEFAULT_CACHE else cache
    key = cache_key(source, arch, options)
    if store is not None and (hit := store.get(key)) is not None:
        return hit
    if _toolchain.facts().from_memo:
        # The key's NVRTC version came from the memo; compiling loads NVRTC itself, and a
        # program is stored under the version that builds it.
        _toolchain.loaded()
        if (fresh := cache_key(source, arch, options)) != key:
            key = fresh
            if store is not None and (hit := store.get(key)) is not None:
                _toolchain.remember(store.directory)  # the memo read back was stale
                return hit
    cubin, log = _nvrtc.compile_to_cubin(
        source, arch=arch, options=options, name=name, context=context
    )
    binary = Binary(
        cubin=cubin, arch=arch, log=log, resources=read_resources(cubin, log), key=key
    )
    if store is not None:
        try:
            store.put(binary)
            _toolchain.remember(store.directory)
        except OSError as exc:
            warnings.warn(
                f"could not write the kernel cache in {store.directory}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
    return binary
