"""Launch plans of edge softmax: for one graph (or its reverse, for ``norm_by="src"``),
task and schedule, the kernel loaded and every argument but the values fixed. Kept in the
graph's ``plans`` cache; call a forward plan with ``x`` and ``y``, a backward plan with
``y``, ``dy`` and ``dz``."""

from __future__ import annotations

from collections.abc import Callable


from ...graph import Graph
from ..source import OPERAND, RUNTIME_LOADER, KernelLoader, device_index
from . import codegen
from .schedule import WarpPerRow
from .task import SoftmaxTask

__all__ = ["build_plan"]


def build_plan(rows: Graph, task: SoftmaxTask, schedule: WarpPerRow,
               loader: KernelLoader = RUNTIME_LOADER) -> Callable[..., None]:
    """The plan of ``task`` over the rows of ``rows``."""
    schedule.validate()
    device = device_index(rows.device)
    program = codegen.program(task, schedule)
    name = codegen.kernel_name(task.direction)
    values = {pname: OPERAND for _, pname in program.kernels[name].params
              if pname in ("x", "y", "dy", "dz")}
    return program.prepare(name, device, (-(-rows.num_dst // schedule.warps_per_block),),
                           schedule.threads, loader=loader, rowptr=rows.rowptr, eid=rows.eid,
                           num_rows=rows.num_dst, num_heads=task.num_heads, **values)
