"""Tests of gsparse.runtime: NVRTC compiles, the resource report, the disk cache, launches.

NVRTC needs no GPU, so everything but the `gpu`-marked tests runs on CPU machines that have
the `cuda` extra installed; without it the NVRTC tests are skipped with the reason.
"""

from __future__ import annotations

import ctypes
import enum
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gsparse import runtime
from gsparse.runtime import (
    Binary,
    CompileError,
    Kernel,
    KernelCache,
    LaunchError,
    Resources,
    _bindings,
    _cubin,
    _driver,
    _nvrtc,
    _toolchain,
    cache_key,
    compile_cuda,
    f32,
    f64,
    i32,
    i64,
)

needs_nvrtc = pytest.mark.skipif(
    runtime.nvrtc_version() is None, reason="NVRTC is not installed (pip install 'gsparse[cuda]')"
)
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def on_gpu(test):
    """Mark a test `gpu`; it is skipped where there is no GPU or no NVRTC."""
    return pytest.mark.gpu(needs_gpu(needs_nvrtc(test)))


SCALE_SOURCE = r"""
extern "C" __global__ void scale_add_index(const float* a, float* out, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * s + (float)i;
}
"""

SHARED_SOURCE = r"""
extern "C" __global__ void reverse_block(float* data) {
    __shared__ float buf[1024];
    buf[threadIdx.x] = data[threadIdx.x];
    __syncthreads();
    data[threadIdx.x] = buf[1023 - threadIdx.x];
}
"""

# 64 accumulators kept live across a loop cannot fit in 32 registers, so ptxas spills.
SPILL_SOURCE = r"""
extern "C" __global__ void many_live_values(const float* __restrict__ a, float* out, int n) {
    float acc[64];
    #pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = a[j * n + threadIdx.x];
    for (int i = 0; i < n; ++i) {
        #pragma unroll
        for (int j = 0; j < 64; ++j) acc[j] = acc[j] * acc[(j + 1) & 63] + a[i * 64 + j];
    }
    #pragma unroll
    for (int j = 0; j < 64; ++j) out[j * n + threadIdx.x] = acc[j];
}
"""

# Two kernels, one with a mangled name, and a device function that is not one.
ENTRIES_SOURCE = r"""
__device__ __noinline__ float tripled(const float* a, int i) { return 3.0f * a[i]; }
template <int N> __global__ void shifted(float* a) { a[threadIdx.x] = tripled(a, N); }
template __global__ void shifted<4>(float*);
extern "C" __global__ void plain(float* a) { a[threadIdx.x] = tripled(a, threadIdx.x); }
"""

HALF_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void widen(const __half* h, const __nv_bfloat16* b, float* out) {
    int i = threadIdx.x;
    out[i] = __half2float(h[i]) + __bfloat162float(b[i]);
}
"""

BROKEN_SOURCE = """extern "C" __global__ void broken(float* a) {
    a[0] = undefined_identifier;
}
"""

# Each thread fills 64 slots of a 64 KiB dynamic buffer, then reads one another thread wrote.
DYNAMIC_SHARED_SOURCE = r"""
extern "C" __global__ void reverse_dynamic(float* out) {
    extern __shared__ float slots[];
    const int count = 16384;
    for (int k = threadIdx.x; k < count; k += blockDim.x) slots[k] = (float)k;
    __syncthreads();
    out[threadIdx.x] = slots[count - 1 - threadIdx.x];
}
"""

BOUNDED_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(128) bounded(float* out) {
    out[threadIdx.x] = 1.0f;
}
"""

PTXAS_LOG = """\
ptxas info    : 0 bytes gmem, 64 bytes cmem[3]
ptxas info    : Compiling entry function 'plain' for 'sm_80'
ptxas info    : Function properties for plain
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compile time = 7.865 ms
ptxas info    : Compiling entry function 'spilly' for 'sm_80'
ptxas info    : Function properties for spilly
ptxas         .     488 bytes stack frame, 696 bytes spill stores, 700 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 2048 bytes smem, \
1280 bytes cumulative stack size, 372 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""


@pytest.fixture(autouse=True)
def isolated_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own default cache directory, never the user's."""
    directory = tmp_path / "default-cache"
    monkeypatch.setenv("GSPARSE_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def cache(tmp_path: Path) -> KernelCache:
    return KernelCache(tmp_path / "kernels")


def offline_kernel(name: str = "k") -> Kernel:
    """A kernel with no GPU function behind it: launches must fail before reaching one."""
    return Kernel(name, function=None, device_index=0, context=None)


@pytest.fixture
def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any use of the CUDA driver fail loudly, to show a check ran before it."""

    def touched() -> None:
        raise AssertionError("the CUDA driver was touched")

    monkeypatch.setattr(_bindings, "driver", touched)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: touched())


# --- without NVRTC ---------------------------------------------------------------------


def test_import_and_compile_without_cuda_bindings() -> None:
    script = """
import sys
sys.modules["cuda.bindings"] = None  # makes `from cuda.bindings import ...` fail
import gsparse.runtime as runtime
assert runtime.nvrtc_version() is None
try:
    runtime.compile_cuda("", arch="sm_90", cache=None)
except RuntimeError as exc:
    print(exc)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "NVRTC is not available: pip install 'gsparse[cuda]'" in result.stdout


def test_parse_resources_reads_each_entry_function() -> None:
    resources = runtime._binary.parse_resources(PTXAS_LOG)
    assert resources == {
        "plain": Resources(
            registers=8,
            shared_bytes=0,
            stack_bytes=0,
            spill_stores=0,
            spill_loads=0,
            constant_bytes=360,
            barriers=0,
        ),
        "spilly": Resources(
            registers=32,
            shared_bytes=2048,
            stack_bytes=1280,
            spill_stores=696,
            spill_loads=700,
            constant_bytes=380,
            barriers=1,
        ),
    }


def test_parse_resources_leaves_out_incomplete_reports() -> None:
    log = (
        "ptxas info    : Compiling entry function 'half' for 'sm_90'\n"
        "ptxas info    : Used 4 registers\n"
    )
    assert runtime._binary.parse_resources(log) == {}
    assert runtime._binary.parse_resources("") == {}


def test_default_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GSPARSE_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert runtime.default_cache_dir() == tmp_path / "explicit"
    assert KernelCache().directory == tmp_path / "explicit"
    monkeypatch.delenv("GSPARSE_CACHE_DIR")
    assert runtime.default_cache_dir() == tmp_path / "xdg" / "gsparse"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert runtime.default_cache_dir() == tmp_path / "home" / ".cache" / "gsparse"


def test_cache_key_changes_with_source_arch_and_options() -> None:
    base = cache_key(SCALE_SOURCE, "sm_90", ())
    assert base == cache_key(SCALE_SOURCE, "sm_90", [])
    assert len(base) == 64
    others = {
        cache_key(SCALE_SOURCE + " ", "sm_90", ()),
        cache_key(SCALE_SOURCE, "sm_80", ()),
        cache_key(SCALE_SOURCE, "sm_90", ("-lineinfo",)),
        cache_key(SCALE_SOURCE, "sm_90", ("-DX=1", "-DY=2")),
        cache_key(SCALE_SOURCE, "sm_90", ("-DX=1 -DY=2",)),
    }
    assert len(others) == 5 and base not in others


def test_cache_rejects_keys_that_are_not_digests(cache: KernelCache) -> None:
    with pytest.raises(ValueError, match="sha256"):
        cache.get("../../etc/passwd")


def test_cache_round_trip_without_nvrtc(cache: KernelCache) -> None:
    binary = Binary(
        cubin=b"\x7fELF not really",
        arch="sm_90",
        log=PTXAS_LOG,
        resources=runtime._binary.parse_resources(PTXAS_LOG),
        key="ab" * 32,
    )
    assert cache.get(binary.key) is None
    cache.put(binary)
    assert cache.get(binary.key) == binary
    assert cache.clear() == 1
    assert cache.get(binary.key) is None
    assert list(cache.directory.iterdir()) == []


# --- scalar arguments and launch validation (no GPU) ----------------------------------


def test_scalar_wrappers_carry_their_c_type() -> None:
    assert i32(-5) == runtime.Scalar("int32_t", -5)
    assert i64(2**40) == runtime.Scalar("int64_t", 2**40)
    assert f32(1) == runtime.Scalar("float", 1.0)
    assert f64(0.1) == runtime.Scalar("double", 0.1)
    assert i32(np.int64(7)) == i32(7)


@pytest.mark.parametrize(
    ("make", "value", "error"),
    [
        (i32, 2**31, ValueError),
        (i32, -(2**31) - 1, ValueError),
        (i64, 2**63, ValueError),
        (i32, 1.5, TypeError),
        (i64, True, TypeError),
        (f32, "1.0", TypeError),
        (f64, None, TypeError),
    ],
)
def test_scalar_wrappers_reject_bad_values(make, value, error) -> None:
    with pytest.raises(error):
        make(value)


@pytest.mark.parametrize(
    ("arg", "error", "message"),
    [
        (3, TypeError, r"argument 1 is a bare Python int .*i32\(\.\.\.\) or i64"),
        (True, TypeError, "argument 1 is a bare Python bool"),
        (2.5, TypeError, r"argument 1 is a bare Python float .*f32\(\.\.\.\) or f64"),
        ("x", TypeError, "argument 1 has type str"),
        (np.float16(1), TypeError, "argument 1 has type float16"),
        (
            torch.zeros(3),
            ValueError,
            "argument 1 is a tensor on cpu, but the kernel is loaded on cuda:0",
        ),
    ],
)
def test_launch_rejects_arguments_before_touching_the_gpu(no_driver, arg, error, message) -> None:
    with pytest.raises(error, match=message):
        offline_kernel().launch(1, 32, [None, arg])


@pytest.mark.parametrize(
    ("grid", "block", "shared_bytes", "message"),
    [
        (1, 2048, 0, "block.x is 2048, more than the limit of 1024"),
        (1, (32, 32, 2), 0, "the block has 2048 threads"),
        (1, (1, 1, 65), 0, "block.z is 65, more than the limit of 64"),
        (0, 32, 0, "grid.x is 0; every dimension must be >= 1"),
        ((4, 70000), 32, 0, "grid.y is 70000, more than the limit of 65535"),
        (2**31, 32, 0, "grid.x is 2147483648"),
        (1, -1, 0, "block.x is -1"),
        (1, 32, -4, "shared_bytes must be >= 0"),
    ],
)
def test_launch_rejects_bad_geometry_before_touching_the_gpu(
    no_driver, grid, block, shared_bytes, message
) -> None:
    with pytest.raises(LaunchError, match=message) as caught:
        offline_kernel("my_kernel").launch(
            grid, block, [], shared_bytes=shared_bytes, context="schedule(kMTile=4)"
        )
    text = str(caught.value)
    assert "my_kernel" in text and "schedule(kMTile=4)" in text and "grid=" in text


def test_launch_geometry_must_be_ints(no_driver) -> None:
    with pytest.raises(TypeError):
        offline_kernel().launch((1, 2, 3, 4), 32, [])
    with pytest.raises(TypeError):
        offline_kernel().launch(1, 32.0, [])


# --- NVRTC -----------------------------------------------------------------------------


@needs_nvrtc
def test_supported_archs_include_ampere_and_hopper() -> None:
    archs = runtime.supported_archs()
    assert {"sm_80", "sm_90"} <= set(archs)
    assert archs == sorted(archs, key=lambda a: int(a[3:]))


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compile_reports_resources(arch: str) -> None:
    binary = compile_cuda(SCALE_SOURCE, arch=arch, cache=None)
    assert binary.arch == arch
    assert binary.cubin.startswith(b"\x7fELF")
    assert f"'scale_add_index' for '{arch}'" in binary.log
    report = binary.resources["scale_add_index"]
    assert report.registers > 0
    assert (report.spill_stores, report.spill_loads, report.stack_bytes) == (0, 0, 0)
    assert report.shared_bytes == 0


@needs_nvrtc
def test_static_shared_memory_is_reported() -> None:
    binary = compile_cuda(SHARED_SOURCE, arch="sm_90", cache=None)
    assert binary.resources["reverse_block"].shared_bytes == 4096
    assert binary.resources["reverse_block"].barriers >= 1


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_register_spills_are_reported(arch: str) -> None:
    binary = compile_cuda(SPILL_SOURCE, arch=arch, options=["-maxrregcount=32"], cache=None)
    report = binary.resources["many_live_values"]
    assert report.registers <= 32
    assert report.spill_stores > 0 and report.spill_loads > 0 and report.stack_bytes > 0


# --- ptxas's report in every log (NVRTC 12.9+ reuses CUBINs it has built) -----------------


@needs_nvrtc
@pytest.mark.parametrize(
    ("source", "options", "kernel"),
    [
        (SHARED_SOURCE, (), "reverse_block"),
        (SPILL_SOURCE, ("-maxrregcount=32",), "many_live_values"),
    ],
    ids=["shared-memory", "spills"],
)
def test_every_compile_of_a_source_reports_the_same_resources(
    source: str, options: tuple[str, ...], kernel: str
) -> None:
    # Where a CUDA driver is installed, NVRTC 12.9+ keeps the CUBINs it builds in the driver's
    # compute cache, and without --no-cache hands a repeated build back with an empty log.
    builds = [compile_cuda(source, arch="sm_90", options=options, cache=None) for _ in range(3)]
    assert {build.cubin for build in builds} == {builds[0].cubin}
    assert [build.resources for build in builds] == [builds[0].resources] * 3
    report = builds[0].resources[kernel]
    if source == SHARED_SOURCE:
        assert report.shared_bytes == 4096
    else:
        assert report.spill_stores > 0 and report.spill_loads > 0


class _OptionsSeen(Exception):
    """Stops a compile once NVRTC has been handed its options."""


class _RecordingNvrtc:
    """The NVRTC bindings, noting the options of every compile and stopping it there."""

    def __init__(self, bindings) -> None:
        self._bindings = bindings
        self.options: list[list[str]] = []

    def __getattr__(self, name: str):
        return getattr(self._bindings, name)

    def nvrtcCompileProgram(self, program, count, options):
        self.options.append([option.decode() for option in options])
        raise _OptionsSeen


@needs_nvrtc
def test_nvrtc_from_12_9_is_told_not_to_reuse_cached_cubins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recording = _RecordingNvrtc(_nvrtc._library())
    monkeypatch.setattr(_nvrtc, "_library", lambda: recording)
    with pytest.raises(_OptionsSeen):
        compile_cuda(SCALE_SOURCE, arch="sm_90", cache=None)
    monkeypatch.setattr(_nvrtc, "nvrtc_version", lambda: (12, 8))  # no cache, no such option
    with pytest.raises(_OptionsSeen):
        compile_cuda(SCALE_SOURCE, arch="sm_90", cache=None)
    no_cache = ["--no-cache" in options for options in recording.options]
    assert no_cache == [runtime.nvrtc_version() >= (12, 9), False]


@needs_nvrtc
def test_a_log_without_the_resource_report_is_refused_and_not_cached(
    cache: KernelCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    compile_to_cubin = _nvrtc.compile_to_cubin

    def from_compute_cache(*args, **kwargs):  # what NVRTC 12.9+ returns for a cached CUBIN
        cubin, log = compile_to_cubin(*args, **kwargs)
        return cubin, ""

    monkeypatch.setattr(_nvrtc, "compile_to_cubin", from_compute_cache)
    missing = r"no ptxas resource report for the kernels \['scale_add_index'\]"
    with pytest.raises(RuntimeError, match=missing):
        compile_cuda(SCALE_SOURCE, arch="sm_90", cache=cache)
    assert not list(cache.directory.glob("*.kernel"))


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_kernel_names_are_the_entry_functions_of_the_cubin(arch: str) -> None:
    binary = compile_cuda(ENTRIES_SOURCE, arch=arch, cache=None)
    assert _cubin.kernel_names(binary.cubin) == {"plain", "_Z7shiftedILi4EEvPf"}
    assert set(binary.resources) == {"plain", "_Z7shiftedILi4EEvPf"}
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        _cubin.kernel_names(b"\x7fELF not really")


@needs_nvrtc
def test_half_and_bfloat16_headers_are_found() -> None:
    binary = compile_cuda(HALF_SOURCE, arch="sm_80", cache=None)
    assert "widen" in binary.resources


@needs_nvrtc
def test_compile_error_names_program_context_and_line() -> None:
    with pytest.raises(CompileError) as caught:
        compile_cuda(
            BROKEN_SOURCE, arch="sm_90", name="spmm_v7", context="kMTile=4 kNTile=32", cache=None
        )
    text = str(caught.value)
    assert "spmm_v7.cu(2): error" in text
    assert 'identifier "undefined_identifier" is undefined' in text
    assert "kMTile=4 kNTile=32" in text
    assert "2>     a[0] = undefined_identifier;" in text


@needs_nvrtc
def test_bad_option_is_a_compile_error() -> None:
    with pytest.raises(CompileError, match="--no-such-option"):
        compile_cuda(SCALE_SOURCE, arch="sm_90", options=["--no-such-option"], cache=None)


@needs_nvrtc
@pytest.mark.parametrize(
    ("arch", "message"), [("compute_90", "real GPU architecture"), ("sm_52", "not supported")]
)
def test_arch_must_be_a_supported_real_architecture(arch: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compile_cuda(SCALE_SOURCE, arch=arch, cache=None)


@needs_nvrtc
def test_device_arch_clamps_within_the_gpu_family(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    capability = (9, 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert runtime.device_arch() == "sm_90"
    capability = (8, 9)
    assert runtime.device_arch(0) == "sm_89"
    older = _toolchain.NvrtcFacts(runtime.nvrtc_version(), (75, 80, 86), from_memo=False)
    monkeypatch.setattr(_toolchain._State, "facts", older)
    monkeypatch.setattr(_nvrtc, "supported_archs", lambda: ["sm_75", "sm_80", "sm_86"])
    assert runtime.device_arch(0) == "sm_86"
    capability = (9, 0)
    with pytest.raises(RuntimeError, match="sm_90 but NVRTC"):
        runtime.device_arch(0)


# --- the disk cache with real compiles --------------------------------------------------


def _forbid_nvrtc(monkeypatch: pytest.MonkeyPatch) -> None:
    def compile_to_cubin(*args, **kwargs):
        raise AssertionError("NVRTC was invoked")

    monkeypatch.setattr(_nvrtc, "compile_to_cubin", compile_to_cubin)


@needs_nvrtc
def test_second_compile_is_a_cache_hit(cache: KernelCache, monkeypatch: pytest.MonkeyPatch) -> None:
    first = compile_cuda(SCALE_SOURCE, arch="sm_90", cache=cache)
    assert first.key == cache_key(SCALE_SOURCE, "sm_90", ())
    _forbid_nvrtc(monkeypatch)
    assert compile_cuda(SCALE_SOURCE, arch="sm_90", cache=cache) == first
    with pytest.raises(AssertionError, match="NVRTC was invoked"):
        compile_cuda(SCALE_SOURCE, arch="sm_80", cache=cache)


@needs_nvrtc
def test_default_cache_follows_gsparse_cache_dir(isolated_cache_dir: Path) -> None:
    binary = compile_cuda(SCALE_SOURCE, arch="sm_90")
    assert (isolated_cache_dir / f"{binary.key}.kernel").is_file()
    assert KernelCache().get(binary.key) == binary


@needs_nvrtc
def test_no_cache_writes_nothing(isolated_cache_dir: Path) -> None:
    compile_cuda(SCALE_SOURCE, arch="sm_90", cache=None)
    assert not isolated_cache_dir.exists()


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip_last_byte(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


@needs_nvrtc
@pytest.mark.parametrize(
    "corrupt",
    [_truncate, _flip_last_byte, lambda data: b"", lambda data: os.urandom(len(data))],
    ids=["truncated", "flipped-byte", "empty", "garbage"],
)
def test_corrupt_entry_is_removed_and_rebuilt(cache: KernelCache, corrupt) -> None:
    binary = compile_cuda(SCALE_SOURCE, arch="sm_90", cache=cache)
    entry = cache.directory / f"{binary.key}.kernel"
    entry.write_bytes(corrupt(entry.read_bytes()))
    assert cache.get(binary.key) is None
    assert not entry.exists()
    entry.write_bytes(corrupt(binary.cubin))
    rebuilt = compile_cuda(SCALE_SOURCE, arch="sm_90", cache=cache)
    assert (rebuilt.cubin, rebuilt.resources) == (binary.cubin, binary.resources)
    assert cache.get(binary.key) == rebuilt


@needs_nvrtc
def test_entry_stored_under_another_key_is_not_trusted(cache: KernelCache) -> None:
    binary = compile_cuda(SCALE_SOURCE, arch="sm_90", cache=cache)
    other_key = cache_key(SHARED_SOURCE, "sm_90", ())
    (cache.directory / f"{binary.key}.kernel").rename(cache.directory / f"{other_key}.kernel")
    assert cache.get(other_key) is None


@needs_nvrtc
def test_unwritable_cache_warns_and_still_compiles(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="could not write the kernel cache"):
        binary = compile_cuda(SCALE_SOURCE, arch="sm_90", cache=KernelCache(blocker / "kernels"))
    assert binary.cubin.startswith(b"\x7fELF")


def _compile_after_barrier(directory: str, barrier, results) -> None:
    barrier.wait()
    binary = compile_cuda(SCALE_SOURCE, arch="sm_90", cache=KernelCache(directory))
    results.put((binary.key, len(binary.cubin)))


@needs_nvrtc
def test_concurrent_writers_leave_one_valid_entry(cache: KernelCache) -> None:
    workers = 4
    # fork starts the workers in milliseconds; spawn re-imports torch in each (seconds).
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    barrier, results = context.Barrier(workers), context.Queue()
    processes = [
        context.Process(
            target=_compile_after_barrier, args=(str(cache.directory), barrier, results)
        )
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    key = cache_key(SCALE_SOURCE, "sm_90", ())
    assert {k for k, _ in outcomes} == {key}
    # One entry and the NVRTC memo (runtime._toolchain); no temporary file left behind.
    assert sorted(path.name for path in cache.directory.iterdir()) == sorted([f"{key}.kernel", "nvrtc.json"])
    assert cache.get(key) is not None


# --- the driver calls, against a recording fake of cuda.bindings.driver ----------------


class FakeDriver:
    """Just enough of ``cuda.bindings.driver`` to follow load -> function -> launch."""

    class CUresult(enum.Enum):
        CUDA_SUCCESS = 0
        CUDA_ERROR_INVALID_VALUE = 1

    class CUfunction_attribute(enum.Enum):
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.current_context = 0
        self.launch_status = self.CUresult.CUDA_SUCCESS
        self.get_current_status = self.CUresult.CUDA_SUCCESS

    def _ok(self, *values):
        return (self.CUresult.CUDA_SUCCESS, *values)

    def cuInit(self, flags):
        return self._ok()

    def cuDeviceGet(self, ordinal):
        return self._ok(ordinal)

    def cuDevicePrimaryCtxRetain(self, device):
        return self._ok(100 + device)

    def cuCtxGetCurrent(self):
        return (self.get_current_status, self.current_context)

    def cuCtxPushCurrent(self, context):
        self.calls.append(("push", context))
        self.current_context = context
        return self._ok()

    def cuCtxPopCurrent(self):
        self.calls.append(("pop",))
        popped, self.current_context = self.current_context, 0
        return self._ok(popped)

    def cuModuleLoadData(self, image):
        self.calls.append(("load", bytes(image), self.current_context))
        return self._ok("module")

    def cuModuleGetFunction(self, module, name):
        return self._ok(("function", name))

    def cuFuncSetAttribute(self, function, attribute, value):
        self.calls.append(("attribute", attribute.name, value))
        return self._ok()

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = (ctypes.c_void_p * 3).from_address(params)
        values = (
            ctypes.c_void_p.from_address(pointers[0]).value,
            ctypes.c_int32.from_address(pointers[1]).value,
            ctypes.c_double.from_address(pointers[2]).value,
        )
        launch = ("launch", function, (gx, gy, gz), (bx, by, bz), shared, stream, values)
        self.calls.append((*launch, self.current_context))
        return (self.launch_status,)

    def cuGetErrorString(self, status):
        return self._ok(b"invalid argument")


def _use_fake_driver(monkeypatch: pytest.MonkeyPatch, fake: FakeDriver) -> None:
    """Route the runtime's driver calls to ``fake``, with no module loaded yet, no CUDA
    initialisation and stream 77 as the current stream."""
    monkeypatch.setattr(_bindings, "driver", lambda: fake)
    monkeypatch.setattr(_driver, "_LOADED", _driver._LoadedModules())
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(_driver, "current_stream_handle", lambda device: 77)


def test_launch_drives_the_cuda_driver_in_the_primary_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeDriver()
    _use_fake_driver(monkeypatch, fake)
    binary = Binary(cubin=b"cubin", arch="sm_90", log="", resources={}, key="cd" * 32)

    module = runtime.load(binary, 0)
    assert runtime.load(binary, "cuda:0") is module
    kernel = module.function("k")
    args = [None, i32(7), f64(2.5)]
    kernel.launch((3, 2), 128, args, shared_bytes=64 * 1024)
    kernel.launch(1, 32, args, shared_bytes=50 * 1024, stream=5)

    attribute = "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"
    assert fake.calls == [
        ("push", 100), ("load", b"cubin", 100), ("pop",),
        ("push", 100), ("pop",),  # cuModuleGetFunction
        ("push", 100), ("attribute", attribute, 65536), ("pop",),
        ("push", 100),
        ("launch", ("function", b"k"), (3, 2, 1), (128, 1, 1), 65536, 77, (None, 7, 2.5), 100),
        ("pop",),
        ("push", 100),  # 50 KiB is under the 64 KiB already allowed: no attribute call
        ("launch", ("function", b"k"), (1, 1, 1), (32, 1, 1), 51200, 5, (None, 7, 2.5), 100),
        ("pop",),
    ]  # fmt: skip

    fake.calls.clear()
    fake.current_context = 100  # already current, as after PyTorch touched the device
    fake.launch_status = FakeDriver.CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(LaunchError, match=r"'k' \[ctx\]: .*CUDA_ERROR_INVALID_VALUE"):
        kernel.launch(1, 32, args, context="ctx")
    assert [call[0] for call in fake.calls] == ["launch"]


def test_prepared_launch_fills_its_operand_slots_on_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeDriver()
    fake.current_context = 100
    _use_fake_driver(monkeypatch, fake)
    # Stand-in pointers: (tensor id, position), as no CUDA tensor exists here.
    pointers = {}
    monkeypatch.setattr(_driver, "operand_pointer",
                        lambda arg, position, index: 0 if arg is None else pointers[id(arg)])
    binary = Binary(cubin=b"cubin", arch="sm_90", log="", resources={}, key="ef" * 32)
    kernel = runtime.load(binary, 0).function("k")

    launch = kernel.prepare(4, 64, [runtime.OPERAND, i32(7), f64(2.5)], context="ctx")
    a, b = torch.zeros(1), torch.zeros(1)
    pointers.update({id(a): 4096, id(b): 8192})
    fake.calls.clear()
    launch(a)
    launch(b, stream=5)
    launch(None)
    assert [call[5:7] for call in fake.calls] == [
        (77, (4096, 7, 2.5)), (5, (8192, 7, 2.5)), (77, (None, 7, 2.5))]
    with pytest.raises(TypeError, match="takes 1 operands, got 2"):
        launch(a, b)
    with pytest.raises(LaunchError, match=r"'k' \[ctx\]: grid.x is 0"):
        kernel.prepare(0, 64, [runtime.OPERAND], context="ctx")


def test_prepared_launch_fills_scalar_slots_and_takes_a_grid_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel of grid-stride loops is prepared once and launched on inputs of any size:
    its sizes are scalar slots and each call may bring its own grid, checked like any."""
    fake = FakeDriver()
    fake.current_context = 100
    _use_fake_driver(monkeypatch, fake)
    binary = Binary(cubin=b"cubin", arch="sm_90", log="", resources={}, key="e1" * 32)
    kernel = runtime.load(binary, 0).function("k")
    launch = kernel.prepare(4, 64, [None, runtime.ScalarOperand("int32_t"), runtime.ScalarOperand("double")],
                            context="ctx")
    fake.calls.clear()
    launch(9, 0.5)
    launch(-2**31, 3, grid=(7, 2))
    assert [(call[2], call[6]) for call in fake.calls] == [
        ((4, 1, 1), (None, 9, 0.5)), ((7, 2, 1), (None, -2**31, 3.0))]
    with pytest.raises(ValueError, match=r"argument 1 is a int32_t operand slot; got 2147483648"):
        launch(2**31, 1.0)
    with pytest.raises(TypeError, match=r"argument 1 is a int32_t operand slot; got 1.5"):
        launch(1.5, 1.0)
    with pytest.raises(LaunchError, match=r"'k' \[ctx\]: grid.x is 0"):
        launch(1, 1.0, grid=0)
    with pytest.raises(ValueError, match="a scalar operand's C type is one of"):
        runtime.ScalarOperand("short")


def test_a_prepared_launch_checks_the_current_context_on_every_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another library may make its own context current on the thread between two launches:
    each launch asks the driver, and pushes (then pops) ours only when it is not current."""
    fake = FakeDriver()
    fake.current_context = 100
    _use_fake_driver(monkeypatch, fake)
    binary = Binary(cubin=b"cubin", arch="sm_90", log="", resources={}, key="ab" * 32)
    launch = runtime.load(binary, 0).function("k").prepare(4, 64, [None, i32(7), f64(2.5)])
    fake.calls.clear()
    launch()
    fake.current_context = 555  # someone else's
    launch()
    assert fake.current_context == 0  # ours was popped (the fake leaves none current)
    fake.current_context = 100
    launch()
    assert [call[0] for call in fake.calls] == ["launch", "push", "launch", "pop", "launch"]
    assert [call[-1] for call in fake.calls if call[0] == "launch"] == [100, 100, 100]

    fake.get_current_status = FakeDriver.CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(RuntimeError, match="cuCtxGetCurrent failed"):
        launch()


# A prepared launch's own steps per call of null operands (gsparse functions run, C
# functions they call: len and the lock's exit; a tensor operand adds get_device and data_ptr).
LAUNCH_STEPS = (1, 2)


def test_a_prepared_launch_costs_a_bounded_number_of_host_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The launch of a resolved call, per call: its own frame and the C calls that fill the
    slots and ask the driver (the driver's and the operands' own steps come on top).
    Bounds to lower, never to raise without a reason."""
    from host_steps import host_steps

    from gsparse.kernels import source

    fake = FakeDriver()
    fake.current_context = 100
    _use_fake_driver(monkeypatch, fake)
    binary = Binary(cubin=b"cubin", arch="sm_90", log="", resources={}, key="9a" * 32)
    kernel = runtime.load(binary, 0).function("k")
    prepared = kernel.prepare(4, 64, [runtime.OPERAND, i32(7), f64(2.5)])
    launch = source.Launch(prepared, ("x",)).positional("x")
    assert launch == prepared.__call__  # the bound method, not the instance's slot call
    launch(None)
    steps = host_steps(lambda: launch(None))
    assert steps["python"] <= LAUNCH_STEPS[0] and steps["c"] <= LAUNCH_STEPS[1], steps["names"]


def test_operand_slots_take_tensors_on_the_kernels_device_or_none() -> None:
    from gsparse.runtime._arguments import operand_pointer

    assert operand_pointer(None, 3, 0) == 0
    with pytest.raises(ValueError, match="argument 3 is a tensor on cpu"):
        operand_pointer(torch.zeros(2), 3, 0)
    with pytest.raises(TypeError, match="argument 4 is an operand slot"):
        operand_pointer(i32(1), 4, 0)


# --- on a GPU ---------------------------------------------------------------------------


@on_gpu
@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_launch_matches_torch(n: int) -> None:
    generator = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn(n, device="cuda", generator=generator)
    out = torch.full((n,), float("nan"), device="cuda")
    kernel = runtime.get_kernel(SCALE_SOURCE, "scale_add_index", context="test")
    block = 256
    kernel.launch((n + block - 1) // block, block, [a, out, f32(1.5), i32(n)])
    expected = a * 1.5 + torch.arange(n, device="cuda", dtype=torch.float32)
    # NVRTC contracts a * s + i into one FMA (one rounding), torch rounds twice.
    torch.testing.assert_close(out, expected)


@on_gpu
def test_launch_on_a_side_stream() -> None:
    n = 2048
    a = torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    kernel = runtime.get_kernel(SCALE_SOURCE, "scale_add_index")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    kernel.launch(n // 256, 256, [a, out, f32(-2.0), np.int32(n)], stream=stream)
    stream.synchronize()
    expected = a * -2.0 + torch.arange(n, device="cuda", dtype=torch.float32)
    torch.testing.assert_close(out, expected)


@on_gpu
def test_load_and_get_kernel_are_cached_in_memory() -> None:
    binary = compile_cuda(SCALE_SOURCE)
    assert binary.arch == runtime.device_arch()
    module = runtime.load(binary)
    assert runtime.load(binary, torch.cuda.current_device()) is module
    assert module.function("scale_add_index") is module.function("scale_add_index")
    assert runtime.get_kernel(SCALE_SOURCE, "scale_add_index") is module.function("scale_add_index")
    with pytest.raises(KeyError, match="scale_add_index"):
        module.function("no_such_kernel")


@on_gpu
def test_dynamic_shared_memory_above_48_kib() -> None:
    threads = 256
    out = torch.full((threads,), float("nan"), device="cuda")
    kernel = runtime.get_kernel(DYNAMIC_SHARED_SOURCE, "reverse_dynamic")
    kernel.launch(1, threads, [out], shared_bytes=64 * 1024)
    torch.cuda.synchronize()
    expected = 16383 - torch.arange(threads, device="cuda", dtype=torch.float32)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@on_gpu
def test_driver_rejections_raise_launch_error() -> None:
    out = torch.zeros(256, device="cuda")
    kernel = runtime.get_kernel(BOUNDED_SOURCE, "bounded")
    with pytest.raises(LaunchError, match=r"'bounded' \[bounds test\].*CUDA_ERROR_"):
        kernel.launch(1, 256, [out], context="bounds test")  # over __launch_bounds__(128)
    with pytest.raises(LaunchError, match="refused 1048576 bytes of dynamic shared memory"):
        kernel.launch(1, 128, [out], shared_bytes=1 << 20)
    with pytest.raises(LaunchError, match="block.x is 2048"):
        kernel.launch(1, 2048, [out])
    kernel.launch(1, 128, [out])  # the rejections left the context usable
    torch.cuda.synchronize()
    assert out[:128].eq(1).all() and out[128:].eq(0).all()


@on_gpu
def test_tensor_on_the_wrong_device_is_rejected() -> None:
    kernel = runtime.get_kernel(SCALE_SOURCE, "scale_add_index")
    a = torch.zeros(4, device="cuda")
    with pytest.raises(ValueError, match="argument 1 is a tensor on cpu"):
        kernel.launch(1, 4, [a, torch.zeros(4), f32(1), i32(4)])
