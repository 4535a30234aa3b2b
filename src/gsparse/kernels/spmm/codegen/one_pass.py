"""The one-pass g-SpMM skeleton: a group of threads per row walks the whole row and
writes its result (see :class:`~gsparse.kernels.spmm.schedule.OnePass`)."""

from __future__ import annotations

from ...source import ACCUMULATOR_TYPES, INDEX_TYPES, PRELUDE, SCALAR_TYPES, Program, Signature, indent
from ..schedule import OnePass
from ..task import SpmmAlgorithm
from .walk import group_walk, write_back

KERNEL = "gspmm"


def signature(algorithm: SpmmAlgorithm) -> Signature:
    """The kernel's parameters. Unused pointers are null; offsets into feature arrays are
    64-bit: ``num_edges * num_features`` passes 2**31 on the graphs we serve."""
    scalar = SCALAR_TYPES[algorithm.dtype]
    return Signature(KERNEL, [
        ("const I* __restrict__", "rowptr"), ("const I* __restrict__", "col"),
        ("const I* __restrict__", "eid"), ("const I* __restrict__", "row_order"),
        (f"const {scalar}* __restrict__", "lhs"), (f"const {scalar}* __restrict__", "rhs"),
        ("const int* __restrict__", "lhs_offset"), ("const int* __restrict__", "rhs_offset"),
        (f"{scalar}* __restrict__", "out"),
        ("long long* __restrict__", "arg_u"), ("long long* __restrict__", "arg_e"),
        ("long long", "num_rows"), ("int", "num_features"), ("long long", "lhs_len"),
        ("long long", "rhs_len"),
    ])


def generate(algorithm: SpmmAlgorithm, schedule: OnePass) -> Program:
    """The program of the kernel ``gspmm`` for ``algorithm`` under ``schedule``."""
    row = "(long long)row_order[slot]" if schedule.degree_sorted else "slot"
    locate = [
        "if (slot >= num_rows) return;  // whole groups leave together",
        f"const long long row = {row};",
        "const long long start = rowptr[row];",
        "const long long end = rowptr[row + 1];",
    ]
    body = [
        f"using T = {SCALAR_TYPES[algorithm.dtype]};",
        f"using A = {ACCUMULATOR_TYPES[algorithm.dtype]};",
        *group_walk(algorithm, schedule, locate),
        write_back(algorithm),
    ]
    kernel = signature(algorithm)
    source = f"""// gsparse g-SpMM: {algorithm}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {INDEX_TYPES[algorithm.index_dtype]};

{kernel.declaration(bounds=(schedule.threads,))}
{{
{indent(chr(10).join(body), 4)}
}}
"""
    return Program(source, {KERNEL: kernel}, f"{algorithm} | schedule {schedule}")
