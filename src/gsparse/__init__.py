"""gsparse: generated, autotuned GPU kernels for the generalized sparse operations of GNNs.

The public API: :class:`Graph`, :func:`gspmm`, :func:`gsddmm`, :func:`edge_softmax`,
:func:`gat_attention` (GAT's attention, fused), and
DGL's shorthands (``u_mul_e_sum``, ``copy_u_max``, ``u_dot_v``, ...), all differentiable and
compilable; GNN layers in :mod:`gsparse.nn`; the sparse triangular solve :func:`sptrsv` and
:class:`TriangularSolver`; graphs to run on in :mod:`gsparse.datasets`.

On CUDA tensors a schedule can be forced (``schedule=``) instead of the default rule: one
of the g-SpMM schedules (:class:`SpmmOnePass`, :class:`SpmmSplitRows`,
:class:`SpmmColumnTiled`, :class:`SpmmOutputTiled`; any of them is a ``SpmmSchedule``) or
the g-SDDMM ones (:class:`SddmmEdge`, :class:`SddmmRow`, :class:`SddmmRowTransposed`,
:class:`SddmmEdgeTransposed`). :func:`schedule_from_json` reads any of them back from
``schedule.to_json()``. :class:`Target` describes the GPU rules and spaces are computed for.
"""

from . import datasets, nn
from .attention import gat_attention
from . import sddmm as _sddmm
from . import spmm as _spmm
from .derived import CompileError
from .graph import Graph, GraphStats, RowStats
from .kernels.schedule import schedule_from_json
from .kernels.sddmm import Edge as SddmmEdge
from .kernels.sddmm import EdgeTransposed as SddmmEdgeTransposed
from .kernels.sddmm import Row as SddmmRow
from .kernels.sddmm import RowTransposed as SddmmRowTransposed
from .kernels.sddmm import SddmmSchedule
from .kernels.spmm import ColumnTiled as SpmmColumnTiled
from .kernels.spmm import OnePass as SpmmOnePass
from .kernels.spmm import OutputTiled as SpmmOutputTiled
from .kernels.spmm import SplitRows as SpmmSplitRows
from .kernels.spmm import SpmmSchedule
from .sddmm import gsddmm
from .softmax import edge_softmax
from .spmm import gspmm
from .sptrsv import TriangularSolver, sptrsv
from .target import Target

__version__ = "0.1.0"
"""The package version."""

globals().update(_spmm.SHORTHANDS)
globals().update(_sddmm.SHORTHANDS)

__all__ = [
    "CompileError",
    "Graph",
    "GraphStats",
    "RowStats",
    "SddmmEdge",
    "SddmmEdgeTransposed",
    "SddmmRow",
    "SddmmRowTransposed",
    "SddmmSchedule",
    "SpmmColumnTiled",
    "SpmmOnePass",
    "SpmmOutputTiled",
    "SpmmSchedule",
    "SpmmSplitRows",
    "Target",
    "schedule_from_json",
    "gspmm",
    "gsddmm",
    "edge_softmax",
    "gat_attention",
    "sptrsv",
    "TriangularSolver",
    "nn",
    "datasets",
    "__version__",
    *sorted(_spmm.SHORTHANDS),
    *sorted(_sddmm.SHORTHANDS),
]
