"""The ``gsparse`` command."""

from __future__ import annotations

import pytest
import torch

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
    assert "relative error vs float64 reference" in out and "(a warm call)" in out


def test_bench_quick_runs_without_the_real_graphs_of_a_data_dir(tmp_path, capsys) -> None:
    (tmp_path / "no-data").mkdir()
    out = tmp_path / "bench"
    assert cli.main(["bench", "--quick", "--ops", "softmax", "--data-dir", str(tmp_path / "no-data"),
                     "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "real graphs ['cora'] not found" in printed
    assert (out / "report.md").is_file() and "cora" not in (out / "report.md").read_text()


def test_bench_reads_real_graphs_from_the_data_dir(tmp_path, capsys) -> None:
    import numpy as np

    np.savez(tmp_path / "cora.npz", edge_index=np.array([[0, 1, 2], [1, 2, 0]]))
    assert cli.main(["bench", "--ops", "softmax", "--workloads", "cora", "--heads", "1", "--dtypes",
                     "float64", "--data-dir", str(tmp_path), "--budget-ms", "1", "--out", str(tmp_path / "o")]) == 0
    assert "workload cora: 3 rows, 3 edges" in capsys.readouterr().out


_EMPTY = "empty"  # a folder the test creates


@pytest.mark.parametrize("args, message", [
    (["bench", "--workloads", "nope"], "gsparse bench: unknown workload 'nope': expected a preset"),
    (["bench", "--workloads", "missing.npz"], "gsparse bench: no such graph file: missing.npz"),
    (["bench", "--workloads", "cora", "--data-dir", _EMPTY], "gsparse bench: cora.npz is not in --data-dir"),
    (["bench", "--data-dir", "/no/such/folder"], "gsparse bench: --data-dir /no/such/folder is not a folder"),
    (["bench", "--dtypes", "float8"], "gsparse bench: --dtypes takes comma-separated names among float32, "
                                      "float64, float16, bfloat16, got 'float8'"),
    (["bench", "--ops", "spmv"], "gsparse bench: --ops takes comma-separated names among spmm, sddmm, softmax"),
    (["bench", "--features", "4,x"], "gsparse bench: --features takes comma-separated positive integers, got 'x'"),
    (["bench", "--features", "0"], "gsparse bench: --features takes positive integers, got 0"),
    (["bench", "--heads", ","], "gsparse bench: --heads needs at least one positive integer"),
    (["bench", "--workloads", ","], "gsparse bench: --workloads names no workload"),
    (["bench", "--scale", "-1"], "gsparse bench: --scale must be positive, got -1.0"),
    (["bench", "--scale", "x"], "gsparse bench: argument --scale: invalid float value: 'x'"),
    (["bench", "--max-edges", "0"], "gsparse bench: --max-edges must be a positive integer, got 0"),
    (["bench", "--budget-ms", "0"], "gsparse bench: --budget-ms must be positive"),
    (["bench", "--device", "tpu"], "gsparse bench: --device must be cpu, cuda or cuda:N, got 'tpu'"),
    (["bench", "--workloads", "ddi-like", "--scale", "1e-6", "--ops", "softmax"],
     "gsparse bench: workload 'ddi-like': scale = 1e-06 leaves 0 nodes"),
    (["bench", "--workloads", "bad.txt", "--ops", "softmax"], "gsparse bench: workload 'bad.txt': "),
    (["bench", "--bogus"], "gsparse: unrecognized arguments: --bogus"),
    (["nope"], "gsparse: argument command: invalid choice: 'nope'"),
    ([], "gsparse: the following arguments are required: command"),
])
def test_user_errors_print_one_line_and_exit_2(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / _EMPTY).mkdir()
    (tmp_path / "bad.txt").write_text("not an edge list\n")
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(message), err
    assert "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA device")
@pytest.mark.parametrize("command", ["bench", "example"])
def test_cuda_without_a_gpu_is_a_user_error(command, capsys):
    assert cli.main([command, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err == f"gsparse {command}: --device cuda asked for, but PyTorch sees no CUDA device\n"


def test_help_is_plain_text_and_explains_the_workloads(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "``" not in out and ":func:" not in out and ":data:" not in out
    assert "G-Sparse paper" in out and "SpMM optimisation report" in out and "float64" in out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "``" not in capsys.readouterr().out
