"""The CPU oracle of scheduled solves: every transform and scheduling combination of the space
solves correctly and never reads a value before it is final; broken plans are caught."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve_triangular

from gsparse.kernels.sptrsv import analysis, scheduling
from gsparse.kernels.sptrsv.executor import ScheduleError, execute
from gsparse.kernels.sptrsv.schedule import ALPHA_LEVELS, SptrsvSchedule
from gsparse.kernels.sptrsv.space import PARALLEL, SCHEDULING, TRANSFORMS, reduced_space
from gsparse.datasets import triangular

# A small grid, so that α_level thresholds (α x 6 node groups) cut these matrices into
# several kernels, and warps hold many node groups each.
NUM_BLOCKS, MAX_WARPS = 3, 6


class _System:
    """A triangular system ``T x = b`` with its analysis and SciPy's solution."""

    def __init__(self, matrix: sp.csr_array, lower: bool, k: int | None, seed: int) -> None:
        self.matrix, self.lower = matrix, lower
        self.rows = analysis.dependency_graph(matrix.indptr, matrix.indices, lower)
        self.level = analysis.levels(self.rows.ptr, self.rows.deps)
        rng = np.random.default_rng(seed)
        self.b = rng.standard_normal(matrix.shape[0] if k is None else (matrix.shape[0], k))
        self.want = spsolve_triangular(matrix, self.b, lower=lower)

    def check(self, schedule: SptrsvSchedule, dtype=np.float64) -> None:
        plan = scheduling.plan(self.rows, self.level, schedule, NUM_BLOCKS, MAX_WARPS)
        x = execute(plan, self.matrix.indptr, self.matrix.indices, self.matrix.data.astype(dtype),
                    self.b.astype(dtype))
        np.testing.assert_allclose(x, self.want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-6 if dtype == np.float32 else 1e-13, err_msg=str(schedule))


SYSTEMS = {
    "power_law lower": lambda: _System(triangular.power_law(120, 4.0, 2.3, seed=1), True, None, 0),
    "laplacian ilu0 U": lambda: _System(triangular.laplacian((8, 7), "ilu0", seed=2, upper=True), False, 2, 1),
    "banded lower": lambda: _System(triangular.banded(80, 6, 0.3, seed=3), True, None, 2),
}
COMBINATIONS = list(itertools.product(TRANSFORMS, SCHEDULING, ALPHA_LEVELS))


@pytest.fixture(scope="module", params=sorted(SYSTEMS))
def system(request) -> _System:
    return SYSTEMS[request.param]()


def test_every_transform_and_scheduling_combination_solves(system):
    for i, ((merge, rb, thresh, reorder), (grouping, ws), alpha) in enumerate(COMBINATIONS):
        nw, ng, sw = PARALLEL[i % len(PARALLEL)]
        system.check(SptrsvSchedule(warps_per_block=nw, subwarps=ng, sw_rnnz=sw, merge=merge, merge_rows=rb,
                                    merge_thresh=thresh, reorder=reorder, grouping=grouping,
                                    warp_schedule=ws, alpha_level=alpha))


@pytest.mark.parametrize("subwarps,sw_rnnz", [(1, 0), (2, 16), (8, 1), (16, float("inf")), (32, 0)])
def test_every_parallel_setup_solves(system, subwarps, sw_rnnz):
    for merge, rb, thresh, reorder in TRANSFORMS[::3]:
        for early_division, sync_elimination in ((True, True), (False, False)):
            system.check(SptrsvSchedule(warps_per_block=2, subwarps=subwarps, sw_rnnz=sw_rnnz, merge=merge,
                                        merge_rows=rb, merge_thresh=thresh, reorder=reorder,
                                        early_division=early_division, sync_elimination=sync_elimination,
                                        warp_schedule="ws_balance", alpha_level=2))


def test_single_precision_runs_in_single_precision(system):
    system.check(SptrsvSchedule(subwarps=4, sw_rnnz=2, merge_rows=4), dtype=np.float32)


@pytest.mark.slow
def test_the_whole_reduced_space_solves(system):
    for schedule in reduced_space():
        system.check(schedule)


def _waiting_plan() -> tuple[_System, scheduling.SolvePlan]:
    system = SYSTEMS["power_law lower"]()
    plan = scheduling.plan(system.rows, system.level, SptrsvSchedule(alpha_level=float("inf")), NUM_BLOCKS,
                           MAX_WARPS)
    assert plan.num_kernels == 1 and plan.kernel_waits.all()
    return system, plan


def _run(system: _System, plan: scheduling.SolvePlan) -> np.ndarray:
    return execute(plan, system.matrix.indptr, system.matrix.indices, system.matrix.data, system.b)


def test_a_plan_without_waits_reads_too_early():
    system, plan = _waiting_plan()
    broken = dataclasses.replace(plan, kernel_waits=np.zeros(1, dtype=bool))
    with pytest.raises(ScheduleError, match=r"row \d+ reads x\[\d+\] before it is final"):
        _run(system, broken)


def test_a_read_from_another_group_of_the_same_kernel_without_waiting_is_caught():
    # Row groups {0, 1} and {2, 3}; row 3 reads row 0, the first row of the other group, at
    # its second step: that row is done by then in this order, but nothing made it final.
    dense = np.eye(4) + np.diag([1.0, 0.0, 1.0], -1)
    dense[3, 0] = 1.0
    matrix = sp.csr_array(dense)
    rows = analysis.dependency_graph(matrix.indptr, matrix.indices, True)
    plan = scheduling.plan(rows, analysis.levels(rows.ptr, rows.deps), SptrsvSchedule(merge_rows=2), 1, 4)
    assert plan.num_kernels == 1 and plan.kernel_waits.all()
    execute(plan, matrix.indptr, matrix.indices, matrix.data, np.ones(4))
    broken = dataclasses.replace(plan, kernel_waits=np.zeros(1, dtype=bool))
    with pytest.raises(ScheduleError, match=r"row 3 reads x\[0\] before it is final"):
        execute(broken, matrix.indptr, matrix.indices, matrix.data, np.ones(4))


def test_a_missing_ready_flag_deadlocks():
    system, plan = _waiting_plan()
    broken = dataclasses.replace(plan, row_flag=np.zeros_like(plan.row_flag))
    with pytest.raises(ScheduleError, match=r"deadlock: no warp can start its next node group; row \d+ "
                                            r"\(node group \d+\) waits for row \d+, which writes no ready flag"):
        _run(system, broken)


def test_a_warp_waiting_on_its_own_later_work_deadlocks():
    system, plan = _waiting_plan()
    broken = dataclasses.replace(plan, node_warp=np.zeros_like(plan.node_warp))
    _run(system, broken)  # one warp, its node groups in level order: slow but sound
    # Running the node groups backwards on that warp makes the first one wait for the last.
    reversed_levels = dataclasses.replace(
        plan, node_warp=np.zeros_like(plan.node_warp),
        nodes=dataclasses.replace(plan.nodes, ptr=plan.nodes.ptr, members=plan.nodes.members[::-1].copy()))
    with pytest.raises(ScheduleError, match="which is not solved yet"):
        _run(system, reversed_levels)


def test_threads_waiting_on_an_unflagged_row_of_their_own_group_are_caught():
    system = SYSTEMS["banded lower"]()
    # 8-row groups on 4-lane subwarps: each row waits on the row before it, another lane's.
    plan = scheduling.plan(system.rows, system.level, SptrsvSchedule(merge_rows=8, subwarps=8, sw_rnnz=float("inf")),
                           NUM_BLOCKS, MAX_WARPS)
    broken = dataclasses.replace(plan, row_flag=np.zeros_like(plan.row_flag))
    with pytest.raises(ScheduleError, match=r"waits, thread by thread, for row \d+ of its own row group, "
                                            r"which writes no ready flag"):
        _run(system, broken)


def test_unit_diagonal_and_early_division():
    matrix = triangular.banded(50, 4, 0.5, seed=5)
    rows = analysis.dependency_graph(matrix.indptr, matrix.indices, True)
    level = analysis.levels(rows.ptr, rows.deps)
    b = np.arange(50.0)
    for early_division in (True, False):
        plan = scheduling.plan(rows, level, SptrsvSchedule(early_division=early_division), 2, 4)
        x = execute(plan, matrix.indptr, matrix.indices, matrix.data, b, unit_diagonal=True)
        np.testing.assert_allclose(x, spsolve_triangular(matrix, b, unit_diagonal=True), rtol=1e-12)
