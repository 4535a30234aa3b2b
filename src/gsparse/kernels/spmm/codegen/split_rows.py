"""The split-rows g-SpMM skeleton: the one-pass walk over a work list in which rows longer
than ``row_split`` edges are cut into chunks, and the merge of each split row's chunks
(see :class:`~gsparse.kernels.spmm.schedule.SplitRows`)."""

from __future__ import annotations

from ...source import Program, Signature, indent
from ..schedule import SplitRows
from ..task import SpmmAlgorithm
from .walk import group_walk, merge_kernel, merge_signature, partial_write_back, two_pass_header, write_back

KERNEL = "gspmm_split"
MERGE = "gspmm_split_merge"

FIRST_PASS = Signature(KERNEL, [
    ("const I* __restrict__", "rowptr"), ("const I* __restrict__", "col"),
    ("const I* __restrict__", "eid"), ("const I* __restrict__", "work_row"),
    ("const I* __restrict__", "work_start"),
    ("const T* __restrict__", "lhs"), ("const T* __restrict__", "rhs"),
    ("const int* __restrict__", "lhs_offset"), ("const int* __restrict__", "rhs_offset"),
    ("T* __restrict__", "out"), ("long long* __restrict__", "arg_u"),
    ("long long* __restrict__", "arg_e"), ("A* __restrict__", "partial"),
    ("long long* __restrict__", "partial_arg"),
    ("long long", "num_items"), ("long long", "num_chunks"), ("int", "num_features"),
    ("long long", "lhs_len"), ("long long", "rhs_len"),
])
MERGE_PASS = merge_signature(MERGE, [
    ("const I* __restrict__", "split_row"), ("const I* __restrict__", "split_first"),
    ("long long", "num_split"), ("int", "num_features"),
])


def generate(algorithm: SpmmAlgorithm, schedule: SplitRows) -> Program:
    """The program of ``gspmm_split`` and its merge ``gspmm_split_merge``.

    Group ``slot`` walks item ``slot`` of the graph's work list, as the one-pass kernel
    walks a row: the edges from ``work_start[slot]`` to the end of row ``work_row[slot]``,
    at most ``row_split`` of them. The first ``num_chunks`` items are the chunks of the rows
    longer than that, in (row, chunk) order; each leaves its unfinished result as partial
    result ``slot``, and the merge folds every split row's chunks in order into its
    output. The other items are whole rows, written directly.
    """
    locate = [
        f"constexpr long long SPLIT = {schedule.row_split};  // most edges per work item",
        "if (slot >= num_items) return;  // whole groups leave together",
        "const long long row = work_row[slot];",
        "const long long start = work_start[slot];",
        "// A chunk ends SPLIT edges on, or at its row's end; a whole row is never longer.",
        "const long long end = min(start + SPLIT, (long long)rowptr[row + 1]);",
    ]
    body = [
        *group_walk(algorithm, schedule, locate),
        "if (slot < num_chunks) {  // a chunk of a split row: the merge writes the output",
        indent(partial_write_back(algorithm, "slot"), 4),
        "} else {",
        indent(write_back(algorithm), 4),
        "}",
    ]
    merge = merge_kernel(algorithm, MERGE_PASS, [
        "if (t >= num_split * num_features) return;",
        "const long long r = t / num_features;  // the r-th split row",
        "const long long row = split_row[r], i = row * num_features + t % num_features;",
        "// One partial result per chunk of the row, num_features apart.",
        "const long long first = split_first[r], last = split_first[r + 1];",
        "const long long base = t % num_features, stride = num_features;",
    ])
    source = f"""{two_pass_header("split rows", algorithm, schedule)}
{FIRST_PASS.declaration(bounds=(schedule.threads,))}
{{
{indent(chr(10).join(body), 4)}
}}

{merge}"""
    return Program(source, {KERNEL: FIRST_PASS, MERGE: MERGE_PASS},
                   f"{algorithm} | schedule {schedule}")
