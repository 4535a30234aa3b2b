"""A stand-in for a loaded kernel, for launch tests that need no GPU."""


class RecordingKernel:
    """Records each launch's grid, block and arguments instead of running it."""

    def __init__(self) -> None:
        self.launches: list[tuple] = []

    def launch(self, grid, block, args, *, shared_bytes=0, stream=None, context=""):
        self.launches.append((grid, block, list(args)))
