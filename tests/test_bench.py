"""The benchmark suite: input rotation and bandwidth, baselines and their checks, sweeps, reports,
and the CLI. (Timing calls is tested in tests/tune/test_measure.py.)"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

import gsparse
import gsparse.cli as cli
from gsparse import datasets, kernels, runtime
from gsparse.bench import baselines, report, runner, timing
from gsparse.bench.baselines import CASES
from gsparse.datasets import LogNormal, synthetic
from gsparse.graph import Graph
from gsparse.kernels.pruning import Facts, prune
from gsparse.kernels.spmm import OutputTiled
from gsparse.target import H100
from gsparse.tune import select
from gsparse.tune.search import FINALISTS

from recording import RecordingLoader

CPU = torch.device("cpu")


def _permuted_graph() -> Graph:
    """A graph whose edge order differs from its CSR order, with an empty row."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, 300, (3_000,), generator=gen)
    dst = torch.randint(1, 400, (3_000,), generator=gen)
    g = Graph.from_edge_index(torch.stack([src, dst]), num_src=300, num_dst=400)
    assert g.eid is not None and int(g.in_degrees()[0]) == 0
    return g


def _cell(case, g: Graph, feature_len: int = 8, sets: int = 2) -> runner._Cell:
    gen = torch.Generator().manual_seed(1)
    inputs = [case.make_inputs(g, feature_len, torch.float32, gen) for _ in range(sets)]
    samples = [baselines.sample_rows(g, feature_len, gen) for _ in inputs]
    refs = [case.reference(i, s) for i, s in zip(inputs, samples)]
    return runner._Cell(case, inputs, samples, refs, baselines.TOLERANCE[torch.float32], CPU, 0.005)


# ------------------------------------------------------------------ rotation and bandwidth


def test_rotation_spans_the_cache_when_inputs_fit():
    cache = timing.l2_bytes(CPU)
    assert timing.rotation_count(2 * cache, CPU) == 1
    assert timing.rotation_count(cache, CPU) == 4
    assert timing.rotation_count(cache * 3 // 2, CPU) == 3
    assert timing.rotation_count(1, CPU) == 4
    with pytest.raises(ValueError, match="working_set_bytes must be >= 0, got -1"):
        timing.rotation_count(-1, CPU)
    assert not timing.needs_flush(1, CPU)  # the CPU never flushes


def test_bandwidth_is_measured():
    bw = timing.measure_bandwidth(CPU, copy_bytes=8 << 20)
    assert bw.copy > 1e8 and bw.gather > 1e7
    assert set(bw.to_json()) == {"copy_bytes_per_s", "gather_bytes_per_s", "copy_buffer_bytes",
                                 "gather_table_bytes"}


def test_gather_probe_sums_each_32_gathered_rows():
    table = torch.randn(50, 32)
    index = torch.randint(0, 50, (32 * 3 + 5,), dtype=torch.int32)
    out = timing._gather_probe(table, index)()
    expected = table[index[:96].long()].view(3, 32, 32).sum(1)
    torch.testing.assert_close(out, expected)


@pytest.mark.skipif(runtime.nvrtc_version() is None, reason="needs NVRTC")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_gather_probe_kernel_compiles_without_spills(arch):
    binary = runtime.compile_cuda(timing._GATHER_PROGRAM.source, arch=arch, cache=None)
    resources = binary.resources["gather_probe"]
    assert resources.spill_stores == 0 and resources.spill_loads == 0, binary.log


# ------------------------------------------------------------------ cases and their checks


@pytest.mark.parametrize("case", [c for cases in CASES.values() for c in cases], ids=lambda c: c.label)
def test_every_implementation_passes_the_reference_check(case):
    cell = _cell(case, _permuted_graph())
    for impl in case.implementations():
        entry = runner._measure(cell, impl)
        assert entry["status"] == "ok", (impl.name, entry)
        assert entry["rel_error"] < 1e-5 and len(entry["times_ms"]) >= 5


def test_the_sample_covers_whole_rows_and_all_rows_of_small_graphs():
    g = _permuted_graph()
    s = baselines.sample_rows(g, 8, torch.Generator().manual_seed(0))
    assert torch.equal(s.rows, torch.arange(g.num_dst))
    assert s.positions.numel() == g.num_edges
    big = synthetic(20_000, LogNormal(100, 1.0), seed=0)
    s = baselines.sample_rows(big, 256, torch.Generator().manual_seed(0))
    assert 16 <= s.rows.numel() < big.num_dst
    assert s.positions.numel() == int(big.in_degrees()[s.rows].sum())


def test_wrong_results_oom_and_errors_are_recorded_not_raised():
    case = CASES["spmm"][0]
    cell = _cell(case, _permuted_graph())
    good = case.implementations()[1]
    wrong = replace(good, name="wrong", run=lambda a, x: torch.sparse.mm(a, x) * 1.01)
    entry = runner._measure(cell, wrong)
    assert entry["status"] == "wrong" and "over the tolerance" in entry["message"]
    assert "times_ms" not in entry

    def oom(*args):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 58.00 GiB")

    assert runner._measure(cell, replace(good, run=oom))["status"] == "OOM"
    nan = replace(good, run=lambda a, x: torch.full((a.shape[0], x.shape[1]), float("nan")))
    assert runner._measure(cell, nan)["status"] == "wrong"
    broken = replace(good, prepare=lambda i: 1 / 0)
    assert runner._measure(cell, broken) == {"status": "error", "message": "ZeroDivisionError: division by zero"}


class _Schedule:
    def __init__(self, n: int) -> None:
        self.n = n

    def __str__(self) -> str:
        return f"s{self.n}"

    def to_json(self) -> str:
        return json.dumps({"n": self.n})


class _FakeOperator:
    """Ten schedules, of which pruning removes the last two (too few blocks); the CPU backend
    ignores them, so each runs the same default path."""

    @staticmethod
    def schedule_space(task, stats, target):
        assert target is H100
        return [_Schedule(n) for n in range(10)]

    @classmethod
    def pruned_space(cls, task, stats, target, registers="off"):
        space = cls.schedule_space(task, stats, target)
        facts = [Facts(blocks=1 if s.n >= 8 else 1_000, row_cov=0.0, column_waste=0.0) for s in space]
        return prune(space, facts, target, registers=None if registers == "off" else (lambda s: 0.0))

    @staticmethod
    def default_schedule(task, stats, target):
        # Named after the task's feature count: the sweep hands over the case's task.
        assert target is H100
        return _Schedule(100 + task.num_features)


def test_sweep_screens_every_schedule_times_the_finalists_and_reports_the_best(monkeypatch):
    case = CASES["spmm"][0]
    monkeypatch.setitem(kernels.OPERATORS, "spmm", _FakeOperator)
    monkeypatch.setattr(gsparse.spmm, "check_schedule", lambda schedule, op: None)  # fake schedules
    cell = _cell(case, _permuted_graph())
    default = runner._measure(cell, case.implementations()[0])
    with select.policy("default"):  # the hand rule's pick is the default the sweep names
        result = runner._sweep(cell, 8, torch.float32, default, H100)
    assert result["status"] == "ok" and result["size"] == result["screened"] == 8
    assert result["pruning"]["candidates"] == 10 and result["pruning"]["kept"] == 8
    assert result["pruning"]["in_order"] == {"utilisation": 2, "row_balance": 0, "column_waste": 0,
                                             "registers": 0}
    assert result["timed"] == FINALISTS == 6
    entries = result["schedules"]
    assert [e["schedule"] for e in entries] == [f"s{n}" for n in range(8)]
    assert [e["json"] for e in entries] == [json.dumps({"n": n}) for n in range(8)]
    assert all("screen_ms" in e for e in entries)
    finalists = sorted(entries, key=lambda e: e["screen_ms"])[:6]
    assert all("median_ms" in e for e in finalists)
    assert sum("median_ms" in e for e in entries) == 6
    fastest = min([default["median_ms"], *(e["median_ms"] for e in finalists)])
    assert result["best_ms"] == fastest and result["default"] == "s108"


def test_a_broken_space_is_reported_not_raised(monkeypatch):
    class Broken(_FakeOperator):
        @staticmethod
        def schedule_space(task, stats, target):
            raise RuntimeError("no space today")

    monkeypatch.setitem(kernels.OPERATORS, "spmm", Broken)
    case = CASES["spmm"][0]
    cell = _cell(case, _permuted_graph())
    with select.policy("default"):  # the fake has no knob tables for the model policy to rank
        result = runner._sweep(cell, 8, torch.float32, {"status": "ok", "median_ms": 1.0}, H100)
    assert result == {"status": "error", "message": "RuntimeError: no space today"}


def test_sweep_is_unavailable_off_the_gpu():
    assert "CPU" in runner._why_not_swept(CASES["spmm"][0], CPU)
    assert runner._why_not_swept(CASES["softmax"][0], CPU) == "softmax/dst has no schedules"
    assert (runner._why_not_swept(CASES["spmm"][1], CPU)
            == "spmm/u_mul_e_sum is swept with sweep_all (--sweep-all) only")
    # swept with sweep_all, but not off the GPU
    assert "CPU" in runner._why_not_swept(CASES["sddmm"][1], CPU, sweep_all=True)
    assert runner._why_not_swept(CASES["spmm"][0], torch.device("cuda")) is None


_SWEPT = [c for cases in CASES.values() for c in cases if c.kernel_task is not None]


@pytest.mark.parametrize("policy", ["default", "model"])
@pytest.mark.parametrize(("case", "feature_len"),
                         [(c, 32) for c in _SWEPT] + [(c, 1) for c in _SWEPT if c.op == "spmm"],
                         ids=lambda p: p.label if hasattr(p, "label") else str(p))
def test_a_sweeps_default_is_the_schedule_the_front_end_runs(case, feature_len, policy, monkeypatch) -> None:
    """The sweep measures the space of ``case.kernel_task(inputs)`` and names the schedule
    the policy chose for that task as the default (``select.choose`` with the sweep's
    target); the front end must run that very task and schedule. Here the choice is made
    and its plan built ahead, on an H100's facts with a recording loader, in the graph's
    caches: a call that chose again or built another task would find neither, and fail on
    the CPU, where no Target can be read. Checked on a graph of long rows at 32 features,
    where element-wise g-SDDMM and dot take different defaults, and at 1, where copy_lhs
    takes the output-tiled skeleton and weighted sums do not."""
    from gsparse import backends
    from gsparse.backends import cuda

    monkeypatch.setitem(backends._BY_DEVICE_TYPE, "cpu", cuda.BACKEND)  # CPU tensors, kernel path
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, 600, (300 * 400,), generator=gen)
    g = gsparse.Graph.from_edge_index(torch.stack([src, torch.arange(300).repeat_interleave(400)]), num_src=600, num_dst=300)
    inputs = case.make_inputs(g, feature_len, torch.float32, gen)
    name, task = case.kernel_task(inputs)
    operator = kernels.OPERATORS[name]
    with select.policy(policy):
        chosen = select.choose(name, g, task, lambda schedule: case.ours(inputs, schedule), H100)
        loader = RecordingLoader()
        if name == "spmm":
            g.plans.get((task, chosen), lambda: operator.build_plan(g, task, chosen, H100, loader=loader))
        else:
            g.plans.get((task, chosen), lambda: operator.build_plan(g, task, chosen, loader=loader))
        case.ours(inputs, None)
    assert len(g.schedules) == len(g.plans) == 1 and loader.order  # what ran is what was named
    if policy == "default" and case.label in ("spmm/copy_lhs_sum", "spmm/copy_lhs_mean") and feature_len == 1:
        assert isinstance(chosen, OutputTiled)


def test_config_names_bad_values():
    base = dict(ops=("spmm",), workloads=("cora",), feature_lens=(4,), heads=(1,), dtypes=("float32",),
                device="cpu")
    runner.Config(**base)
    for change, match in [({"ops": ("spmv",)}, r"ops must be among .* got \['spmv'\]"),
                          ({"dtypes": ("float8",)}, r"dtypes must be among"),
                          ({"feature_lens": (0,)}, r"feature_lens must be positive integers, got \[0\]"),
                          ({"workloads": ()}, "workloads must name at least one"),
                          ({"budget_s": 0}, "budget_s must be positive")]:
        with pytest.raises(ValueError, match=match):
            runner.Config(**{**base, **change})


# ------------------------------------------------------------------ reports


def _entry(ms: float) -> dict:
    return {"status": "ok", "median_ms": ms, "spread": 0.01, "rel_error": 1e-7, "times_ms": [ms] * 5}


def _synthetic_doc() -> dict:
    cells = []
    for workload, speed in (("reddit-like", 3.0), ("cora", 1.5)):
        for f in (1, 32, 512):
            pyg = _entry(20.0) if f < 512 else {"status": "OOM", "message": "CUDA out of memory"}
            pruning = {"candidates": 5, "kept": 2, "registers": "kept", "fallback": False,
                       "alone": {"utilisation": 1, "row_balance": 2, "column_waste": 0, "registers": None},
                       "in_order": {"utilisation": 1, "row_balance": 1, "column_waste": 0, "registers": 1},
                       "thresholds": {}}
            sweep = {"status": "ok", "default": "r8.f32", "best": "r4.f8", "best_ms": 0.8, "best_json": "{}",
                     "size": 2, "timed": 2, "pruning": pruning, "schedules": []}
            cells.append({"op": "spmm", "case": "copy_lhs_sum", "workload": workload, "feature_len": f,
                          "dtype": "float32", "baseline": "torch.sparse", "rotation": 1,
                          "floor": {"bytes": 10, "gather_bytes": 10, "floor_ms": 0.5},
                          "results": {"gsparse": _entry(1.0), "torch.sparse": _entry(speed), "PyG": pyg},
                          "sweep": sweep})
        cells.append({"op": "softmax", "case": "dst", "workload": workload, "feature_len": 8,
                      "dtype": "float32", "baseline": "PyTorch", "rotation": 1,
                      "floor": {"bytes": 10, "gather_bytes": 0, "floor_ms": 0.1},
                      "results": {"gsparse": _entry(0.4), "PyTorch": _entry(1.2)},
                      "sweep": {"status": "unavailable", "message": "softmax/dst has no schedules"}})
    workloads = {w: {"num_src": 10, "num_dst": 10, "num_edges": 100, "row_mean": 10.0, "row_max": 30,
                     "row_cov": 1.2, "source": "test"} for w in ("reddit-like", "cora")}
    return {"format": runner.FORMAT, "created": "2026-11-23T12:00:00+00:00", "wall_s": 12.0,
            "environment": {"gsparse": "0.1.0", "torch": "2.x", "torch_cuda": "12.8", "gpu": "NVIDIA H100",
                            "platform": "linux", "pyg_baseline": "torch index_add_"},
            "bandwidth": {"copy_bytes_per_s": 3e12, "gather_bytes_per_s": 8e12},
            "config": {}, "tolerance": {}, "workloads": workloads, "cells": cells}


def test_ratios_are_baseline_over_ours():
    cell = _synthetic_doc()["cells"][0]
    assert report.ratios(cell) == {"vs_torch.sparse": 3.0, "vs_PyG": 20.0, "floor_fraction": 0.5,
                                   "default_over_best": 1.25, "best_vs_baseline": 3.75}
    oom = _synthetic_doc()["cells"][2]
    assert report.ratios(oom)["vs_PyG"] is None


def test_report_writes_json_markdown_and_plots(tmp_path):
    paths = report.write_report(_synthetic_doc(), tmp_path)
    doc = report.load(paths["json"])
    assert doc["cells"][0]["ratios"]["vs_torch.sparse"] == 3.0
    md = paths["markdown"].read_text()
    assert "## spmm/copy_lhs_sum (float32)" in md and "## softmax/dst (float32)" in md
    assert ("| workload | F | gsparse ms | ± | torch.sparse ms | ± | x torch.sparse | PyG ms | ± | x PyG "
            "| floor ms | % floor |") in md
    assert "| reddit-like | 32 | 1 | ±0% | 3 | ±0% | 3.00x | 20 | ±0% | 20.00x | 0.5 | 50% | 0.8 | 1.25x | `r4.f8` |" in md
    assert "| OOM | — | —" in md
    assert "gsparse vs torch.sparse: geometric mean 2.12x, min 1.50x, max 3.00x over 6 cells" in md
    assert "gsparse vs PyTorch: geometric mean 3.00x" in md
    assert "in milliseconds (ms)" in md and "torch.sparse (`torch.sparse.mm` / `sampled_addmm`: cuSPARSE)" in md
    assert "- sweep unavailable: softmax/dst has no schedules" in md
    assert sorted(p.name for p in paths["plots"]) == ["softmax_dst_float32.png", "spmm_copy_lhs_sum_float32.png"]
    for p in paths["plots"]:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_shows_what_pruning_removed_from_each_swept_cell():
    md = report.markdown(_synthetic_doc())
    assert "| workload | F | space | utilisation | COV_row | WASTE_col | registers | measured |" in md
    assert "| cora | 32 | 5 | 1 | 1 | 0 | 1 | 2 |" in md and "| reddit-like | 512 | 5 | 1 | 1 | 0 | 1 | 2 |" in md
    # a sweep recorded before pruning existed, or the register constraint left off
    doc = _synthetic_doc()
    for cell in doc["cells"]:
        if cell["op"] == "spmm":
            cell["sweep"]["pruning"]["in_order"]["registers"] = None
    assert "| cora | 32 | 5 | 1 | 1 | 0 | — | 2 |" in report.markdown(doc)
    for cell in doc["cells"]:
        (cell.get("sweep") or {}).pop("pruning", None)
    assert "COV_row" not in report.markdown(doc)


def test_a_format_1_document_loads_with_todays_baseline_names(tmp_path):
    doc = _synthetic_doc()
    for cell in doc["cells"]:
        old = {"torch.sparse": "cusparse", "PyG": "pyg", "PyTorch": "torch"}
        cell["baseline"] = old[cell["baseline"]]
        cell["results"] = {old.get(k, k): v for k, v in cell["results"].items()}
        cell["ratios"] = {"vs_cusparse": 3.0}
    doc["format"] = "gsparse-bench/1"
    (tmp_path / "old.json").write_text(json.dumps(doc))
    loaded = report.load(tmp_path / "old.json")
    assert loaded["format"] == runner.FORMAT
    assert set(loaded["cells"][0]["results"]) == {"gsparse", "torch.sparse", "PyG"}
    assert loaded["cells"][0]["baseline"] == "torch.sparse" and loaded["cells"][-1]["baseline"] == "PyTorch"
    assert loaded["cells"][0]["ratios"] == {"vs_torch.sparse": 3.0}


@pytest.mark.parametrize("values, expected", [
    ([1.2, 1.3], [0.9, 1.0, 1.1, 1.2, 1.3]),  # a narrow range still gets several labelled ticks
    ([0.5, 3.0], [0.5, 1.0, 1.5, 2.0, 3.0]),
    ([0.01, 200.0], [0.01, 0.1, 1.0, 10.0, 100.0]),
])
def test_ratio_axes_carry_at_least_three_readable_ticks(values, expected):
    ticks = report._ratio_ticks(values)
    assert 3 <= len(ticks) <= 10
    assert [round(t, 6) for t in ticks] == expected


@pytest.mark.parametrize("values", [[0.9, 36.0], [0.5, 3.0], [1.2, 1.3], [0.004, 0.02]])
def test_ratio_axes_keep_every_point_in_view(values):
    plotted = [v for v in values if v > 0]
    low, high = report._ratio_limits(plotted, report._ratio_ticks(plotted))
    assert low < min(values) and high > max(values)


def test_report_without_matplotlib_keeps_the_numbers(tmp_path, monkeypatch):
    real = report.importlib.util.find_spec
    monkeypatch.setattr(report.importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    paths = report.write_report(_synthetic_doc(), tmp_path)
    assert paths["plots"] == [] and "matplotlib is not installed" in paths["plots_skipped"]
    assert paths["json"].is_file() and paths["markdown"].is_file()


def test_load_rejects_other_files(tmp_path):
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="is not a gsparse benchmark result"):
        report.load(tmp_path / "x.json")
    (tmp_path / "y.json").write_text("{")
    with pytest.raises(ValueError, match="is not JSON"):
        report.load(tmp_path / "y.json")


# ------------------------------------------------------------------ the command


def test_bench_quick_runs_end_to_end_on_the_cpu(tmp_path, capsys):
    workloads = {"products-like", "cora"}  # cora ships with gsparse
    # F = 4 and 32: four g-SpMM cases, u_dot_v, the two 8-head g-SDDMM cases at 32 only,
    # and edge softmax at 8 heads
    cells = (4 * 2 + 2 + 2 + 1) * len(workloads)
    assert cli.main(["bench", "--quick", "--device", "cpu", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "bandwidth on cpu" in out and f"[{cells}/{cells}]" in out
    doc = report.load(tmp_path / "results.json")
    assert doc["complete"] and len(doc["cells"]) == cells and set(doc["workloads"]) == workloads
    assert all(c["results"]["gsparse"]["status"] == "ok" for c in doc["cells"])
    assert (tmp_path / "report.md").is_file() and len(list(tmp_path.glob("*.png"))) == 8
    multihead = [c for c in doc["cells"] if c["case"] == "u_add_v_8heads"]
    assert {c["feature_len"] for c in multihead} == {32}  # [N, 8, 4]: 8 must divide F


def test_bench_expands_suites_of_presets(tmp_path, monkeypatch):
    class Captured(Exception):
        pass

    def capture(config, **kwargs):
        raise Captured(config)

    monkeypatch.setattr(runner, "run_suite", capture)
    with pytest.raises(Captured) as caught:
        cli.main(["bench", "--device", "cpu", "--workloads", "spmm-report,cora", "--out", str(tmp_path)])
    config = caught.value.args[0]
    assert config.workloads == (*datasets.SUITES["spmm-report"], "cora")
    assert config.max_edges == 2_000_000 and config.feature_lens == (1, 4, 16, 64, 256)
    assert not config.sweep and not config.sweep_all
    for flag, sweep_all in (("--sweep", False), ("--sweep-all", True)):
        with pytest.raises(Captured) as caught:
            cli.main(["bench", "--device", "cpu", flag, "--out", str(tmp_path)])
        assert caught.value.args[0].sweep and caught.value.args[0].sweep_all == sweep_all


def test_bench_with_a_graph_file_and_explicit_lengths(tmp_path):
    path = tmp_path / "ring.txt"
    path.write_text("\n".join(f"{i} {(i + 1) % 50}" for i in range(50)))
    argv = ["bench", "--device", "cpu", "--workloads", str(path), "--ops", "sddmm,softmax", "--features", "3",
            "--heads", "2", "--dtypes", "float32,bfloat16", "--budget-ms", "2", "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 0
    doc = report.load(tmp_path / "o" / "results.json")
    assert [(c["op"], c["feature_len"], c["dtype"]) for c in doc["cells"]] == [
        ("sddmm", 3, "float32"), ("sddmm", 3, "bfloat16"), ("softmax", 2, "float32"), ("softmax", 2, "bfloat16")]


def test_run_suite_checkpoints_after_each_workload(tmp_path):
    paths = []
    for n in (30, 40):
        path = tmp_path / f"ring{n}.txt"
        path.write_text("\n".join(f"{i} {(i + 1) % n}" for i in range(n)))
        paths.append(str(path))
    config = runner.Config(ops=("softmax",), workloads=tuple(paths), feature_lens=(1,), heads=(2,),
                           dtypes=("float32",), device="cpu", budget_s=0.002)
    seen = []
    doc = runner.run_suite(config, progress=lambda line: None,
                           checkpoint=lambda d: seen.append((d["complete"], len(d["cells"]))))
    assert seen == [(False, 1), (False, 2)]
    assert doc["complete"] and list(doc["workloads"]) == ["ring30", "ring40"]


def test_cpu_floor_counts_compulsory_bytes_only():
    case = CASES["spmm"][0]
    g = _permuted_graph()
    bw = timing.Bandwidth(copy=1e9, gather=1e6, copy_bytes=1, gather_table_bytes=1)
    moved, gathered = case.floor_bytes(g, 8, 4)
    assert gathered / bw.gather > moved / bw.copy  # the gather term would dominate
    assert runner._floor(case, g, 8, torch.float32, bw)["floor_ms"] == moved / bw.copy * 1e3
