"""Replacing a file so that readers in other processes see the old one or the whole new one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["replace_atomically"]


def replace_atomically(path: Path, data: bytes, prefix: str) -> None:
    """Write ``data`` to ``path`` through a private temporary file in the same directory
    (``<prefix>*.tmp``), flushed to disk and renamed over ``path``; concurrent writers all
    succeed and the last rename wins with a whole file. Creates the directory; raises
    OSError if the disk does, leaving no temporary file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
