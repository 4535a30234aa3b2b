"""The gradient of a g-SpMM's source operand on a sampled block, without its reverse graph.

That gradient is a g-SpMM sum on the reverse graph (:mod:`gsparse._ops`). A block from
:meth:`gsparse.Graph.from_block` lives for one training step; building its reverse graph
(a sort of its edges, then a plan for a kernel on the new graph) cost an H200 machine's host
about 0.3 ms per block, more than the GPU spends on the whole backward. So the eager
backward of a block whose reverse graph is not built adds each edge's message to its
source's row with atomic adds (:file:`kernels/block_scatter.cu`): one memset and one
launch, prepared once per kernel and device.

It takes sum messages of ``copy_lhs``, ``copy_rhs``, ``mul`` and ``div`` in float32 and
float64, where each operand has the output's feature shape or is spread over its last
dimension (attention weights ``[E, H, 1]`` against features ``[N, H, C]``), and whose
output fits in :data:`MAX_OUTPUT_IN_L2` L2 caches; anything else, half precision (whose
atomic adds would round at every edge), and every call under
``torch.use_deterministic_algorithms`` (atomic adds land in any order) take the reverse
graph.
"""

from __future__ import annotations

import functools
import math
from typing import Optional

import torch
from torch import Tensor

from . import backends
from ._prepared import PreparedLaunches
from .backends import cuda
from .graph import Graph
from .kernels.operands import misalignment, vector_limit
from .kernels.source import INDEX_TYPES, PRELUDE, SCALAR_TYPES, TYPE_SUFFIXES, Signature, device_code
from .target import Target

BLOCK = 256  # threads per block
MAX_BLOCKS = 8192  # a grid-stride loop covers the rest
CONTEXT = "gsparse block_scatter"
OPS = {"copy_lhs": 0, "copy_rhs": 1, "mul": 2, "div": 3}
# The kernels' own ops: those, and copy_lhs of a mean's gradient, each row over its degree.
_KERNEL_OPS = {**OPS, "copy_lhs_over_degree": 4}
# The largest output taken, in L2 caches. Atomic adds change the output in the L2 cache: an
# output that fits there costs one write, one that does not is read and written again
# line by line, in the sources' random order. Against the reverse graph built and walked,
# in device time (scripts/block_scatter_probe.py, an H200 of 60 MB of L2, replayed CUDA
# graphs), the adds were 1.55-4x faster for outputs of 4-64 MB and 0.79-0.84x for outputs
# of 300-705 MB. Eagerly the reverse graph would also cost the host about 0.45 ms; but a
# step captured after an eager warm-up must take the path the warm-up took (its kernels
# are loaded then), so the choice is the same either way: by device time.
MAX_OUTPUT_IN_L2 = 2
DTYPES = (torch.float32, torch.float64)


def vector_widths(dtype: torch.dtype) -> tuple[int, ...]:
    """The vectors (elements) the program has for ``dtype``: 4 and 2 floats, which Hopper
    adds with one atomic instruction, or one element."""
    return (4, 2, 1) if dtype == torch.float32 else (1,)


@functools.cache
def _signature(op: str, dtype: torch.dtype, index: torch.dtype, vector: int) -> Signature:
    element, i = SCALAR_TYPES[dtype], INDEX_TYPES[index]
    return Signature(f"block_scatter_{op}_{TYPE_SUFFIXES[dtype]}_{TYPE_SUFFIXES[index]}_v{vector}", (
        (f"const {i}* __restrict__", "col"), (f"const {i}* __restrict__", "dst"),
        (f"const {i}* __restrict__", "eid"), (f"const {element}* __restrict__", "lhs"),
        (f"const {element}* __restrict__", "rhs"), (f"const {i}* __restrict__", "rowptr"),
        ("long long", "num_edges"), ("int", "heads"),
        ("int", "width"), ("int", "lhs_spread"), ("int", "rhs_spread"),
        (f"{element}* __restrict__", "out"), ("int", "lanes_log2")))


def source(dtype: torch.dtype, index: torch.dtype) -> str:
    """The program of the kernels of ``dtype`` operands and ``index`` indices: one program
    a pair, so that a first backward compiles only what it runs (``gsparse precompile``
    builds them all)."""
    entries = []
    for op, vector in ((op, vector) for op in _KERNEL_OPS for vector in vector_widths(dtype)):
        signature = _signature(op, dtype, index, vector)
        arguments = ", ".join(name for _, name in signature.params)
        entries.append(f"{signature.declaration((BLOCK,))}\n{{\n    block_scatter<{SCALAR_TYPES[dtype]}, "
                       f"{INDEX_TYPES[index]}, {_KERNEL_OPS[op]}, {vector}>({arguments});\n}}")
    return "\n".join((PRELUDE, device_code("gsparse.kernels", "block_scatter.cu"), "\n\n".join(entries), ""))


PROGRAMS = {(dtype, index): PreparedLaunches(functools.partial(source, dtype, index), CONTEXT, BLOCK)
            for dtype in DTYPES for index in INDEX_TYPES}


def _spread(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> Optional[bool]:
    """Whether an operand of feature shape ``shape`` is spread over the last dimension of
    ``out_shape`` (False: it has that shape; None: neither, which the kernel cannot read)."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    if shape == out_shape:
        return False
    if out_shape and shape[:-1] == out_shape[:-1] and shape[-1] == 1:
        return True
    return None


def takes(g: Graph, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor],
          out_shape: tuple[int, ...]) -> bool:
    """Whether the sum of ``op`` messages on ``g``'s reverse graph (``lhs`` on ``g``'s
    destinations, ``rhs`` on its edges) runs here: see the module docstring."""
    if not (g.sync_free and op in OPS and not g.reverse_built
            and backends.for_device(g.device) is cuda.BACKEND
            and not torch.are_deterministic_algorithms_enabled()):
        return False
    operands = [t for t in (lhs, rhs) if t is not None]
    features = math.prod(out_shape)
    return (all(t.dtype in DTYPES and t.dtype == operands[0].dtype for t in operands)
            and features < 2**31
            and g.num_src * features * operands[0].itemsize <= MAX_OUTPUT_IN_L2 * Target.of(g.device).l2_bytes
            and all(_spread(tuple(t.shape[1:]), out_shape) is not None for t in operands))


def scatter(g: Graph, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor],
            out_shape: tuple[int, ...], lhs_over_degree: bool = False) -> Tensor:
    """``[g.num_src, *out_shape]``: the sum over each source's edges of ``lhs[dst] op
    rhs[e]``, for a call :func:`takes` accepts; with ``lhs_over_degree`` (``copy_lhs``
    only), of ``lhs[dst] / deg(dst)``, a mean's gradient (``deg`` at least 1)."""
    if lhs_over_degree and op != "copy_lhs":
        raise ValueError(f"lhs_over_degree takes op copy_lhs, got {op!r}")
    operand = lhs if lhs is not None else rhs
    out = torch.zeros((g.num_src, *out_shape), dtype=operand.dtype, device=g.device)
    features = math.prod(out_shape)
    if g.num_edges == 0 or features == 0:
        return out
    width = out_shape[-1] if out_shape else 1
    operands = [None if t is None else (t.contiguous(), bool(_spread(tuple(t.shape[1:]), out_shape)))
                for t in (lhs, rhs)]
    # a vector never straddles two heads (width); the output is fresh, so aligned
    rows = [misalignment(t) for t, spread in filter(None, operands) if not spread]
    vector = min(vector_limit(width, rows, operand.dtype), vector_widths(operand.dtype)[0])
    vectors = features // vector
    lanes_log2 = min(5, (vectors - 1).bit_length())
    blocks = min(-(-(g.num_edges << lanes_log2) // BLOCK), MAX_BLOCKS)
    (lhs, lhs_spread), (rhs, rhs_spread) = [(None, False) if o is None else o for o in operands]
    kernel_op = "copy_lhs_over_degree" if lhs_over_degree else op
    signature = _signature(kernel_op, operand.dtype, g.index_dtype, vector)
    PROGRAMS[operand.dtype, g.index_dtype](signature, g.device.index)(
        g.col, g.csr_dst, g.eid, lhs, rhs, g.rowptr if lhs_over_degree else None, g.num_edges,
        features // width, width, int(lhs_spread), int(rhs_spread), out, lanes_log2, grid=blocks)
    return out
