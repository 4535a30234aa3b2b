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


def test_bench_quick_runs_without_the_real_graphs(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("GSPARSE_DATA_DIR", str(tmp_path / "no-data"))
    out = tmp_path / "bench"
    assert cli.main(["bench", "--quick", "--ops", "softmax", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "real graphs ['cora'] not found" in printed
    assert (out / "report.md").is_file() and "cora" not in (out / "report.md").read_text()
