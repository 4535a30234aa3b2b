"""The ``gsparse`` command."""

from __future__ import annotations

import gsparse.cli as cli


def test_info_lists_device_nvrtc_cache_and_versions(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GSPARSE_CACHE_DIR", str(tmp_path / "kernels"))
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    for key in ("gsparse", "device", "torch", "nvrtc", "cache directory", "python"):
        assert key in out
    assert str(tmp_path / "kernels") in out


def test_example_runs_and_matches_the_reference(capsys):
    assert cli.main(["example", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "relative error vs float64 reference" in out
