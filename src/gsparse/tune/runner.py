"""The runner of a tuning call: measures candidates on the user's real inputs.

Each candidate's output is first checked against a reference (the PyTorch-ops result where
its per-edge messages fit in memory, else the hand rule's kernel), then timed with CUDA
events around its device work alone (median of repeats; the check call warmed it up; the
host's launch time, alike for every candidate, is hidden). A candidate that fails to launch
or to match is a result with its error, and the others are still measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .builder import describe
from .interfaces import BuildResult, RunResult
from .measure import time_calls

__all__ = ["CallRunner", "TOLERANCE", "relative_error"]

# ‖out − ref‖ / ‖ref‖ accepted per dtype.
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 5e-3, torch.bfloat16: 2e-2}


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``‖out − ref‖ / ‖ref‖`` in float64 (``‖out − ref‖`` when ``ref`` is 0; inf for NaN)."""
    scale = float(ref.double().norm())
    err = float((out.double() - ref.double()).norm())
    err = err / scale if scale > 0 else err
    return err if math.isfinite(err) else math.inf


class CallRunner:
    """Runs ``call(schedule)`` for each built schedule (a :class:`~gsparse.tune.Runner`).

    Args:
        call: runs the operator with a forced schedule on the real inputs, returning its output.
        reference: the output every candidate must match.
        device: where it runs (CUDA events there).
        repeats: timed calls per candidate.
        flush_l2: overwrite the L2 before each timed call (inputs that fit in it).
    """

    def __init__(self, call: Callable[[Any], torch.Tensor], reference: torch.Tensor,
                 device: torch.device, *, repeats: int = 7, flush_l2: bool = False) -> None:
        self.call, self.reference, self.device = call, reference, device
        self.repeats, self.flush_l2 = repeats, flush_l2
        self.tolerance = TOLERANCE[reference.dtype]

    def run(self, builds: Sequence[BuildResult]) -> list[RunResult]:
        return [self._run(b.schedule) for b in builds]

    def _run(self, schedule: Any) -> RunResult:
        try:
            err = relative_error(self.call(schedule), self.reference)
            if not err <= self.tolerance:
                return RunResult(schedule, error=f"relative error {err:.3g} over {self.tolerance:g}")
            timing = time_calls(lambda: self.call(schedule), [()], self.device, min_repeats=self.repeats,
                                max_repeats=self.repeats, warmup=0, flush_l2=self.flush_l2,
                                hide_host=True)
            return RunResult(schedule, timing.times_ms)
        except Exception as error:  # noqa: BLE001 - one candidate's failure is data
            return RunResult(schedule, error=describe(error))
