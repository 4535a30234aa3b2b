"""The SpTRSV scheme sweep on the CPU: the kernel model stands in for the GPU, so sampling,
checking, timing, the time slices, the records and the summary run without one."""

from __future__ import annotations

import json
import math
import time

import pytest
import scipy.sparse as sp
import torch

from gsparse.bench import sptrsv_sweep as sweep
from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.codegen import CodeVariant
from gsparse.kernels.sptrsv.features import FEATURE_NAMES
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.kernels.sptrsv.space import reduced_space, selection_space
from gsparse.target import H100

from . import kernel_model
from .loader import RecordingLoader


def _model_prepare(plans, task, schedule, target, values, b, solve_plan=None):
    """A scheme's solve through the CPU model of the kernel, on the launches it records."""
    loader = RecordingLoader()
    plans.loader = loader
    plan = plans.build_plan(task, schedule, target, solve_plan)

    def solve():
        loader.launches.clear()
        x = plan(values, b)
        kernel_model.run(task.algorithm, CodeVariant.of(schedule), loader.lookups[-1][0], loader.launches)
        return x

    return solve, {"plan_ms": 0.0, "codegen_ms": 0.0, "launches": plan.num_launches}


def _record(family, schemes, k=1, deadline=math.inf, **kwargs):
    matrix = triangular.generate(family, 300, 1)
    [record] = sweep.sweep_matrix(f"{family}:300:1", matrix, [k], torch.float64, torch.device("cpu"), schemes, H100,
                                  deadline=deadline, time_s=0.001, prepare=_model_prepare, **kwargs)
    return record


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
    assert (record["family"], record["seed"], record["sms"]) == ("laplacian2d", 1, H100.sms)
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
    def wrong(plans, task, schedule, target, values, b, solve_plan):
        return (lambda: torch.zeros_like(b)), {"launches": 1}

    matrix = triangular.generate("road", 300, 1)
    [record] = sweep.sweep_matrix("road", matrix, [1], torch.float64, torch.device("cpu"), [], H100,
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


def test_rows_seeds_and_schemes_options():
    assert sweep.parse_rows("40000-250000,banded=20000-100000,road=5000") == {
        "": (40000, 250000), "banded": (20000, 100000), "road": (5000, 5000)}
    assert sweep.parse_seeds("0-2,7") == [0, 1, 2, 7]
    specs = sweep.matrix_specs(["road", "banded", "rmat"], sweep.parse_rows("1000-64000,road=500"), [3, 4])
    assert [(f, s) for f, _, s in specs] == [("road", 3), ("banded", 3), ("rmat", 3), ("road", 4), ("banded", 4),
                                             ("rmat", 4)]
    assert [r for f, r, _ in specs if f == "road"] == [500, 500]
    assert [r for f, r, s in specs if f == "rmat"] == [triangular.corpus_rows("rmat", 1000, 64000, s) for s in (3, 4)]
    assert sweep.scheme_set("selection") == selection_space() and sweep.scheme_set("all") == reduced_space()
    assert sweep.scheme_set("5", 2) == sweep.sample_schemes(5, 2)
    for bad, message in (("10-5", "27 <= LO <= HI"), ("a-b", "N, LO-HI or FAMILY=LO-HI")):
        with pytest.raises(ValueError, match=message):
            sweep.parse_rows(bad)
    with pytest.raises(ValueError, match="--schemes must be 'selection', 'all' or a number, got 'some'"):
        sweep.scheme_set("some")
    with pytest.raises(ValueError, match="--rows gives no size for family 'rmat'"):
        sweep.matrix_specs(["rmat"], {"road": (100, 100)}, [0])


def _timed(slow_ms: dict[str, float], made: list | None = None):
    """A prepare whose solves return SciPy's answer after sleeping: ``slow_ms`` by scheme
    (JSON), 1 ms for the others; records ``(k, scheme, solve plan)`` of each call in ``made``."""
    from scipy.sparse.linalg import spsolve_triangular

    def prepare(plans, task, schedule, target, values, b, solve_plan):
        if made is not None:
            made.append((task.num_rhs, schedule, solve_plan))
        analysis = plans.analysis(False)
        matrix = sp.csr_array((values.numpy(), analysis.col, analysis.crow), shape=(analysis.n, analysis.n))
        x = torch.from_numpy(spsolve_triangular(matrix, b.numpy(), lower=True))
        pause = slow_ms.get(schedule.to_json(), 1.0) / 1e3

        def solve():
            time.sleep(pause)
            return x

        return solve, {"launches": solve_plan.num_kernels}

    return prepare


def test_one_analysis_serves_every_k_and_the_plans_are_shared():
    made = []
    schemes = selection_space()[:6]
    matrix = triangular.generate("road", 300, 2)
    records = sweep.sweep_matrix("road:300:2", matrix, [1, 16], torch.float64, torch.device("cpu"), schemes, H100,
                                 deadline=math.inf, repeats=3, by_value="none", prepare=_timed({}, made))
    assert [r["k"] for r in records] == [1, 16] and records[0]["features"] == records[1]["features"]
    first = {schedule: plan for k, schedule, plan in made if k == 1}
    second = {schedule: plan for k, schedule, plan in made if k == 16}
    both = set(first) & set(second)
    assert len(both) >= 3 and all(second[s] is first[s] for s in both)
    assert all(e["repeats"] == 3 for r in records for e in r["schemes"] if "same_plan_as" not in e)


def test_schemes_whose_partition_is_the_same_copy_one_measurement():
    a2, ainf = (SptrsvSchedule(warps_per_block=4, subwarps=32, sw_rnnz=math.inf, ready_by_value=True,
                               alpha_level=alpha) for alpha in (2, math.inf))
    record = _record("road", [a2, ainf], by_value="none", repeats=2)
    entries = {e["schedule"]: e for e in record["schemes"]}
    assert entries[ainf.to_json()]["same_plan_as"] == a2.to_json()
    assert entries[ainf.to_json()]["median_ms"] == entries[a2.to_json()]["median_ms"]
    assert "same_plan_as" not in entries[a2.to_json()]


def test_pruning_leaves_out_schemes_far_from_the_best_at_a_smaller_k_but_never_the_protected_ones():
    space = selection_space()
    slow, fine = space[34], space[0]  # neither is the hand rule's on this factor
    matrix = triangular.generate("road", 300, 2)
    records = sweep.sweep_matrix("road:300:2", matrix, [1, 16], torch.float64, torch.device("cpu"), [slow, fine],
                                 H100, deadline=math.inf, repeats=2, by_value="none", prune=4.0, also=(slow,),
                                 prepare=_timed({slow.to_json(): 30.0}))
    k16 = {e["schedule"]: e for e in records[1]["schemes"]}
    assert k16[slow.to_json()]["status"] == "ok"  # --also: measured whatever it costs
    records = sweep.sweep_matrix("road:300:2", matrix, [1, 16], torch.float64, torch.device("cpu"), [slow, fine],
                                 H100, deadline=math.inf, repeats=2, by_value="none", prune=4.0,
                                 prepare=_timed({slow.to_json(): 30.0}))
    k1, k16 = ({e["schedule"]: e for e in r["schemes"]} for r in records)
    assert k1[slow.to_json()]["status"] == "ok" and k1[slow.to_json()]["median_ms"] > 20
    assert k16[slow.to_json()]["status"] == "pruned" and "at a smaller k" in k16[slow.to_json()]["error"]
    assert k16[fine.to_json()]["status"] == "ok" and k16[records[1]["default"]]["status"] == "ok"


def test_a_family_prunes_schemes_far_from_the_best_on_its_first_factors():
    pruning = sweep.FamilyPruning(4.0, after=2)

    def record(k, **times):
        return {"k": k, "schemes": [{"schedule": key, "status": "ok", "median_ms": t} for key, t in times.items()]
                + [{"schedule": "lost", "status": "failed"}, {"schedule": "long", "status": "skipped"}]}

    pruning.add("road", record(1, best=1.0, far=5.0, near=3.0))
    assert pruning.reason("road", 1, "far") is None  # one factor is not enough
    pruning.add("road", record(1, best=1.0, far=9.0, near=5.0))
    pruning.add("road", record(16, best=1.0, far=1.0))
    assert "first 2 factors" in pruning.reason("road", 1, "far") and "first 2" in pruning.reason("road", 1, "lost")
    assert pruning.reason("road", 1, "near") is None and pruning.reason("road", 1, "long") is None
    assert pruning.reason("road", 16, "far") is None and pruning.reason("rmat", 1, "far") is None


def test_each_k_gets_an_even_share_of_the_time_left():
    ticks = iter(range(1000))
    matrix = triangular.generate("road", 300, 2)
    records = sweep.sweep_matrix("road:300:2", matrix, [1, 16], torch.float64, torch.device("cpu"),
                                 selection_space()[:20], H100, deadline=12.0, repeats=1, by_value="none",
                                 prepare=_timed({}), clock=lambda: float(next(ticks)))
    assert all(r["truncated"] for r in records)
    assert 0 < len(records[1]["schemes"]) and len(records[0]["schemes"]) < 20


def test_the_summary_can_be_rebuilt_without_a_gpu(tmp_path, capsys):
    records = [_record(family, sweep.sample_schemes(2, seed=1)) for family in ("road", "banded")]
    (tmp_path / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert sweep.main(["--summarize", "--no-lofo", "--out", str(tmp_path)]) == 0
    assert "| road:300:1 | 1 |" in (tmp_path / "summary.md").read_text()
    assert sweep.read_records(tmp_path / "sweep.jsonl") == records
