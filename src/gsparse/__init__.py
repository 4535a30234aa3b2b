"""gsparse: generated, autotuned GPU kernels for the generalized sparse operations of GNNs.

The public API: :class:`Graph`, :func:`gspmm`, :func:`gsddmm`, :func:`edge_softmax`, and
DGL's shorthands (``u_mul_e_sum``, ``copy_u_max``, ``u_dot_v``, ...), all differentiable and
compilable; GNN layers in :mod:`gsparse.nn`; the sparse triangular solve :func:`sptrsv` and
:class:`TriangularSolver`. :class:`SpmmSchedule` / :class:`SddmmSchedule`
force a kernel schedule on CUDA tensors (``schedule=``) instead of the default rule.
"""

from . import nn
from . import sddmm as _sddmm
from . import spmm as _spmm
from .graph import Graph, RowStats
from .kernels.sddmm import SddmmSchedule
from .kernels.spmm import SpmmSchedule
from .sddmm import gsddmm
from .softmax import edge_softmax
from .spmm import gspmm
from .sptrsv import TriangularSolver, sptrsv

__version__ = "0.1.0"

globals().update(_spmm.SHORTHANDS)
globals().update(_sddmm.SHORTHANDS)

__all__ = [
    "Graph",
    "RowStats",
    "SddmmSchedule",
    "SpmmSchedule",
    "gspmm",
    "gsddmm",
    "edge_softmax",
    "sptrsv",
    "TriangularSolver",
    "nn",
    "__version__",
    *sorted(_spmm.SHORTHANDS),
    *sorted(_sddmm.SHORTHANDS),
]
