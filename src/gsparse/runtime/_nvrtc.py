"""NVRTC: version, target architectures, header search path, and CUDA C++ -> CUBIN.

The facts about the installed NVRTC (its version, the architectures it targets, where the
CUDA headers are) do not change while a process runs, so they are looked up once.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from . import _bindings
from ._errors import CompileError

# Options every program gets, before the caller's. No --use_fast_math: kernels are checked
# for exactness against a float64 reference. --ptxas-options=-v puts the resource report
# (registers, shared memory, spills) into the log, where _binary.read_resources reads it.
DEFAULT_OPTIONS = ("-std=c++17", "-default-device", "--ptxas-options=-v")

# From 12.9 on, NVRTC hands back the CUBIN the CUDA driver's compute cache holds for the same
# PTX and options (built before in this process, or by another one through the cache on disk)
# without running ptxas, so the log holds no resource report. --no-cache runs ptxas on every
# compile and changes no code. NVRTC before 12.9 has neither the cache nor the option. It is
# not in DEFAULT_OPTIONS, which go into cache keys: the NVRTC version there decides it.
_NO_CACHE_SINCE = (12, 9)

_REAL_ARCH = re.compile(r"sm_(\d+)[af]?")


@functools.cache
def _library() -> ModuleType:
    """The NVRTC bindings, after checking that libnvrtc itself loads."""
    bindings = _bindings.nvrtc()
    try:
        _check(bindings, bindings.nvrtcVersion(), "nvrtcVersion")
    except RuntimeError as exc:  # cuda-pathfinder raises a RuntimeError when libnvrtc is missing
        raise RuntimeError(f"{_bindings.NVRTC_MISSING} ({exc})") from exc
    return bindings


def _check(bindings: ModuleType, result: tuple, call: str) -> tuple:
    """The values an NVRTC call returned after its status, or RuntimeError if it failed."""
    status, *values = result
    if status != bindings.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{call} failed: {status.name}")
    return tuple(values)


@functools.cache
def nvrtc_version() -> tuple[int, int] | None:
    """(major, minor) of the NVRTC library, or None when it cannot be loaded."""
    try:
        bindings = _library()
    except RuntimeError:
        return None
    major, minor = _check(bindings, bindings.nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


@functools.cache
def supported_arch_numbers() -> tuple[int, ...]:
    """The numbers of :func:`supported_archs` (RuntimeError when NVRTC is not available)."""
    bindings = _library()
    (archs,) = _check(bindings, bindings.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
    return tuple(sorted(int(a) for a in archs))


def supported_archs() -> list[str]:
    """The real architectures NVRTC builds CUBINs for, oldest first: ["sm_75", ..., "sm_90"].

    Raises RuntimeError when NVRTC is not available.
    """
    return [f"sm_{n}" for n in supported_arch_numbers()]


def arch_number(arch: str) -> int:
    """``"sm_90"`` -> 90; ValueError for anything that is not a real architecture."""
    match = _REAL_ARCH.fullmatch(arch) if isinstance(arch, str) else None
    if match is None:
        raise ValueError(
            f"arch must name a real GPU architecture such as 'sm_90' (a CUBIN is built, "
            f"never PTX), got {arch!r}"
        )
    return int(match.group(1))


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Directories that hold the CUDA headers (``cuda_fp16.h``, ``cuda_bf16.h``, ...).

    NVRTC ships without them. They come from the ``nvidia-cuda-runtime`` wheel (installed
    next to NVRTC's wheel under ``site-packages/nvidia/cu<major>/include``, or
    ``nvidia/cuda_runtime/include`` for CUDA 12 wheels), else from a CUDA toolkit
    ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda). Wheels come first because their headers match
    the wheel's NVRTC. Empty when none is found; programs that include no CUDA header still
    compile.
    """
    version = nvrtc_version()
    major = version[0] if version else None
    wheel_subdirs = [f"cu{major}/include"] if major else []
    wheel_subdirs.append("cuda_runtime/include")
    candidates = [root / sub for root in _nvidia_wheel_roots() for sub in wheel_subdirs]
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            candidates.append(Path(os.environ[variable]) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    for directory in candidates:
        if (directory / "cuda_fp16.h").is_file():
            return (str(directory),)
    return ()


def _nvidia_wheel_roots() -> list[Path]:
    """Every ``site-packages/nvidia`` directory (a namespace package shared by NVIDIA's wheels)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(location) for location in spec.submodule_search_locations]


def compile_to_cubin(
    source: str, *, arch: str, options: Sequence[str], name: str, context: str
) -> tuple[bytes, str]:
    """Compile ``source`` to a CUBIN for ``arch``; returns (cubin, log).

    Raises CompileError (naming ``name`` and ``context``) when NVRTC rejects the program or
    an option, ValueError when ``arch`` is not a real architecture NVRTC targets.
    """
    bindings = _library()
    number = arch_number(arch)
    if number not in supported_arch_numbers():
        raise ValueError(
            f"arch {arch!r} is not supported by NVRTC {nvrtc_version()}; "
            f"it targets {supported_archs()}"
        )
    all_options = [
        f"--gpu-architecture={arch}",
        *DEFAULT_OPTIONS,
        *(["--no-cache"] if nvrtc_version() >= _NO_CACHE_SINCE else []),
        *(f"-I{directory}" for directory in cuda_include_dirs()),
        *options,
    ]
    file_name = f"{name}.cu"
    (program,) = _check(
        bindings,
        bindings.nvrtcCreateProgram(source.encode(), file_name.encode(), 0, [], []),
        "nvrtcCreateProgram",
    )
    try:
        (status,) = bindings.nvrtcCompileProgram(
            program, len(all_options), [option.encode() for option in all_options]
        )
        log = _program_log(bindings, program)
        if status != bindings.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(_compile_error_message(source, file_name, arch, context, log))
        (size,) = _check(bindings, bindings.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize")
        cubin = bytearray(size)
        _check(bindings, bindings.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
    finally:
        bindings.nvrtcDestroyProgram(program)
    return bytes(cubin), log


def _program_log(bindings: ModuleType, program: object) -> str:
    (size,) = _check(bindings, bindings.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    # A fresh bytearray: the binding writes into the buffer it is given.
    buffer = bytearray(size)
    _check(bindings, bindings.nvrtcGetProgramLog(program, buffer), "nvrtcGetProgramLog")
    return buffer.decode(errors="replace").rstrip("\x00").rstrip()


def _compile_error_message(source: str, file_name: str, arch: str, context: str, log: str) -> str:
    where = f" [{context}]" if context else ""
    message = f"NVRTC could not compile {file_name} for {arch}{where}:\n{log}"
    lines = sorted({int(n) for n in re.findall(rf"{re.escape(file_name)}\((\d+)\)", log)})
    if lines:
        message += "\n\nsource around the reported lines:\n" + _numbered_excerpt(source, lines)
    return message


def _numbered_excerpt(source: str, lines: Sequence[int], around: int = 2) -> str:
    """The given 1-based lines of ``source`` with ``around`` lines either side, numbered."""
    source_lines = source.splitlines()
    shown = sorted(
        {
            n
            for line in lines
            for n in range(line - around, line + around + 1)
            if 1 <= n <= len(source_lines)
        }
    )
    width = len(str(shown[-1])) if shown else 1
    out, previous = [], None
    for n in shown:
        if previous is not None and n != previous + 1:
            out.append(" " * width + " ...")
        marker = ">" if n in lines else " "
        out.append(f"{n:>{width}}{marker} {source_lines[n - 1]}")
        previous = n
    return "\n".join(out)
