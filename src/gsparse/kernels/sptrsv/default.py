"""The SpTRSV hand rule: a scheme from the matrix features, the task and the target, with no
measurement; and the analysed default (:func:`analysed_schedule`), which asks the MLP
selector (:mod:`.selector`) first where one is trained and answers, the hand rule
otherwise. The rule's schemes lie in the reduced space (:func:`.space.reduced_space`) but
for ``ready_by_value``, which is on (valid for every task: float32 and float64 have a
sentinel), so its choices can be compared with the tuner's records; all of them lie in the
selector's space (:func:`.space.selection_space`).

The evidence is the H100 sweep of 12 families of 2026-11-28 (:func:`default_schedule`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import torch

from ...target import Target
from ..operands import pow2_at_least
from .codegen import one_block_shared_bytes, shared_row_batches
from .features import FEATURE_NAMES
from .schedule import NaturalOrderSchedule, SptrsvSchedule
from .selector import SelectorSet
from .stats import PatternStats
from .task import SptrsvTask

__all__ = ["NATURAL_SCHEMES", "analysed_schedule", "default_schedule", "natural_schedule", "natural_serves"]

_F = {name: i for i, name in enumerate(FEATURE_NAMES)}

# Fewer rows per level than this is a chain (a banded factor): one row after another.
_CHAIN_ROWS_PER_LEVEL = 2
# Warps per block (one block per SM) of the rule's schemes for rows that are not a chain.
_ROW_WARPS = 32
# At least this many rows per level per resident warp are wide levels (see default_schedule).
_WIDE_ROWS_PER_WARP = 1.5


def default_schedule(features: np.ndarray, task: SptrsvTask, target: Target) -> SptrsvSchedule:
    """The scheme used when none is given (and none is selected), from the features of
    :mod:`.features` and the task:

    - a chain (under 2 rows per level: banded factors) with one right-hand side: a thread
      per row over 4 warps per block, a kernel per two resident waves of levels
      (``nw4.ng32.swinf``, ``alpha_level`` 2);
    - wide levels (on average at least 1.5 rows a level per resident warp of the grid,
      ``target.sms`` x 32): 8-thread subwarps, four rows a warp at once (``nw32.ng4.sw2``,
      ``alpha_level`` ∞). With several rows of a level per warp, a warp's rows of one level
      run one after another; four rows a warp at once take fewer turns. (What each turn
      waits for is not settled: prefetching the next rows' pointers changed nothing.);
    - everything else: a warp per row over 32 warps per block, every level in one kernel
      (``nw32.ng1.sw0``, ``alpha_level`` ∞), rows not merged.

    Values are the ready signals (``ready_by_value``) throughout. The evidence is the H100
    sweep of 2026-11-28 (``docs/results/sptrsv/h100-2026-11-28-selector-sweep.jsonl.gz``:
    96 factors of 12 families, 50K-300K rows, each family's systems with their long rows
    split): the warp scheme's geometric mean over each family's best measured scheme was
    1.00-1.23 at one right-hand side (banded 2.30, where the thread scheme's is 1.01) and
    1.00-1.10 at 16. The rule it replaced (a subwarp or a thread per row on short rows,
    merged rows on power-law graphs, fitted to the 500K-row sweep of 2026-11-25 with the
    kernels of then) was 1.07-2.90 at one and 1.53-4.47 at 16 on the same factors. The wide
    level branch: over all 96 factors, within 10% of the best on 89% (was 87%) at one
    right-hand side and 93% (was 88%) at 16, geometric mean 1.055 (1.071) and 1.023 (1.029);
    on an H200, 4M-row laplacian3d (1.9 rows a level per warp) took 1.53 ms against the warp
    scheme's 1.93 at one right-hand side, and a 500K-row community factor (2.6) 0.169 ms
    against 0.247 (docs/performance.md, "Wide levels").
    """
    rows, depth = features[_F["m"]], max(features[_F["layer_num"]], 1.0)
    if rows / depth < _CHAIN_ROWS_PER_LEVEL and task.num_rhs == 1:
        return _scheme(warps_per_block=4, subwarps=32, sw_rnnz=math.inf, alpha_level=2)
    if rows / depth >= _WIDE_ROWS_PER_WARP * target.sms * _ROW_WARPS:
        return _scheme(warps_per_block=_ROW_WARPS, subwarps=4, sw_rnnz=2, alpha_level=math.inf)
    return _scheme(warps_per_block=_ROW_WARPS, subwarps=1, sw_rnnz=0, alpha_level=math.inf)


def _scheme(**parallel: float) -> SptrsvSchedule:
    """A scheme of the rule: rows alone (not merged or reordered), values as ready signals,
    sequential grouping and round-robin warps."""
    return SptrsvSchedule(ready_by_value=True, merge="merge_fixed", merge_rows=1, merge_thresh=0, reorder=False,
                          grouping="rg_sequential", warp_schedule="ws_rr", **parallel).validate()


def analysed_schedule(features: np.ndarray, task: SptrsvTask, target: Target,
                      selectors: SelectorSet | None) -> SptrsvSchedule:
    """The scheme of an analysed solve that forces none: the MLP selector's pick
    (:meth:`.selector.SelectorSet.select`: the selector of the nearest number of right-hand
    sides, for a factor within its training sizes on the GPU model it was measured on), else
    the hand rule's (:func:`default_schedule`)."""
    if selectors is not None:
        picked = selectors.select(features, task.num_rhs, target.sms)
        if picked is not None:
            return picked
    return default_schedule(features, task, target)


def natural_serves(stats: PatternStats, task: SptrsvTask) -> bool:
    """Whether the fast start is the better choice for ``task`` on a system of these
    statistics without knowing how many solves follow: everywhere but large factors of
    short rows near the diagonal with several right-hand sides.

    - One right-hand side: the fast start solved every factor of the benchmark at least as
      fast as the analysed hand rule (H100, 2026-11-27, docs/performance.md "Fast start"),
      after ~2 ms of preparation against 5-20 ms.
    - Several right-hand sides on short rows near the diagonal (meshes, roads, bands numbered
      along their grid: under 4 entries a row, half the rows or more with an entry within
      :data:`.stats.NEAR` rows of the diagonal, where the fast start goes by level): the
      analysed solve is 3-17% faster than the fast start's best at 500K rows (laplacian3d,
      road), which pays for its preparation after 80-100 solves. Below :data:`_SMALL_ROWS`
      rows, the analysed preparation's floor (about 4 ms of small device operations,
      whatever the size) is hundreds of solves of a factor that small.
    - Several right-hand sides on short rows away from the diagonal (numbered without
      locality: shuffled meshes, trees, sparse community, power-law and R-MAT graphs): the
      fast start in natural order needs no levels, and its rows a subwarp keep more rows in
      flight than the analysed scheme. On an H200 (2026-11-28, float64, 4 and 16
      right-hand sides, ``scripts/sptrsv_fast_start_schemes.py --grid widths``) its pick
      was 1.01-2.10x faster than the analysed solve on all 16 cells of the 8 such factors
      of the subwarp rule's records; held out from that, on 11 fresh factors of 7 kinds
      (``docs/results/sptrsv/h200-2026-11-28-natural-serves-held-out.json``: R-MAT and
      power law with hubs, trees, community, shuffled, and bands of entries 33-64 and
      40-400 rows off the diagonal, built to break this), 1.12-1.99x faster on 17 of 22
      cells, 0.99-1.02x on the two bands' four, and 0.90x on a 1.5M-row tree at 4 (the
      subwarp rule's miss there: its best width was 0.99x).
    - Long rows with several right-hand sides: the fast start is as fast or faster (power law
      500K at 16 right-hand sides: 2.06 ms against 4.90 ms analysed).
    """
    return (task.num_rhs == 1 or stats.mean_row >= _SHORT_ROW_NNZ or stats.rows < _SMALL_ROWS
            or stats.near_row_share < _LEVELS_NEAR_ROWS)


# Rows averaging fewer entries than this are short (meshes, roads, bands).
_SHORT_ROW_NNZ = 4
# Factors of fewer rows than this take the fast start with any number of right-hand sides.
_SMALL_ROWS = 1 << 16
# The longest row a lane of the fast start walks alone (else the warp shares each row).
_THREAD_ROW_MAX = 128
# From this share of rows with a near entry (stats.NEAR) the fast start goes by level.
_LEVELS_NEAR_ROWS = 0.5
# Under this many rows a level per resident warp, one right-hand side goes by level too.
_DEEP_ROWS_PER_WARP = 0.15

# Lane rows by level keep about this many levels' rows in flight (see natural_schedule).
_LEVELS_IN_FLIGHT = 4
_LANE_WARPS = 32  # warps per block of the lane-row schemes
# Lane rows in natural order run in one block up to this many rows: eight a lane of its
# 1,024 (see natural_schedule).
_ONE_BLOCK_ROWS = 8192

# The fast start's schemes, which :func:`natural_schedule` chooses between (``gsparse
# precompile`` compiles them all).
LANE_PER_ROW = NaturalOrderSchedule(warps_per_block=_LANE_WARPS, rows_per_ticket=32, rows_per_thread=True)
LANE_PER_ROW_ONE_BLOCK = NaturalOrderSchedule(warps_per_block=_LANE_WARPS, rows_per_ticket=32, rows_per_thread=True,
                                              one_block=True)
LANE_PER_ROW_BY_LEVEL = tuple(NaturalOrderSchedule(warps_per_block=_LANE_WARPS, rows_per_ticket=1 << i,
                                                   rows_per_thread=True, level_order=True) for i in range(6))
WARP_SHARED_ROWS = NaturalOrderSchedule(warps_per_block=8, rows_per_ticket=4, rows_per_thread=False)
WARP_PER_ROW = NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=1, rows_per_thread=False)
WARP_PER_ROW_BY_LEVEL = NaturalOrderSchedule(warps_per_block=32, rows_per_ticket=1, rows_per_thread=False,
                                             level_order=True)
# A row a subwarp: the same with each warp 2, 4 or 8 subwarps (see natural_schedule).
_MOST_SUBWARPS = 8
SUBWARP_PER_ROW = tuple(dataclasses.replace(warp, subwarps=1 << i) for warp in (WARP_PER_ROW, WARP_PER_ROW_BY_LEVEL)
                        for i in range(1, _MOST_SUBWARPS.bit_length()))
NATURAL_SCHEMES = (LANE_PER_ROW, LANE_PER_ROW_ONE_BLOCK, *LANE_PER_ROW_BY_LEVEL, WARP_SHARED_ROWS, WARP_PER_ROW,
                   WARP_PER_ROW_BY_LEVEL, *SUBWARP_PER_ROW)
# Rows a level per resident warp (target.sms x 32) from which rows that the warp would share
# go a row a subwarp: 2 subwarps from this, and from _WIDE_ROWS_PER_WARP as many as leave a
# subwarp 8 lanes, or half a lane per right-hand side (see natural_schedule).
_SUBWARP_ROWS_PER_WARP = 0.2
_WARP_LANES = 32
# From this many rows a level per resident warp, short rows go 8 subwarps a warp: a row for
# every subwarp (see natural_schedule); measured up to _MEASURED_RHS right-hand sides.
_ALL_SUBWARPS_ROWS_PER_WARP = 8
_MEASURED_RHS = 16


def natural_schedule(stats: PatternStats, task: SptrsvTask, target: Target,
                     level_count: Callable[[], int]) -> NaturalOrderSchedule:
    """The fast start's scheme, from what is known without any analysis (the system's
    :class:`~.stats.PatternStats`), the task and the target; ``level_count()`` gives the
    system's number of levels (the levels kernel's, read back once), asked only by lane rows
    by level and, on factors large enough to have wide levels, by rows of several right-hand
    sides.

    - Who walks a row. With one right-hand side and rows of at most 128 entries, a lane per
      row, so that 32 rows of a warp go at once; with longer rows (hubs), or several
      right-hand sides, whose columns the lanes share, the warp shares each row.
    - In which order. By level where at least half the rows have an entry near the diagonal
      (:mod:`.stats`: a mesh or road numbered along its grid, whose consecutive rows chain);
      else in natural order, which needs no levels. On the recorded factors (H100 and H200,
      2026-11-28: 7 factors of every fast-start scheme and the five subwarp records, about
      170 cells of both orders) rows near the diagonal were 0.66-1.00 of the rows where the
      levels were as fast or faster (up to 51x), and 0-0.27 where natural order was as fast
      or within 1.07x, but for a chain of rows 33 apart (1.18-1.53x) and a community factor
      at 16 right-hand sides (1.21x); 20% of the entries, the rule's first
      statistic, sent a 1M-row 27-point stencil (one near entry in 13, but on 99% of its
      rows) to natural order, 0.23-0.41x cuSPARSE (docs/performance.md, "Rows near the
      diagonal"). With one right-hand side on a factor of 65,536 rows or more, also by level
      where the levels hold under 0.15 rows per resident warp (the level count, read back
      once): natural order hands a warp rows of many levels at once. On an H200 natural
      order took 1.8-5.2x the levels' time on 12 such factors of few near rows (trees,
      community, the bands of arrow factors; 0.01-0.13 rows a warp) and lost to cuSPARSE on
      five (0.64-0.89x); it was as fast or faster from 0.19 to 12.5 rows a warp, but on
      factors with hubs (1.13-1.5x slower there).
    - Where. Lane rows in natural order on at most 8,192 rows run in one block
      (``one_block``), which keeps ``x`` in its shared memory, where rows poll their
      dependencies (where ``x`` fits in the target's shared memory per block: 64 KiB at
      8,192 rows in float64); all else runs over one block per SM. On the H100 (2026-11-28,
      ``scripts/sptrsv_one_block.py``, float64, one right-hand side) the best one-block
      scheme took 0.75x and 0.62x the grid's time on Cora and CiteSeer, and 1.23x on PubMed
      (19,717 rows): a lane of the block solves ``n / 1,024`` rows one after another. Held
      out from that choice, 11 factors of 2,000-8,000 rows of four graph families
      (Erdős-Rényi, Watts-Strogatz, Barabási-Albert, random geometric; randomly numbered)
      that the rule sent to one block ran 1.00-2.05x faster there than over the grid
      (geometric mean 1.36x). Meshes by level, rows the warp shares and power-law factors
      were as fast or faster over the grid from 4,000 rows up.
    - Lane rows by level take tickets of about four levels' rows over the grid's warps
      (``4 x rows a level / (32 x target.sms)``, a power of two in 1-32). A ticket's rows are
      solved by that many lanes, and the warp takes its next ticket when all are done: fewer
      rows a ticket couple fewer rows, more keep more levels in flight. Predicted from three
      factors before it was measured on eleven (H100, 2026-11-28, docs/performance.md "The
      fast start's rule"): within 1.07x of the best of 1-32 rows a ticket on all eleven,
      where 2 rows a ticket everywhere took up to 1.49x (a 500K-row geometric mesh, 4,772
      levels: 2.76 ms against 4.11).
    - Rows of several right-hand sides that the warp would share go a row a subwarp where
      the levels are wide enough (``rows / levels / (32 x target.sms)`` rows a level per
      resident warp, the levels kernel's count, asked only of factors of 65,536 rows or more
      and no row over 128 entries: hubs want every lane):

      - from a fifth of a row: 2 subwarps; for short rows (under 4 entries), a lane per
        right-hand side where 8 subwarps or fewer give it (3-8 right-hand sides) and a lane
        reads its row in one batch;
      - from 1.5 (the analysed rule's wide levels): as many as leave a subwarp 8 lanes, or
        half a lane per right-hand side, at most 4; then narrower, up to 8 subwarps, while
        a lane still reads its row's values in one batch (:func:`.codegen.shared_row_batches`
        of the mean row: short rows cost a narrower subwarp no longer);
      - from 8, short rows: 8 subwarps (up to 16 right-hand sides, 32-bit indices: as
        measured), a row of the level for every subwarp.

      The warp takes a ticket of a row per subwarp and its subwarps solve the rows side by
      side (``natural.cuh``); a whole warp sharing a row keeps its lanes on the columns, one
      or two entries at a time. Designed on an H200 (2026-11-28,
      ``scripts/sptrsv_fast_start_schemes.py --grid tickets``, float64, 1-8 subwarps, 1-2
      rows a subwarp a ticket, by level or not; 12 factors at 4 and 16 right-hand sides,
      ``docs/results/sptrsv/h200-2026-11-28-warp-tickets-design.json``): at 16 right-hand
      sides on levels of 2.5-6 rows per warp 4 subwarps were the best width (1.08-1.58x
      faster than 2), and on levels of a fifth to half a row per warp (a 2M-row community
      factor, 500K-row laplacian3d) 2 subwarps were 1.21-1.43x faster than the warp. Two
      rows a subwarp a ticket were faster still on some wide factors and 3-127x slower on
      others (a subwarp's second row waits while the warp's other subwarps idle at the
      ticket), so the rule keeps one. Held out twice (11 and 8 factors: community factors of
      0.6-4M rows, laplacian2d and laplacian3d of 1-4M, trees, road, stencil, shuffled;
      ``--grid widths``, ``...-warp-tickets-held-out.json`` and ``-held-out-2.json``), the
      pick then was the best width in 23 of 38 cells; it missed at 4
      right-hand sides on levels of 0.2-1.2 rows per warp of short rows (8 subwarps
      1.26-1.54x faster than its 2). The lane per right-hand side there, and 8 subwarps from
      8 rows a warp, were set down before a third held-out set of 15 fresh factors at 2, 4,
      8 and 16 right-hand sides (``...-subwarps-held-out-3.json``): all 8 mid-wide short-row
      factors at 8 right-hand sides went fastest on 4 subwarps (the rule before took up to
      1.54x), at 4 the change gained on all 8, and the 8 subwarps on very wide short rows
      were the best in all 7 cells they changed (up to 1.52x); at 2 right-hand sides 8
      subwarps lost on 7 of 8 mid-wide factors (up to 1.77x the best), so there the rule
      keeps 2.
      Over the five records' 144 cells the pick is within 1.10x of the best width in 132.

    Measured on the H100 (2026-11-28, float64; every fast-start scheme, 60 of them, on
    Cora, CiteSeer, PubMed and 500K-row laplacian3d, road, power-law and community
    factors; docs/performance.md "The fast start's rule"):

    - one right-hand side: a lane per row in natural order, 32 rows a ticket over 32 warps,
      took 1.03-1.76x the best scheme's time on the graphs; by level, 2 rows a ticket, 1.00x
      on laplacian3d (1.68x in natural order) and 1.24x on road;
    - 16 right-hand sides: the warp per row, a row a ticket over 32 warps, took 1.00-1.47x
      the best in natural order on the graphs and 1.00x by level on laplacian3d and road
      (12.4x and 1.35x in natural order). The scheme it replaced (8 warps, 4 rows a ticket)
      took 1.7-6.8x, and 400x on laplacian3d;
    - rows of a power-law graph (hubs of 1,024 entries after the split) by the warp, 8
      warps and 4 rows a ticket: 1.14x the best, against 3.7x for a lane per row.

    On 13 factors of 8 families held out from that design, every pick was at least 1.13x
    cuSPARSE (the rule it replaced: 0.01-0.06x on geometric, community and stencil
    factors), with 2 rows a ticket for every lane-by-level pick; that fixed choice then
    missed on laplacian3d at 4M rows (levels of 8,200 rows: 0.97x cuSPARSE, where the 8 rows
    a ticket of the rule above took 1.64 ms, 1.21x).
    """
    by_level = stats.near_row_share >= _LEVELS_NEAR_ROWS or (task.num_rhs == 1 and _deep(stats, target, level_count))
    if task.num_rhs == 1 and stats.longest_row <= _THREAD_ROW_MAX:
        if not by_level:
            fits = one_block_shared_bytes(task.algorithm, stats.rows) <= target.shared_bytes_per_block
            return LANE_PER_ROW_ONE_BLOCK if stats.rows <= _ONE_BLOCK_ROWS and fits else LANE_PER_ROW
        levels = max(level_count(), 1)
        wanted = _LEVELS_IN_FLIGHT * stats.rows / levels / (_LANE_WARPS * target.sms)
        return LANE_PER_ROW_BY_LEVEL[min(max(math.floor(math.log2(max(wanted, 1.0)) + 0.5), 0), 5)]
    if task.num_rhs == 1 and not by_level:
        return WARP_SHARED_ROWS
    warp = WARP_PER_ROW_BY_LEVEL if by_level else WARP_PER_ROW
    subwarps = _row_subwarps(stats, task, target, level_count)
    return dataclasses.replace(warp, subwarps=subwarps) if subwarps > 1 else warp


def _deep(stats: PatternStats, target: Target, level_count: Callable[[], int]) -> bool:
    """Whether a factor of 65,536 rows or more has levels so narrow (under
    :data:`_DEEP_ROWS_PER_WARP` rows a level per resident warp) that one right-hand side
    goes faster by level whatever its near rows: natural order hands a warp rows of many
    levels at once, and its lanes wait on the deepest (see :func:`natural_schedule`)."""
    if stats.rows < _SMALL_ROWS:
        return False  # the level count would cost a small factor more than it saves
    return stats.rows / max(level_count(), 1) / (_ROW_WARPS * target.sms) < _DEEP_ROWS_PER_WARP


def _row_subwarps(stats: PatternStats, task: SptrsvTask, target: Target, level_count: Callable[[], int]) -> int:
    """Subwarps per warp of the fast start's rows a row a (sub)warp, several right-hand sides:
    1, 2, 4 or 8 (see :func:`natural_schedule`)."""
    if task.num_rhs == 1 or stats.longest_row > _THREAD_ROW_MAX or stats.rows < _SMALL_ROWS:
        # Hubs want every lane of the warp. A small factor's levels would cost its preparation
        # more than wide levels could save (under 65,536 rows, a factor is wide only with
        # fewer than 31 levels on an H100).
        return 1
    wide = stats.rows / max(level_count(), 1) / (_ROW_WARPS * target.sms)
    if wide < _SUBWARP_ROWS_PER_WARP:
        return 1
    short = stats.mean_row < _SHORT_ROW_NNZ
    entries = max(stats.mean_row - 1, 0.0)
    if (short and wide >= _ALL_SUBWARPS_ROWS_PER_WARP and task.num_rhs <= _MEASURED_RHS
            and task.index_dtype == torch.int32):
        # Every subwarp of every warp has a row of the level: short rows cost a narrow
        # subwarp little, and the most rows go at once (measured with 32-bit indices, whose
        # loads go in batches).
        return _MOST_SUBWARPS
    # As many as leave a subwarp 8 lanes, or half a lane per right-hand side, at most 4.
    subwarps = max(1, min(4, _WARP_LANES // max(8, pow2_at_least(task.num_rhs) // 2)))
    if wide < _WIDE_ROWS_PER_WARP:
        column_subwarps = _WARP_LANES // pow2_at_least(task.num_rhs)  # a lane per right-hand side
        if (short and 2 <= column_subwarps <= _MOST_SUBWARPS
                and shared_row_batches(task.algorithm, _WARP_LANES // column_subwarps, entries) <= 1):
            # A lane per right-hand side, none splitting a row's entries, so no sum across
            # lanes on a short row's critical path (our reading: at 2 right-hand sides that
            # would take 16 subwarps, and 8, whose lanes still split entries, were slower
            # than 2), and each lane reads its row in one batch.
            return column_subwarps
        return min(2, subwarps)
    # Narrower still while a lane reads its row in one batch: rows that short cost a
    # narrower subwarp no longer, and the warp keeps more of them in flight.
    while (subwarps < _MOST_SUBWARPS
           and shared_row_batches(task.algorithm, _WARP_LANES // (2 * subwarps), entries) <= 1):
        subwarps *= 2
    return subwarps
