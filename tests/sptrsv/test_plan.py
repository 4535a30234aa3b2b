"""SpTRSV launch plans on the CPU: recorded launches (geometry, arguments, one per partition,
epochs), the kernel model run on them against SciPy for every family and sampled schemes,
edge-case factors, int64 indices, transposed values, plan reuse, and the hand rule."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import spsolve_triangular

from gsparse.bench.sptrsv_sweep import read_records
from gsparse.datasets import triangular
from gsparse.kernels.memory import filled_bits, poisoned
from gsparse.kernels.sptrsv import FactorPlans, default_schedule, selector
from gsparse.kernels.sptrsv import plan as plan_module
from gsparse.kernels.sptrsv.codegen import KERNEL, SENTINEL, CodeVariant
from gsparse.kernels.sptrsv.features import FEATURE_NAMES
from gsparse.kernels.sptrsv.plan import co_resident_blocks, stage_capacity
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.kernels.sptrsv.space import reduced_space, selection_space
from gsparse.kernels.sptrsv.task import SptrsvTask
from gsparse.target import A100, H100

from . import kernel_model
from .factors import dense_system, family_factor, relative_residual, unit_factor
from .loader import RecordingLoader

SPACE = reduced_space()
RESIDUAL = {torch.float64: 1e-14, torch.float32: 1e-6}


def _factor_plans(matrix: sp.sparray, lower: bool, target=H100) -> tuple[FactorPlans, RecordingLoader]:
    csr = sp.csr_array(matrix)
    csr.sort_indices()
    plans = FactorPlans(torch.from_numpy(csr.indptr.astype(np.int64)),
                        torch.from_numpy(csr.indices.astype(np.int64)), lower)
    loader = RecordingLoader()
    plans.loader, plans.target = loader, target
    plans.analyse = True  # the analysed schemes' plans (the fast start's: test_natural.py)
    return plans, loader


def _rhs(n: int, k: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    b = torch.randn((n, k), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (b[:, 0] if k == 1 else b).to(dtype)


def _expected(matrix: sp.sparray, lower: bool, unit: bool, transpose: bool, b: torch.Tensor) -> np.ndarray:
    csr = sp.csr_array(matrix, dtype=np.float64)
    if transpose:
        csr, lower = sp.csr_array(csr.T), not lower
    return spsolve_triangular(csr, b.double().numpy(), lower=lower, unit_diagonal=unit)


def _solve_with_model(matrix, lower, unit, transpose, k, dtype, schedule, index_dtype=None, seed=0):
    """Solve through FactorPlans with recorded launches, run them through the kernel model,
    and return (x, expected, plan)."""
    plans, loader = _factor_plans(matrix, lower)
    plans.index_dtype = index_dtype
    values = torch.from_numpy(sp.csr_array(matrix).data).to(dtype)
    b = _rhs(matrix.shape[0], k, dtype, seed)
    task = plans.task(dtype, unit, transpose, k)
    with poisoned():
        x = plans.solve(values, b, unit, transpose, schedule)
        plan = plans._plans[(task, schedule)]
        program = loader.lookups[-1][0]
        kernel_model.run(task.algorithm, CodeVariant.of(schedule), program, loader.launches)
    return x, _expected(matrix, lower, unit, transpose, b), plan


def _cases(count: int, seed: int) -> list[tuple]:
    """(family, lower, unit, transpose, k, dtype, schedule), sampled so that every family,
    orientation, flag, k in {1, 3, 16} and dtype appears, with schemes of the reduced space
    and their code-variant flags switched off now and then."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        schedule = rng.choice(SPACE)
        if rng.random() < 0.3:
            schedule = SptrsvSchedule(**{**schedule.knobs(), "collaborative_read": rng.random() < 0.5,
                                         "sync_elimination": rng.random() < 0.5,
                                         "early_division": rng.random() < 0.5,
                                         "ready_by_value": rng.random() < 0.5})
        cases.append((triangular.FAMILIES[i % len(triangular.FAMILIES)], rng.random() < 0.5,
                      rng.random() < 0.3, rng.random() < 0.5, rng.choice([1, 3, 16]),
                      rng.choice([torch.float32, torch.float64]), schedule))
    return cases


@pytest.mark.parametrize("family, lower, unit, transpose, k, dtype, schedule", _cases(48, seed=1),
                         ids=lambda v: str(v) if not isinstance(v, SptrsvSchedule) else "")
def test_sampled_schemes_solve_every_family_under_the_kernel_model(family, lower, unit, transpose, k, dtype,
                                                                   schedule):
    matrix = family_factor(family, seed=3, upper=not lower)
    if unit:
        matrix = unit_factor(matrix)
    x, expected, _ = _solve_with_model(matrix, lower, unit, transpose, k, dtype, schedule)
    b = _rhs(matrix.shape[0], k, dtype)
    assert relative_residual(dense_system(matrix, unit, transpose), x, b) <= RESIDUAL[dtype]
    tolerance = 1e-4 if dtype == torch.float32 else 1e-11
    np.testing.assert_allclose(x.double().numpy(), expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("name", list(triangular.edge_cases()))
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("schedule", random.Random(2).sample(SPACE, 3), ids=str)
def test_edge_case_factors_under_the_kernel_model(name, transpose, schedule):
    matrix, unit = triangular.edge_cases()[name]
    for k, index_dtype in ((1, torch.int64), (16, None)):
        x, expected, _ = _solve_with_model(matrix, True, unit, transpose, k, torch.float64, schedule, index_dtype)
        np.testing.assert_allclose(x.numpy(), expected.reshape(x.shape), rtol=1e-12, atol=1e-12)


def test_int64_plans_pass_int64_arrays_and_scalars():
    matrix = family_factor("power_law")
    _, _, plan = _solve_with_model(matrix, True, False, False, 1, torch.float64, SPACE[0], torch.int64)
    assert plan.task.index_dtype == torch.int64
    assert plan._parts.dtype == torch.int64


def test_an_empty_factor_launches_nothing():
    plans, loader = _factor_plans(sp.csr_array((0, 0)), True)
    x = plans.solve(torch.zeros(0, dtype=torch.float64), torch.zeros(0, 4, dtype=torch.float64), False, False)
    assert x.shape == (0, 4) and not loader.launches


def test_launch_geometry_and_arguments():
    matrix = family_factor("laplacian2d")
    plans, loader = _factor_plans(matrix, True, target=A100)
    schedule = SptrsvSchedule(warps_per_block=4, subwarps=4, sw_rnnz=2, alpha_level=0)
    values = torch.from_numpy(matrix.data)
    b = _rhs(matrix.shape[0], 16, torch.float64)
    x = plans.solve(values, b, False, False, schedule)
    plan = next(iter(plans._plans.values()))
    assert len(loader.launches) == plan.num_launches == plan.solve_plan.num_kernels > 1
    for p, (grid, block, shared_bytes, _) in enumerate(loader.launches):
        named = _named(loader, p)
        assert grid == A100.sms and block == 128
        assert shared_bytes == stage_capacity(plan.task, 4) * 4 * (8 + 4) <= 48 * 1024
        assert named["b"] is b and named["x"] is x and named["val"] is values
        assert named["part"].tolist() == plan._parts[p].tolist()
        assert named["part"][2] == int(plan.solve_plan.kernel_waits[p])
        assert named["epoch"].item() == 1
        assert named["row_flag"] is not None and named["order"] is None  # sync elimination, no reorder
    assert loader.kernel_stub.prepared == 1  # one prepared launch serves every partition


@pytest.mark.parametrize("dtype, bits", [(torch.float64, torch.int64), (torch.float32, torch.int32)])
def test_ready_by_value_starts_x_as_a_signalling_nan_sentinel(dtype, bits):
    matrix = family_factor("power_law")
    plans, loader = _factor_plans(matrix, True)
    schedule = SptrsvSchedule(subwarps=4, sw_rnnz=2, ready_by_value=True)
    x = plans.solve(torch.from_numpy(matrix.data).to(dtype), _rhs(matrix.shape[0], 3, dtype), False, False, schedule)
    assert _named(loader)["x"] is x and (x.view(bits) == SENTINEL[dtype]).all()  # as the launches find it
    assert torch.isnan(x).all()
    quiet_bit = 1 << (51 if dtype == torch.float64 else 22)
    assert SENTINEL[dtype] & quiet_bit == 0  # signalling: no arithmetic result has these bits


def _named(loader: RecordingLoader, launch: int = -1) -> dict:
    names = [name for _, name in loader.lookups[-1][0].kernels[KERNEL].params]
    return dict(zip(names, loader.launches[launch][3], strict=True))


def test_epochs_advance_per_solve_and_flags_are_cleared_when_they_wrap(monkeypatch):
    monkeypatch.setattr(plan_module, "EPOCHS", 3)
    matrix = family_factor("banded")
    plans, loader = _factor_plans(matrix, True)
    values, b = torch.from_numpy(matrix.data), _rhs(matrix.shape[0], 1, torch.float64)
    plan = plans.build_plan(plans.task(torch.float64, False, False, 1), SPACE[0], H100)
    seen = []
    for _ in range(7):
        plan._flags.fill_(5)  # as a solve would leave them
        plan(values, b)
        seen.append((_named(loader)["epoch"].item(), bool((plan._flags == 0).all())))
    assert seen == [(1, False), (2, False), (3, False), (1, True), (2, False), (3, False), (1, True)]


def test_transposed_values_are_gathered_once_per_tensor_and_version():
    matrix = family_factor("rmat")
    plans, loader = _factor_plans(matrix, True)
    values = torch.from_numpy(matrix.data.copy())
    b = _rhs(matrix.shape[0], 1, torch.float64)
    plans.solve(values, b, False, True)
    first = _named(loader)["val"]
    plans.solve(values, b, False, True)
    assert _named(loader)["val"] is first
    values.mul_(2)
    plans.solve(values, b, False, True)
    changed = _named(loader)["val"]
    assert changed is not first
    transposed = sp.csr_array(matrix.T)
    transposed.sort_indices()
    np.testing.assert_array_equal(changed.numpy(), 2 * transposed.data)


def test_plans_are_built_once_per_task_and_scheme_and_values_are_operands():
    matrix = family_factor("road")
    plans, loader = _factor_plans(matrix, True)
    b = _rhs(matrix.shape[0], 1, torch.float64)
    for scale in (1.0, 2.0, 3.0):
        plans.solve(torch.from_numpy(matrix.data * scale), b, False, False)
    assert loader.kernel_stub.prepared == 1 and len(plans._plans) == 1
    plans.solve(torch.from_numpy(matrix.data), _rhs(matrix.shape[0], 4, torch.float64), False, False)
    plans.solve(torch.from_numpy(matrix.data), b, False, True)
    assert loader.kernel_stub.prepared == 3 and len(plans._analyses) == 2


def test_a_forced_schedule_replaces_the_chosen_one():
    matrix = family_factor("power_law")
    plans, _ = _factor_plans(matrix, True)
    task = plans.task(torch.float64, False, False, 1)
    forced = SPACE[-1]
    assert plans.chosen_schedule(task, H100) != forced
    plans.schedule = forced
    assert plans.chosen_schedule(task, H100) == forced


def _always(scheme: SptrsvSchedule, num_rhs: int) -> selector.SchemeSelector:
    """A selector trained to pick ``scheme`` (of three) on factors of 100 to 10,000 rows."""
    schemes = [SPACE[0], SPACE[1], scheme]
    features = np.tile(np.array([[300.0, 900, 3, 4, 0.1, 30, 40, 0.2, 30, 1]]), (20, 1))
    features[:, 0] = np.geomspace(100, 10_000, 20)
    times = np.tile([2.0, 2.0, 1.0], (20, 1))
    return selector.train(features, times, schemes, num_rhs=num_rhs, epochs=150)


def test_the_analysed_default_runs_the_selectors_pick_where_it_answers_else_the_hand_rule(monkeypatch):
    matrix = family_factor("road")
    one, sixteen = selection_space()[7], selection_space()[40]
    chosen = selector.SelectorSet([_always(one, 1), _always(sixteen, 16)], sms=H100.sms)
    hand = {k: default_schedule(_factor_plans(matrix, True)[0].analysis(False).features,
                                SptrsvTask(torch.float64, torch.int32, True, False, False, k), H100) for k in (1, 16)}
    assert hand[1] != one and hand[16] != sixteen
    plans, _ = _factor_plans(matrix, True)
    plans.selectors = chosen
    for k, want in ((1, one), (4, sixteen), (16, sixteen)):
        assert plans.chosen_schedule(plans.task(torch.float64, False, False, k), H100) == want
    for target, declined in ((A100, True), (H100, False)):  # the set was measured on 132 SMs
        other, _ = _factor_plans(matrix, True, target)
        other.selectors = chosen
        assert (other.chosen_schedule(other.task(torch.float64, False, False, 1), target) != one) is declined
    off, _ = _factor_plans(matrix, True)
    off.selectors = None
    assert off.chosen_schedule(off.task(torch.float64, False, False, 16), H100) == hand[16]
    monkeypatch.setenv(selector.SELECTOR_ENV, "off")
    assert _factor_plans(matrix, True)[0].selectors is None


def test_factors_outside_the_selectors_training_sizes_get_the_hand_rule():
    big = triangular.generate("road", 30_000, 1)  # the selector saw up to 10,000 rows: 2x slack
    plans, _ = _factor_plans(big, True)
    plans.selectors = selector.SelectorSet([_always(selection_space()[7], 1)], sms=H100.sms)
    task = plans.task(torch.float64, False, False, 1)
    assert plans.chosen_schedule(task, H100) == default_schedule(plans.analysis(False).features, task, H100)


def test_a_plan_refuses_a_task_of_the_other_orientation():
    plans, _ = _factor_plans(family_factor("banded"), True)
    analysis = plans.analysis(False)
    task = plans.task(torch.float64, False, True, 1)
    with pytest.raises(ValueError, match="solves a upper system, but the analysis is of a lower one"):
        plan_module.SptrsvPlan(analysis, task, SPACE[0], H100, RecordingLoader())


def test_plans_of_several_right_hand_side_counts_can_share_one_solve_plan():
    matrix = family_factor("laplacian3d")
    plans, loader = _factor_plans(matrix, True)
    schedule = SPACE[5]
    solve_plan = plans.analysis(False).solve_plan(schedule, H100)
    values = torch.from_numpy(matrix.data)
    for k in (1, 16):
        task = plans.task(torch.float64, False, False, k)
        plan = plans.build_plan(task, schedule, H100, solve_plan)
        assert plan.solve_plan is solve_plan
        b = _rhs(matrix.shape[0], k, torch.float64)
        x = plan(values, b)
        kernel_model.run(task.algorithm, CodeVariant.of(schedule), loader.lookups[-1][0], loader.launches)
        loader.launches.clear()
        np.testing.assert_allclose(x.numpy(), _expected(matrix, True, False, False, b), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match=r"solve_plan was made for .* on 132 SMs, not for .* on NVIDIA A100-SXM4-80GB's 108"):
        plans.build_plan(plans.task(torch.float64, False, False, 1), schedule, A100, solve_plan)
    with pytest.raises(ValueError, match="solve_plan was made for"):
        plans.build_plan(plans.task(torch.float64, False, False, 1), SPACE[6], H100, solve_plan)


def test_the_kernel_model_catches_a_missing_flag_and_a_lost_segment():
    matrix = family_factor("laplacian2d")
    # 4-row groups on 4-lane subwarps: each row's lane waits on its group's rows through flags.
    schedule = SptrsvSchedule(subwarps=8, sw_rnnz=math.inf, merge="merge_fixed", merge_rows=4)
    plans, loader = _factor_plans(matrix, True)
    task = plans.task(torch.float64, False, False, 1)
    plans.build_plan(task, schedule, H100)(torch.from_numpy(matrix.data), _rhs(matrix.shape[0], 1, torch.float64))
    program, named = loader.lookups[-1][0], _named(loader)
    kernel_model.run(task.algorithm, CodeVariant.of(schedule), program, loader.launches[-1:])
    named["row_flag"].zero_()
    with pytest.raises(kernel_model.KernelFault, match="writes no flag|was flagged"):
        kernel_model.run(task.algorithm, CodeVariant.of(schedule), program, loader.launches[-1:])
    named["row_flag"].fill_(1)
    named["seg_warp"][0] = 10**6
    with pytest.raises(kernel_model.KernelFault, match="not in the grid"):
        kernel_model.run(task.algorithm, CodeVariant.of(schedule), program, loader.launches[-1:])


@pytest.mark.parametrize("target", [H100, A100], ids=lambda t: t.arch)
@pytest.mark.parametrize("warps", [1, 4, 32])
def test_one_block_per_sm_is_always_co_resident(target, warps):
    assert co_resident_blocks(target, warps, 48 * 1024) == target.sms
    assert co_resident_blocks(target, warps, 0) == target.sms


def test_co_residency_counts_what_does_not_fit():
    assert co_resident_blocks(H100, 32, H100.shared_bytes_per_block + 1) == 0


@pytest.mark.parametrize("family", triangular.FAMILIES)
@pytest.mark.parametrize("k", [1, 16])
def test_the_hand_rule_picks_a_scheme_of_the_reduced_space(family, k):
    plans, _ = _factor_plans(family_factor(family), True)
    task = plans.task(torch.float64, False, False, k)
    schedule = default_schedule(plans.analysis(False).features, task, H100)
    assert schedule.ready_by_value
    assert SptrsvSchedule(**{**schedule.knobs(), "ready_by_value": False}) in SPACE


def _features(**named: float) -> np.ndarray:
    """A feature vector with the named features set (the rest 1)."""
    features = np.ones(len(FEATURE_NAMES))
    for name, value in named.items():
        features[FEATURE_NAMES.index(name)] = value
    return features


SWEEP = Path(__file__).resolve().parents[2] / "docs/results/sptrsv/h100-2026-11-28-selector-sweep.jsonl.gz"


@pytest.mark.parametrize("k", [1, 16])
def test_the_hand_rule_is_near_each_familys_best_on_the_recorded_h100_sweep(k):
    """On every family of the sweep the rule's scheme is within 25% of the best measured
    (geometric mean over the family's factors), every scheme timed on the factor's own
    system; the rule it replaced was up to 2.9x (k = 1) and 4.5x (k = 16) off."""
    by_family = {}
    for record in read_records(SWEEP):
        if record["k"] != k or record.get("truncated"):
            continue
        times = {SptrsvSchedule.from_json(e["schedule"]): e["median_ms"] for e in record["schemes"]
                 if e["status"].startswith("ok")}
        task = SptrsvTask(torch.float64, torch.int32, True, False, False, k)
        features = np.array([record["features"][name] for name in FEATURE_NAMES])
        picked = default_schedule(features, task, H100)
        assert picked in times, (record["matrix"], str(picked))  # the rule's scheme is in the swept space
        by_family.setdefault(record["family"], []).append(times[picked] / min(times.values()))
    assert len(by_family) == 12
    for family, ratios in by_family.items():
        assert math.exp(np.mean(np.log(ratios))) <= 1.25, (family, ratios)


def test_the_hand_rule_runs_chains_a_thread_per_row_at_one_right_hand_side_and_rows_by_warps_else():
    chain = sp.csr_array(sp.diags([np.ones(299), np.full(300, 4.0)], [-1, 0]))
    plans, _ = _factor_plans(chain, True)
    one, many = (plans.task(torch.float64, False, False, k) for k in (1, 16))
    chained = default_schedule(plans.analysis(False).features, one, H100)
    assert (chained.warps_per_block, chained.subwarps, chained.sw_rnnz, chained.alpha_level) == (4, 32, math.inf, 2)
    assert default_schedule(plans.analysis(False).features, many, H100).subwarps == 1
    mesh = _features(m=500_000, rnnz=3.9, layer_num=242, dep_dist=0.99)
    for task in (one, many):
        rows = default_schedule(mesh, task, H100)
        assert (rows.warps_per_block, rows.subwarps, rows.sw_rnnz, rows.merge_rows, rows.alpha_level) == \
            (32, 1, 0, 1, math.inf) and rows.ready_by_value


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_unsolved_x_holds_the_sentinels_bits_exactly(dtype):
    """The signalling NaN survives the fill (a floating-point fill could quiet it)."""
    x = filled_bits((5, 3), dtype, torch.device("cpu"), SENTINEL[dtype])
    bits = torch.int64 if dtype == torch.float64 else torch.int32
    assert x.dtype == dtype and x.shape == (5, 3) and x.is_contiguous()
    assert (x.view(bits) == SENTINEL[dtype]).all() and torch.isnan(x).all()


def test_the_hand_rule_runs_wide_levels_four_rows_a_warp():
    """From 1.5 rows a level per resident warp (132 SMs x 32 warps on an H100) on, 8-thread
    subwarps share rows four to a warp; below it a warp takes each row."""
    task = SptrsvTask(torch.float64, torch.int32, True, False, False, 1)
    wide = 1.5 * H100.sms * 32
    for rows_per_level, subwarps in ((wide, 4), (wide * 0.99, 1), (wide * 10, 4)):
        scheme = default_schedule(_features(m=rows_per_level * 500, rnnz=3.9, layer_num=500, dep_dist=0.99),
                                  task, H100)
        assert scheme.subwarps == subwarps and scheme.warps_per_block == 32 and scheme.alpha_level == math.inf
    wide_scheme = default_schedule(_features(m=wide * 500, layer_num=500), task, H100)
    assert (wide_scheme.sw_rnnz, wide_scheme.merge_rows) == (2, 1)
    fewer_sms = dataclasses.replace(H100, sms=66)  # the same factor is wide on half the warps
    assert default_schedule(_features(m=wide * 0.6 * 500, layer_num=500), task, fewer_sms).subwarps == 4


def test_dense_system_helper_agrees_with_the_expected_solution():
    """The SciPy reference used above, checked against a dense solve once."""
    matrix = family_factor("banded")
    b = _rhs(matrix.shape[0], 3, torch.float64)
    for transpose in (False, True):
        dense = dense_system(matrix, False, transpose)
        np.testing.assert_allclose(_expected(matrix, True, False, transpose, b),
                                   np.linalg.solve(dense, b.numpy()), rtol=1e-10)


def test_a_thread_waits_for_no_row_it_solved_itself():
    matrix = family_factor("banded")  # a chain: 32-row groups, each solved by one thread
    schedule = SptrsvSchedule(warps_per_block=4, subwarps=32, sw_rnnz=math.inf, merge_rows=32)
    x, expected, plan = _solve_with_model(matrix, True, False, False, 1, torch.float64, schedule)
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-11, atol=1e-11)
    flags = plan.solve_plan.row_flag
    assert flags.sum() < matrix.shape[0] // 8  # only rows a later group depends on


def test_a_repeated_solve_resolves_nothing_again_until_its_choice_may_change(monkeypatch):
    """A small factor's solve costs the host as much as the GPU: the second solve of the same
    task neither makes a task nor asks for a scheme, and whatever decides the scheme (a forced
    one, the analysis switch, an analysed direction, forgotten choices) makes it ask again."""
    matrix = family_factor("road")
    plans, loader = _factor_plans(matrix, True)
    plans.analyse = None  # the fast start where it serves: an analysis changes the choice
    values, b = torch.from_numpy(matrix.data), _rhs(matrix.shape[0], 4, torch.float64)
    asked = []
    real = FactorPlans.solve_schedule
    monkeypatch.setattr(FactorPlans, "solve_schedule", lambda self, task, target: asked.append(task) or
                        real(self, task, target))

    def solved_with() -> object:
        plans.solve(values, b, False, False)
        return plans._resolved[(torch.float64, False, False, 4, -1)]

    natural = solved_with()
    assert solved_with() is natural and len(asked) == 1
    plans.analysis(False)  # an analysed direction runs its analysed scheme from now on
    analysed = solved_with()
    assert len(asked) == 2 and isinstance(analysed, plan_module.SptrsvPlan)
    forced = dataclasses.replace(SPACE[0])
    plans.schedule = forced
    assert solved_with().schedule == forced and len(asked) == 3
    plans.schedule = None
    plans.forget_choices()
    solved_with()
    solved_with()
    assert len(asked) == 4
    plans.solve(values, b[:, 0].contiguous(), False, False)  # another task: asked once more
    assert len(asked) == 5
