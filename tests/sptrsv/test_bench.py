"""The SpTRSV benchmark: matrix specs, throughput, records with every output checked, the
Markdown table; on the CPU (gsparse's kernels recorded as failed there) and on a GPU."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gsparse.bench import sptrsv as bench
from gsparse.datasets import triangular
from gsparse.datasets.real import real_graph


def test_gflops_counts_two_flops_per_entry_and_one_per_row_and_rhs():
    assert bench.gflops(n=1_000, nnz=4_000, k=16, ms=1.0) == pytest.approx((2 * 4_000 + 1_000) * 16 / 1e6)


def test_matrix_specs_name_a_family_size_and_seed():
    name, matrix = bench.load_matrix("road:400:3")
    assert name == "road:400:3" and matrix.shape == triangular.generate("road", 400, 3).shape
    assert bench.load_matrix("road:400")[0] == "road:400"
    with pytest.raises(ValueError, match="family must be one of"):
        bench.load_matrix("nope:100")


def test_a_real_graphs_name_is_the_lower_triangle_of_its_symmetrised_adjacency():
    name, matrix = bench.load_matrix("cora")
    edges = real_graph("cora").edge_index.numpy()
    n = 2708
    adjacency = sp.coo_array((np.ones(edges.shape[1]), (edges[0], edges[1])), shape=(n, n)).tocsr()
    expected = sp.tril(((adjacency + adjacency.T) != 0).astype(np.float64), k=-1)
    assert name == "cora" and matrix.shape == (n, n)
    assert (sp.tril(matrix, k=-1) != 0).astype(np.float64).sum() == expected.sum()
    assert (abs((sp.tril(matrix, k=-1) != 0).astype(np.float64) - expected)).sum() == 0
    assert (matrix.diagonal() != 0).all()


def test_a_cpu_run_checks_and_times_every_baseline_it_can():
    _, matrix = bench.load_matrix("laplacian2d:400")
    record = bench.bench_matrix("laplacian2d:400", matrix, 3, torch.float64, False, torch.device("cpu"), 0.01)
    results = record["results"]
    for name in ("scipy", "levelset", "cusparse_per_call"):
        assert results[name]["status"] == "ok", results[name]
        assert results[name]["relative_error"] <= 1e-10 and results[name]["gflops"] > 0
    for name in ("gsparse", "fast_start"):
        assert results[name]["status"] == "failed" and "CUDA GPU" in results[name]["error"], results[name]
    assert results["levelset"]["total_20_ms"] >= 20 * results["levelset"]["median_ms"]
    assert record["levels"] == results["levelset"]["levels"] > 1
    doc = {"environment": {"device": "cpu"}, "records": [record]}
    table = bench.markdown(doc)
    assert "| laplacian2d:400 | " in table and "## Failures" in table and "## Fast start" in table
    json.dumps(doc)  # the record is plain data


def test_a_run_of_some_implementations_skips_the_others(capsys):
    _, matrix = bench.load_matrix("banded:300")
    record = bench.bench_matrix("banded:300", matrix, 1, torch.float64, True, torch.device("cpu"), 0.01,
                                implementations=("scipy",))
    statuses = {name: entry["status"] for name, entry in record["results"].items()}
    assert statuses == {name: "ok" if name == "scipy" else "skipped" for name in bench.IMPLEMENTATIONS}
    assert "## Fast start" not in bench.markdown({"environment": {"device": "cpu"}, "records": [record]})
    with pytest.raises(SystemExit):
        bench.main(["--implementations", "gsparse,nope", "--out", "unused"])
    assert "--implementations: unknown ['nope']" in capsys.readouterr().err


def test_a_wrong_result_is_recorded_not_timed():
    reference = torch.ones(5, dtype=torch.float64).numpy()
    record = bench._measure(lambda: torch.zeros(5, dtype=torch.float64), reference, torch.float64,
                            torch.device("cpu"), 0.01)
    assert record["status"] == "wrong" and "relative error" in record["error"]
    nan = bench._measure(lambda: torch.full((5,), float("nan"), dtype=torch.float64), reference,
                         torch.float64, torch.device("cpu"), 0.01)
    assert nan["status"] == "wrong"


def test_the_device_time_table_compares_the_solvers_default_with_cusparse():
    def entry(ms, device_ms=None, loop_ms=None):
        return {"status": "ok", "median_ms": ms, "total_20_ms": 20 * ms,
                **({} if device_ms is None else {"device_ms": device_ms, "loop_ms": loop_ms})}

    def record(matrix, default, ours, cus):
        results = {name: {"status": "skipped"} for name in bench.IMPLEMENTATIONS}
        results.update({default: ours, "cusparse": cus})
        return {"matrix": matrix, "n": 10, "nnz": 20, "k": 16, "dtype": "float64", "transpose": False,
                "levels": None, "default": default, "results": results}

    doc = {"environment": {"device": "gpu"}, "records": [
        record("small", "fast_start", entry(0.05, 0.025, 0.03), entry(0.08, 0.05, 0.075)),
        record("large", "gsparse", entry(4.0), entry(9.0)),  # no device times: not in the table
    ]}
    table = bench.markdown(doc)
    assert "## Small solves" in table
    assert "| small | 16 | float64 | fast start | 0.030 | 0.075 | 2.50x | 0.025 | 0.050 | 2.00x |" in table
    assert "| large |" not in table.split("## Small solves")[1]
    doc["records"] = doc["records"][1:]
    assert "## Small solves" not in bench.markdown(doc)


@pytest.mark.gpu
def test_the_benchmark_runs_on_a_gpu(tmp_path):
    assert bench.main(["--matrices", "laplacian2d:3000,banded:3000", "--rhs", "1,16", "--budget", "0.05",
                       "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "sptrsv.json").read_text())
    assert len(doc["records"]) == 2 * 2 * 2
    for record in doc["records"]:
        ours = record["results"]["gsparse"]
        assert ours["status"] == "ok", ours
        assert set(ours["preprocess_ms"]) == {"analysis", "selection", "plan"} and ours["codegen_ms"] >= 0
        fast = record["results"]["fast_start"]
        assert fast["status"] == "ok", fast
        assert set(fast["preprocess_ms"]) == {"validation", "selection", "plan"} and fast["compile_ms"] > 0
        assert record["default"] in ("fast_start", "gsparse")
        per_solve = fast.get("loop_ms", fast["median_ms"])  # 20 solves in a row are a loop
        assert fast["total_20_ms"] == pytest.approx(sum(fast["preprocess_ms"].values()) + 20 * per_solve)
        assert record["results"]["cusparse_per_call"]["status"] == "ok"
        assert record["results"]["cusparse"]["status"] in ("ok", "skipped")
        for entry in (ours, fast):  # a cheap solve is also timed with the host hidden, and in loops
            assert ("device_ms" in entry) == ("loop_ms" in entry) == (entry["median_ms"] < bench._DEVICE_ALONE_MS)
            assert entry.get("device_ms", 1.0) > 0 and entry.get("loop_ms", 1.0) > 0
    table = (tmp_path / "sptrsv.md").read_text()
    assert table.startswith("# SpTRSV benchmark on ") and "## Fast start" in table


@pytest.mark.parametrize("preparer", ["fast_start", "gsparse"])
def test_each_preparation_phase_is_the_median_of_fresh_preparations(monkeypatch, preparer):
    """Off the GPU, with launches recorded and each timed step taking one more millisecond
    than the one before: the phases are the middle run's, the compile the first run's, and
    every run prepared the factor anew (its own plan, its own launch)."""
    import gsparse.kernels.sptrsv as sptrsv_kernels
    from gsparse.target import H100

    from .loader import RecordingLoader

    loader = RecordingLoader()
    for module in (bench, sptrsv_kernels):
        monkeypatch.setattr(module, "RUNTIME_LOADER", loader)
    monkeypatch.setattr(bench, "compile_cuda", lambda *args, **kwargs: None)
    monkeypatch.setattr(bench, "device_arch", lambda index: "sm_90")
    monkeypatch.setattr(bench.Target, "of", staticmethod(lambda device: H100))
    monkeypatch.setattr(bench, "PREPARATIONS", 3)
    clock = iter(range(100))
    monkeypatch.setattr(bench, "_host_ms", lambda fn, device: (fn(), float(next(clock))))
    matrix = triangular.generate("road", 400, 0)
    crow, col = (torch.from_numpy(a.astype(np.int64)) for a in (matrix.indptr, matrix.indices))
    values, b = torch.from_numpy(matrix.data), torch.ones(matrix.shape[0], dtype=torch.float64)
    if preparer == "fast_start":
        _, extra = bench._fast_start(crow, col, values, b, 1, False, torch.device("cpu"), None)
        # steps: the checks' compile (0), then per run validation, selection, compile, plan
        assert extra["preprocess_ms"] == {"validation": 5.0, "selection": 6.0, "plan": 8.0}
        assert extra["compile_ms"] == 0.0 + 3.0
    else:
        _, extra = bench._gsparse(crow, col, values, b, 1, False, torch.device("cpu"), None, None)
        # per run: analysis, selection, codegen, plan
        assert extra["preprocess_ms"] == {"analysis": 4.0, "selection": 5.0, "plan": 7.0}
        assert extra["codegen_ms"] == 2.0
    by_level = json.loads(extra["schedule"]).get("level_order", False)  # the fast start's levels kernel too
    assert loader.kernel_stub.prepared == 3 * (1 + by_level)
