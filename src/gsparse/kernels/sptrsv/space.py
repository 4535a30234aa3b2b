"""The SpTRSV scheme spaces: the paper's full space and the reduced one the tuner measures.

Both keep the adaptive code optimisations (collaborative read, sync elimination, early
division) switched on: as in AG-SpTRSV they are not searched, each applies where its
condition holds (decided per kernel and row group by the plan and the code generator).

The full space (§4.5, Table 3) is every ``warps_per_block`` and ``subwarps`` in 1..32 with
each ``sw_rnnz`` the subwarp width allows, ``merge_fixed(rb)`` for ``rb`` in 1..32,
``merge_avg(32, thresh)`` and ``merge_thresh(32, thresh)`` for ``thresh`` in 1..32, with and
without reordering, every grouping and warp schedule, and ``alpha_level`` in
{0, 2, 4, 8, ∞}: 213,840 schemes.

The paper reduces it to about 1.6e3 by dropping schemes that were poor on most of its
matrices, without listing them. :func:`reduced_space` is our a-priori reduction to 1,680,
to be refit on GPU measurements: it keeps every transform family and every α_level, and
thins the axes whose neighbouring values behave alike (see :data:`PARALLEL`,
:data:`TRANSFORMS`, :data:`SCHEDULING`).

:func:`selection_space` is the space the MLP selector chooses from: 54 schemes, small
enough to be measured on every factor of a corpus of dozens within minutes of GPU time (the
whole reduced space would take hours: ~0.1-0.5 s of host planning per scheme per factor).
It is the hand rule's decision space (:func:`.default.default_schedule`) taken whole: rows
merged 1, 4 or 32 at a time, every :data:`PARALLEL` setup, ``alpha_level`` 0, 2 or ∞, all
with values as ready signals (faster than flags on each of the six factors where both were
measured, H100 sweep of 2026-11-25), sequential grouping, round-robin warps and no
reordering (never the best in that sweep).
"""

from __future__ import annotations

import itertools
import math
from typing import Iterator

from .schedule import (
    ALPHA_LEVELS,
    GROUPINGS,
    POWERS_OF_TWO,
    WARP_SCHEDULES,
    SptrsvSchedule,
    sw_rnnz_choices,
)

__all__ = ["PARALLEL", "TRANSFORMS", "SCHEDULING", "SELECTION_MERGE_ROWS", "SELECTION_ALPHA_LEVELS", "reduced_space",
           "selection_space", "full_space"]

# (warps_per_block, subwarps, sw_rnnz): few or all warps of an SM (long dependency chains
# want few: they spin less), crossed with a warp, an 8-thread subwarp and a thread per
# row group; the 8-thread subwarp shares rows averaging more than 2 entries.
PARALLEL = tuple((nw, ng, sw) for nw in (4, 32) for ng, sw in ((1, 0), (4, 2), (32, math.inf)))

# (merge, merge_rows, merge_thresh, reorder): rows alone, in fours and in warps' worth;
# short-row merging at two thresholds each; all with and without reordering.
TRANSFORMS = tuple(
    (merge, rb, thresh, reorder)
    for reorder in (False, True)
    for merge, rb, thresh in (("merge_fixed", 1, 0), ("merge_fixed", 4, 0), ("merge_fixed", 32, 0),
                              ("merge_avg", 32, 2), ("merge_avg", 32, 8),
                              ("merge_thresh", 32, 4), ("merge_thresh", 32, 16))
)

# (grouping, warp_schedule): the pairings whose heuristics pull the same way, plus rr
# after balanced grouping.
SCHEDULING = (("rg_sequential", "ws_rr"), ("rg_sequential", "ws_locality"),
              ("rg_balance", "ws_balance"), ("rg_balance", "ws_rr"))


def reduced_space() -> list[SptrsvSchedule]:
    """The 1,680 schemes the tuner measures: :data:`PARALLEL` x :data:`TRANSFORMS` x
    :data:`SCHEDULING` x every ``alpha_level``, in that nesting order."""
    return [
        SptrsvSchedule(warps_per_block=nw, subwarps=ng, sw_rnnz=sw, merge=merge, merge_rows=rb,
                       merge_thresh=thresh, reorder=reorder, grouping=grouping,
                       warp_schedule=ws, alpha_level=alpha)
        for (nw, ng, sw), (merge, rb, thresh, reorder), (grouping, ws), alpha
        in itertools.product(PARALLEL, TRANSFORMS, SCHEDULING, ALPHA_LEVELS)
    ]


# The selector's transforms and kernel partitions (see the module docstring).
SELECTION_MERGE_ROWS = (1, 4, 32)
SELECTION_ALPHA_LEVELS = (0, 2, math.inf)


def selection_space() -> list[SptrsvSchedule]:
    """The 54 schemes the MLP selector chooses from: ``merge_fixed`` of
    :data:`SELECTION_MERGE_ROWS` x :data:`PARALLEL` x :data:`SELECTION_ALPHA_LEVELS`, in that
    nesting order (unmerged rows first: merging is what makes a scheme hundreds of times
    slower on a mesh, so a sweep cut short has measured the others), with ``ready_by_value``
    on and the other knobs at their defaults. Every scheme of the hand rule is one of them."""
    return [
        SptrsvSchedule(warps_per_block=nw, subwarps=ng, sw_rnnz=sw, ready_by_value=True, merge="merge_fixed",
                       merge_rows=rb, merge_thresh=0, reorder=False, grouping="rg_sequential",
                       warp_schedule="ws_rr", alpha_level=alpha)
        for rb, (nw, ng, sw), alpha in itertools.product(SELECTION_MERGE_ROWS, PARALLEL, SELECTION_ALPHA_LEVELS)
    ]


def _all_transforms() -> Iterator[tuple[str, int, int]]:
    for rb in POWERS_OF_TWO:
        yield "merge_fixed", rb, 0
    for merge in ("merge_avg", "merge_thresh"):
        for thresh in POWERS_OF_TWO:
            yield merge, 32, thresh


def full_space() -> Iterator[SptrsvSchedule]:
    """Every scheme of the paper's full space (213,840), lazily."""
    for nw, ng in itertools.product(POWERS_OF_TWO, POWERS_OF_TWO):
        for sw in sw_rnnz_choices(ng):
            for (merge, rb, thresh), reorder in itertools.product(_all_transforms(), (False, True)):
                for grouping, ws, alpha in itertools.product(GROUPINGS, WARP_SCHEDULES, ALPHA_LEVELS):
                    yield SptrsvSchedule(warps_per_block=nw, subwarps=ng, sw_rnnz=sw, merge=merge,
                                         merge_rows=rb, merge_thresh=thresh, reorder=reorder,
                                         grouping=grouping, warp_schedule=ws, alpha_level=alpha)
