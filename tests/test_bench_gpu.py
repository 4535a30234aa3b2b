"""The benchmark suite on a CUDA device: generator speed, same-run baselines, the sweep."""

from __future__ import annotations

import time

import pytest
import torch

from gsparse import datasets
from gsparse.bench import runner, timing

pytestmark = pytest.mark.gpu


def test_a_reddit_sized_graph_is_built_on_the_gpu_in_seconds():
    torch.cuda.synchronize()
    start = time.perf_counter()
    g = datasets.preset("reddit-like", device="cuda")
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    p = datasets.PRESETS["reddit-like"]
    assert g.device.type == "cuda" and g.num_dst == p.num_nodes
    assert abs(g.num_edges - p.num_edges) <= 1
    assert abs(g.row_stats.cov - p.cov) / p.cov < 0.05
    assert elapsed < 20, f"building reddit-like took {elapsed:.1f} s"


def test_gather_probe_kernel_sums_each_32_gathered_rows_and_beats_index_select():
    table = torch.randn(1000, 32, device="cuda")
    index = torch.randint(0, 1000, (32 * 4096,), dtype=torch.int32, device="cuda")
    out = timing._gather_probe(table, index)()
    expected = table[index.long()].view(4096, 32, 32).sum(1)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    bw = timing.measure_bandwidth(torch.device("cuda"))
    assert bw.gather > bw.copy, "an L2-resident gather should outrun an HBM copy"


def _config(**change) -> runner.Config:
    base = dict(ops=("spmm", "sddmm", "softmax"), workloads=("cora", "products-like"), feature_lens=(1, 32),
                heads=(8,), dtypes=("float32",), device="cuda", max_edges=1_000_000, budget_s=0.02)
    return runner.Config(**{**base, **change})


def test_every_implementation_runs_and_passes_its_check_on_the_gpu():
    doc = runner.run_suite(_config(), progress=lambda line: None)
    assert doc["environment"]["gpu"] == torch.cuda.get_device_name()
    assert doc["bandwidth"]["copy_bytes_per_s"] > 1e11
    for cell in doc["cells"]:
        for name, entry in cell["results"].items():
            assert entry["status"] == "ok", (cell["op"], cell["case"], cell["workload"], name, entry)


def test_sweep_times_the_spmm_schedule_space_on_the_gpu():
    from gsparse.kernels import spmm
    from gsparse.target import Target
    from gsparse.tune import select
    from gsparse.tune.search import FINALISTS

    doc = runner.run_suite(_config(ops=("spmm",), workloads=("cora",), feature_lens=(32,), sweep=True),
                           progress=lambda line: None)
    by_case = {cell["case"]: cell for cell in doc["cells"]}
    swept, unswept = by_case["copy_lhs_sum"], by_case["u_mul_e_sum"]
    assert set(by_case) == {"copy_lhs_sum", "u_mul_e_sum", "copy_lhs_mean", "copy_lhs_max"}
    g = datasets.real_graph("cora").graph
    assert swept["sweep"]["status"] == "ok", swept["sweep"]
    x = torch.randn(g.num_src, 32, device="cuda")
    task = spmm.task_for(g.to("cuda"), "copy_lhs", "sum", x, None, (32,))
    size = len(spmm.schedule_space(task, g.stats, Target.of("cuda")))
    assert swept["sweep"]["screened"] == swept["sweep"]["size"] == size
    assert swept["sweep"]["timed"] == min(size, FINALISTS)
    # the default entry is what the front end ran: the default policy's pick, the model's
    assert select.get_policy() == "model"
    assert swept["sweep"]["default"] == str(select.model_choice("spmm", g, task, Target.of("cuda")))
    assert swept["sweep"]["best_ms"] <= swept["results"]["gsparse"]["median_ms"]
    assert unswept["sweep"]["status"] == "unavailable"
