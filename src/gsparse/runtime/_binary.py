"""A compiled program (:class:`Binary`) and the per-kernel resource report read from ptxas."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._cubin import kernel_names


@dataclass(frozen=True)
class Resources:
    """What ptxas allocated for one kernel, as printed in its verbose report.

    The tuner prunes schedules with these numbers (register budget, occupancy), so they are
    read from the compiler's log and never estimated.

    Attributes:
        registers: registers per thread.
        shared_bytes: static shared memory per block (``__shared__`` arrays); dynamic shared
            memory is a launch argument and is not included.
        stack_bytes: local memory per thread for the stack: the cumulative stack size
            (including callees) when ptxas reports it, else the kernel's own frame.
        spill_stores: bytes of register spill stores per thread.
        spill_loads: bytes of register spill loads per thread.
        constant_bytes: constant memory the kernel uses (kernel parameters and literals),
            summed over the constant banks listed for it.
        barriers: named barriers used.
    """

    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int
    constant_bytes: int
    barriers: int


@dataclass(frozen=True)
class Binary:
    """A CUBIN built by NVRTC for one real architecture.

    Attributes:
        cubin: the ELF image, loadable with :func:`gsparse.runtime.load`.
        arch: the architecture it was built for, e.g. ``"sm_90"``.
        log: NVRTC's full log, including ptxas's resource report.
        resources: ptxas's resource report of each kernel in ``cubin``, keyed by its symbol
            name (the plain name of an ``extern "C"`` kernel).
        key: the cache key (see :func:`gsparse.runtime.cache_key`).
    """

    cubin: bytes
    arch: str
    log: str
    resources: dict[str, Resources]
    key: str


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SHARED = re.compile(r"(\d+) bytes smem")
_CUMULATIVE_STACK = re.compile(r"(\d+) bytes cumulative stack size")
_CONSTANT = re.compile(r"(\d+) bytes cmem\[\d+\]")


def read_resources(cubin: bytes, log: str) -> dict[str, Resources]:
    """The resource report of every kernel of ``cubin`` from the log of the compile that built it.

    Raises RuntimeError when the log lacks the report of a kernel the CUBIN defines: ptxas did
    not build that CUBIN in this compile (NVRTC took it from a cache), and resources that are
    missing or made up would mislead the pruning and every later reader of the kernel cache.
    """
    resources = parse_resources(log)
    if missing := kernel_names(cubin) - resources.keys():
        raise RuntimeError(
            f"NVRTC's log has no ptxas resource report for the kernels {sorted(missing)} of the "
            f"CUBIN it returned, so ptxas did not build it in this compile; the log was:\n{log}"
        )
    return resources


def parse_resources(log: str) -> dict[str, Resources]:
    """Read the per-kernel resource report of ``ptxas -v`` out of a compiler log.

    ptxas prints, per entry function::

        Compiling entry function 'k' for 'sm_90'
        Function properties for k
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        Used 16 registers, used 1 barriers, 4096 bytes smem, 360 bytes cmem[0]

    Device functions that were not inlined get a "Function properties" block of their own;
    they are not kernels and are left out. A quantity missing from the "Used" line is one
    ptxas did not allocate (it omits zero shared memory), so it counts as 0. A kernel whose
    report is incomplete is left out rather than given invented numbers.
    """
    frames: dict[str, tuple[int, int, int]] = {}
    usage: dict[str, str] = {}
    entry: str | None = None
    properties_of: str | None = None
    for line in log.splitlines():
        if match := _ENTRY.search(line):
            entry = match.group(1)
        elif match := _PROPERTIES.search(line):
            properties_of = match.group(1)
        elif (match := _FRAME.search(line)) and properties_of is not None:
            frames[properties_of] = (int(match[1]), int(match[2]), int(match[3]))
        elif _REGISTERS.search(line) and entry is not None:
            usage[entry] = line
    resources = {}
    for name, line in usage.items():
        if name not in frames:
            continue
        frame, spill_stores, spill_loads = frames[name]
        resources[name] = Resources(
            registers=_first_int(_REGISTERS, line),
            shared_bytes=_first_int(_SHARED, line),
            stack_bytes=max(frame, _first_int(_CUMULATIVE_STACK, line)),
            spill_stores=spill_stores,
            spill_loads=spill_loads,
            constant_bytes=sum(int(n) for n in _CONSTANT.findall(line)),
            barriers=_first_int(_BARRIERS, line),
        )
    return resources


def _first_int(pattern: re.Pattern[str], line: str) -> int:
    match = pattern.search(line)
    return int(match.group(1)) if match else 0
