"""The analysis of one solve direction on the factor's own device, what
:class:`~gsparse.kernels.sptrsv.FactorPlans` prepares an analysed solve from: the system's
CSR, its row graph in solve order and levels as tensors (:mod:`.device_prep`), the
selector's features on the host, and the levels of the DAGs a plan needs besides
(:class:`DagLevels`).

:func:`.plan.analyse` computes the same in NumPy: the reference the tests compare this with,
and what the CPU oracle (:mod:`.executor`) and the scheme sweep's shared transforms
(:class:`.scheduling.TransformCache`) start from (:attr:`DeviceAnalysis.host`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ...target import Target
from ..source import KernelLoader
from . import device_prep
from .analysis import RowGraph, levels
from .device_prep import TorchRowGraph, TorchSolvePlan
from .natural import DeviceSystem, dag_levels
from .plan import SystemAnalysis
from .schedule import SptrsvSchedule
from .scheduling import SolvePlan

__all__ = ["DEVICE_LEVELS_MAX_CHAIN", "DagLevels", "DeviceAnalysis", "analyse_on_device"]

# The levels kernel takes a chain one row at a time, a trip through L2 each, where the host's
# levels take it in one NumPy pass. Measured on an H100 (banded factors, whose chain is every
# row): the kernel 0.51 us a chain row (20K rows 10.4 ms, 100K 50.9 ms), the host 10.5 ms at
# 20K and 20.6 ms at 100K: even near 20K rows, so longer chains go to the host.
DEVICE_LEVELS_MAX_CHAIN = 16_384


class DagLevels:
    """The levels of DAGs over one system's rows (its row graph in solve order, a merging
    scheme's row groups) as int64 tensors on their device: :func:`.natural.dag_levels`, the
    levels kernel, on a GPU, unless the DAG has a chain of more than
    :data:`DEVICE_LEVELS_MAX_CHAIN` nodes each depending on the one before, which the
    kernel takes one node at a time and the host's levels (:func:`.analysis.levels`) in one
    pass: there, and on a CPU, the host's (on a GPU the DAG is read back and its levels
    copied to the device). The same values either way.

    Args:
        index_dtype: the levels kernel's index type (the DAG's sizes fit it).
        target: the GPU the kernel runs on; None (a factor on the CPU): the host's levels.
        loader: compiles and loads the kernel.
    """

    def __init__(self, index_dtype: torch.dtype, target: Target | None, loader: KernelLoader) -> None:
        self._index_dtype, self._target, self._loader = index_dtype, target, loader

    def rows(self, rows: TorchRowGraph) -> torch.Tensor:
        """``[n]`` level of each position of a row graph; a GPU reads its longest chain
        (:func:`.device_prep.longest_chain`)."""
        return self._levels(rows.ptr, rows.deps, lambda: device_prep.longest_chain(rows))

    def __call__(self, ptr: torch.Tensor, deps: torch.Tensor) -> torch.Tensor:
        """``[m]`` level of each node of the DAG ``(ptr, deps)`` (:func:`.analysis.levels`'
        contract; :func:`.device_prep.solve_plan`'s ``group_levels``); a GPU reads its
        longest chain (:func:`.device_prep.dag_longest_chain`)."""
        return self._levels(ptr, deps, lambda: device_prep.dag_longest_chain(ptr, deps))

    def _levels(self, ptr: torch.Tensor, deps: torch.Tensor, longest_chain: Callable[[], int]) -> torch.Tensor:
        if self._target is not None and longest_chain() <= DEVICE_LEVELS_MAX_CHAIN:
            return dag_levels(ptr, deps, self._index_dtype, self._target, self._loader).long()
        # sync: on a GPU, the DAG read back (two reads) and its levels copied to it.
        return torch.from_numpy(levels(ptr.cpu().numpy(), deps.cpu().numpy())).to(ptr.device)


@dataclass(frozen=True, eq=False)
class DeviceAnalysis:
    """The system of one solve direction, ``T = A`` or ``T = A^T``, analysed on the factor's
    device: :class:`.plan.SystemAnalysis` with tensors.

    Attributes:
        system: the system analysed, ``T`` with its long rows split (its CSR, orientation
            and value gather are the analysis's; a plan's solves go through it).
        rows: ``T``'s row graph in solve order; ``row_level`` its levels (int64).
        features: ``[10]`` the matrix features of :mod:`.features` (NumPy, on the host:
            the selector's input), NumPy's to rounding (``dep_dist``'s sum) and to the bit
            otherwise.
        dag_levels: the levels of the DAGs of merging schemes' row groups.
    """

    system: DeviceSystem
    rows: TorchRowGraph
    row_level: torch.Tensor
    features: np.ndarray
    dag_levels: DagLevels

    @property
    def lower(self) -> bool:
        """``T`` is lower triangular."""
        return self.system.lower

    @property
    def crow(self) -> torch.Tensor:
        """``T``'s row pointers (int64)."""
        return self.system.crow

    @property
    def col(self) -> torch.Tensor:
        """``T``'s column indices (int64, rows' columns increasing)."""
        return self.system.col

    @property
    def value_index(self) -> torch.Tensor | None:
        """``[nnz]`` int64, the index of each of ``T``'s entries among ``A``'s values (and
        the split's constants after them); None when ``T = A``."""
        return self.system.value_index

    @property
    def n(self) -> int:
        return self.system.n

    @property
    def nnz(self) -> int:
        return self.col.numel()

    @property
    def levels(self) -> int:
        """The number of levels (the features' ``layer_num``: no read)."""
        return int(self.features[8])

    def solve_plan(self, schedule: SptrsvSchedule, target: Target) -> TorchSolvePlan | SolvePlan:
        """``schedule``'s transform and scheduling of this system on ``target``: on the
        device (:func:`.device_prep.solve_plan`), but for ``ws_locality`` warps, which place
        node groups level after level on the host (:meth:`.plan.SystemAnalysis.solve_plan`
        of :attr:`host`)."""
        if schedule.warp_schedule == "ws_locality":
            return self.host.solve_plan(schedule, target)
        return device_prep.solve_plan(self.rows, self.row_level, schedule, target.sms, target.resident_warps,
                                      self.levels, self.dag_levels)

    @functools.cached_property
    def host(self) -> SystemAnalysis:
        """This analysis in NumPy, read back once (on a CPU, the same memory): for the
        host's scheduling (``ws_locality``, the scheme sweep's shared transforms)."""

        def numpy(t: torch.Tensor | None) -> np.ndarray | None:
            return None if t is None else t.cpu().numpy()

        r = self.rows
        rows = RowGraph(order=numpy(r.order), ptr=numpy(r.ptr), deps=numpy(r.deps), row_nnz=numpy(r.row_nnz))
        return SystemAnalysis(self.lower, numpy(self.crow), numpy(self.col), numpy(self.value_index), rows,
                              numpy(self.row_level), self.features)


def analyse_on_device(system: DeviceSystem, dag_levels: DagLevels) -> DeviceAnalysis:
    """The analysis of ``system`` on its device: the row graph
    (:func:`.device_prep.dependency_graph`, one read), its levels (``dag_levels``: on a GPU
    the levels kernel, after one read of the longest chain) and the features
    (:func:`.device_prep.matrix_features`, one read)."""
    rows = device_prep.dependency_graph(system.crow, system.col, system.lower)
    row_level = dag_levels.rows(rows)
    return DeviceAnalysis(system, rows, row_level, device_prep.matrix_features(rows, row_level), dag_levels)
