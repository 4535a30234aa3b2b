"""Host time per call of the operators on a small graph, where the GPU work is negligible.

On a GPU machine, from the repository root:
``PYTHONPATH=src python3 scripts/host_time.py [--rounds 5] [--no-profile]``.
Prints microseconds per call (wall time of 2,000 calls between two synchronisations; the
median of ``--rounds`` rounds, each round timing every call in turn) for gspmm without
autograd and the forward of one that records autograd, the CUDA backend's g-SpMM alone,
gsddmm, edge_softmax and, for scale, torch.sparse.mm on the same CSR and torch.empty; then
profiles of the operators' Python paths.

Without a GPU, ``--cpu-mock`` times the same Python path on CPU tensors up to the launch:
the CUDA backend's tasks, schedules (an H100's facts) and plans, with launches that do
nothing (``tests/cuda_path.py``), on a Cora-sized graph. ``--stub-driver`` times the launch
too: the runtime's prepared launches call the CUDA driver bindings as on a GPU, into a
stand-in for libcuda that does nothing (``scripts/stub_libcuda.c``, built with ``cc``);
stand-in handles, CPU tensors' pointers, stream 0.

Instructions instead of wall time (steadier on a shared machine): ``--segments N`` runs
each case N times after a warm-up, a call of ``os.getppid`` before each case and after the
last, so that ``valgrind --tool=callgrind --dump-before=getppid python3
scripts/host_time.py --stub-driver --segments 500`` writes one profile per case (the
second dump is the first case, in the order printed): its total over N is the case's
instructions per call.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

import gsparse
from gsparse import backends
from gsparse.backends.cpu import unchecked_csr


def per_call_us(fn: Callable[[], object], sync: Callable[[], None], calls: int = 2000) -> float:
    for _ in range(20):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


class _NoLaunch:
    """A kernel loader whose launches do nothing."""

    def kernel(self, program, name, device_index):
        return self

    def prepare(self, grid, block, args, *, shared_bytes=0, context=""):
        return lambda *operands, stream=None, grid=None: None


@contextlib.contextmanager
def _stub_driver() -> Iterator[object]:
    """A kernel loader whose kernels are the runtime's, launched through the driver
    bindings into ``scripts/stub_libcuda.c`` (built here), on CPU tensors."""
    import ctypes
    import os
    import subprocess
    import tempfile
    import types

    from gsparse.runtime import _bindings, _driver

    with tempfile.TemporaryDirectory() as build:
        library = Path(build) / "libcuda_stub.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(library),
                        str(Path(__file__).with_name("stub_libcuda.c")), "-ldl"], check=True)
        ctypes.CDLL(str(library), os.RTLD_GLOBAL)  # found by its soname before any other
    driver = _bindings.driver()
    driver.cuInit(0)

    class Loader:
        def kernel(self, program, name, device_index):
            kernel = object.__new__(_driver.Kernel)
            # Device index -1, which CPU tensors report: the launch takes their pointers on
            # the path a CUDA tensor of the kernel's device takes.
            kernel.name, kernel.device = name, types.SimpleNamespace(index=-1)
            kernel._function, kernel._context = driver.CUfunction(0x1234), driver.CUcontext(0x5678)
            kernel._dynamic_shared_limit = 48 * 1024
            return kernel

    real_stream = _driver.current_stream_handle
    _driver.current_stream_handle = lambda device_index: 0
    try:
        yield Loader()
    finally:
        _driver.current_stream_handle = real_stream


def cases(device: str) -> dict[str, Callable[[], object]]:
    gen = torch.Generator().manual_seed(0)
    num_nodes, num_edges, features = (100, 1000, 16) if device == "cuda" else (2708, 10858, 64)
    g = gsparse.Graph.from_edge_index(torch.randint(0, num_nodes, (2, num_edges), generator=gen),
                                      num_nodes=num_nodes).to(device)
    x = torch.randn(num_nodes, features, device=device)
    xg = x.clone().requires_grad_()
    logits = torch.randn(g.num_edges, 8, device=device)
    csr = unchecked_csr(g.rowptr.long(), g.col.long(), torch.ones(g.num_edges, device=device),
                        (num_nodes, num_nodes))
    found = {
        "gspmm": lambda: gsparse.gspmm(g, "copy_lhs", "sum", x),
        "gspmm forward with autograd": lambda: gsparse.gspmm(g, "copy_lhs", "sum", xg),
        "gsddmm": lambda: gsparse.gsddmm(g, "dot", x, x, "u", "v"),
        "edge_softmax": lambda: gsparse.edge_softmax(g, logits),
        "torch.empty": lambda: torch.empty(num_nodes, features, device=device),
    }
    if device == "cuda":
        cuda = backends.for_device(g.device)
        found["CUDA backend g-SpMM"] = lambda: cuda.spmm(g, "copy_lhs", "sum", x, None, (features,))
        found["torch.sparse.mm"] = lambda: torch.sparse.mm(csr, x)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--cpu-mock", action="store_true",
                        help="no GPU: the CUDA backend's host path on CPU tensors, launches doing nothing")
    parser.add_argument("--stub-driver", action="store_true",
                        help="no GPU: as --cpu-mock, launching through the driver bindings into a stub libcuda")
    parser.add_argument("--segments", type=int, default=0,
                        help="no timing: each case this many times between os.getppid() calls, for callgrind")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.cpu_mock or args.stub_driver:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            from cuda_path import cuda_path_on_cpu

            loader = stack.enter_context(_stub_driver()) if args.stub_driver else _NoLaunch()
            stack.enter_context(cuda_path_on_cpu(loader))
            device, sync = "cpu", lambda: None
        else:
            device, sync = "cuda", torch.cuda.synchronize
        report(args, device, sync)


def report(args: argparse.Namespace, device: str, sync: Callable[[], None]) -> None:
    """Times every case, prints the medians, then profiles the operators."""
    timings = cases(device)
    if args.segments:
        import os

        for fn in timings.values():
            per_call_us(fn, sync, calls=1)  # warm-up: calls resolved, caches filled
        print("cases:", ", ".join(timings))
        for fn in timings.values():
            os.getppid()  # a dump boundary under callgrind --dump-before=getppid
            for _ in range(args.segments):
                fn()
        os.getppid()
        return
    rounds: dict[str, list[float]] = {name: [] for name in timings}
    for _ in range(args.rounds):
        for name, fn in timings.items():
            rounds[name].append(per_call_us(fn, sync))
    for name, values in rounds.items():
        print(f"{name}: {statistics.median(values):.1f} us per call "
              f"(median of {args.rounds} rounds, {min(values):.1f}-{max(values):.1f})")
    if args.no_profile:
        return
    for name in ("gspmm", "gspmm forward with autograd", "gsddmm", "edge_softmax"):
        print(f"--- profile of 2,000 {name} calls")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            timings[name]()
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
