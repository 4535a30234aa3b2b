"""The fast start: a triangular solve in natural dependency order, prepared on the device.

The analysed schemes (:mod:`.plan`) need the row graph and the levels, computed on the host
(50-1,100 ms at 500K rows, docs/performance.md). The fast start needs neither: the kernel
(``natural.cuh``) hands consecutive rows to the warps of a persistent grid in solve order,
through one ticket counter, and each row waits on its dependencies by value. Its
preparation is a few torch ops on the factor's device: the index type, for a transposed
solve the CSR of ``A^T`` (:func:`device_transpose`), and in level order the rows sorted by
level (:func:`level_order`); no copy of the pattern to the host.
"""

from __future__ import annotations

import threading

import torch

from ...runtime import current_stream_handle
from ...target import Target
from ..memory import allocate, filled_bits
from ..source import OPERAND, RUNTIME_LOADER, KernelLoader, device_index
from .codegen import (LEVELS_KERNEL, LEVELS_WARPS, NATURAL_KERNEL, SENTINEL, levels_program, natural_program,
                      natural_variant, one_block_shared_bytes)
from .plan import SystemValues
from .schedule import NaturalOrderSchedule
from .split import CONSTANTS, SPLIT_ABOVE, split_long_rows
from .task import SptrsvTask

__all__ = ["DeviceSystem", "NaturalPlan", "dag_levels", "device_levels", "device_transpose", "entry_rows", "level_order"]


def entry_rows(crow: torch.Tensor, nnz: int) -> torch.Tensor:
    """``[nnz]`` int64 row of each entry of a CSR with valid offsets ``crow``, on its device
    (traceable: the size is given, nothing is read back)."""
    n = crow.numel() - 1
    return torch.repeat_interleave(torch.arange(n, device=crow.device), crow[1:] - crow[:-1], output_size=nnz)


def device_transpose(crow: torch.Tensor, col: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(crow_t, col_t, value_index)`` of ``A^T`` for the canonical CSR ``(crow, col)`` of an
    ``n x n`` ``A`` (int64, any device), with torch ops on that device: the same arrays as
    :func:`.levelset.transposed_pattern` (a stable sort of the entries by column keeps each
    column's entries in row order, so ``A^T``'s rows come out sorted)."""
    n = crow.numel() - 1
    rows = entry_rows(crow, col.numel())
    sorted_col, value_index = torch.sort(col, stable=True)
    # Each row's offset is where its column starts among the sorted columns: a search, where
    # a bincount would read its size back (a wait on a GPU).
    crow_t = torch.searchsorted(sorted_col, torch.arange(n + 1, dtype=torch.int64, device=crow.device))
    return crow_t, rows[value_index], value_index


class DeviceSystem:
    """The system of one solve direction, ``T = A`` or ``A^T``, as device tensors (int64):
    ``crow``, ``col``, ``value_index`` (None when ``T = A``) and ``lower``; with its rows of
    more than :data:`.split.SPLIT_ABOVE` entries split into partial rows (``split``, None
    when none is: :mod:`.split`), ``value_index`` then indexes ``A``'s values followed by
    :data:`.split.CONSTANTS`. ``longest_row`` is the most entries of a row of ``T`` before
    any split: given (a factor's statistics, ``FactorPlans.stats``), or read back here, once.

    Args:
        crow, col: ``A``'s canonical CSR.
        lower: ``A`` is lower triangular.
        transpose: the system is ``A^T``.
        longest_row: the most entries of a row of ``T``, where known: no row needs a split
            when it is at most :data:`.split.SPLIT_ABOVE`, and nothing is read back.
    """

    def __init__(self, crow: torch.Tensor, col: torch.Tensor, lower: bool, transpose: bool,
                 longest_row: int | None = None) -> None:
        self.value_index = None
        if transpose:
            crow, col, self.value_index = device_transpose(crow, col)
        self.lower = lower != transpose
        if longest_row is None:
            longest_row = int(crow.diff().max()) if crow.numel() > 1 else 0  # a wait on a GPU
        self.longest_row = longest_row
        self.split = (split_long_rows(crow, col, self.lower, self.value_index) if longest_row > SPLIT_ABOVE
                      else None)
        if self.split is not None:
            crow, col, self.value_index = self.split.crow, self.split.col, self.split.value_index
        self.crow, self.col = crow, col
        self._indices: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = {}
        self._level_orders: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._level_counts: dict[torch.dtype, int] = {}

    def indices(self, index_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(crow, col)`` in ``index_dtype``, converted once and kept: the levels kernel and
        every plan of the direction read the same arrays."""
        if index_dtype not in self._indices:
            self._indices[index_dtype] = (self.crow.to(index_dtype), self.col.to(index_dtype))
        return self._indices[index_dtype]

    def system_values(self) -> SystemValues:
        """What gathers ``T``'s values from ``A``'s, for a plan of this system."""
        return SystemValues(self.value_index, CONSTANTS if self.split is not None else ())

    def spread(self, b: torch.Tensor) -> torch.Tensor:
        """``b`` as this system's right side: itself, or with split rows in the split system's."""
        return b if self.split is None else self.split.spread(b)

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """The original system's solution from this system's ``x`` (itself when nothing is split)."""
        return x if self.split is None else self.split.gather(x)

    @property
    def n(self) -> int:
        return self.crow.numel() - 1

    def level_order(self, index_dtype: torch.dtype, target: Target,
                    loader: KernelLoader = RUNTIME_LOADER) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`level_order` of this system, computed once per index type and kept: every
        task of the direction (dtype, right-hand sides) shares it."""
        if index_dtype not in self._level_orders:
            self._level_orders[index_dtype] = level_order(self, index_dtype, target, loader)
        order, position, _ = self._level_orders[index_dtype]
        return order, position

    def level_count(self, index_dtype: torch.dtype, target: Target, loader: KernelLoader = RUNTIME_LOADER) -> int:
        """The number of levels of the system, from :meth:`level_order`'s levels: one
        read-back (a wait on a GPU), once per index type."""
        if self.n == 0:
            return 0
        if index_dtype not in self._level_counts:
            self.level_order(index_dtype, target, loader)
            _, _, sorted_levels = self._level_orders[index_dtype]
            self._level_counts[index_dtype] = int(sorted_levels[-1]) + 1
        return self._level_counts[index_dtype]


def device_levels(system: DeviceSystem, index_dtype: torch.dtype, target: Target,
                  loader: KernelLoader = RUNTIME_LOADER) -> torch.Tensor:
    """``[n]`` int32 level of each of the system's rows (matrix row order), on its device, from
    one launch of the levels kernel (``levels.cuh``); nothing is read back. The kernel's
    critical path is the system's longest dependency chain, one trip through L2 per row of it."""
    return _kernel_levels(*system.indices(index_dtype), system.lower, index_dtype, target, loader)


def dag_levels(ptr: torch.Tensor, deps: torch.Tensor, index_dtype: torch.dtype, target: Target,
               loader: KernelLoader = RUNTIME_LOADER) -> torch.Tensor:
    """``[m]`` int32 level of each node of a DAG whose node ``k`` depends on
    ``deps[ptr[k]:ptr[k + 1]]`` (all ``< k``; :func:`.analysis.levels`' contract), on its
    device, from one launch of the levels kernel: the DAG is the pattern of a lower
    triangular system without its diagonal (a row graph in solve order, a merging scheme's
    row groups). Nothing is read back."""
    return _kernel_levels(ptr, deps, True, index_dtype, target, loader)


def _kernel_levels(crow: torch.Tensor, col: torch.Tensor, lower: bool, index_dtype: torch.dtype, target: Target,
                   loader: KernelLoader) -> torch.Tensor:
    """One launch of the levels kernel on the triangular pattern ``(crow, col)``."""
    device = crow.device
    n = crow.numel() - 1
    level = torch.full((n,), -1, dtype=torch.int32, device=device)
    tickets = torch.zeros(2, dtype=torch.int64, device=device)
    code = levels_program(index_dtype, lower)
    launch = code.prepare(LEVELS_KERNEL, device_index(device), target.sms, LEVELS_WARPS * 32, loader=loader,
                          crow=crow.to(index_dtype), col=col.to(index_dtype), level=OPERAND, ticket=OPERAND, n=n)
    launch(level=level, ticket=tickets)
    return level


def level_order(system: DeviceSystem, index_dtype: torch.dtype, target: Target,
                loader: KernelLoader = RUNTIME_LOADER) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(order, position, sorted_levels)`` of the system's rows by level, on its device:
    ``order[k]`` is the row solved at position ``k`` (levels increasing; rows of one level in
    index order), ``position`` its inverse and ``sorted_levels[k]`` that row's level (int32).
    The levels come from :func:`device_levels`, the order from a stable sort; nothing is
    read back."""
    device = system.crow.device
    n = system.n
    level = device_levels(system, index_dtype, target, loader)
    sorted_levels, order = torch.sort(level, stable=True)
    order = order.to(index_dtype)
    position = torch.empty(n, dtype=index_dtype, device=device)
    position.index_copy_(0, order.long(), torch.arange(n, dtype=index_dtype, device=device))
    return order, position, sorted_levels


# Systems whose x is at most this many bytes get x from the previous solve's kernel, already
# filled with the sentinel (NaturalPlan): their solves take tens of microseconds, of which a
# fill kernel of its own, and the gap before the solve's, would be a tenth; a larger x's fill
# is a smaller share, and the plan would hold a second x.
RECYCLED_X_BYTES = 16 << 20


class NaturalPlan:
    """The launch of the fast start for one task on one factor's system; call it with ``A``'s
    values (canonical order, ``[nnz]``) and ``b`` (``[n]`` or ``[n, k]``, contiguous) to get
    ``x``. One launch per solve, after filling ``x`` with the sentinel (in one block, no fill).
    On a GPU, a system whose ``x`` fits :data:`RECYCLED_X_BYTES` has no fill either after its
    first solve: each launch also fills the next solve's ``x``, which the plan keeps (not while
    a CUDA graph is captured, whose replays each need their own fill, nor across a change of
    stream, which would not order the fill before its use).

    Args:
        system: the system of the task's direction, on the device.
        task: the solve; its ``system_lower`` must be the system's orientation.
        schedule: the scheme (validated here).
        target: the GPU: one block per SM, or one block in all.
        loader: compiles and loads the kernel (a recorder in tests).

    Raises:
        ValueError: the system's orientation is not the task's, or a scheme in one block on
            a system whose ``x`` does not fit in the target's shared memory per block.
    """

    def __init__(self, system: DeviceSystem, task: SptrsvTask, schedule: NaturalOrderSchedule, target: Target,
                 loader: KernelLoader = RUNTIME_LOADER) -> None:
        schedule.validate()
        if task.system_lower != system.lower:
            raise ValueError(f"task {task} solves a {'lower' if task.system_lower else 'upper'} system, "
                             f"but the system is {'lower' if system.lower else 'upper'}")
        self.task, self.schedule, self.n = task, schedule, system.n
        shared_bytes = one_block_shared_bytes(task.algorithm, system.n) if schedule.one_block else 0
        if shared_bytes > target.shared_bytes_per_block:
            raise ValueError(f"scheme {schedule} keeps x in one block's shared memory: {system.n} rows of "
                             f"{task.num_rhs} {task.dtype} values need {shared_bytes} bytes, more than the "
                             f"{target.shared_bytes_per_block} of {target.name}")
        self._sentinel = None if schedule.one_block else SENTINEL[task.dtype]
        self._recycles = (self._sentinel is not None and system.crow.is_cuda
                          and system.n * task.num_rhs * task.dtype.itemsize <= RECYCLED_X_BYTES)
        self._next_x: torch.Tensor | None = None  # the next solve's x, filled by the last launch
        self._next_stream = 0  # the stream of that launch
        self._next_lock = threading.Lock()  # two solves from two threads never take the same x
        self._system = system
        self._system_values = system.system_values()
        device = system.crow.device
        # The next ticket and the warps done; the kernel's last warp zeroes both (natural.cuh).
        # One block keeps its counter in shared memory.
        self._tickets = None if schedule.one_block else torch.zeros(2, dtype=torch.int64, device=device)
        index = task.index_dtype
        order = position = None
        if schedule.level_order and self.n:
            order, position = system.level_order(index, target, loader)
        code = natural_program(task.algorithm, schedule)
        crow, col = system.indices(index)
        self._launch = code.prepare(
            NATURAL_KERNEL, device_index(device), 1 if schedule.one_block else target.sms,
            natural_variant(schedule).threads, shared_bytes=shared_bytes, loader=loader,
            crow=crow, col=col, order=order, position=position, n=self.n,
            val=OPERAND, b=OPERAND, x=OPERAND, ticket=OPERAND, next_x=OPERAND).positional(
                "val", "b", "x", "ticket", "next_x")

    def __call__(self, values: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``x`` of ``b``'s shape with ``T x = b``, ``T`` the system over ``values`` (with
        split rows, through the split system's right side and solution)."""
        b = self._system.spread(b)
        shape = tuple(b.shape)
        if self.n == 0:
            return allocate(shape, b.dtype, b.device)
        if self._sentinel is None:  # one block: x's signals live in its shared memory
            x = allocate(shape, b.dtype, b.device)
            self._launch(self._system_values(values), b, x, None, None)
            return self._system.gather(x)
        recycle = self._recycles and not torch.cuda.is_current_stream_capturing()
        stream = current_stream_handle(b.device.index) if recycle else 0
        x = None
        if recycle:
            with self._next_lock:  # taken by one solve only
                if stream == self._next_stream:
                    x = self._next_x
                self._next_x = None
        if x is None:
            x = filled_bits(shape, b.dtype, b.device, self._sentinel)
        following = allocate(shape, b.dtype, b.device) if recycle else None
        self._launch(self._system_values(values), b, x, self._tickets, following)
        if recycle:
            with self._next_lock:
                self._next_x, self._next_stream = following, stream
        return self._system.gather(x)
