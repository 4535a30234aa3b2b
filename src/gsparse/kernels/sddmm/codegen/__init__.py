"""g-SDDMM code generation: (algorithm, schedule) -> a :class:`~gsparse.kernels.source.Program`.

Pure; no GPU needed. Every program has the one kernel ``gsddmm`` with the same parameters
(:data:`SIGNATURE`): unused pointers are null, ``*_len`` are the operands' elements per
row, and every skeleton covers features ``d_begin .. d_end - 1`` of each head (all of them
unless ``features_per_launch`` slices the launches) and, for ``dot`` with ``accumulate``,
adds to ``out`` instead of overwriting it.
"""

from __future__ import annotations

import functools

import torch

from ...source import ACCUMULATOR_TYPES, INDEX_TYPES, PRELUDE, SCALAR_TYPES, Program, Signature, indent
from ..schedule import Edge, EdgeTransposed, Row, RowTransposed, SddmmSchedule
from ..task import SddmmAlgorithm
from .edge import edge_body
from .row import row_body
from .transposed import transposed_body

__all__ = ["KERNEL", "program", "signature"]

KERNEL = "gsddmm"


def signature(algorithm: SddmmAlgorithm) -> Signature:
    """The parameters of ``gsddmm`` for ``algorithm``'s dtypes."""
    scalar = SCALAR_TYPES[algorithm.dtype]
    return Signature(KERNEL, [
        ("const I* __restrict__", "rowptr"), ("const I* __restrict__", "col"),
        ("const I* __restrict__", "dst"), ("const I* __restrict__", "eid"),
        (f"const {scalar}* __restrict__", "lhs"), (f"const {scalar}* __restrict__", "rhs"),
        ("const int* __restrict__", "lhs_offset"), ("const int* __restrict__", "rhs_offset"),
        (f"{scalar}* __restrict__", "out"),
        ("long long", "num_rows"), ("long long", "num_edges"), ("int", "num_heads"),
        ("int", "head_len"), ("long long", "lhs_len"), ("long long", "rhs_len"),
        ("int", "d_begin"), ("int", "d_end"), ("int", "accumulate"),
    ])


def _min_blocks(algorithm: SddmmAlgorithm, schedule: SddmmSchedule) -> int:
    """Blocks per SM the register allocation must allow.

    Given only the block size, ptxas aims at full occupancy (32 registers per thread) and
    spills to get there. The gathers need registers for loads in flight more than they
    need the last warps: the budget is 64 registers per thread (half occupancy), and 128
    where each lane holds twice as much, in fp64 or with ``v``'s features cached (row
    skeletons; ``row_transposed`` also holds a batch of partial sums).
    """
    heavy = algorithm.dtype == torch.float64 or not isinstance(schedule, Edge)
    return max(1, (512 if heavy else 1024) // schedule.threads)


@functools.lru_cache(maxsize=4096)
def program(algorithm: SddmmAlgorithm, schedule: SddmmSchedule) -> Program:
    """The program that runs ``algorithm`` under ``schedule`` (validated first)."""
    schedule.validate()
    body = [
        f"using T = {SCALAR_TYPES[algorithm.dtype]};",
        f"using A = {ACCUMULATOR_TYPES[algorithm.dtype]};",
        f"constexpr int LANES = {schedule.lanes};  // threads per edge",
        f"constexpr int V = {schedule.vector_width};  // features per vector access",
        f"constexpr int K = {schedule.features_per_thread};  // vectors per lane and pass",
        "constexpr int SLICE = LANES * V * K;  // features per group and pass",
        f"constexpr int GROUPS = {schedule.groups_per_block};",
        "const int lane = threadIdx.x % LANES;",
        "// The lanes of this thread's group: shuffles must name exactly them.",
        "const unsigned mask = LANES == 32 ? 0xffffffffu\n"
        "                                  : ((1u << LANES) - 1u) << ((threadIdx.x % 32) / LANES * LANES);",
        "(void)mask; (void)SLICE;",
    ]
    if isinstance(schedule, Edge):
        body += edge_body(algorithm)
    elif isinstance(schedule, Row):
        body += row_body(algorithm)
    elif isinstance(schedule, RowTransposed):
        if not algorithm.is_dot:
            raise ValueError(f"schedule {schedule} transposes a dot's reduction; {algorithm.op} "
                             f"has none (use a Row schedule)")
        body += transposed_body(algorithm, schedule.edges_per_batch, by_edge=False)
    elif isinstance(schedule, EdgeTransposed):
        body += transposed_body(algorithm, schedule.edges_per_batch, by_edge=True)
    else:
        raise TypeError(f"schedule must be a g-SDDMM schedule, got {type(schedule).__name__}")
    kernel = signature(algorithm)
    source = f"""// gsparse g-SDDMM: {algorithm}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {INDEX_TYPES[algorithm.index_dtype]};

{kernel.declaration(bounds=(schedule.threads, _min_blocks(algorithm, schedule)))}
{{
{indent(chr(10).join(body), 4)}
}}
"""
    return Program(source, {KERNEL: kernel}, f"{algorithm} | schedule {schedule}")
