"""Measuring candidates: compiling them ahead in parallel, and timing calls.

On a CUDA device each call is bracketed by two CUDA events on the current stream (no
host synchronisation between calls), after a warm-up that also covers module loading and
run-time compilation; the reported time is the median of the repeats. On the CPU each call
is timed with :func:`time.perf_counter`. Callers check a candidate's result before timing
it, and hand several independent input sets when one would sit in the L2 cache.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from ..target import Target

__all__ = ["Timing", "compile_ahead", "time_calls"]

# Least warm-up on a GPU, whatever the budget: after an idle spell (a kernel compiled, a
# reference computed on the CPU) a GPU takes tens of milliseconds of back-to-back calls to
# come back to full speed.
_MIN_GPU_WARMUP_S = 0.1
# GPU clock cycles per second that a spin-wait of ``hide_host`` assumes: above the boost
# clock of the GPUs we target, so that a wait lasts at least as long as intended.
_WAIT_CYCLES_PER_S = 2.1e9


def compile_ahead(first_calls: Sequence[Callable[[], Any]], device: torch.device,
                  workers: int | None = None) -> None:
    """Run each call once, many threads at a time, ignoring failures.

    Each first call of a candidate compiles its kernels (or loads them from the disk
    cache); NVRTC releases the GIL, so doing this for a whole space in threads takes a
    fraction of the time one-by-one measurement would spend compiling. Failures are left
    for the measurement to record.
    """

    def run(call: Callable[[], Any]) -> None:
        try:
            call()
        except Exception:  # noqa: BLE001 - measured again later, and recorded there
            pass

    with ThreadPoolExecutor(max_workers=workers or min(16, os.cpu_count() or 1)) as pool:
        list(pool.map(run, first_calls))
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class Timing:
    """The raw per-call times of one measurement, in milliseconds."""

    times_ms: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        """The median time in milliseconds."""
        return statistics.median(self.times_ms)

    @property
    def spread(self) -> float:
        """``(p90 - p10) / median``: how noisy the repeats were."""
        ordered = sorted(self.times_ms)
        lo = ordered[int(0.1 * (len(ordered) - 1))]
        hi = ordered[math.ceil(0.9 * (len(ordered) - 1))]
        return (hi - lo) / self.median_ms if self.median_ms > 0 else 0.0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(
    fn: Callable[..., Any],
    input_sets: Sequence[tuple[Any, ...]],
    device: torch.device,
    *,
    budget_s: float = 0.2,
    min_repeats: int = 5,
    max_repeats: int = 200,
    warmup: int = 1,
    flush_l2: bool = False,
    hide_host: bool = False,
) -> Timing:
    """Median-ready per-call times of ``fn(*input_sets[i % k])``.

    Args:
        fn: the operation; its result is discarded (check it before timing).
        input_sets: ``k >= 1`` argument tuples, cycled through call by call.
        device: where ``fn`` runs; CUDA events there, :func:`time.perf_counter` on the CPU.
        budget_s: about how long the repeats may take in all; the repeat count is derived
            from the last warm-up pass and clamped to ``[min_repeats, max_repeats]``.
        warmup: least number of untimed passes over all input sets before timing; the
            warm-up also lasts at least ``budget_s / 4``, and on a GPU at least 0.1 s
            (clocks come back up after an idle spell). 0: no warm-up, and exactly
            ``min_repeats`` timed calls, for a caller that has just run ``fn`` on these
            inputs (to check its result) and only wants a quick ranking.
        flush_l2: on a CUDA device, overwrite a buffer twice the L2 size before each timed
            call, outside its events: for inputs so small that even the rotated sets fit in L2.
        hide_host: on a CUDA device, keep the device waiting while the host enqueues the
            timed calls, so that each call's events hold its device work alone. Without it a
            call whose host side is slower than its kernels is timed at its launch rate
            (tens of microseconds of Python, noisy from call to call). For ranking schedules
            of one operator, whose host costs are alike.

    Returns:
        A :class:`Timing` with one entry per timed call.
    """
    if not input_sets:
        raise ValueError("input_sets must hold at least one argument tuple, got none")
    if min_repeats < 1 or max_repeats < min_repeats:
        raise ValueError(f"need 1 <= min_repeats <= max_repeats, got {min_repeats} and {max_repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    k = len(input_sets)
    # Warm up for whole passes over the input sets, at least ``warmup`` of them and a quarter
    # of the budget: the first calls pay page faults, thread-pool start and kernel loading.
    passes, spent, per_call = 0, 0.0, math.inf
    least = max(budget_s / 4, _MIN_GPU_WARMUP_S if device.type == "cuda" else 0.0)
    while warmup and (passes < warmup or spent < least):
        _sync(device)
        start = time.perf_counter()
        for args in input_sets:
            fn(*args)
        _sync(device)
        elapsed = time.perf_counter() - start
        spent += elapsed
        per_call = elapsed / k
        passes += 1
    repeats = int(min(max_repeats, max(min_repeats, budget_s / max(per_call, 1e-7))))
    if device.type == "cuda":
        scratch = (torch.empty(2 * Target.of(device).l2_bytes, dtype=torch.uint8, device=device)
                   if flush_l2 else None)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(repeats)]
        if hide_host:
            _wait_while_enqueued(fn, input_sets[0], scratch, repeats, device)
        for i, (begin, end) in enumerate(events):
            if scratch is not None:
                scratch.fill_(i & 0xFF)
            begin.record()
            fn(*input_sets[i % k])
            end.record()
        torch.cuda.synchronize(device)
        return Timing(tuple(begin.elapsed_time(end) for begin, end in events))
    times = []
    for i in range(repeats):
        begin = time.perf_counter()
        fn(*input_sets[i % k])
        times.append((time.perf_counter() - begin) * 1e3)
    return Timing(tuple(times))


def _wait_while_enqueued(fn: Callable[..., Any], args: tuple[Any, ...], scratch: torch.Tensor | None,
                         repeats: int, device: torch.device) -> None:
    """Enqueue a device spin-wait long enough for the host to enqueue ``repeats`` calls
    behind it: twice the host time of one unsynchronised call (flush included), each."""
    _sync(device)
    start = time.perf_counter()
    if scratch is not None:
        scratch.fill_(0)
    fn(*args)
    host_s = time.perf_counter() - start
    _sync(device)
    wait_s = min(1.0, 2 * repeats * host_s + 1e-4)
    torch.cuda._sleep(int(wait_s * _WAIT_CYCLES_PER_S))
