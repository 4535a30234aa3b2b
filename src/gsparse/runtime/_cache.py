"""The on-disk kernel cache: one checksummed file per compiled program.

Entry layout (little endian)::

    b"GSPK" | u32 format version | 32-byte sha256 of the payload | u64 payload length | payload
    payload = u64 metadata length | metadata (JSON: key, arch, log, resources) | cubin

An entry is trusted only if every one of those checks out, so a truncated write, a flipped
byte or a file from another format version reads as a miss, and the entry is deleted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import struct
from collections.abc import Sequence
from pathlib import Path

from . import _toolchain
from ._binary import Binary, Resources
from ._files import replace_atomically
from ._nvrtc import DEFAULT_OPTIONS

# Bump when the entry layout or the key recipe change, or when old entries may be wrong: old
# entries then stop matching instead of being misread. 2: entries of version 1 may hold no
# resource report (NVRTC 12.9+ reused a cached CUBIN and ptxas's report was not in its log).
FORMAT_VERSION = 2

_MAGIC = b"GSPK"
_HEADER = struct.Struct("<4sI32sQ")
_LENGTH = struct.Struct("<Q")
_KEY = re.compile(r"[0-9a-f]{64}")
_SUFFIX = ".kernel"


def default_cache_dir() -> Path:
    """The one place gsparse keeps compiled kernels.

    ``$GSPARSE_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/gsparse``, else
    ``~/.cache/gsparse``. Read at each call, so changing the variable takes effect at once.
    """
    if override := os.environ.get("GSPARSE_CACHE_DIR"):
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gsparse"


def cache_key(source: str, arch: str, options: Sequence[str]) -> str:
    """sha256 (hex) of everything that decides the CUBIN.

    That is the source, the architecture, the caller's options, the runtime's default
    options, the NVRTC version and the cache's format version. Header search paths are
    left out: the CUDA headers found are those of the same CUDA release as NVRTC. The
    version is read from the memo of :mod:`._toolchain` where it is valid, so a lookup
    does not load NVRTC.
    """
    recipe = [FORMAT_VERSION, list(DEFAULT_OPTIONS), _toolchain.facts().version, arch, list(options), source]
    return hashlib.sha256(json.dumps(recipe).encode()).hexdigest()


class KernelCache:
    """Compiled programs on disk, keyed by :func:`cache_key`, shared by processes.

    Writers never leave a partial entry visible: each writes a private temporary file in the
    cache directory, fsyncs it and renames it over the entry, so concurrent writers of one
    key all succeed and the last rename wins with a complete entry.
    """

    directory: Path

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def __repr__(self) -> str:
        return f"KernelCache({str(self.directory)!r})"

    def _path(self, key: str) -> Path:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(f"key must be a sha256 hex digest from cache_key(), got {key!r}")
        return self.directory / f"{key}{_SUFFIX}"

    def get(self, key: str) -> Binary | None:
        """The cached program for ``key``, or None on a miss.

        An entry that is unreadable or fails any check is deleted and reported as a miss,
        so the caller rebuilds it.
        """
        path = self._path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            _discard(path)
            return None
        binary = _decode(data, key)
        if binary is None:
            # If another process just replaced the bad entry with a good one, this deletes
            # a good entry: that costs one rebuild, never a wrong answer.
            _discard(path)
        return binary

    def put(self, binary: Binary) -> None:
        """Store ``binary`` under ``binary.key`` atomically (raises OSError if the disk does)."""
        replace_atomically(self._path(binary.key), _encode(binary), prefix=f".{binary.key[:16]}.")

    def clear(self) -> int:
        """Delete every entry (and leftover temporary files); returns the number of entries."""
        if not self.directory.is_dir():
            return 0
        removed = 0
        for path in self.directory.glob(f"*{_SUFFIX}"):
            removed += _discard(path)
        for path in self.directory.glob(".*.tmp"):
            _discard(path)
        return removed


def _discard(path: Path) -> bool:
    try:
        path.unlink()
    except OSError:
        return False
    return True


def _encode(binary: Binary) -> bytes:
    metadata = json.dumps(
        {
            "key": binary.key,
            "arch": binary.arch,
            "log": binary.log,
            "resources": {name: dataclasses.asdict(r) for name, r in binary.resources.items()},
        }
    ).encode()
    payload = _LENGTH.pack(len(metadata)) + metadata + binary.cubin
    digest = hashlib.sha256(payload).digest()
    return _HEADER.pack(_MAGIC, FORMAT_VERSION, digest, len(payload)) + payload


def _decode(data: bytes, key: str) -> Binary | None:
    """The entry in ``data`` if it is complete, intact, of this format and for ``key``."""
    if len(data) < _HEADER.size:
        return None
    magic, version, digest, length = _HEADER.unpack_from(data)
    payload = data[_HEADER.size :]
    if magic != _MAGIC or version != FORMAT_VERSION or length != len(payload):
        return None
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        (metadata_length,) = _LENGTH.unpack_from(payload)
        metadata_end = _LENGTH.size + metadata_length
        metadata = json.loads(payload[_LENGTH.size : metadata_end])
        if metadata["key"] != key:
            return None
        return Binary(
            cubin=payload[metadata_end:],
            arch=metadata["arch"],
            log=metadata["log"],
            resources={name: Resources(**r) for name, r in metadata["resources"].items()},
            key=key,
        )
    except (struct.error, ValueError, KeyError, TypeError):
        return None
