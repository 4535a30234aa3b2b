"""The preparation in PyTorch ops (:mod:`gsparse.kernels.sptrsv.device_prep`) against the
NumPy one, array for array and bit for bit (dtype included), on CPU tensors: every family
of ``gsparse.datasets.triangular`` at three sizes, lower and upper, and schemes covering its
scope."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv import device_prep
from gsparse.kernels.sptrsv.analysis import dependency_graph, levels, longest_chain
from gsparse.kernels.sptrsv.features import matrix_features
from gsparse.kernels.sptrsv.plan import _schedule_arrays
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.kernels.sptrsv.scheduling import plan
from gsparse.target import H100

SIZES = (500, 6_000, 30_000)

# (scheme, resident warps): the analysed default's scheme on meshes and roads at 16
# right-hand sides, then schemes covering the scope's other choices: subwarps, grouping,
# reordering, sync elimination, and kernel partitions (a few resident warps make the wide
# levels of these small factors kernels of their own, next to shared kernels that wait).
SCHEMES = (
    (SptrsvSchedule(warps_per_block=32, subwarps=1, sw_rnnz=0, ready_by_value=True, alpha_level=math.inf),
     H100.resident_warps),
    (SptrsvSchedule(), H100.resident_warps),
    (SptrsvSchedule(ready_by_value=True, warps_per_block=4, subwarps=32, sw_rnnz=math.inf, alpha_level=2), 3),
    (SptrsvSchedule(subwarps=4, sw_rnnz=2, grouping="rg_balance", alpha_level=0), H100.resident_warps),
    (SptrsvSchedule(subwarps=8, sw_rnnz=4, reorder=True, grouping="rg_balance", alpha_level=2), 2),
    (SptrsvSchedule(subwarps=2, sw_rnnz=2, reorder=True, sync_elimination=False, alpha_level=4), 1),
    (SptrsvSchedule(merge="merge_avg", merge_thresh=8, alpha_level=2), 5),
    # Merged row groups: the contracted DAG, its levels given, and the flags of dependencies
    # inside a group.
    (SptrsvSchedule(merge_rows=32, grouping="rg_balance", alpha_level=2), H100.resident_warps),
    (SptrsvSchedule(subwarps=4, sw_rnnz=2, merge="merge_avg", merge_rows=32, merge_thresh=8, reorder=True,
                    alpha_level=math.inf), H100.resident_warps),
    (SptrsvSchedule(subwarps=8, sw_rnnz=4, merge="merge_thresh", merge_rows=32, merge_thresh=4,
                    grouping="rg_balance", alpha_level=2), 2),
    (SptrsvSchedule(merge_rows=4, sync_elimination=False, alpha_level=0), H100.resident_warps),
    (SptrsvSchedule(subwarps=2, sw_rnnz=2, merge_rows=4, reorder=True, alpha_level=2), 1),
    (SptrsvSchedule(ready_by_value=True, warps_per_block=4, subwarps=32, sw_rnnz=math.inf, merge_rows=32,
                    alpha_level=2), 3),
    # ws_balance: kernels of at most W node groups, and larger ones dealt round by round.
    (SptrsvSchedule(merge_rows=32, grouping="rg_balance", warp_schedule="ws_balance", alpha_level=2),
     H100.resident_warps),
    (SptrsvSchedule(merge_rows=4, sync_elimination=False, warp_schedule="ws_balance", alpha_level=0),
     H100.resident_warps),
    (SptrsvSchedule(warps_per_block=4, warp_schedule="ws_balance", alpha_level=math.inf), H100.resident_warps),
    (SptrsvSchedule(subwarps=4, sw_rnnz=2, reorder=True, warp_schedule="ws_balance", alpha_level=2), 3),
)


def _host_levels(ptr: torch.Tensor, deps: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(levels(ptr.numpy(), deps.numpy()))


def _same(torch_array: torch.Tensor, numpy_array: np.ndarray, name: str) -> None:
    got = torch_array.numpy()
    assert got.dtype == numpy_array.dtype, f"{name}: {got.dtype} != {numpy_array.dtype}"
    assert got.shape == numpy_array.shape, f"{name}: {got.shape} != {numpy_array.shape}"
    assert np.array_equal(got, numpy_array), name


def _factor(family: str, rows: int, lower: bool):
    matrix = triangular.generate(family, rows, seed=0, upper=not lower)
    crow, col = matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64)
    return crow, col, torch.from_numpy(crow), torch.from_numpy(col)


@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_the_torch_analysis_is_numpys(family, lower):
    for rows in SIZES:
        crow, col, crow_t, col_t = _factor(family, rows, lower)
        expected = dependency_graph(crow, col, lower)
        got = device_prep.dependency_graph(crow_t, col_t, lower)
        for name in ("order", "ptr", "deps", "row_nnz"):
            _same(getattr(got, name), getattr(expected, name), name)
        assert device_prep.longest_chain(got) == longest_chain(expected)
        level = levels(expected.ptr, expected.deps)
        features = device_prep.matrix_features(got, torch.from_numpy(level))
        assert features.dtype == np.float64
        want = matrix_features(expected, level)
        # The counts' moments to the bit; dep_dist, a float sum in another order, to rounding.
        assert features[:9].tobytes() == want[:9].tobytes(), (features, want)
        np.testing.assert_allclose(features[9], want[9], rtol=1e-13, atol=0)


@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
@pytest.mark.parametrize("family", triangular.FAMILIES)
def test_the_torch_plans_are_numpys(family, lower):
    mixed = False  # kernels that wait next to kernels that do not
    for rows in SIZES:
        crow, col, crow_t, col_t = _factor(family, rows, lower)
        graph = dependency_graph(crow, col, lower)
        level = levels(graph.ptr, graph.deps)
        graph_t = device_prep.dependency_graph(crow_t, col_t, lower)
        for schedule, max_warps in SCHEMES:
            expected = plan(graph, level, schedule, H100.sms, max_warps)
            # The number of levels given (as the features know it) and read.
            got = device_prep.solve_plan(graph_t, torch.from_numpy(level), schedule, H100.sms, max_warps,
                                         int(level.max()) + 1 if schedule.reorder else None, _host_levels)
            mixed |= 0 < expected.kernel_waits.sum() < expected.num_kernels
            nodes = expected.nodes
            pairs = {"order": (got.rows.order, expected.rows.order), "ptr": (got.rows.ptr, expected.rows.ptr),
                     "deps": (got.rows.deps, expected.rows.deps), "row_nnz": (got.rows.row_nnz, expected.rows.row_nnz),
                     "group_starts": (got.group_starts, expected.group_starts),
                     "group_level": (got.group_level, expected.group_level),
                     "group_per_thread": (got.group_per_thread, expected.group_per_thread),
                     "node_ptr": (got.node_ptr, nodes.ptr), "members": (got.node_members, nodes.members),
                     "node_level": (got.node_level, nodes.level), "node_nnz": (got.node_nnz, nodes.nnz),
                     "node_warp": (got.node_warp, expected.node_warp),
                     "kernel_ptr": (got.kernel_ptr, expected.kernel_ptr),
                     "kernel_waits": (got.kernel_waits, expected.kernel_waits),
                     "row_flag": (got.row_flag, expected.row_flag)}
            arrays = _schedule_arrays(expected)
            pairs.update({name: (got.arrays[name], arrays[name]) for name in arrays})
            for name, (a, b) in pairs.items():
                _same(a, b, f"{family} {rows} {schedule} {name}")
    assert mixed or family == "banded", "no scheme partitioned the kernels both ways"


def test_schemes_outside_the_scope_are_refused():
    crow, col, crow_t, col_t = _factor("laplacian2d", 500, True)
    graph = device_prep.dependency_graph(crow_t, col_t, True)
    level = torch.from_numpy(levels(graph.ptr.numpy(), graph.deps.numpy()))
    for schedule in (SptrsvSchedule(merge_rows=4), SptrsvSchedule(warp_schedule="ws_locality")):
        with pytest.raises(NotImplementedError):
            device_prep.solve_plan(graph, level, schedule, H100.sms, H100.resident_warps)


def test_a_pattern_on_the_wrong_side_is_refused():
    crow = torch.tensor([0, 1, 3], dtype=torch.int64)
    col = torch.tensor([0, 0, 1], dtype=torch.int64)
    with pytest.raises(ValueError, match="not upper triangular"):
        device_prep.dependency_graph(crow, col, False)
