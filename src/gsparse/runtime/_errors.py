"""The runtime's two error types; both are RuntimeErrors so callers can catch either broadly."""

from __future__ import annotations


class CompileError(RuntimeError):
    """NVRTC rejected a program.

    The message names the program, the caller's ``context`` (typically the schedule that
    generated the source) and holds NVRTC's full log, whose lines start with
    ``<name>.cu(<line>)``, followed by the offending source lines, numbered.
    """


class LaunchError(RuntimeError):
    """A kernel launch was rejected, by our validation or by the CUDA driver.

    The message names the kernel, the caller's ``context``, the grid, block and dynamic
    shared memory of the launch, and the CUDA error name (or the violated limit).
    """
