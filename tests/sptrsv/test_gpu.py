"""The generated SpTRSV kernels on a GPU, against SciPy: every matrix family with sampled
schemes in float32 and float64, a vector and 16 right-hand sides, lower, upper and
transposed, unit and stored diagonals; poisoned outputs (every element must be written);
edge-case factors; int64 indices; repeated solves across the flags' epochs; new values;
gradcheck in ``b`` and the values."""

from __future__ import annotations

import random

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import spsolve_triangular

import gsparse
from gsparse import TriangularSolver
from gsparse.datasets import triangular
from gsparse.kernels.memory import poisoned
from gsparse.kernels.sptrsv import plan as plan_module
from gsparse.kernels.sptrsv.schedule import NaturalOrderSchedule, SptrsvSchedule
from gsparse.kernels.sptrsv.space import reduced_space

from .factors import family_factor, hand_factor, relative_residual, sparse_system, unit_factor

pytestmark = pytest.mark.gpu

SPACE = reduced_space()
RESIDUAL = {torch.float64: 1e-14, torch.float32: 1e-6}
CLOSE = {torch.float64: 1e-10, torch.float32: 1e-4}
# A larger member of each family: thousands of node groups over every warp of the grid.
LARGE_ROWS = 40_000


def _arrays(matrix: sp.sparray, dtype: torch.dtype, device: str = "cuda"):
    csr = sp.csr_array(matrix)
    csr.sort_indices()
    return (torch.from_numpy(csr.indptr.astype(np.int64)).to(device),
            torch.from_numpy(csr.indices.astype(np.int64)).to(device),
            torch.from_numpy(csr.data).to(device=device, dtype=dtype), csr.shape)


def _rhs(n: int, k: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    b = torch.randn((n, k), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (b[:, 0] if k == 1 else b).to(dtype)


def _scipy(matrix: sp.sparray, lower: bool, unit: bool, transpose: bool, b: torch.Tensor) -> np.ndarray:
    csr = sp.csr_array(matrix, dtype=np.float64)
    if transpose:
        csr, lower = sp.csr_array(csr.T), not lower
    return spsolve_triangular(csr, b.double().numpy(), lower=lower, unit_diagonal=unit)


def _check(matrix, lower, unit, transpose, k, dtype, schedule=None, seed=0, analysis=False) -> TriangularSolver:
    """Solve on the GPU under ``schedule`` (None: the fast start, or with ``analysis`` the
    hand rule's) with poisoned outputs; check the issue's relative residual and the match
    with SciPy (normwise: the largest difference over the largest element)."""
    b = _rhs(matrix.shape[0], k, dtype, seed)
    solver = TriangularSolver(_arrays(matrix, dtype), lower=lower, unit_diagonal=unit, schedule=schedule,
                              analysis=analysis)
    with poisoned():
        x = solver.solve(b.cuda(), transpose=transpose)
    torch.cuda.synchronize()
    assert x.shape == b.shape and x.dtype == dtype and x.device.type == "cuda"
    x = x.cpu()
    assert bool(torch.isfinite(x).all()), "an element of x was never written (still NaN)"
    assert relative_residual(sparse_system(matrix, unit, transpose), x, b) <= RESIDUAL[dtype]
    want = _scipy(matrix, lower, unit, transpose, b)
    error = np.abs(x.double().numpy() - want).max() / max(np.abs(want).max(), 1e-300)
    assert error <= CLOSE[dtype], f"max |x - x_scipy| / max |x_scipy| = {error:.3e}"
    return solver


def _cases(count: int, seed: int) -> list[tuple]:
    """(family, lower, unit, transpose, k, dtype, schedule): each family in turn; orientation,
    transpose, unit diagonal, k in {1, 16} and dtype cycling so that every combination of
    two of them appears; schemes drawn from the reduced space, a third of them with a code
    optimisation switched off."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        schedule = rng.choice(SPACE)
        if rng.random() < 0.33:
            schedule = SptrsvSchedule(**{**schedule.knobs(), "collaborative_read": rng.random() < 0.5,
                                         "sync_elimination": rng.random() < 0.5,
                                         "early_division": rng.random() < 0.5,
                                         "ready_by_value": rng.random() < 0.5})
        bits = [(i >> j) & 1 for j in range(5)]
        families = triangular.BENCHMARK_FAMILIES
        cases.append((families[i % len(families)], bool(bits[0]), bool(bits[1]),
                      bool(bits[2]), 16 if bits[3] else 1, torch.float64 if bits[4] else torch.float32,
                      schedule))
    return cases


@pytest.mark.parametrize("family, lower, unit, transpose, k, dtype, schedule", _cases(96, seed=0),
                         ids=lambda v: str(v))
def test_sampled_schemes_match_scipy(family, lower, unit, transpose, k, dtype, schedule):
    matrix = family_factor(family, seed=5, upper=not lower)
    _check(unit_factor(matrix) if unit else matrix, lower, unit, transpose, k, dtype, schedule)


@pytest.mark.parametrize("graph", ["cora", "pubmed_cites"])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("schedule", [None, *random.Random(6).sample(SPACE, 3)], ids=str)
def test_real_graphs_lower_triangles_match_scipy(graph, transpose, schedule):
    """The lower triangles of Cora's and PubMed's symmetrised adjacency (2.7K and 19.7K rows,
    rows of up to 91 and 52 entries), in the benchmark's matrix set."""
    from gsparse.datasets.real import real_graph

    matrix = triangular.graph_lower(real_graph(graph).graph)
    for k, dtype in ((1, torch.float64), (16, torch.float32)):
        _check(matrix, True, False, transpose, k, dtype, schedule, analysis=True)


@pytest.mark.parametrize("family", triangular.BENCHMARK_FAMILIES)
@pytest.mark.parametrize("k", [1, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_default_schemes_of_larger_factors_match_scipy(family, k, dtype):
    matrix = triangular.generate(family, LARGE_ROWS, seed=1)
    for transpose in (False, True):
        _check(matrix, True, False, transpose, k, dtype, analysis=True)


@pytest.mark.parametrize("family", triangular.BENCHMARK_FAMILIES)
@pytest.mark.parametrize("k", [1, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_fast_start_on_larger_factors_matches_scipy_without_a_host_analysis(family, k, dtype):
    matrix = triangular.generate(family, LARGE_ROWS, seed=1)
    for lower, transpose in ((True, False), (True, True), (False, False)):
        factor = matrix if lower else sp.csr_array(matrix.T)
        plans = _check(factor, lower, False, transpose, k, dtype)._pattern.device_plans
        assert not plans._analyses
        assert all(isinstance(schedule, NaturalOrderSchedule) for _, schedule in plans._plans)


NATURAL = [NaturalOrderSchedule(), NaturalOrderSchedule(rows_per_ticket=4, rows_per_thread=False),
           NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=1, rows_per_thread=True),
           NaturalOrderSchedule(warps_per_block=1, rows_per_ticket=32, rows_per_thread=False),
           NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=32, level_order=True),
           NaturalOrderSchedule(rows_per_ticket=4, rows_per_thread=False, level_order=True),
           # in one block: rows signal through shared memory (one warp: every row by one warp)
           NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=32, one_block=True),
           NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=1, rows_per_thread=False, one_block=True),
           NaturalOrderSchedule(warps_per_block=16, rows_per_ticket=4, level_order=True, one_block=True),
           NaturalOrderSchedule(warps_per_block=1, rows_per_ticket=2, rows_per_thread=False, one_block=True),
           # subwarps: rows shared under the warp's tickets (by level, in one block); lane rows under their own
           NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=2, rows_per_thread=False, subwarps=4),
           NaturalOrderSchedule(warps_per_block=8, rows_per_ticket=1, rows_per_thread=False, subwarps=8,
                                level_order=True),
           NaturalOrderSchedule(warps_per_block=16, rows_per_ticket=16, subwarps=2),
           NaturalOrderSchedule(warps_per_block=2, rows_per_ticket=4, rows_per_thread=False, subwarps=2,
                                one_block=True)]


@pytest.mark.parametrize("family", triangular.BENCHMARK_FAMILIES)
@pytest.mark.parametrize("lower, transpose", [(True, False), (True, True), (False, False)])
def test_the_device_levels_are_the_host_analysis_levels(family, lower, transpose):
    from gsparse.kernels.sptrsv.analysis import dependency_graph, levels
    from gsparse.kernels.sptrsv.natural import DeviceSystem, level_order
    from gsparse.target import Target

    matrix = triangular.generate(family, LARGE_ROWS, seed=3)
    factor = matrix if lower else sp.csr_array(matrix.T)
    factor.sort_indices()
    crow = torch.from_numpy(factor.indptr.astype(np.int64)).cuda()
    col = torch.from_numpy(factor.indices.astype(np.int64)).cuda()
    system = DeviceSystem(crow, col, lower, transpose)
    order, position, sorted_levels = level_order(system, torch.int32, Target.of(crow.device))
    # The host's levels of the system the device solves (its long rows split: power law, R-MAT).
    graph = dependency_graph(system.crow.cpu().numpy(), system.col.cpu().numpy(), system.lower)
    want = levels(graph.ptr, graph.deps)
    n = system.n
    level_of_row = np.empty(n, dtype=np.int64)
    level_of_row[graph.order] = want
    np.testing.assert_array_equal(order.cpu().numpy(), np.argsort(level_of_row, kind="stable"))
    np.testing.assert_array_equal(position.cpu().numpy()[order.cpu().numpy()], np.arange(n))
    np.testing.assert_array_equal(sorted_levels.cpu().numpy(), np.sort(level_of_row))
    assert system.level_count(torch.int32, Target.of(crow.device)) == int(want.max()) + 1


@pytest.mark.parametrize("family", triangular.BENCHMARK_FAMILIES)
@pytest.mark.parametrize("lower, transpose", [(True, False), (True, True), (False, False), (False, True)])
def test_the_analysis_of_a_factor_on_the_gpu_takes_the_kernels_levels_and_features_of_the_host(
        family, lower, transpose, monkeypatch):
    from gsparse.kernels.sptrsv import FactorPlans, device_analysis

    matrix = triangular.generate(family, LARGE_ROWS, seed=3, upper=not lower)
    matrix.sort_indices()
    crow = torch.from_numpy(matrix.indptr.astype(np.int64)).cuda()
    col = torch.from_numpy(matrix.indices.astype(np.int64)).cuda()
    # Every factor's levels from the kernel here, the banded one's chain included.
    monkeypatch.setattr(device_analysis, "DEVICE_LEVELS_MAX_CHAIN", LARGE_ROWS)
    monkeypatch.setattr(device_analysis, "levels", lambda *_: pytest.fail("the host's levels were computed"))
    plans = FactorPlans(crow, col, lower)
    analysis = plans.analysis(transpose)
    # The host's analysis of the system the device solves (its long rows split: power law, R-MAT).
    system = plans.device_system(transpose)
    host = plan_module.analyse(system.crow.cpu().numpy(), system.col.cpu().numpy(), system.lower, False)
    assert analysis.row_level.is_cuda
    np.testing.assert_array_equal(analysis.row_level.cpu().numpy(), host.row_level)
    np.testing.assert_array_equal(analysis.features[:9], host.features[:9])
    np.testing.assert_allclose(analysis.features[9], host.features[9], rtol=1e-13, atol=0)  # a float sum


@pytest.mark.parametrize("schedule", NATURAL, ids=str)
@pytest.mark.parametrize("family", triangular.BENCHMARK_FAMILIES)
def test_natural_schemes_match_scipy_with_unit_diagonals_and_several_right_hand_sides(schedule, family):
    matrix = family_factor(family, seed=4)
    _check(matrix, True, False, False, 1, torch.float64, schedule)
    _check(unit_factor(matrix), True, True, True, 16, torch.float32, schedule)
    _check(sp.csr_array(matrix.T), False, False, True, 3, torch.float64, schedule)


def test_the_fast_start_on_int64_indices_leaves_its_counter_zeroed_for_the_next_solve():
    matrix = family_factor("banded")
    solver = TriangularSolver(_arrays(matrix, torch.float64), analysis=False)  # short rows, k = 2
    solver._pattern.device_plans.index_dtype = torch.int64
    for i in range(7):
        b = _rhs(matrix.shape[0], 2, torch.float64, seed=i)
        x = solver.solve(b.cuda()).cpu()
        np.testing.assert_allclose(x.numpy(), _scipy(matrix, True, False, False, b), rtol=1e-10, atol=1e-10)
    ((task, _), plan), = solver._pattern.device_plans._plans.items()
    assert task.index_dtype == torch.int64 and plan._tickets.tolist() == [0, 0]


def test_consecutive_fast_start_solves_take_x_filled_by_the_solve_before():
    """A small system's solve runs on the x its previous launch filled with the sentinel, on
    the same stream; on another stream it fills its own."""
    matrix = family_factor("power_law", seed=5)
    n = matrix.shape[0]
    schedule = NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=1, rows_per_thread=False, subwarps=2)
    solver = TriangularSolver(_arrays(matrix, torch.float64), schedule=schedule)
    side = torch.cuda.Stream()
    for i in range(6):
        rhs = _rhs(n, 16, torch.float64, seed=i)
        b = rhs.cuda()
        if i == 3:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                x = solver.solve(b)
            torch.cuda.current_stream().wait_stream(side)
        else:
            x = solver.solve(b)
        np.testing.assert_allclose(x.cpu().numpy(), _scipy(matrix, True, False, False, rhs), rtol=1e-10,
                                   atol=1e-10)
    (plan,) = solver._pattern.device_plans._plans.values()
    assert plan._recycles and plan._next_x is not None


def test_the_fast_start_replays_in_a_cuda_graph():
    matrix = family_factor("road")
    n = matrix.shape[0]
    solver = TriangularSolver(_arrays(matrix, torch.float64))
    b = _rhs(n, 1, torch.float64).cuda()
    solver.solve(b)  # the kernel is compiled and the plan built outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x = solver.solve(b)
    for seed in (1, 2, 3):  # each replay finds the counter the previous one left zeroed
        rhs = _rhs(n, 1, torch.float64, seed)
        b.copy_(rhs)
        graph.replay()
        np.testing.assert_allclose(x.cpu().numpy(), _scipy(matrix, True, False, False, rhs), rtol=1e-10,
                                   atol=1e-10)


@pytest.mark.parametrize("schedule", random.Random(3).sample(SPACE, 8), ids=str)
def test_sampled_schemes_of_a_larger_factor_match_scipy(schedule):
    matrix = triangular.generate("power_law", LARGE_ROWS, seed=2)
    _check(matrix, True, False, False, 1, torch.float64, schedule)
    _check(matrix, True, False, True, 16, torch.float32, schedule)


def _long_rows_factor(n: int = 3000, seed: int = 0) -> sp.csr_array:
    """A lower factor whose every 50th row has 40-1500 entries on earlier rows, long rows
    among them (past LONG_ROW: 64 entries for a warp, 16 for an 8-lane subwarp; those of
    40-63 stay under it for a warp), and the rest 2-6: long rows that wait on long rows, and
    rows with several entries per lane, for shared rows with several right-hand sides."""
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for r in range(1, n):
        count = min(r, int(rng.integers(40, 1500)) if r % 50 == 0 else int(rng.integers(2, 7)))
        picked = rng.choice(r, size=count, replace=False)
        rows += [r] * count
        cols += picked.tolist()
    values = rng.uniform(-1, 1, len(rows)) / 40
    strict = sp.csr_array((values, (rows, cols)), shape=(n, n))
    return sp.csr_array(strict + sp.diags_array(rng.uniform(1, 2, n)))


@pytest.mark.parametrize("k", [2, 3, 16, 40])
@pytest.mark.parametrize("schedule", [
    SptrsvSchedule(sw_rnnz=0),
    SptrsvSchedule(sw_rnnz=0, ready_by_value=True),
    SptrsvSchedule(subwarps=4, sw_rnnz=4, collaborative_read=False, sync_elimination=False),
    SptrsvSchedule(subwarps=8, sw_rnnz=0, ready_by_value=True, reorder=True, alpha_level=0),
    NaturalOrderSchedule(rows_per_thread=False, rows_per_ticket=4),
], ids=str)
def test_long_shared_rows_and_batched_reads_match_scipy(k, schedule):
    """Shared rows of LONG_ROW entries or more take the long rows' lanes (LCL column lanes,
    LCPL columns each), and lanes with several entries batch their reads of x: with flags
    and by value, with subwarps, staged or not, and in the fast start."""
    matrix = _long_rows_factor()
    for dtype in (torch.float64, torch.float32):
        _check(matrix, True, False, False, k, dtype, schedule)
    _check(sp.csr_array(matrix.T), False, False, True, k, torch.float64, schedule)


@pytest.mark.parametrize("name", list(triangular.edge_cases()))
@pytest.mark.parametrize("schedule", [None, *random.Random(4).sample(SPACE, 3)], ids=str)
def test_edge_case_factors(name, schedule):
    matrix, unit = triangular.edge_cases()[name]
    for transpose, k in ((False, 1), (True, 16)):
        _check(matrix, True, unit, transpose, k, torch.float64, schedule)


@pytest.mark.parametrize("schedule", [None, *random.Random(5).sample(SPACE, 4)], ids=str)
def test_int64_indices(schedule):
    """Every scheme with int64 indices; the fast start (no schedule) also hands its counter
    back zeroed."""
    matrix = family_factor("rmat")
    solver = TriangularSolver(_arrays(matrix, torch.float64), schedule=schedule)
    solver._pattern.device_plans.index_dtype = torch.int64
    b = _rhs(matrix.shape[0], 16, torch.float64)
    with poisoned():
        x = solver.solve(b.cuda()).cpu()
    ((task, chosen), plan), = solver._pattern.device_plans._plans.items()
    assert task.index_dtype == torch.int64
    if schedule is None:
        assert isinstance(chosen, NaturalOrderSchedule) and plan._tickets.tolist() == [0, 0]
    np.testing.assert_allclose(x.numpy(), _scipy(matrix, True, False, False, b), rtol=1e-10, atol=1e-10)


def test_repeated_solves_across_epochs_and_new_values(monkeypatch):
    monkeypatch.setattr(plan_module, "EPOCHS", 3)  # the flags are cleared every third solve
    matrix = family_factor("laplacian2d")
    solver = TriangularSolver(_arrays(matrix, torch.float64), schedule=SPACE[4])
    for i in range(8):
        scale = 1.0 + i
        if i:
            solver.update_values(solver.values * (scale / i))
        b = _rhs(matrix.shape[0], 1, torch.float64, seed=i)
        x = solver.solve(b.cuda()).cpu()
        want = _scipy(matrix * scale, True, False, False, b)
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-10, atol=1e-10)
    assert len(solver._pattern.device_plans._plans) == 1


def test_a_solve_with_several_kernel_partitions():
    matrix = family_factor("laplacian3d")
    schedule = SptrsvSchedule(warps_per_block=4, subwarps=4, sw_rnnz=2, alpha_level=0)
    _check(matrix, True, False, False, 16, torch.float64, schedule)
    _check(matrix, True, False, True, 1, torch.float32, SptrsvSchedule(alpha_level=2))


def test_sptrsv_on_cuda_uses_the_generated_kernels():
    matrix = family_factor("road")
    crow, col, values, shape = _arrays(matrix, torch.float64)
    b = _rhs(matrix.shape[0], 3, torch.float64).cuda()
    x = gsparse.sptrsv((crow, col, values, shape), b)
    np.testing.assert_allclose(x.cpu().numpy(), _scipy(matrix, True, False, False, b.cpu()), rtol=1e-10,
                               atol=1e-10)
    solver = TriangularSolver((crow, col, values, shape))
    solver.solve(b)
    assert len(solver._pattern.device_plans._plans) == 1  # not the level-set plans
    assert not solver._pattern._levelset


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit_diagonal", [False, True])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("schedule", [None, SptrsvSchedule(subwarps=32, sw_rnnz=float("inf"), merge_rows=4)],
                         ids=["default", "per-thread rows"])
def test_gradcheck_on_the_gpu(lower, unit_diagonal, transpose, schedule):
    matrix = hand_factor() if lower else sp.csr_array(hand_factor().T)
    crow, col, values, shape = _arrays(matrix, torch.float64)
    values.requires_grad_()
    b = _rhs(5, 3, torch.float64, seed=1).cuda().requires_grad_()

    def solve(v, rhs):
        return TriangularSolver((crow, col, v, shape), lower=lower, unit_diagonal=unit_diagonal,
                                schedule=schedule).solve(rhs, transpose=transpose)

    assert torch.autograd.gradcheck(solve, (values, b))


def test_gradients_on_the_gpu_match_the_cpu():
    matrix = family_factor("power_law")
    grads = {}
    for device in ("cpu", "cuda"):
        crow, col, values, shape = _arrays(matrix, torch.float64, device)
        values.requires_grad_()
        b = _rhs(matrix.shape[0], 16, torch.float64).to(device).requires_grad_()
        x = gsparse.sptrsv((crow, col, values, shape), b)
        (x * torch.linspace(-1, 1, x.numel(), dtype=x.dtype, device=device).reshape(x.shape)).sum().backward()
        grads[device] = (values.grad.cpu(), b.grad.cpu())
    for cpu, gpu in zip(grads["cpu"], grads["cuda"]):
        torch.testing.assert_close(gpu, cpu, rtol=1e-10, atol=1e-12)


def test_tuning_records_the_fastest_scheme_and_later_solvers_run_it(tmp_path):
    """TriangularSolver.tune on the GPU: every scheme checked and timed, the samples in the
    tuning database, the fastest run by this solver and by a new one over the same pattern."""
    from gsparse.kernels.sptrsv.space import selection_space
    from gsparse.tune import select
    from gsparse.tune import sptrsv as tuning
    from gsparse.tune.database import TuningDatabase

    select.use_database(tmp_path / "tuning.sqlite")
    try:
        matrix = family_factor("road", seed=5)
        schemes = selection_space()[::18]  # 3 schemes
        solver = TriangularSolver(_arrays(matrix, torch.float64))
        b = _rhs(matrix.shape[0], 16, torch.float64).cuda()
        best = solver.tune(b, schemes=schemes, progress=False)
        assert best in schemes
        plans = solver._pattern.device_plans
        task = plans.task(torch.float64, False, False, 16)
        key = tuning.tuning_key(plans, task, gsparse.target.Target.of(b.device))
        samples = TuningDatabase(tmp_path / "tuning.sqlite").samples(key)
        assert sorted(str(s.schedule([SptrsvSchedule])) for s in samples) == sorted(map(str, schemes))
        assert all(s.ok for s in samples)
        fresh = TriangularSolver(_arrays(matrix, torch.float64))
        x = fresh.solve(b)
        assert fresh._pattern.device_plans.chosen_schedule(task, gsparse.target.Target.of(b.device)) == best
        want = _scipy(matrix, True, False, False, b.cpu())
        assert np.abs(x.cpu().numpy() - want).max() <= 1e-10 * np.abs(want).max()
    finally:
        select.use_database(None)
