"""Measuring candidates: timing calls, and compiling them ahead in parallel."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from gsparse.tune.measure import Timing, compile_ahead, time_calls

CPU = torch.device("cpu")


def test_time_calls_cycles_through_every_input_set() -> None:
    seen = []
    t = time_calls(seen.append, [(0,), (1,), (2,)], CPU, budget_s=0.001, min_repeats=6, max_repeats=6)
    assert len(t.times_ms) == 6 and t.median_ms >= 0
    assert set(seen) == {0, 1, 2} and seen[-6:] == [0, 1, 2, 0, 1, 2]
    with pytest.raises(ValueError, match="input_sets must hold at least one"):
        time_calls(print, [], CPU)
    with pytest.raises(ValueError, match="need 1 <= min_repeats <= max_repeats, got 5 and 2"):
        time_calls(print, [()], CPU, min_repeats=5, max_repeats=2)


def test_no_warmup_times_exactly_min_repeats_calls() -> None:
    seen = []
    t = time_calls(lambda i: seen.append(i), [(0,), (1,)], CPU, warmup=0, min_repeats=3)
    assert seen == [0, 1, 0] and len(t.times_ms) == 3
    with pytest.raises(ValueError, match="warmup must be >= 0"):
        time_calls(print, [()], CPU, warmup=-1)


def test_warmup_passes_over_every_input_set_before_timing() -> None:
    seen = []
    time_calls(seen.append, [(0,), (1,)], CPU, budget_s=0.0, warmup=2, min_repeats=1, max_repeats=1)
    assert seen == [0, 1, 0, 1, 0]  # two whole passes, then one timed call


def test_timing_reports_the_median_and_spread() -> None:
    t = Timing((1.0, 2.0, 3.0, 4.0, 100.0))
    assert t.median_ms == 3.0
    assert t.spread == pytest.approx((100.0 - 1.0) / 3.0)
    assert Timing((2.0,) * 7).spread == 0.0
    assert Timing((0.0, 0.0)).spread == 0.0


def test_compile_ahead_runs_every_call_in_threads_and_ignores_failures() -> None:
    ran, threads = [], set()

    def call(i):
        def run():
            threads.add(threading.get_ident())
            ran.append(i)
            if i % 3 == 0:
                raise RuntimeError("this candidate does not compile")
        return run

    compile_ahead([call(i) for i in range(12)], CPU, workers=4)
    assert sorted(ran) == list(range(12))
    assert threading.get_ident() not in threads  # not on the caller's thread


@pytest.mark.gpu
def test_gpu_warmup_lasts_a_tenth_of_a_second_whatever_the_budget():
    calls = []

    def one_millisecond() -> None:
        calls.append(time.perf_counter())
        torch.cuda._sleep(2_000_000)  # about 1 ms of GPU clock cycles

    t = time_calls(one_millisecond, [()], torch.device("cuda"), budget_s=0.001,
                   min_repeats=3, max_repeats=3)
    warmup_s = calls[-len(t.times_ms)] - calls[0]
    assert warmup_s >= 0.1, f"warm-up lasted {warmup_s * 1e3:.1f} ms"


@pytest.mark.gpu
def test_hide_host_times_the_device_work_alone():
    device = torch.device("cuda")
    x = torch.randn(1 << 16, device=device)

    def slow_host_fast_kernel() -> None:
        time.sleep(0.001)  # 1 ms of host work before a kernel of a few microseconds
        x.mul_(1.0)

    hidden = time_calls(slow_host_fast_kernel, [()], device, min_repeats=9, max_repeats=9, warmup=0,
                        hide_host=True)
    shown = time_calls(slow_host_fast_kernel, [()], device, min_repeats=9, max_repeats=9, warmup=0)
    assert hidden.median_ms < 0.1, hidden.times_ms
    # Without it the host's 1 ms per call is in the events: call by call, or, where the
    # driver submits recorded work in batches (an H200 machine did), in every other pair.
    assert sum(shown.times_ms) > 0.9 * len(shown.times_ms), shown.times_ms
