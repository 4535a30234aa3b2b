"""The two facts of the installed NVRTC that a cache hit needs, without loading NVRTC.

Every cache key holds NVRTC's version, and the architecture a GPU's programs are built for
depends on the architectures NVRTC targets. Loading NVRTC for them (its bindings and
``libnvrtc``, a 100 MB library) costs a GPU process 30-100 ms, most of the first call of an
operator whose kernels ``gsparse precompile`` has already built. So a process that loads
NVRTC writes both facts, with the library's path, size, inode and modification time, to
``nvrtc.json`` in every cache directory it stores a program in (:func:`remember`: a cache
filled by ``gsparse precompile --cache-dir`` carries them, and a compile that stores
nothing writes nothing). Later processes using that directory read them back for as long
as the file at that path is unchanged. A process that compiles loads NVRTC anyway
(:func:`loaded`): the facts it finds replace those read back, and the memo, if they differ.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from . import _nvrtc
from ._files import replace_atomically

__all__ = ["NvrtcFacts", "facts", "loaded", "memo_path", "remember"]

_MEMO = "nvrtc.json"


@dataclass(frozen=True)
class NvrtcFacts:
    """NVRTC's version ((major, minor), None when it cannot be loaded), the real
    architectures it targets (numbers, oldest first), and whether they were read back from
    the memo rather than from the loaded library."""

    version: tuple[int, int] | None
    archs: tuple[int, ...]
    from_memo: bool


class _State:
    facts: NvrtcFacts | None = None
    memo: dict[str, object] | None = None  # of the NVRTC loaded, where its file is known
    remembered: set[Path] = set()  # directories whose memo this process has written or found current


def memo_path(directory: Path | None = None) -> Path:
    """Where the memo lives: ``nvrtc.json`` in ``directory``, by default the kernel cache
    directory of the moment."""
    if directory is None:
        from ._cache import default_cache_dir  # _cache keys entries with these facts

        directory = default_cache_dir()
    return Path(directory) / _MEMO


def facts() -> NvrtcFacts:
    """The facts this process uses: read back from a valid memo, else from NVRTC loaded."""
    if _State.facts is None:
        _State.facts = _read_memo() or _load()
    return _State.facts


def loaded() -> NvrtcFacts:
    """The facts of NVRTC itself, loading it if this process has not (a compile needs it)."""
    if _State.facts is None or _State.facts.from_memo:
        _State.facts = _load()
    return _State.facts


def remember(directory: Path) -> None:
    """Write the memo of the NVRTC this process loaded into ``directory``, where a compiled
    program was just stored; once per directory and process."""
    directory = Path(directory)
    if _State.memo is not None and directory not in _State.remembered:
        _State.remembered.add(directory)
        if _read_raw(directory) != _State.memo:
            _write_memo(directory, _State.memo)


def _load() -> NvrtcFacts:
    version = _nvrtc.nvrtc_version()
    if version is None:
        return NvrtcFacts(None, (), from_memo=False)
    found = NvrtcFacts(version, _nvrtc.supported_arch_numbers(), from_memo=False)
    if (stamp := _library_stamp()) is not None:
        _State.memo = {"library": stamp, "version": list(version), "archs": list(found.archs)}
        _State.remembered = set()  # memos checked so far were checked against other facts
    return found


def _library_stamp() -> dict[str, object] | None:
    """Path, size, inode and modification time of the loaded libnvrtc, or None where the
    loader does not say which file it loaded (then nothing is memoised)."""
    try:
        from cuda import pathfinder

        path = pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception:  # noqa: BLE001 - any failure only means no memo
        return None
    return None if path is None else _stamp(path)


def _stamp(path: str) -> dict[str, object] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return {"path": path, "size": status.st_size, "inode": status.st_ino, "mtime_ns": status.st_mtime_ns}


def _read_raw(directory: Path | None = None) -> object:
    try:
        return json.loads(memo_path(directory).read_text())
    except (OSError, ValueError):
        return None


def _read_memo() -> NvrtcFacts | None:
    """The memo's facts if the memo is whole and its library file is unchanged, else None."""
    memo = _read_raw()
    try:
        library = memo["library"]
        if _stamp(library["path"]) != library:
            return None
        major, minor = memo["version"]
        return NvrtcFacts((int(major), int(minor)), tuple(int(a) for a in memo["archs"]), from_memo=True)
    except (ValueError, KeyError, TypeError):
        return None


def _write_memo(directory: Path, memo: dict[str, object]) -> None:
    """Write the memo atomically; a cache directory that cannot be written only leaves the
    next process to load NVRTC again."""
    with contextlib.suppress(OSError):
        replace_atomically(memo_path(directory), json.dumps(memo).encode(), prefix=".nvrtc.")
