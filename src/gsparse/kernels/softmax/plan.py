"""Launch plans of edge softmax: for one graph (or its reverse, for ``norm_by="src"``),
task and schedule, the kernel loaded and every argument but the values fixed. Kept in the
graph's ``plans`` cache; call a forward plan with ``x`` and ``y``, a backward plan with
``y``, ``dy`` and ``dz``; GAT's with the scores, ``masked`` and ``negative_slope`` besides
(and ``d_dst`` backward), ``x`` aside."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ...graph import Graph
from ..source import OPERAND, RUNTIME_LOADER, KernelLoader, LaunchTemplate, device_index
from . import codegen
from .schedule import WarpPerRow
from .task import SoftmaxTask

__all__ = ["build_plan"]


@functools.lru_cache(maxsize=256)
def _template(task: SoftmaxTask, schedule: WarpPerRow) -> LaunchTemplate:
    """The launch of ``task`` under ``schedule`` but for the rows' graph (``rowptr``,
    ``eid``, ``num_rows``)."""
    schedule.validate()
    program = codegen.program(task, schedule)
    name = codegen.kernel_name(task.direction, task.logits)
    graph = _GRAPH[task.logits]
    values = {pname: OPERAND for _, pname in program.kernels[name].params
              if pname not in graph and pname != "num_heads"}
    return LaunchTemplate(program, name, graph, num_heads=task.num_heads, **values)


# What a plan fixes of the rows' graph: GAT's logits read the sources (col) too.
_GRAPH = {"given": ("rowptr", "eid", "num_rows"), "gat": ("rowptr", "col", "eid", "num_rows")}


def build_plan(rows: Graph, task: SoftmaxTask, schedule: WarpPerRow,
               loader: KernelLoader = RUNTIME_LOADER) -> Callable[..., None]:
    """The plan of ``task`` over the rows of ``rows``."""
    values = {"rowptr": rows.rowptr, "col": rows.col, "eid": rows.eid, "num_rows": rows.num_dst}
    return _template(task, schedule).prepare(
        device_index(rows.device), (-(-rows.num_dst // schedule.rows_per_block),), schedule.threads,
        *(values[name] for name in _GRAPH[task.logits]), loader=loader, late=rows.sync_free)
