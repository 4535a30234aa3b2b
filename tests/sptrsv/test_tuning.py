"""Scheme tuning of the triangular solve (gsparse.tune.sptrsv) on the CPU: the factor's
signature, the tuning loop over a scheme space with a simulated runner, the records in the
database, and the recorded scheme winning the next choice."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gsparse import TriangularSolver
from gsparse.datasets import triangular
from gsparse.kernels.sptrsv import FactorPlans
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.kernels.sptrsv.space import selection_space
from gsparse.target import H100
from gsparse.tune import select
from gsparse.tune import sptrsv as tuning
from gsparse.tune.database import TuningDatabase
from gsparse.tune.interfaces import RunResult

from .loader import RecordingLoader

SCHEMES = selection_space()[:4]


def _plans(matrix: sp.csr_array) -> FactorPlans:
    plans = FactorPlans(torch.from_numpy(matrix.indptr.astype(np.int64)),
                        torch.from_numpy(matrix.indices.astype(np.int64)), True)
    plans.loader, plans.target = RecordingLoader(), H100
    plans.recorded = tuning.recorded_scheme
    return plans


class _SimulatedRunner:
    """Times each scheme by a table (a failure where the table says None), counting runs."""

    def __init__(self, times: dict[SptrsvSchedule, float | None]) -> None:
        self.times, self.runs = times, []

    def run(self, builds):
        self.runs += [b.schedule for b in builds]
        return [RunResult(b.schedule, error="relative error 1 over 1e-10") if self.times[b.schedule] is None
                else RunResult(b.schedule, (self.times[b.schedule],) * 3) for b in builds]


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "tuning.sqlite"
    select.use_database(path)
    yield path
    select.use_database(None)


def _tune(plans, k, runner, database_path, schemes=SCHEMES):
    task = plans.task(torch.float64, False, False, k)
    n = plans.n
    values, b = torch.ones(plans.nnz, dtype=torch.float64), torch.ones((n, k) if k > 1 else (n,), dtype=torch.float64)
    return task, tuning.tune_factor(plans, task, H100, values, b, b, TuningDatabase(database_path), schemes=schemes,
                                    runner=runner, progress=False)


def test_the_signature_follows_the_pattern_and_nothing_else():
    matrix = triangular.generate("laplacian2d", 400, 0)
    same = _plans(matrix)
    assert tuning.factor_signature(same) == tuning.factor_signature(_plans(matrix.copy()))
    changed = matrix.copy()
    changed.indices[5] -= 1  # one entry moved within its row (still lower triangular)
    assert tuning.factor_signature(_plans(changed)) != tuning.factor_signature(same)
    assert same.signature == tuning.factor_signature(same)  # kept with the plans


def test_every_scheme_is_recorded_the_fastest_wins_and_the_next_choice_is_it(database):
    plans = _plans(triangular.generate("road", 300, 1))
    times = {SCHEMES[0]: 2.0, SCHEMES[1]: None, SCHEMES[2]: 0.5, SCHEMES[3]: 1.0}
    runner = _SimulatedRunner(times)
    task, result = _tune(plans, 1, runner, database)
    assert sorted(map(str, runner.runs)) == sorted(map(str, SCHEMES))  # each measured once
    assert result.best == SCHEMES[2] and result.time_ms == 0.5 and result.failed == 1
    db = TuningDatabase(database)
    key = tuning.tuning_key(plans, task, H100)
    samples = db.samples(key)
    assert len(samples) == 4 and sum(not s.ok for s in samples) == 1
    assert next(s for s in samples if not s.ok).error == "relative error 1 over 1e-10"
    assert db.get_best(key).schedule([SptrsvSchedule]) == SCHEMES[2]
    # A new choice on the same pattern takes the record, before the selector and the rule.
    fresh = _plans(triangular.generate("road", 300, 1))
    assert fresh.chosen_schedule(task, H100) == SCHEMES[2]
    # Not for another number of right-hand sides, another factor or another GPU model.
    assert tuning.recorded_scheme(fresh, fresh.task(torch.float64, False, False, 16), H100) is None
    other = _plans(triangular.generate("road", 300, 2))
    assert tuning.recorded_scheme(other, task, H100) is None
    assert tuning.recorded_scheme(fresh, task, dataclasses.replace(H100, sms=108)) is None


def test_a_second_run_reads_the_samples_back_instead_of_measuring_again(database):
    plans = _plans(triangular.generate("road", 300, 1))
    times = {SCHEMES[0]: 2.0, SCHEMES[1]: 0.7, SCHEMES[2]: 0.5, SCHEMES[3]: 1.0}
    _tune(plans, 16, _SimulatedRunner(times), database)
    again = _SimulatedRunner(times)
    _, result = _tune(plans, 16, again, database)
    assert again.runs == [] and result.measured == 0 and len(result.reused) == 4 and result.best == SCHEMES[2]


def test_a_recorded_scheme_replaces_the_fast_start_where_the_solver_would_run_it(database):
    plans = _plans(triangular.generate("road", 300, 1))
    task, _ = _tune(plans, 1, _SimulatedRunner(dict.fromkeys(SCHEMES, 1.0) | {SCHEMES[3]: 0.1}), database)
    fresh = _plans(triangular.generate("road", 300, 1))
    fresh.analyse = None  # the solver's default: the fast start at one right-hand side
    assert fresh.solve_schedule(task, H100) == SCHEMES[3]
    fresh.analyse = False  # asked for the fast start: it stays
    fresh.forget_choices()
    assert not isinstance(fresh.solve_schedule(task, H100), SptrsvSchedule)


def test_the_database_is_asked_once_per_task_not_at_every_solve(database):
    plans = _plans(triangular.generate("road", 300, 1))
    asked = []
    plans.recorded = lambda p, task, target: asked.append(task)
    task = plans.task(torch.float64, False, False, 1)
    plans.analyse = None
    for _ in range(3):
        plans.solve_schedule(task, H100)
    assert asked == [task]
    plans.forget_choices()  # after a tuning run: asked again
    plans.solve_schedule(task, H100)
    assert asked == [task, task]


def test_without_a_database_file_nothing_is_recorded_or_read(tmp_path):
    select.use_database(tmp_path / "absent.sqlite")
    try:
        plans = _plans(triangular.generate("road", 300, 1))
        assert tuning.recorded_scheme(plans, plans.task(torch.float64, False, False, 1), H100) is None
        assert plans.signature is None  # the factor was not read back
    finally:
        select.use_database(None)


def test_bad_scheme_lists_and_a_solver_off_the_gpu_are_refused(database):
    plans = _plans(triangular.generate("road", 300, 1))
    task = plans.task(torch.float64, False, False, 1)
    b = torch.ones(plans.n, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"schemes must be one of \['reduced', 'selection'\]"):
        tuning.tune_factor(plans, task, H100, b, b, b, TuningDatabase(database), schemes="all")
    with pytest.raises(TypeError, match="schemes must be a non-empty list of SptrsvSchedule"):
        tuning.tune_factor(plans, task, H100, b, b, b, TuningDatabase(database), schemes=[])
    matrix = triangular.generate("road", 300, 1)
    solver = TriangularSolver(matrix)
    n = matrix.shape[0]
    with pytest.raises(ValueError, match="tune measures the CUDA kernels, but this solver is on cpu"):
        solver.tune(torch.ones(n, dtype=torch.float64))
    with pytest.raises(ValueError, match=rf"b must have shape \[n\] or \[n, k\] with n = {n}"):
        solver.tune(torch.ones(n + 1, dtype=torch.float64))
    with pytest.raises(TypeError, match="transpose must be a bool, got int"):
        solver.tune(torch.ones(n, dtype=torch.float64), transpose=1)


def test_the_reference_is_the_cpus_float64_solve():
    matrix = triangular.generate("laplacian2d", 400, 0)
    solver = TriangularSolver(matrix)
    b = torch.randn(matrix.shape[0], 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for transpose in (False, True):
        x = solver._reference(b, transpose)
        system = sp.csr_array(matrix.T) if transpose else matrix
        assert x.shape == b.shape and math.isclose(float((torch.from_numpy(system @ x.numpy()) - b).abs().max()), 0,
                                                   abs_tol=1e-12)


class _LuckyOnceRunner(_SimulatedRunner):
    """The table's times, except one scheme's first measurement, 10% too fast."""

    def __init__(self, times, lucky) -> None:
        super().__init__(times)
        self.lucky = lucky

    def run(self, builds):
        first = [b.schedule not in self.runs for b in builds]
        results = super().run(builds)
        return [RunResult(r.schedule, tuple(t * 0.9 for t in r.times_ms)) if new and r.schedule == self.lucky
                else r for r, new in zip(results, first)]


def test_schemes_within_ten_percent_are_measured_again_and_the_truly_fastest_wins(database):
    plans = _plans(triangular.generate("road", 300, 1))
    times = {SCHEMES[0]: 2.0, SCHEMES[1]: 0.52, SCHEMES[2]: 0.5, SCHEMES[3]: 1.0}
    runner = _LuckyOnceRunner(times, SCHEMES[1])  # measured first at 0.468, ahead of 0.5
    task, result = _tune(plans, 1, runner, database)
    assert result.best == SCHEMES[2] and result.time_ms == 0.5
    assert {r.schedule for r in result.confirmed} == {SCHEMES[1], SCHEMES[2]}
    assert sorted(map(str, runner.runs[4:])) == sorted(map(str, [SCHEMES[1], SCHEMES[2]] * 3))
    key = tuning.tuning_key(plans, task, H100)
    assert TuningDatabase(database).get_best(key).schedule([SptrsvSchedule]) == SCHEMES[2]
