"""A pool of processes (gloo on the CPU, or NCCL with a GPU each) that stay up for the whole test session.

Starting a process that imports torch takes seconds on a small CI machine, so the tests
do not spawn per test: :class:`Pool` starts ``size`` workers once and joins them in a gloo process group through a ``file://`` rendezvous in a
temporary directory (no port to pick), and builds subgroups of the first 1, 2, ... ranks.
``pool.run(fn, world_size, *args)`` runs ``fn(group, *args)`` on the first
``world_size`` ranks, on the subgroup of exactly those ranks, and returns their results
in rank order. The workers are forked from a ``forkserver`` that imported torch, its
compiler front end (which the first custom-op call imports) and gsparse once, so that
starting four costs about one import. A worker's exception comes back as an AssertionError with its traceback;
a run that does not finish within ``timeout`` seconds (a collective mismatch) fails and
the pool is restarted for the next test.

``Pool(backend="nccl")`` gives rank ``r`` GPU ``r`` and has as many ranks as there are
GPUs, up to four; a run on more ranks than the pool has is skipped. The cases put each
rank's share on its GPU under NCCL (``cases.device_of``).
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import traceback
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZES = (1, 2, 4)


def _worker(rank: int, size: int, backend: str, init_file: str, tasks, results) -> None:
    torch.set_num_threads(1)
    timeout = timedelta(seconds=60)
    device = None
    if backend == "nccl":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=size,
                            timeout=timeout, device_id=device)
    groups = {n: (dist.group.WORLD if n == size else dist.new_group(list(range(n)), timeout=timeout))
              for n in WORLD_SIZES if n <= size}
    results.put((rank, "ready", None))
    while True:
        task = tasks.get()
        if task is None:
            break
        fn, world_size, args = task
        if rank >= world_size:
            results.put((rank, "idle", None))
            continue
        try:
            results.put((rank, "ok", fn(groups[world_size], *args)))
        except BaseException:  # any failure, assertion or not, goes back as the test's message
            results.put((rank, "error", traceback.format_exc()))


# Imported once by the fork server, before it forks the workers.
_PRELOAD = ["torch", "torch._dynamo", "torch.distributed", "scipy.sparse.csgraph", "gsparse", "gsparse.distributed",
            "cases", "models"]


class Pool:
    def __init__(self, size: int = max(WORLD_SIZES), timeout: float = 90.0, backend: str = "gloo") -> None:
        if backend == "nccl":
            size = min(size, torch.cuda.device_count())
        self.size, self.timeout, self.backend = size, timeout, backend
        self._procs: list = []
        self._start()

    def _start(self) -> None:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        self._dir = tempfile.mkdtemp(prefix="gsparse-dist-")
        init_file = os.path.join(self._dir, "rendezvous")
        self._tasks = [ctx.Queue() for _ in range(self.size)]
        self._results = ctx.Queue()
        self._procs = [ctx.Process(target=_worker, daemon=True,
                                   args=(r, self.size, self.backend, init_file, self._tasks[r], self._results))
                       for r in range(self.size)]
        for p in self._procs:
            p.start()
        self._collect("starting the pool")

    def _collect(self, what: str) -> list:
        out = [None] * self.size
        errors = []
        for _ in range(self.size):
            try:
                rank, status, value = self._results.get(timeout=self.timeout)
            except queue.Empty:
                self.close()
                self._procs = []
                raise AssertionError(f"{what}: no answer from every rank within {self.timeout:.0f} s "
                                     f"(a collective mismatch?); the pool restarts") from None
            if status == "error":
                errors.append(f"rank {rank}:\n{value}")
            out[rank] = value
        if errors:
            raise AssertionError(f"{what} failed on {len(errors)} rank(s):\n" + "\n".join(errors))
        return out

    def run(self, fn, world_size: int, *args) -> list:
        if world_size > self.size:
            pytest.skip(f"{world_size} ranks: the {self.backend} pool has {self.size}")
        if not self._procs or not all(p.is_alive() for p in self._procs):
            self.close()
            self._start()
        for q in self._tasks:
            q.put((fn, world_size, args))
        return self._collect(f"{fn.__name__} on {world_size} rank(s)")[:world_size]

    def close(self) -> None:
        for q in getattr(self, "_tasks", []):
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for p in self._procs:
            p.join(timeout=2)
            if p.is_alive():
                p.terminate()
                p.join(timeout=2)
        shutil.rmtree(getattr(self, "_dir", ""), ignore_errors=True)
