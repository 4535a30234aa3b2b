"""The NVRTC memo (gsparse.runtime._toolchain): a cache hit does not load NVRTC, a changed
library is not trusted, and a compile keys its program by the NVRTC that built it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gsparse import runtime
from gsparse.runtime import KernelCache, _toolchain, cache_key, compile_cuda

pytestmark = pytest.mark.skipif(runtime.nvrtc_version() is None, reason="needs NVRTC")

SOURCE = 'extern "C" __global__ void toolchain_probe(float* x) { x[threadIdx.x] += 1.0f; }'

_HIT = """
import sys
from gsparse import runtime
binary = runtime.compile_cuda(sys.argv[1], arch="sm_90")
print(binary.key, "cuda.bindings.nvrtc" in sys.modules)
"""


def _run(script: str, cache: Path) -> list[str]:
    env = {**os.environ, "GSPARSE_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", script, SOURCE], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty cache directory, and a process that has read no memo yet."""
    monkeypatch.setenv("GSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_toolchain._State, "facts", None)
    monkeypatch.setattr(_toolchain._State, "memo", None)
    monkeypatch.setattr(_toolchain._State, "remembered", set())
    return tmp_path


def test_a_cache_hit_in_a_new_process_does_not_load_nvrtc(tmp_path: Path) -> None:
    compiled_key, loaded_by_compile = _run(_HIT, tmp_path)
    memo = json.loads((tmp_path / "nvrtc.json").read_text())
    assert tuple(memo["version"]) == runtime.nvrtc_version()
    hit_key, loaded_by_hit = _run(_HIT, tmp_path)
    assert (loaded_by_compile, loaded_by_hit) == ("True", "False")
    assert hit_key == compiled_key


def test_a_memo_of_a_changed_library_is_not_trusted(fresh: Path) -> None:
    compile_cuda(SOURCE, arch="sm_90")
    memo = json.loads((fresh / "nvrtc.json").read_text())
    memo["library"]["size"] += 1  # as if libnvrtc had been replaced
    memo["version"] = [1, 0]
    (fresh / "nvrtc.json").write_text(json.dumps(memo))
    _toolchain._State.facts = None
    found = _toolchain.facts()
    assert (found.version, found.from_memo) == (runtime.nvrtc_version(), False)
    compile_cuda(SOURCE + "\n// changed", arch="sm_90")  # a program stored rewrites the memo
    assert json.loads((fresh / "nvrtc.json").read_text())["version"] == list(runtime.nvrtc_version())


def test_a_compile_keys_its_program_by_the_nvrtc_that_built_it(fresh: Path) -> None:
    compile_cuda(SOURCE + "\n// first", arch="sm_90")
    memo = json.loads((fresh / "nvrtc.json").read_text())
    memo["version"] = [1, 0]  # a stale memo of a library whose file looks the same
    (fresh / "nvrtc.json").write_text(json.dumps(memo))
    _toolchain._State.facts = None
    assert _toolchain.facts().version == (1, 0)
    binary = compile_cuda(SOURCE, arch="sm_90")
    assert not _toolchain.facts().from_memo
    assert binary.key == cache_key(SOURCE, "sm_90", ())
    assert json.loads((fresh / "nvrtc.json").read_text())["version"] == list(runtime.nvrtc_version())


def test_a_compile_that_stores_nothing_writes_no_memo(fresh: Path) -> None:
    compile_cuda(SOURCE, arch="sm_90", cache=None)
    assert _toolchain.facts().version == runtime.nvrtc_version()
    assert list(fresh.iterdir()) == []


def test_a_cache_filled_elsewhere_carries_the_memo(fresh: Path) -> None:
    # `gsparse precompile --cache-dir D` fills D; a process run with GSPARSE_CACHE_DIR=D
    # then finds the memo there.
    elsewhere = fresh / "elsewhere"
    compile_cuda(SOURCE + "\n// elsewhere", arch="sm_90", cache=KernelCache(elsewhere))
    memo = json.loads((elsewhere / "nvrtc.json").read_text())
    assert tuple(memo["version"]) == runtime.nvrtc_version()
