"""Launch plans of the SpTRSV kernel: for one factor, direction, task and scheme, the system's
arrays and the scheme's schedule on the device, the kernel loaded, one launch per kernel
partition.

A factor is analysed once per direction: the system's CSR, its row graph in solve order,
levels, and the selector's features, so that choosing a scheme is only the selector's
forward pass; a transposed solve gets the CSR of ``A^T`` once, with the index of each of its
entries among ``A``'s, so the kernel always walks rows. The solver does it on the factor's
device (:class:`.device_analysis.DeviceAnalysis`); :func:`analyse` is the same in NumPy
(:class:`SystemAnalysis`), the reference and the host scheduling's start. A plan
(:class:`SptrsvPlan`) then runs the scheme's transform and scheduling (on the device,
:func:`.device_prep.solve_plan`; ``ws_locality`` on the host, :func:`.scheduling.plan`)
and lays the result out for the kernel (see ``solve.cuh``): each launch is one partition
of ``alpha_level``, run in order on PyTorch's current stream.

The persistent grid is one block per SM (``Target.sms``), which the GPU always holds at
once (:func:`co_resident_blocks`): a warp spinning on a ready flag never waits for a block
that has not started. The ready flags live with the plan and carry an epoch that changes
with every solve, so they are cleared only once every :data:`EPOCHS` solves. Solves of one
plan are meant to run one after another on one stream (as PyTorch's current stream orders
them): two solves in flight at once on different streams would share the flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ...target import Target
from ..memory import allocate, filled_bits
from ..source import OPERAND, RUNTIME_LOADER, KernelLoader, device_index
from .analysis import RowGraph, dependency_graph, levels, ranges, stable_order
from .codegen import KERNEL, SENTINEL, CodeVariant, program
from .device_prep import TorchSolvePlan
from .features import matrix_features
from .levelset import transposed_pattern
from .schedule import SptrsvSchedule
from .scheduling import SolvePlan, TransformCache, plan
from .task import SptrsvTask

if TYPE_CHECKING:
    from .device_analysis import DeviceAnalysis

__all__ = ["EPOCHS", "SystemAnalysis", "SystemValues", "SptrsvPlan", "analyse", "co_resident_blocks", "stage_capacity"]

# Solves between two clearings of the ready flags (the epochs 1..EPOCHS are a device array;
# each solve passes a view of the next one).
EPOCHS = 1024
# The collaborative read's buffers take at most this much shared memory per block (the
# default dynamic limit: no opt-in, and the L1 cache keeps the rest), at most this many
# entries per warp.
_STAGE_BLOCK_BYTES = 48 * 1024
_STAGE_MAX_ENTRIES = 1024


@dataclass(frozen=True, eq=False)
class SystemAnalysis:
    """The system of one solve direction, ``T = A`` or ``T = A^T``, analysed on the host (the
    NumPy reference of :class:`.device_analysis.DeviceAnalysis`).

    Attributes:
        lower: ``T`` is lower triangular.
        crow, col: ``T``'s CSR (int64, rows' columns increasing).
        value_index: ``[nnz]`` int64, the index among ``A``'s values of each of ``T``'s
            entries; None when ``T = A``.
        rows: ``T``'s row graph in solve order; ``row_level`` its levels.
        features: ``[10]`` the matrix features of :mod:`.features` (a few milliseconds
            at 500K rows, next to the tens the levels take).
    """

    lower: bool
    crow: np.ndarray
    col: np.ndarray
    value_index: np.ndarray | None
    rows: RowGraph
    row_level: np.ndarray
    features: np.ndarray

    @property
    def n(self) -> int:
        return len(self.crow) - 1

    @property
    def nnz(self) -> int:
        return len(self.col)

    def solve_plan(self, schedule: SptrsvSchedule, target: Target, cache: TransformCache | None = None) -> SolvePlan:
        """``schedule``'s transform and scheduling of this system on ``target``
        (:func:`.scheduling.plan`), with the transforms of ``cache`` (made with
        :meth:`transform_cache`) where it holds them."""
        return plan(self.rows, self.row_level, schedule, target.sms, target.resident_warps, cache)

    def transform_cache(self) -> TransformCache:
        """An empty :class:`~.scheduling.TransformCache` of this system, for :meth:`solve_plan`."""
        return TransformCache(self.rows, self.row_level)


def analyse(crow: np.ndarray, col: np.ndarray, lower: bool, transpose: bool) -> SystemAnalysis:
    """The system of ``A x = b`` (``A^T x = b`` with ``transpose``) for the canonical
    triangular CSR ``(crow, col)`` of ``A``, ``lower`` or upper, analysed by NumPy, the
    host's levels (:func:`.analysis.levels`) included."""
    crow = np.ascontiguousarray(crow, dtype=np.int64)
    col = np.ascontiguousarray(col, dtype=np.int64)
    value_index = None
    if transpose:
        crow, col, value_index = transposed_pattern(crow, col)
        lower = not lower
    rows = dependency_graph(crow, col, lower)
    row_level = levels(rows.ptr, rows.deps)
    return SystemAnalysis(lower, crow, col, value_index, rows, row_level, matrix_features(rows, row_level))


def co_resident_blocks(target: Target, warps_per_block: int, shared_bytes: int) -> int:
    """The number of blocks of the solve kernel that ``target`` is sure to hold at once.

    Per SM, the least of: its warp slots, ``warps_per_sm // warps_per_block``; its shared
    memory, at least ``shared_bytes_per_block // shared_bytes`` (an SM has at least what
    one block may opt in to); and its registers, of which the kernel's
    ``__launch_bounds__(threads, 1)`` guarantees one block's worth and no more is known
    before the kernel is compiled. Times the SMs: ``target.sms`` whenever one block fits.
    """
    by_warps = target.warps_per_sm // warps_per_block
    by_shared = target.shared_bytes_per_block // shared_bytes if shared_bytes else by_warps
    return target.sms * min(by_warps, by_shared, 1)


def stage_capacity(task: SptrsvTask, warps_per_block: int) -> int:
    """Entries per warp of the collaborative read's buffer: a multiple of 32, all warps'
    buffers within 48 KiB, at most 1,024."""
    entry = task.dtype.itemsize + task.index_dtype.itemsize
    return min(_STAGE_MAX_ENTRIES, _STAGE_BLOCK_BYTES // (warps_per_block * entry)) // 32 * 32


def _schedule_arrays(solve: SolvePlan) -> dict[str, np.ndarray]:
    """The plan's node groups renumbered by (kernel, warp, order) and the per-launch tables
    of ``solve.cuh``: ``seg_warp``, ``seg_start``, ``node_ptr``, ``slot_group`` and
    ``parts`` (``[K, 3]``: segment range and whether the launch waits)."""
    nodes = solve.nodes
    q = nodes.count
    kernels = solve.num_kernels
    kernel_of_node = np.repeat(np.arange(kernels, dtype=np.int64), np.diff(solve.kernel_ptr))
    # One stable sort by (kernel, warp) keeps each warp's node groups in order: as a single
    # key, a radix sort (or a merge of presorted runs) rather than a lexsort of three.
    key = kernel_of_node * solve.num_warps + solve.node_warp
    perm = stable_order(key)
    key = key[perm]
    counts = np.diff(nodes.ptr)[perm]
    node_ptr = np.zeros(q + 1, dtype=np.int64)
    np.cumsum(counts, out=node_ptr[1:])
    warp = solve.node_warp[perm]
    seg_first = np.flatnonzero(np.diff(key, prepend=-1))
    bounds = np.searchsorted(key[seg_first] // solve.num_warps, np.arange(kernels + 1), side="left")
    parts = np.stack([bounds[:-1], bounds[1:], solve.kernel_waits.astype(np.int64)], axis=1)
    return {
        "seg_warp": warp[seg_first],
        "seg_start": np.append(seg_first, q),
        "node_ptr": node_ptr,
        "slot_group": nodes.members[ranges(nodes.ptr[perm], counts)],
        "parts": parts,
    }


def _kernel_arrays(solve: TorchSolvePlan | SolvePlan, device: torch.device) -> dict[str, torch.Tensor]:
    """The arrays the kernel reads of ``solve`` (``solve.cuh``'s names; ``order``, the matrix
    row of each position), as int64 or bool tensors on ``device``: a device plan's as they
    are, a host plan's laid out by :func:`_schedule_arrays` and copied."""
    arrays = {**(solve.arrays if isinstance(solve, TorchSolvePlan) else _schedule_arrays(solve)),
              "order": solve.order, "group_start": solve.group_starts, "group_per_thread": solve.group_per_thread,
              "row_flag": solve.row_flag}
    if isinstance(solve, TorchSolvePlan):
        return arrays
    return {name: torch.from_numpy(np.ascontiguousarray(a)).to(device) for name, a in arrays.items()}


class SystemValues:
    """``T``'s values from ``A``'s (canonical order): ``A``'s themselves, or for ``T = A^T``
    and split systems gathered through ``value_index`` from ``A``'s values followed by
    ``constants``, once per values tensor and version (the tensor is kept, so its storage
    cannot be reused by another while cached)."""

    def __init__(self, value_index: torch.Tensor | None, constants: tuple[float, ...] = ()) -> None:
        self._value_index = value_index
        self._constants = constants
        self._gathered: tuple[torch.Tensor, int, torch.Tensor] | None = None

    def __call__(self, values: torch.Tensor) -> torch.Tensor:
        if self._value_index is None:
            return values
        cached = self._gathered
        if cached is not None and cached[0] is values and cached[1] == values._version:
            return cached[2]
        source = values
        if self._constants:
            # Filled on the values' device: no copy from the host per new values.
            source = torch.cat([values, *(values.new_full((1,), c) for c in self._constants)])
        gathered = source.index_select(0, self._value_index)
        self._gathered = (values, values._version, gathered)
        return gathered


class SptrsvPlan:
    """The launches of one scheme for one task on one factor's system; call it with
    ``A``'s values (canonical order, ``[nnz]``) and ``b`` (``[n]`` or ``[n, k]``,
    contiguous) to get ``x``.

    Args:
        analysis: the system, on the factor's device (:func:`.device_analysis.analyse_on_device`
            for the task's direction): the arrays go there (a CPU device serves loaders that
            never launch).
        task: the solve; its ``system_lower`` must be the analysis's orientation.
        schedule: the scheme (validated here).
        target: the GPU: SMs (the grid), resident warps (``alpha_level``'s unit).
        loader: compiles and loads the kernel (a recorder in tests).
        solve_plan: the scheme's transform and scheduling made already, on this analysis and
            target for this ``schedule``: on the device
            (:meth:`.device_analysis.DeviceAnalysis.solve_plan`) or on the host
            (:func:`.scheduling.plan`, laid out here by :func:`_schedule_arrays` and
            copied). It does not depend on the task, so plans of several right-hand side
            counts can share it. None: made here, by the analysis.
    """

    def __init__(self, analysis: DeviceAnalysis, task: SptrsvTask, schedule: SptrsvSchedule, target: Target,
                 loader: KernelLoader = RUNTIME_LOADER, solve_plan: TorchSolvePlan | SolvePlan | None = None) -> None:
        schedule.validate()
        if task.system_lower != analysis.lower:
            raise ValueError(f"task {task} solves a {'lower' if task.system_lower else 'upper'} system, "
                             f"but the analysis is of a {'lower' if analysis.lower else 'upper'} one")
        if solve_plan is not None and (solve_plan.schedule != schedule or solve_plan.num_blocks != target.sms):
            raise ValueError(f"solve_plan was made for {solve_plan.schedule} on {solve_plan.num_blocks} SMs, "
                             f"not for {schedule} on {target.name}'s {target.sms}")
        self.task, self.schedule, self.target = task, schedule, target
        self.n = analysis.n
        device = analysis.crow.device
        variant = CodeVariant.of(schedule)
        self._sentinel = SENTINEL[task.dtype] if schedule.ready_by_value else None
        self.solve_plan = solve_plan or analysis.solve_plan(schedule, target)
        arrays = _kernel_arrays(self.solve_plan, device)
        index = task.index_dtype

        def put(name: str, dtype: torch.dtype = index) -> torch.Tensor:
            return arrays[name].to(dtype)  # on the device: no host round trip

        order = position = None
        if schedule.reorder:
            order = put("order")
            position = torch.empty_like(order).scatter_(
                0, arrays["order"], torch.arange(self.n, dtype=index, device=device))
        both_paths = variant.shared_rows and variant.per_thread_rows
        self._parts = put("parts")
        self._system = analysis.system
        self._system_values = analysis.system.system_values()
        self._flags = torch.zeros(self.n, dtype=torch.int32, device=device)
        self._epochs = torch.arange(1, EPOCHS + 1, dtype=torch.int32, device=device)
        self._solves = 0
        capacity = stage_capacity(task, schedule.warps_per_block) if variant.stage else 0
        shared_bytes = capacity * schedule.warps_per_block * (task.dtype.itemsize + index.itemsize)
        grid = target.sms
        if grid > co_resident_blocks(target, schedule.warps_per_block, shared_bytes):
            raise ValueError(f"a grid of {grid} blocks of {variant.threads} threads with {shared_bytes} "
                             f"bytes of shared memory is not co-resident on {target.name}")
        code = program(task.algorithm, schedule)
        crow, col = analysis.system.indices(index)  # converted once per direction, shared by its plans
        launch = code.prepare(
            KERNEL, device_index(device), grid, variant.threads, shared_bytes=shared_bytes, loader=loader,
            crow=crow, col=col, order=order, position=position,
            seg_warp=put("seg_warp"), seg_start=put("seg_start"), node_ptr=put("node_ptr"),
            slot_group=put("slot_group"), group_start=put("group_start"),
            group_per_thread=put("group_per_thread", torch.uint8) if both_paths else None,
            row_flag=put("row_flag", torch.uint8) if schedule.sync_elimination else None,
            flags=self._flags, n=self.n, stage_capacity=capacity,
            val=OPERAND, b=OPERAND, x=OPERAND, epoch=OPERAND, part=OPERAND)
        # The per-call path, made once: on small factors the host's time per solve was most of
        # it (48 us against 32 us of kernel for Cora's lower triangle on an H100), so each
        # launch's part and each epoch is a view made once, and the launch takes its operands
        # by position.
        self._launch = launch.positional("val", "b", "x", "epoch", "part")
        self._part_views = tuple(self._parts[p] for p in range(self.num_launches))
        self._epoch_views: list[torch.Tensor | None] = [None] * EPOCHS

    @property
    def num_launches(self) -> int:
        """Kernel launches per solve: the partitions of ``alpha_level``."""
        return self.solve_plan.num_kernels

    def __call__(self, values: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``x`` of ``b``'s shape with ``T x = b``, ``T`` the system over ``values`` (with
        split rows, through the split system's right side and solution)."""
        b = self._system.spread(b)
        if self.n == 0:
            return allocate(tuple(b.shape), b.dtype, b.device)
        if self._sentinel is not None:  # ready_by_value: every entry unsolved until written
            x = filled_bits(tuple(b.shape), b.dtype, b.device, self._sentinel)
        else:
            x = allocate(tuple(b.shape), b.dtype, b.device)
        val = self._system_values(values)
        epoch = self._next_epoch()
        for part in self._part_views:
            self._launch(val, b, x, epoch, part)
        return self._system.gather(x)

    def _next_epoch(self) -> torch.Tensor:
        """A view of this solve's epoch; every :data:`EPOCHS` solves the flags are cleared
        first (on the stream, before the solve's launches)."""
        slot = self._solves % EPOCHS
        if slot == 0 and self._solves:
            self._flags.zero_()
        self._solves += 1
        view = self._epoch_views[slot]
        if view is None:
            view = self._epoch_views[slot] = self._epochs[slot:slot + 1]
        return view
