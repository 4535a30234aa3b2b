"""Counting the host steps of a call: the Python functions gsparse runs and the C functions
(torch's, the driver bindings', builtins) its code calls, as ``sys.setprofile`` reports them.

A wall-clock budget is too noisy to test on a shared machine; these counts are exact, and
every frame or C call added to a per-call path shows in them.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import gsparse

_PACKAGE = str(Path(gsparse.__file__).parent)


def host_steps(fn: Callable[[], object]) -> Counter:
    """``fn()``'s steps inside gsparse: ``python`` counts the gsparse functions it runs,
    ``c`` the C functions called from them; ``names`` lists both, for a failure message."""
    steps: Counter = Counter()
    names: list[str] = []

    def profile(frame, event, arg) -> None:
        if event in ("call", "c_call") and frame.f_code.co_filename.startswith(_PACKAGE):
            steps["python" if event == "call" else "c"] += 1
            names.append(frame.f_code.co_name if event == "call" else f"{getattr(arg, '__name__', arg)}()")

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    steps["names"] = names  # type: ignore[assignment]
    return steps
