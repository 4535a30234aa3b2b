"""The SpTRSV scheme sweep on the CPU: the kernel model stands in for the GPU, so sampling,
checking, timing, the time slices, the records and the summary run without one."""

from __future__ import annotations

import json
import math

import torch

from gsparse.bench import sptrsv_sweep as sweep
from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.codegen import CodeVariant
from gsparse.kernels.sptrsv.features import FEATURE_NAMES
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.kernels.sptrsv.space import reduced_space
from gsparse.target import H100

from . import kernel_model
from .loader import RecordingLoader


def _model_prepare(plans, task, schedule, target, values, b):
    """A scheme's solve through the CPU model of the kernel, on the launches it records."""
    loader = RecordingLoader()
    plans.loader = loader
    plan = plans.build_plan(task, schedule, target)

    def solve():
        loader.launches.clear()
        x = plan(values, b)
        kernel_model.run(task.algorithm, CodeVariant.of(schedule), loader.lookups[-1][0], loader.launches)
        return x

    return solve, {"plan_ms": 0.0, "codegen_ms": 0.0, "launches": plan.num_launches}


def _record(family, schemes, k=1, deadline=math.inf, **kwargs):
    matrix = triangular.generate(family, 300, 1)
    return sweep.sweep_matrix(f"{family}:300:1", matrix, k, torch.float64, torch.device("cpu"), schemes, H100,
                              deadline=deadline, time_s=0.001, prepare=_model_prepare, **kwargs)


def test_the_sample_is_seeded_and_the_whole_space_when_asked():
    assert sweep.sample_schemes(10, seed=3) == sweep.sample_schemes(10, seed=3)
    assert len(set(sweep.sample_schemes(10, seed=3))) == 10
    assert sweep.sample_schemes(None) == reduced_space() == sweep.sample_schemes(10**6)


def test_specs_put_the_seed_outermost_so_a_short_run_has_every_family():
    specs = sweep.matrix_specs(["road", "banded"], 100, [0, 1])
    assert specs == [("road", 100, 0), ("banded", 100, 0), ("road", 100, 1), ("banded", 100, 1)]


def test_a_record_checks_and_times_the_default_first_then_the_sample():
    schemes = sweep.sample_schemes(4, seed=0)
    record = _record("laplacian2d", schemes, k=3)
    keys = [e["schedule"] for e in record["schemes"]]
    assert keys[:2] == [record["default"], record["by_value"]] and len(keys) == len(set(keys)) >= 5
    assert SptrsvSchedule.from_json(record["by_value"]) == SptrsvSchedule(
        **{**SptrsvSchedule.from_json(record["default"]).knobs(), "ready_by_value": False})
    assert all(e["status"] == "ok" and e["relative_error"] <= 1e-10 and e["median_ms"] > 0
               for e in record["schemes"]), record["schemes"]
    assert set(record["features"]) == set(FEATURE_NAMES) and record["levels"] > 1
    assert record["cusparse"]["status"] == "skipped" and not record["truncated"]
    json.dumps(record)  # plain data, one JSON line


def test_a_passed_deadline_starts_no_scheme_and_marks_the_record():
    record = _record("road", sweep.sample_schemes(3), deadline=-1.0)
    assert record["schemes"] == [] and record["truncated"]


def test_schemes_with_too_many_launches_are_skipped_not_run():
    level_set = SptrsvSchedule(alpha_level=0)
    record = _record("banded", [level_set], max_launches=5)
    entry = next(e for e in record["schemes"] if e["schedule"] == level_set.to_json())
    assert entry["status"] == "skipped" and entry["launches"] > 5


def test_a_wrong_solve_is_recorded_and_not_timed():
    def wrong(plans, task, schedule, target, values, b):
        return (lambda: torch.zeros_like(b)), {"launches": 1}

    matrix = triangular.generate("road", 300, 1)
    record = sweep.sweep_matrix("road", matrix, 1, torch.float64, torch.device("cpu"), [], H100,
                                deadline=math.inf, prepare=wrong)
    assert record["schemes"][0]["status"] == "wrong"


def test_the_summary_compares_and_fits_the_mlp_leaving_each_family_out():
    schemes = sweep.sample_schemes(3, seed=1)
    records = [_record(family, schemes) for family in ("road", "banded", "laplacian3d")]
    for r in records:  # as if measured on a GPU
        r["cusparse"] = {"status": "ok", "median_ms": 1.0, "analysis_ms": 2.0}
    text = sweep.summary(records)
    assert all(f"\n| {r['matrix']} | 1 |" in text for r in records)
    assert "geomean cuSPARSE / best-of-space: " in text
    assert "leave-one-family-out MLP within 10% of the best measured: " in text


def test_every_sampled_scheme_can_be_measured_with_values_as_ready_signals_too():
    schemes = sweep.sample_schemes(2, seed=4)
    record = _record("power_law", schemes, by_value="all")
    by_value = [SptrsvSchedule.from_json(e["schedule"]) for e in record["schemes"]]
    assert sum(s.ready_by_value for s in by_value) >= 3 and all(e["status"] == "ok" for e in record["schemes"])
    assert _record("road", schemes, by_value="none")["by_value"] is None


def test_schemes_asked_for_with_also_are_measured_before_the_sample():
    extra = SptrsvSchedule(warps_per_block=4, subwarps=32, sw_rnnz=math.inf, ready_by_value=True,
                           grouping="rg_balance", alpha_level=4)
    record = _record("laplacian3d", sweep.sample_schemes(2, seed=1), also=(extra,))
    keys = [e["schedule"] for e in record["schemes"]]
    assert keys.index(extra.to_json()) == 2 and len(keys) == len(set(keys))
    assert all(e["status"] == "ok" for e in record["schemes"]), record["schemes"]
