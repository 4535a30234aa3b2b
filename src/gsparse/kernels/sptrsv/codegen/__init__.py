"""SpTRSV code generation: (algorithm, code variant) -> a :class:`~gsparse.kernels.source.Program`.

Pure: no GPU needed. The solve is fixed device code (``solve.cuh``) written against a
handful of compile-time constants; the generator prints those constants (types, the
number of right-hand sides, the code variant's knobs) and the kernel's signature, and the
code's ``if constexpr`` branches keep only the variant's paths. A scheme's transform and
scheduling knobs (merge, grouping, warp schedule, ``alpha_level``) do not change the code,
only the plan's arrays: :class:`CodeVariant` is the part of a
:class:`~..schedule.SptrsvSchedule` the source depends on, so the 1,680 schemes of the
reduced space share a dozen programs per algorithm.

How ``k`` right-hand sides map onto threads (``x`` and ``b`` are ``[n, k]`` row-major):

- a row shared by a subwarp of ``W`` lanes: ``CL = min(W, pow2 >= k)`` column lanes read
  consecutive right-hand sides of each dependency (coalesced), and the ``W / CL`` entry
  lanes split the row's entries, merged by shuffles; each lane keeps ``CPL`` columns (at
  most 4 in float32, 2 in float64) and wider ``k`` takes several passes over the row; a
  row of at least ``LONG_ROW`` entries takes fewer column lanes, ``LCL``, each keeping
  ``LCPL`` columns (as many as a row per thread keeps), so that more entry lanes walk it;
- a row per thread: the thread walks the row once per ``KC`` columns (at most 8 in
  float32, 4 in float64).

For ``k = 1`` this is the paper's collaborative (warp/subwarp per row) and per-thread row
processing.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ...operands import pow2_at_least
from ...source import ACCUMULATOR_TYPES, INDEX_TYPES, PRELUDE, SCALAR_TYPES, Program, Signature, device_code
from ..schedule import NaturalOrderSchedule, SptrsvSchedule
from ..task import SptrsvAlgorithm

__all__ = ["KERNEL", "NATURAL_KERNEL", "LEVELS_KERNEL", "LEVELS_WARPS", "STAGE_MIN", "SENTINEL", "CodeVariant",
           "generate", "program", "signature", "natural_program", "levels_program", "one_block_shared_bytes",
           "shared_row_layout", "shared_row_batches"]

KERNEL = "sptrsv"
NATURAL_KERNEL = "sptrsv_natural"
LEVELS_KERNEL = "sptrsv_levels"
# Warps per block of the levels kernel: its window of rows in flight (32 a warp) must span
# many grid lines of a mesh, as the fast start's own (see natural_schedule).
LEVELS_WARPS = 32
# A node group's entries are staged in shared memory only if there are at least this many:
# one per lane of the warp, below which a coalesced read has nothing to coalesce.
STAGE_MIN = 32
# Bytes of accumulators a lane keeps per pass, over a shared row and over a row of its own
# (4 and 8 float32 columns, 2 and 4 float64): what fits in the 64 registers of a 1,024-thread
# block with the rest of the kernel, without spilling.
_SHARED_COLUMN_BYTES = 16
_THREAD_COLUMN_BYTES = 32
# Subwarp widths of entries from which a shared row takes the long rows' lanes (LCL column
# lanes): below it the extra shuffles of fewer column lanes outweigh the shorter walk.
_LONG_ROW_WIDTHS = 2
# Values of x a lane loads before it checks any, with int32 and int64 indices: what the 64
# registers of a 1,024-thread block hold next to the rest without spilling (with int64
# indices, which only factors past 2^31 entries need, there is no room to batch).
_READ_BATCH = {torch.int32: 4, torch.int64: 1}
_WARP = 32
# The bits of an unsolved entry of x under ready_by_value, per dtype: a signalling NaN with a
# payload (arithmetic only ever produces quiet NaNs); a result with these bits is stored as
# the quiet NaN instead, so a solved row can never look unsolved.
SENTINEL = {torch.float64: 0x7FF4_DEAD_BEEF_CAFE, torch.float32: 0x7FA0_BEEF}
QUIET_NAN = {torch.float64: 0x7FF8_0000_0000_0000, torch.float32: 0x7FC0_0000}


@dataclass(frozen=True)
class CodeVariant:
    """The knobs of a scheme that change the generated code.

    Attributes:
        warps_per_block: ``nw``; the block has ``32 nw`` threads.
        subwarps: ``ng``; a subwarp has ``32 / ng`` lanes.
        shared_rows, per_thread_rows: which row-processing paths exist (``sw_rnnz`` = 0:
            only shared rows; ∞: only rows per thread; otherwise both, chosen per row group
            by the plan).
        stage: the collaborative read (needs the row groups' rows to be consecutive CSR
            rows, so never with ``reorder``).
        eliminate: sync elimination (rows write flags only where the plan says so).
        early_division: the diagonal's reciprocal is taken before the waits.
        ready_by_value: rows signal readiness by their values (``x`` starts as
            :data:`SENTINEL`), not by flags.
        reorder: rows are solved in a stored order rather than by index.
        x_in_shared: ``x`` also lives in the block's shared memory, where rows poll their
            dependencies (the fast start in one block,
            :attr:`~..schedule.NaturalOrderSchedule.one_block`; with ``ready_by_value``).
    """

    warps_per_block: int
    subwarps: int
    shared_rows: bool
    per_thread_rows: bool
    stage: bool
    eliminate: bool
    early_division: bool
    ready_by_value: bool
    reorder: bool
    x_in_shared: bool = False

    @classmethod
    def of(cls, schedule: SptrsvSchedule) -> CodeVariant:
        return cls(
            warps_per_block=schedule.warps_per_block,
            subwarps=schedule.subwarps,
            shared_rows=schedule.sw_rnnz != math.inf,
            per_thread_rows=schedule.sw_rnnz != 0,
            stage=schedule.collaborative_read and not schedule.reorder,
            eliminate=schedule.sync_elimination,
            early_division=schedule.early_division,
            ready_by_value=schedule.ready_by_value,
            reorder=schedule.reorder,
        )

    @property
    def threads(self) -> int:
        return _WARP * self.warps_per_block

    @property
    def subwarp_width(self) -> int:
        return _WARP // self.subwarps


def signature(algorithm: SptrsvAlgorithm) -> Signature:
    """``sptrsv(...)``: the system's CSR, the plan's arrays (null where the variant reads
    none), the right-hand sides and solution, the ready flags and this solve's epoch, this
    launch's partition, ``n`` and the shared-memory buffer's entries per warp."""
    scalar = SCALAR_TYPES[algorithm.dtype]
    index = "const I* __restrict__"
    return Signature(KERNEL, [
        (index, "crow"), (index, "col"), (f"const {scalar}* __restrict__", "val"),
        (index, "order"), (index, "position"),
        (index, "seg_warp"), (index, "seg_start"), (index, "node_ptr"), (index, "slot_group"),
        (index, "group_start"), ("const unsigned char* __restrict__", "group_per_thread"),
        ("const unsigned char* __restrict__", "row_flag"),
        (f"const {scalar}* __restrict__", "b"), (f"{scalar}*", "x"),
        ("unsigned*", "flags"), ("const unsigned* __restrict__", "epoch"), (index, "part"),
        (INDEX_TYPES[algorithm.index_dtype], "n"), ("int", "stage_capacity"),
    ])


def shared_row_layout(algorithm: SptrsvAlgorithm, width: int) -> tuple[int, int]:
    """``(column lanes, columns per lane per pass)`` of a row that ``width`` lanes share
    (``solve.cuh``'s CL and CPL): a lane per right-hand side up to the width, each lane
    keeping up to 16 bytes of columns; the other ``width / column lanes`` lanes split the
    row's entries."""
    column_lanes = min(width, pow2_at_least(algorithm.num_rhs))
    return column_lanes, min(_SHARED_COLUMN_BYTES // algorithm.dtype.itemsize, -(-algorithm.num_rhs // column_lanes))


def shared_row_batches(algorithm: SptrsvAlgorithm, width: int, entries: float) -> int:
    """Batches of loads of ``x`` (:data:`_READ_BATCH` values a batch, checked together) a
    lane issues for a shared row of ``entries`` off-diagonal entries, over every pass of
    the row's right-hand sides: the round trips of the row's critical path."""
    column_lanes, columns = shared_row_layout(algorithm, width)
    passes = -(-algorithm.num_rhs // (column_lanes * columns))
    per_batch = max(_READ_BATCH[algorithm.index_dtype] // columns, 1)  # solve.cuh's tile_entries
    entries_per_lane = math.ceil(entries / (width // column_lanes))
    return passes * max(math.ceil(entries_per_lane / per_batch), 1)


def _constants(algorithm: SptrsvAlgorithm, variant: CodeVariant) -> str:
    k = algorithm.num_rhs
    bits = "unsigned long long" if algorithm.dtype.itemsize == 8 else "unsigned"
    width = variant.subwarp_width
    column_lanes, shared_columns = shared_row_layout(algorithm, width)
    size = algorithm.dtype.itemsize
    thread_columns = min(_THREAD_COLUMN_BYTES // size, k)
    long_lanes = min(width, pow2_at_least(-(-k // thread_columns)))
    long_columns = min(thread_columns, -(-k // long_lanes))
    long_row = _LONG_ROW_WIDTHS * width if long_lanes < column_lanes else 0
    flags = (("LOWER", algorithm.lower, "the system is lower triangular (else upper)"),
             ("UNIT", algorithm.unit_diagonal, "the diagonal is ones; stored ones are skipped"),
             ("SHARED_ROWS", variant.shared_rows, "row groups whose rows a subwarp shares"),
             ("PER_THREAD_ROWS", variant.per_thread_rows, "row groups solved a row per thread"),
             ("STAGE", variant.stage, "collaborative read into shared memory"),
             ("ELIMINATE", variant.eliminate, "sync elimination: flags only where the plan says"),
             ("EARLY_DIVISION", variant.early_division, "reciprocal of the diagonal before the waits"),
             ("READY_BY_VALUE", variant.ready_by_value, "x is the ready signal (starts as SENTINEL)"),
             ("REORDER", variant.reorder, "positions map to rows through `order`"),
             ("X_IN_SHARED", variant.x_in_shared, "x polled in the block's shared memory (one block)"))
    lines = [
        f"using T = {SCALAR_TYPES[algorithm.dtype]};",
        f"using A = {ACCUMULATOR_TYPES[algorithm.dtype]};",
        f"using I = {INDEX_TYPES[algorithm.index_dtype]};",
        f"constexpr int NW = {variant.warps_per_block};  // warps per block",
        f"constexpr int W = {width};  // lanes per subwarp",
        f"constexpr int K = {k};  // right-hand sides",
        f"constexpr int CL = {column_lanes};  // column lanes of a shared row",
        f"constexpr int CPL = {shared_columns};  // columns per lane per pass over a shared row",
        f"constexpr int KC = {thread_columns};  // columns per pass over a row of one thread",
        f"constexpr int LONG_ROW = {long_row};  // entries from which a shared row is long (0: never)",
        f"constexpr int LCL = {long_lanes};  // column lanes of a long shared row",
        f"constexpr int LCPL = {long_columns};  // columns per lane per pass over a long shared row",
        f"constexpr int READ_BATCH = {_READ_BATCH[algorithm.index_dtype]};  // values of x loaded before any is checked",
        f"constexpr int STAGE_MIN = {STAGE_MIN};  // fewest entries worth a collaborative read",
        f"constexpr {bits} SENTINEL = {SENTINEL[algorithm.dtype]:#x}u;  // x not yet solved (a signalling NaN)",
        f"constexpr {bits} QUIET_NAN = {QUIET_NAN[algorithm.dtype]:#x}u;  // written instead of SENTINEL",
        *(f"constexpr bool {name} = {'true' if on else 'false'};  // {why}" for name, on, why in flags),
    ]
    return "\n".join(lines)


def generate(algorithm: SptrsvAlgorithm, variant: CodeVariant) -> Program:
    """The program of the kernel ``sptrsv`` for ``algorithm`` under ``variant``."""
    kernel = signature(algorithm)
    source = f"""// gsparse SpTRSV (AG-SpTRSV): {algorithm}
// code variant: {variant}
{PRELUDE}
namespace cfg {{
{_constants(algorithm, variant)}
}}  // namespace cfg
using cfg::A;
using cfg::I;
using cfg::T;

{device_code(__package__, "solve.cuh")}
{kernel.declaration(bounds=(variant.threads, 1))}
{{
    const gs::sptrsv::System sys{{crow, col, val, order, position, row_flag, b, x, flags, *epoch, n}};
    gs::sptrsv::run(sys, seg_warp, seg_start, node_ptr, slot_group, group_start, group_per_thread, part,
                    stage_capacity);
}}
"""
    return Program(source, {KERNEL: kernel}, f"sptrsv {algorithm} | {variant}")


def program(algorithm: SptrsvAlgorithm, schedule: SptrsvSchedule) -> Program:
    """The program that runs ``algorithm`` under ``schedule`` (validated first), generated
    once per algorithm and code variant."""
    schedule.validate()
    return _program(algorithm, CodeVariant.of(schedule))


@functools.lru_cache(maxsize=512)
def _program(algorithm: SptrsvAlgorithm, variant: CodeVariant) -> Program:
    return generate(algorithm, variant)


def natural_variant(schedule: NaturalOrderSchedule) -> CodeVariant:
    """The code variant of ``solve.cuh`` that the fast start's kernel runs: the scheme's
    subwarps, a row per lane or shared rows, values as signals (in one block, polled in its
    shared memory), no staging or flags (neither exists without a plan), positions mapped
    to rows through ``order`` in level order."""
    return CodeVariant(warps_per_block=schedule.warps_per_block, subwarps=schedule.subwarps,
                       shared_rows=not schedule.rows_per_thread, per_thread_rows=schedule.rows_per_thread,
                       stage=False, eliminate=False, early_division=True, ready_by_value=True,
                       reorder=schedule.level_order, x_in_shared=schedule.one_block)


def natural_signature(algorithm: SptrsvAlgorithm) -> Signature:
    """``sptrsv_natural(crow, col, val, order, position, b, x, ticket, next_x, n)``: the
    system's CSR, the positions' rows and the rows' positions (level order; null in natural
    order), the right-hand sides and solution (``x`` filled with the sentinel, except in one
    block, which sets its shared copy), the ticket counter (two zeros, which the kernel leaves
    zero; one block keeps its own in shared memory), and the next solve's ``x``, which the
    kernel fills with the sentinel (null: none; one block never reads it)."""
    scalar = SCALAR_TYPES[algorithm.dtype]
    index = "const I* __restrict__"
    return Signature(NATURAL_KERNEL, [
        (index, "crow"), (index, "col"), (f"const {scalar}* __restrict__", "val"),
        (index, "order"), (index, "position"),
        (f"const {scalar}* __restrict__", "b"), (f"{scalar}*", "x"),
        ("unsigned long long*", "ticket"), (f"{scalar}*", "next_x"), (INDEX_TYPES[algorithm.index_dtype], "n"),
    ])


@functools.lru_cache(maxsize=64)
def natural_program(algorithm: SptrsvAlgorithm, schedule: NaturalOrderSchedule) -> Program:
    """The program of the kernel ``sptrsv_natural`` for ``algorithm`` under ``schedule``
    (validated first): ``solve.cuh``'s row paths driven by tickets (``tickets.cuh``,
    ``natural.cuh``). In one block the kernel takes :func:`one_block_shared_bytes` of
    dynamic shared memory."""
    schedule.validate()
    variant = natural_variant(schedule)
    kernel = natural_signature(algorithm)
    if schedule.one_block:
        body = ("    extern __shared__ __align__(16) unsigned char block_shared[];\n"
                "    gs::sptrsv::System sys{crow, col, val, order, position, nullptr, b, x, nullptr, 0u, n};\n"
                "    gs::sptrsv::run_natural_one_block(sys, block_shared);")
    else:
        body = ("    const gs::sptrsv::System sys{crow, col, val, order, position, nullptr, b, x, nullptr, 0u, n};\n"
                "    gs::sptrsv::run_natural(sys, ticket, next_x);")
    source = f"""// gsparse SpTRSV, natural order (fast start): {algorithm}
// scheme: {schedule.to_json()}
{PRELUDE}
namespace cfg {{
{_constants(algorithm, variant)}
constexpr int ROWS = {schedule.rows_per_ticket};  // positions per ticket
}}  // namespace cfg
using cfg::A;
using cfg::I;
using cfg::T;

{device_code(__package__, "solve.cuh")}
{device_code(__package__, "tickets.cuh")}
{device_code(__package__, "natural.cuh")}
{kernel.declaration(bounds=(variant.threads, 1))}
{{
{body}
}}
"""
    return Program(source, {NATURAL_KERNEL: kernel}, f"sptrsv natural {algorithm} | {schedule}")


def one_block_shared_bytes(algorithm: SptrsvAlgorithm, rows: int) -> int:
    """Dynamic shared memory of the fast start in one block on a system of ``rows`` rows: the
    ticket counter's two 8-byte words, then ``x`` (``[rows, k]``; ``natural.cuh``)."""
    return 16 + -(-rows * algorithm.num_rhs * algorithm.dtype.itemsize // 16) * 16


@functools.lru_cache(maxsize=8)
def levels_program(index_dtype: torch.dtype, lower: bool) -> Program:
    """The program of the kernel ``sptrsv_levels(crow, col, level, ticket, n)``: each row's
    level (``level`` ``[n]`` int32 filled with -1; the ticket counter two zeros, left zero)
    for a lower (else upper) system (``levels.cuh``, over ``tickets.cuh``)."""
    index = "const I* __restrict__"
    kernel = Signature(LEVELS_KERNEL, [
        (index, "crow"), (index, "col"), ("int*", "level"), ("unsigned long long*", "ticket"),
        (INDEX_TYPES[index_dtype], "n"),
    ])
    source = f"""// gsparse SpTRSV, the levels of a {'lower' if lower else 'upper'} system for the fast start
{PRELUDE}
namespace cfg {{
using I = {INDEX_TYPES[index_dtype]};
constexpr int NW = {LEVELS_WARPS};  // warps per block
constexpr bool LOWER = {'true' if lower else 'false'};  // the system is lower triangular (else upper)
}}  // namespace cfg
using cfg::I;
using namespace cfg;

{device_code(__package__, "tickets.cuh")}
{device_code(__package__, "levels.cuh")}
{kernel.declaration(bounds=(LEVELS_WARPS * _WARP, 1))}
{{
    gs::sptrsv::run_levels(crow, col, level, ticket, n);
}}
"""
    return Program(source, {LEVELS_KERNEL: kernel}, f"sptrsv levels {'lower' if lower else 'upper'} {index_dtype}")
