"""Tasks, algorithms, operands and checks the g-SDDMM tests share."""

from __future__ import annotations

import itertools

import torch

import gsparse
from gsparse.algebra import BINARY_OPS, SDDMM_OPS, TARGETS
from gsparse.kernels import sddmm as sddmm_kernels
from gsparse.kernels.operands import VECTOR_BYTES, Layout
from gsparse.kernels.sddmm import SddmmAlgorithm, SddmmTask
from gsparse.target import H100
from gsparse.testing.reference import gsddmm_ref

from graphs import random_features
from kernels.support import TOLERANCE, sample

FEATURE_LENGTHS = (1, 2, 3, 4, 8, 16, 32, 64, 100, 128, 256, 512)

# (lhs feature shape, rhs feature shape): full/full, full/scalar, broadcast both ways.
SHAPES = {
    "full": ((3, 8), (3, 8)),
    "scalar": ((3, 8), (1, 1)),
    "indexed": ((1, 8), (3, 1)),
}
DOT_SHAPES = {  # the last dimension is reduced
    "full": ((3, 8), (3, 8)),
    "scalar": ((1, 1), (3, 1)),
    "indexed": ((1, 8), (3, 8)),
}


def task(op: str = "dot", head_len: int = 8, dtype: torch.dtype = torch.float32, *,
         num_heads: int = 1, lhs_target: str = "u", rhs_target: str = "v",
         index_dtype: torch.dtype = torch.int32, has_eid: bool = False,
         vector_ok: int | None = None) -> SddmmTask:
    """A task on full-shape operands: ``num_heads`` heads of ``head_len`` features for
    ``dot``, ``head_len`` features for element-wise operators. ``vector_ok`` defaults to
    16 bytes' worth (freshly allocated, aligned operands)."""
    binop = BINARY_OPS[op]
    dot = binop.reduces_last_dim
    shape = (num_heads, head_len) if num_heads > 1 else (head_len,)
    if vector_ok is None:
        vector_ok = max(w for w in (1, 2, 4, 8)
                        if w * dtype.itemsize <= VECTOR_BYTES and head_len % w == 0)
    return SddmmTask(
        op=op, lhs_target=lhs_target if binop.uses_lhs else None,
        rhs_target=rhs_target if binop.uses_rhs else None,
        lhs_shape=shape if binop.uses_lhs else None, rhs_shape=shape if binop.uses_rhs else None,
        full_shape=shape, num_heads=num_heads if dot else 1, dtype=dtype, index_dtype=index_dtype,
        has_eid=has_eid, vector_ok=vector_ok)


def space(g: gsparse.Graph, head_len: int, dtype: torch.dtype = torch.float32, op: str = "dot") -> list:
    """The candidates of :func:`task` on ``g`` on an H100, as a list."""
    return list(sddmm_kernels.schedule_space(task(op, head_len, dtype), g.stats, H100))


def algorithms(seed: int, k: int) -> list[SddmmAlgorithm]:
    """``k`` algorithms sampled from every op, target pair, layout, dtype, index type and eid."""
    layouts = [Layout.FULL, Layout.SCALAR, Layout.INDEXED]
    every = []
    for op in SDDMM_OPS:
        binop = BINARY_OPS[op]
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            for index_dtype in (torch.int32, torch.int64):
                for lt, rt, has_eid in itertools.product(TARGETS, TARGETS, (False, True)):
                    for ll in layouts if binop.uses_lhs else [None]:
                        for rl in layouts if binop.uses_rhs else [None]:
                            every.append(SddmmAlgorithm(
                                op, lt if binop.uses_lhs else None, rt if binop.uses_rhs else None,
                                ll, rl, dtype, index_dtype, has_eid))
    return sample(list(dict.fromkeys(every)), k, seed)


# --- GPU checks ---------------------------------------------------------------------------

_ROWS = {"u": lambda g: g.num_src, "v": lambda g: g.num_dst, "e": lambda g: g.num_edges}


def operands(g, op, lhs_target, rhs_target, lhs_shape, rhs_shape, dtype, seed):
    """Random ``lhs`` and ``rhs`` on the CPU, rows on their targets (None where the op
    reads none); divisors away from zero."""
    binop = BINARY_OPS[op]
    lhs = (random_features((_ROWS[lhs_target](g), *lhs_shape), dtype, seed)
           if binop.uses_lhs else None)
    rhs = (random_features((_ROWS[rhs_target](g), *rhs_shape), dtype, seed + 1,
                           away_from_zero=op == "div")
           if binop.uses_rhs else None)
    return lhs, rhs


def operand_task(g, op, lhs, rhs, lhs_target, rhs_target) -> SddmmTask:
    """The task the front end builds for a call on these operands (of the output's rank)."""
    shapes = [tuple(t.shape[1:]) for t in (lhs, rhs) if t is not None]
    out_shape = tuple(torch.broadcast_shapes(*shapes))
    if BINARY_OPS[op].reduces_last_dim:
        out_shape = (*out_shape[:-1], 1)
    return sddmm_kernels.task_for(g, op, lhs, rhs, lhs_target, rhs_target, out_shape)


def check(poisoned, g, op, lhs, rhs, lhs_target, rhs_target, schedule=None, *,
          expected=None) -> None:
    """The front end on the GPU (under ``schedule``) against the float64 reference; the
    output must come from the generated kernels (one poisoned allocation)."""
    launched = len(poisoned)
    out = gsparse.gsddmm(g.to("cuda"), op,
                         None if lhs is None else lhs.cuda(), None if rhs is None else rhs.cuda(),
                         lhs_target, rhs_target, schedule=schedule)
    assert len(poisoned) == launched + 1, "the CUDA backend did not run gsparse.kernels.sddmm"
    if expected is None:
        expected = gsddmm_ref(g, op, lhs, rhs, lhs_target, rhs_target)
    dtype = (lhs if lhs is not None else rhs).dtype
    torch.testing.assert_close(
        out.cpu().double(), expected.to(dtype).double(), **TOLERANCE[dtype],
        msg=lambda m: f"{lhs_target}_{op}_{rhs_target} {schedule}: {m}")
