"""Generated g-SDDMM kernels: schedule, search space, default rule, code generation, launch.

``Z_e = lhs[t_l(e)] ⊕ rhs[t_r(e)]`` for every edge ``e = (u, v)``, the targets picking the
source ``u``, the destination ``v`` or the edge itself. Element-wise operators write one
output per feature; ``dot`` reduces the last feature dimension, so its features are
``num_heads`` *heads* of ``head_len`` elements each, and each head gives one output.
Element-wise operators are the one-head case with ``head_len`` = all output features.

Three skeletons, all walking CSR positions ``p`` (so ``u = col[p]``) and writing
``out[eid[p]]``:

- ``edge``: a group of ``lanes`` threads per edge, ``groups_per_block`` edges per block.
  The lanes split the features of the edge; for ``dot`` their partial products meet in a
  ``__shfl_xor_sync`` butterfly inside the group (G-Sparse's adaptive warp shuffle: the
  group, not the warp, is the shuffle width). ``v`` is read from the CSR's expanded
  destination array. Balanced by construction, whatever the degree distribution.
- ``row``: a warp per destination row, ``groups_per_block`` rows per block. The warp
  keeps ``v``'s features of one chunk in registers and walks the row in CSR order,
  ``32 / lanes`` edges at a time. Saves the destination index and ``v``'s loads per edge;
  a long row is walked by one warp, so it suits graphs whose longest row is short next to
  the work of the whole grid.
- ``row_transposed``: the row skeleton whose ``dot`` takes ``edges_per_batch`` edges at a
  time per group of lanes and reduces them together with a transposed butterfly (a
  reduce-scatter by shuffles), about one shuffle per edge instead of ``log2(lanes)``;
  lane ``j`` then writes edge ``j``'s output. The batch's source indices are loaded one
  batch ahead. Other operators have no reduction and run the row code.
- ``edge_transposed``: the same batches over a fixed range of CSR positions per warp
  instead of a row (balanced whatever the row lengths, like ``edge``); ``v`` is read per
  edge, its index loaded a batch ahead with the source's. Other operators walk the same
  batches without the reduction.

A lane owns ``features_per_thread`` vectors of ``vector_width`` consecutive features at a
stride of ``lanes * vector_width`` (coalesced across the group); the group's *slice* is
``lanes * vector_width * features_per_thread`` features and longer heads take several
passes (edge) or several chunks over ``blockIdx.y`` (the others, element-wise only: a
``dot`` head, or the part of it one launch covers, must fit in one slice there).

``features_per_launch`` splits each head into slices of that many features, one launch
per slice, so that the live slice of the gathered node features stays in L2 while the grid
sweeps the edges (the same idea as g-SpMM's feature-slice ordering); ``dot`` adds each
launch's partial products to the previous launches' sum in ``out``. On a row skeleton it
also lets a long head be covered by a slice short enough for a whole warp's row reads.

Public entry points: :class:`SddmmSchedule`, :func:`schedule_space`,
:func:`default_schedule`, :func:`generate` (pure) and :func:`run_sddmm` (the CUDA backend's
``sddmm``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import runtime
from ..algebra import BINARY_OPS, TARGETS
from ..graph import Graph
from .common import (
    ACCUMULATOR_TYPES,
    INDEX_TYPES,
    PRELUDE,
    SCALAR_TYPES,
    Layout,
    VECTOR_BYTES,
    element_size,
    indent,
    indexed_offsets,
    operand_layout,
    pow2_at_least,
    schedule_from_json,
    schedule_to_json,
    sm_count,
    vector_limit,
    widest_vector,
)
from .common import l2_bytes as l2_bytes_of

__all__ = [
    "SddmmAlgorithm",
    "SddmmProgram",
    "SddmmSchedule",
    "default_schedule",
    "generate",
    "run_sddmm",
    "schedule_space",
]

KERNEL_NAME = "gsddmm"
SKELETONS = ("edge", "row", "row_transposed", "edge_transposed")
_ROW_SKELETONS = ("row", "row_transposed")  # a warp per destination row (read rowptr)
_TRANSPOSED_SKELETONS = ("row_transposed", "edge_transposed")  # batches of edges_per_batch
_LANES = (1, 2, 4, 8, 16, 32)
_VECTORS = (1, 2, 4, 8)
_LAUNCH_SLICES = (0, 32, 64, 128, 256)
_BATCHES = (2, 4, 8, 16, 32)
# Batches a warp of the edge_transposed skeleton walks: its first index loads wait
# unhidden once per range, so 8 batches amortise them while the grid stays ~10^5 blocks
# on graphs of 10^8 edges.
_RANGE_BATCHES = 8
_WARP = 32
_MAX_THREADS = 1024
_MAX_GRID_X = 2**31 - 1
_MAX_GRID_Y = 65535
_MAX_INT32 = 2**31 - 1
# Warps an SM keeps resident (Hopper and Ampere: 64); the default rule weighs the longest
# row against them.
_WARPS_PER_SM = 64
# The default rule's constants, fitted to an H100 sweep (see default_schedule).
_SCALAR_HEAD = 4  # heads of at most this many elements: scalar loads
_MAX_DEFAULT_LANES = 4
_DEFAULT_THREADS = 128
_DEFAULT_LAUNCH = 128  # features per launch for long heads that overflow the L2 ...
_WIDE_DOT_LANES = 8  # ... but one launch of 8 lanes for fp32 dot heads at least this long
# On graphs whose rows have this many edges on average, fp32 heads in 16-byte vectors
# take these transposed schedules by head length, as (skeleton, lanes, vectors per lane,
# edges per batch): dot the refit of 2026-11-23, evening, element-wise operators the
# schedules fitted before it ...
_TRANSPOSED_MEAN_DEGREE = 256
_DOT_TRANSPOSED = {16: ("edge_transposed", 4, 1, 4), 32: ("edge_transposed", 4, 2, 4),
                   64: ("edge_transposed", 8, 2, 4)}
_ELEMENTWISE_TRANSPOSED = {16: ("edge_transposed", 4, 1, 4), 32: ("row_transposed", 8, 1, 8)}
# ... and a dot row_transposed over launches of this many features at other lengths beyond.
_TRANSPOSED_LAUNCH = 32


# --------------------------------------------------------------------------- schedule


@dataclass(frozen=True)
class SddmmSchedule:
    """One point of the g-SDDMM search space (a plain value: hashable, JSON round trip).

    Attributes:
        skeleton: ``"edge"`` (a group of threads per edge), ``"row"`` (a warp per
            destination row, ``v``'s features in registers), ``"row_transposed"`` (the
            row skeleton whose ``dot`` reduces a batch of edges at once; see
            :func:`_transposed_body`) or ``"edge_transposed"`` (those batches over a
            fixed range of edges per warp).
        groups_per_block: edges (edge skeleton) or warps (the others) per block.
        lanes: threads per edge, 1 to 32: the width of the ``dot`` shuffle reduction.
        features_per_thread: vectors each lane handles per pass (independent loads in flight).
        features_per_launch: 0 for one launch over all features; else the features of a
            head each launch covers (fp32/fp64 for ``dot``, whose partial sums are kept in
            ``out`` between launches).
        vector_width: consecutive features moved per load/store (1, 2, 4, or 8 for 2-byte
            dtypes: a vector is at most 16 bytes).
        edges_per_batch: the transposed skeletons only (0 otherwise): edges a group of
            lanes reduces together, a power of two from 2 up to ``lanes``.
    """

    skeleton: str = "edge"
    groups_per_block: int = 8
    lanes: int = 32
    features_per_thread: int = 1
    vector_width: int = 1
    features_per_launch: int = 0
    edges_per_batch: int = 0

    @property
    def threads(self) -> int:
        per_group = self.lanes if self.skeleton == "edge" else _WARP
        return self.groups_per_block * per_group

    @property
    def edges_per_warp(self) -> int:
        """Edges a warp walks (edge_transposed; 0 for the other skeletons)."""
        if self.skeleton != "edge_transposed":
            return 0
        return _WARP // self.lanes * self.edges_per_batch * _RANGE_BATCHES

    def launch_len(self, head_len: int) -> int:
        """Features of a head that one launch covers."""
        return min(head_len, self.features_per_launch or head_len)

    @property
    def feature_slice(self) -> int:
        """Features one group covers per pass."""
        return self.lanes * self.vector_width * self.features_per_thread

    def problems(self) -> list[str]:
        """Why this schedule can never run (empty when it is valid)."""
        found = []
        if self.skeleton not in SKELETONS:
            found.append(f"skeleton must be one of {SKELETONS}, got {self.skeleton!r}")
        if self.lanes not in _LANES:
            found.append(f"lanes must be one of {_LANES}, got {self.lanes}")
        if self.vector_width not in _VECTORS:
            found.append(f"vector_width must be one of {_VECTORS}, got {self.vector_width}")
        if self.features_per_thread not in (1, 2, 4, 8):
            found.append(f"features_per_thread must be 1, 2, 4 or 8, got {self.features_per_thread}")
        if self.features_per_launch not in _LAUNCH_SLICES:
            found.append(f"features_per_launch must be one of {_LAUNCH_SLICES}, "
                         f"got {self.features_per_launch}")
        if not isinstance(self.groups_per_block, int) or self.groups_per_block < 1:
            found.append(f"groups_per_block must be an int >= 1, got {self.groups_per_block!r}")
        if found:
            return found
        if self.threads > _MAX_THREADS:
            found.append(f"{self.threads} threads per block, more than {_MAX_THREADS}")
        elif self.threads % _WARP:
            found.append(f"{self.threads} threads per block is not a multiple of {_WARP}")
        if self.skeleton in _TRANSPOSED_SKELETONS:
            if self.edges_per_batch not in _BATCHES or self.edges_per_batch > self.lanes:
                found.append(f"edges_per_batch must be one of {_BATCHES} and at most lanes = "
                             f"{self.lanes} for the {self.skeleton} skeleton, got "
                             f"{self.edges_per_batch}")
        elif self.edges_per_batch:
            found.append(f"edges_per_batch is a knob of the row_transposed and edge_transposed "
                         f"skeletons; the {self.skeleton} skeleton needs 0, got "
                         f"{self.edges_per_batch}")
        if self.features_per_launch and self.features_per_launch < self.feature_slice:
            found.append(f"features_per_launch = {self.features_per_launch} is narrower than the "
                         f"{self.feature_slice} features a group covers per pass")
        if self.features_per_thread * self.vector_width > 16:
            found.append(
                f"features_per_thread * vector_width = "
                f"{self.features_per_thread * self.vector_width} elements per lane and pass; "
                f"more than 16 spills registers"
            )
        return found

    def validate(self) -> SddmmSchedule:
        """``self``, or ValueError listing every problem."""
        if problems := self.problems():
            raise ValueError(f"invalid SddmmSchedule {self}: " + "; ".join(problems))
        return self

    def __str__(self) -> str:
        launch = f".s{self.features_per_launch}" if self.features_per_launch else ""
        batch = f".b{self.edges_per_batch}" if self.edges_per_batch else ""
        return (f"{self.skeleton}.g{self.groups_per_block}.l{self.lanes}"
                f".f{self.features_per_thread}.v{self.vector_width}{launch}{batch}")

    def to_json(self) -> str:
        return schedule_to_json(self)

    @classmethod
    def from_json(cls, text: str) -> SddmmSchedule:
        """The schedule written by :meth:`to_json` (see :func:`schedule_from_json`)."""
        return schedule_from_json(cls, text)


def schedule_space(g: Graph, feature_len: int, dtype: torch.dtype = torch.float32) -> list[SddmmSchedule]:
    """The pruned grid of schedules for heads of ``feature_len`` features (all valid).

    ``feature_len`` is the length of one head: the reduced last dimension for ``dot``, all
    output features for element-wise operators. Edge skeletons cover the head in one
    launch, or in launches of 32 or 128 features where the head is longer (not for 2-byte
    dtypes, whose ``dot`` cannot keep partial sums in ``out``). Pruned to the shapes that
    can win: vectors scalar or as wide as the length allows; group slices no wider than
    the features of a launch (rounded up to a power of two) and at most four passes short
    of them; 128 or 256 threads per edge block; row skeletons only where one slice covers
    the head (then every operator, ``dot`` included, runs on them), with 4 or 8 rows per
    block; and where such a slice has 8 or more lanes, ``row_transposed`` with 4 rows per
    block and batches of 8 edges and of ``lanes`` edges, where their partial sums,
    ``v``'s features and the next batch's indices fit in 64 registers (measured best at 32
    and 64 features on proteins-like; the default uses it at 32 fp32 features on long-row
    graphs), also over the launches of 32 or 128 features where one slice covers a
    launch; where it has 4 or more lanes, ``edge_transposed`` with 4 warps per block and
    batches of 4, 8 and ``lanes`` edges under the same budget (two indices per edge).
    """
    del g  # the grid depends on the head length and dtype only; kept for a uniform API
    launches = [0]
    if element_size(dtype) >= 4:
        launches += [w for w in (32, 128) if w < feature_len]
    vectors = sorted({1, widest_vector(feature_len, VECTOR_BYTES // element_size(dtype))})
    accumulator_words = 2 if dtype == torch.float64 else 1
    grid = []
    for launch in launches:
        span = launch or feature_len
        for vector, lanes, per_thread in itertools.product(vectors, _LANES, (1, 2, 4, 8)):
            slice_ = lanes * vector * per_thread
            if slice_ > max(pow2_at_least(span), vector) or slice_ * 4 < span:
                continue
            for threads in (128, 256):
                grid.append(SddmmSchedule("edge", threads // lanes, lanes, per_thread, vector, launch))
            if slice_ < span:
                continue
            if not launch:
                for rows in (4, 8):
                    grid.append(SddmmSchedule("row", rows, lanes, per_thread, vector))
            lane_values = per_thread * vector
            for batch in sorted({8, lanes}) if lanes >= 8 else []:
                if _batch_fits(batch, lane_values, accumulator_words, indices=1):
                    grid.append(SddmmSchedule("row_transposed", 4, lanes, per_thread, vector,
                                              launch, edges_per_batch=batch))
            if not launch:
                for batch in sorted({4, 8, lanes}) if lanes >= 4 else []:
                    if batch <= lanes and _batch_fits(batch, lane_values, accumulator_words,
                                                      indices=2):
                        grid.append(SddmmSchedule("edge_transposed", 4, lanes, per_thread,
                                                  vector, edges_per_batch=batch))
    return [s for s in dict.fromkeys(grid) if not s.problems()]


def _batch_fits(batch: int, lane_values: int, accumulator_words: int, indices: int) -> bool:
    """Whether a transposed skeleton's lane keeps its registers within half of the 128 a
    row skeleton's thread gets (more spills in fp64): the batch's sums, ``v``'s features
    (``lane_values``) and the next batch's ``indices`` indices per edge (source on
    ``row_transposed``, source and destination on ``edge_transposed``; two words each in
    int64)."""
    return (batch + lane_values) * accumulator_words + 2 * indices * batch <= 64


def _lanes_for(span: int, vector: int) -> tuple[int, int]:
    """(lanes, vectors per lane) for ``span`` features: a lane takes up to 4 vectors (and
    at most 16 elements, as ``problems`` demands), and up to 4 lanes share an edge
    (longer spans take several passes)."""
    vectors = -(-max(span, 1) // vector)
    per_lane = min(4, 16 // vector)
    lanes = min(_MAX_DEFAULT_LANES, pow2_at_least(-(-vectors // per_lane)))
    return lanes, min(per_lane, pow2_at_least(-(-vectors // lanes)))


def _resident_warps(device: torch.device) -> int:
    return sm_count(device) * _WARPS_PER_SM


def default_schedule(
    g: Graph,
    feature_len: int,
    dtype: torch.dtype = torch.float32,
    vector_ok: int | None = None,
    *,
    dot: bool = True,
    resident_warps: int | None = None,
    l2_bytes: int | None = None,
) -> SddmmSchedule:
    """The schedule used when none is given, from graph statistics and the head length.

    ``dot`` says whether the operator reduces the head (``feature_len`` is then one head's
    length) or is element-wise (all output features). The cases marked ``dot`` below
    were fitted on ``u_dot_v`` alone; element-wise operators take the schedules of the
    same cases from before that fit (``edge_transposed`` at 16 features, ``row_transposed``
    at 32) and otherwise the edge rules.

    Fitted to an H100 sweep of ``u_dot_v`` in fp32 (every schedule of the space on a
    reddit-like and a proteins-like graph, heads of 1 to 512 features; docs/performance.md).
    On the sweep of 2026-11-23 it was within 1.12x of the best schedule in every cell of
    those graphs and of products-like, but for 32 features on proteins-like (1.44x), which
    the row_transposed case below now covers.

    - Heads of at most 4 elements: one lane per edge and one scalar load per element.
      Separate loads beat one vector load of the same bytes (2 features: 1.13-1.15x; 4
      features: 1.04-1.05x), presumably because they are independent requests in flight.
    - Longer heads: vectors as wide as the data allows (``vector_ok``, from the operands'
      alignment; by default 16 bytes), up to 4 vectors per lane and up to 4 lanes per
      edge: 1 lane up to 16 fp32 features, 2 at 32, 4 from 64 (several passes beyond).
      More lanes lose: the best schedule with G-Sparse's widths (its Table IV: 2 at 8
      features, 4 at 32, 16 at 128, 32 at 512) is 1.12-1.7x off the best on the H100,
      presumably because the time goes to gathering node rows and a lane's four 16-byte
      loads in flight already keep enough of them outstanding.
    - 128 threads per block: 256 is up to 1.14x slower for the same schedule (at most 3%
      faster).
    - The row skeleton where it cannot lose to the load imbalance it brings: rows long
      enough to fill the warp's ``32 / lanes`` edge groups (mean degree), and the longest
      row at most half of one warp's share of the whole grid (edges over resident warps),
      so the last warp is not left walking it alone. Otherwise the edge skeleton. (Both
      swept graphs have longest rows 2-3.6x a warp's share, so this does not fire there;
      where the row skeleton won, at 1-8 features and at 32 on proteins-like, the rule's
      edge schedule is within 1.15x of it.)
    - ``dot`` over fp32 heads in 16-byte vectors on graphs whose mean row has 256 or
      more edges (the sweep of 2026-11-23, evening, on reddit- and proteins-like;
      docs/performance.md):
      - of 16, 32 or 64 features: ``edge_transposed``, 4 rows per block, batches of 4
        edges, 4 / 4 / 8 lanes of 1 / 2 / 2 vectors. The best schedule of both graphs but
        at 64 features on reddit-like (1.05x off), where the edge schedule below was 1.26
        to 1.35x off the best;
      - longer: ``row_transposed`` (8 lanes, batches of 8 edges) over launches of 32
        features: each launch reads whole 128-byte lines of ``u``'s 32-feature slice,
        which stays in L2, where the edge schedules read one 32-byte sector per request
        (ncu). The best schedule from 128 features up, 1.17-1.35x faster than the edge
        schedules. On products-like (mean 51) the edge schedules were within 1.14x of the
        best.
    - ``dot`` over fp32 heads of 128 features or more in 16-byte vectors whose
      source-node features overflow three quarters of the L2 cache (on the graphs the
      cases above leave: products-like, mean row 51): the edge skeleton with 8 lanes of 4
      vectors, in one launch. In the sweep of 2026-11-23, evening, the 4-lane schedules
      below were 1.07 / 1.10 / 1.14x off the best at 128 / 256 / 512 features; this one
      is within 1.02x (re-run with the rule in place).
    - Otherwise, 4- or 8-byte dtypes, heads longer than 128 features whose source-node
      features overflow three quarters of the L2 cache: launches of 128 features. At 256
      and 512 features they were the best edge schedules on proteins-like and within
      1.04x on reddit-like, where one launch is 1.06-1.15x slower and 32-feature launches
      (which fit the L2) win by 2-4% on reddit-like but lose 1.16x on proteins-like,
      re-reading the graph's indices once per launch.
    """
    if vector_ok is None:
        vector_ok = VECTOR_BYTES // element_size(dtype)
    vector = 1 if feature_len <= _SCALAR_HEAD else widest_vector(feature_len, vector_ok)
    lanes, per_thread = _lanes_for(feature_len, vector)
    stats = g.row_stats
    if resident_warps is None:
        resident_warps = _resident_warps(g.device)
    size = element_size(dtype)
    fp32_vectors = size == 4 and vector == 4
    if fp32_vectors and stats.mean >= _TRANSPOSED_MEAN_DEGREE:
        transposed = _DOT_TRANSPOSED if dot else _ELEMENTWISE_TRANSPOSED
        if feature_len in transposed:
            skeleton, lanes, per_thread, batch = transposed[feature_len]
            return SddmmSchedule(skeleton, 4, lanes, per_thread, 4,
                                 edges_per_batch=batch).validate()
        if dot and feature_len > _TRANSPOSED_LAUNCH:
            return SddmmSchedule("row_transposed", 4, 8, 1, 4, _TRANSPOSED_LAUNCH,
                                 edges_per_batch=8).validate()
    fills_warp = stats.mean >= _WARP // lanes
    short_tail = 2 * stats.max <= g.num_edges / max(resident_warps, 1)
    one_slice = lanes * vector * per_thread >= feature_len
    if fills_warp and short_tail and one_slice:
        return SddmmSchedule("row", 8, lanes, per_thread, vector).validate()
    if l2_bytes is None:
        l2_bytes = l2_bytes_of(g.device)
    overflows_l2 = g.num_src * feature_len * size > l2_bytes * 3 // 4
    if dot and fp32_vectors and feature_len >= _DEFAULT_LAUNCH and overflows_l2:
        return SddmmSchedule("edge", _DEFAULT_THREADS // _WIDE_DOT_LANES, _WIDE_DOT_LANES,
                             4, vector).validate()
    launch = 0
    if size >= 4 and feature_len > _DEFAULT_LAUNCH and overflows_l2:
        launch = _DEFAULT_LAUNCH
    lanes, per_thread = _lanes_for(launch or feature_len, vector)
    return SddmmSchedule("edge", _DEFAULT_THREADS // lanes, lanes, per_thread, vector,
                         launch).validate()


# --------------------------------------------------------------------------- code generation


@dataclass(frozen=True)
class SddmmAlgorithm:
    """What to compute, and the facts about the operands the code is specialised on.

    Attributes:
        op: ⊕, a key of :data:`gsparse.algebra.BINARY_OPS` valid for g-SDDMM.
        lhs_target, rhs_target: ``"u"``, ``"v"`` or ``"e"`` for each operand the op reads,
            None for one it ignores.
        lhs_layout, rhs_layout: how each read operand maps onto the (for ``dot``:
            unreduced) output features; None for one the op ignores.
        dtype: feature dtype; index_dtype: int32 or int64.
        has_eid: edge ids differ from CSR positions (read ``eid[p]``).
    """

    op: str
    lhs_target: str | None
    rhs_target: str | None
    lhs_layout: Layout | None
    rhs_layout: Layout | None
    dtype: torch.dtype
    index_dtype: torch.dtype
    has_eid: bool

    def __post_init__(self) -> None:
        binop = BINARY_OPS[self.op]
        for name, uses in (("lhs", binop.uses_lhs), ("rhs", binop.uses_rhs)):
            target, layout = getattr(self, f"{name}_target"), getattr(self, f"{name}_layout")
            if (target is not None, layout is not None) != (uses, uses):
                raise ValueError(f"op {self.op!r} {'reads' if uses else 'ignores'} {name}: "
                                 f"give both its target and layout, or neither")
            if target is not None and target not in TARGETS:
                raise ValueError(f"{name}_target must be one of {TARGETS}, got {target!r}")

    @property
    def is_dot(self) -> bool:
        return BINARY_OPS[self.op].reduces_last_dim

    def targets(self) -> set[str]:
        return {t for t in (self.lhs_target, self.rhs_target) if t is not None}

    def __str__(self) -> str:
        operands = "/".join(
            f"{name}:{target}:{layout.value}"
            for name, target, layout in (("lhs", self.lhs_target, self.lhs_layout),
                                         ("rhs", self.rhs_target, self.rhs_layout))
            if layout is not None
        )
        return (f"{self.op} {operands} {str(self.dtype).removeprefix('torch.')} "
                f"{str(self.index_dtype).removeprefix('torch.')}{' eid' if self.has_eid else ''}")


@dataclass(frozen=True)
class SddmmProgram:
    """Generated source and how to launch it.

    Every program has the kernel signature::

        gsddmm(rowptr, col, dst, eid, lhs, rhs, lhs_offset, rhs_offset, out,
               num_rows, num_edges, num_heads, head_len, lhs_len, rhs_len,
               d_begin, d_end, accumulate)

    Unused pointers are null. ``*_len`` are the operands' elements per row. Every
    skeleton covers features ``d_begin .. d_end - 1`` of each head (all of them unless
    ``features_per_launch`` slices the launches) and, for ``dot`` with ``accumulate``,
    adds to ``out`` instead of overwriting it.
    """

    source: str
    kernel_name: str
    schedule: SddmmSchedule
    is_dot: bool

    @property
    def block(self) -> int:
        return self.schedule.threads

    def num_chunks(self, num_heads: int, head_len: int) -> int:
        """How many times a row or transposed skeleton walks its rows or ranges: once per
        head for ``dot``, once per feature slice otherwise (1 for the edge skeleton)."""
        if self.schedule.skeleton == "edge":
            return 1
        span = self.schedule.launch_len(head_len)
        return num_heads if self.is_dot else -(-span // self.schedule.feature_slice)

    def grid(self, num_edges: int, num_rows: int, num_heads: int, head_len: int) -> tuple[int, int]:
        """Blocks over edges (edge skeleton), over ranges of edges and chunks
        (edge_transposed) or over rows and chunks (row skeletons).

        The edge kernels stride over what the grid does not cover, so the limits on the
        grid's size never leave work undone.
        """
        skeleton = self.schedule.skeleton
        if skeleton == "edge":
            groups = num_edges
        elif skeleton == "edge_transposed":
            groups = -(-num_edges // self.schedule.edges_per_warp)
        else:
            groups = num_rows
        blocks = min(-(-groups // self.schedule.groups_per_block), _MAX_GRID_X)
        return blocks, min(self.num_chunks(num_heads, head_len), _MAX_GRID_Y)


# The C names: an operand's row is the variable named after its target (u, v or e), and an
# operand's values are held in ``a`` (lhs) or ``b`` (rhs), as in the algebra's cuda_expr.
_VAR = {"lhs": "a", "rhs": "b"}


def _load_operand(name: str, target: str, layout: Layout) -> str:
    """Code that fills ``a[V]`` (lhs) or ``b[V]`` (rhs) with features ``f .. f+V-1``."""
    var = _VAR[name]
    row = target
    if layout is Layout.FULL:
        return f"A {var}[V];\ngs::load<V>({name} + {row} * {name}_len + f, {var});"
    if layout is Layout.SCALAR:
        return f"A {var}[V];\n#pragma unroll\nfor (int i = 0; i < V; ++i) {var}[i] = {var}_scalar;"
    return (f"A {var}[V];\n#pragma unroll\nfor (int i = 0; i < V; ++i) "
            f"{var}[i] = gs::to_acc({name}[{row} * {name}_len + {name}_offset[f + i]]);")


def _indexed_expr(expr: str) -> str:
    """``a + b`` -> ``a[i] + b[i]``: the table's expression over element ``i``."""
    return " ".join(f"{token}[i]" if token in ("a", "b") else token for token in expr.split(" "))


def _operands(algorithm: SddmmAlgorithm) -> list[tuple[str, str, Layout]]:
    return [(name, target, layout)
            for name, target, layout in (("lhs", algorithm.lhs_target, algorithm.lhs_layout),
                                         ("rhs", algorithm.rhs_target, algorithm.rhs_layout))
            if layout is not None]


def _scalar_loads(algorithm: SddmmAlgorithm, targets: set[str]) -> list[str]:
    """Per-edge (or per-row) loads of the SCALAR operands whose target is in ``targets``."""
    return [f"const A {_VAR[name]}_scalar = gs::to_acc({name}[{target}]);"
            for name, target, layout in _operands(algorithm)
            if layout is Layout.SCALAR and target in targets]


def _feature_work(algorithm: SddmmAlgorithm, cached: set[str]) -> str:
    """Code for the vector of features at virtual index ``f``: element-wise, compute and
    store the messages; ``dot``, add their products into ``partial``. Operands named in
    ``cached`` are read from ``{a,b}_cache[k]`` instead of memory."""
    lines = []
    for name, target, layout in _operands(algorithm):
        var = _VAR[name]
        if name in cached:
            lines.append(f"const A (&{var})[V] = {var}_cache[k];")
        else:
            lines.append(_load_operand(name, target, layout))
    if algorithm.is_dot:
        lines += ["#pragma unroll", "for (int i = 0; i < V; ++i) partial += a[i] * b[i];"]
    else:
        lines += [
            "A m[V];",
            "#pragma unroll",
            f"for (int i = 0; i < V; ++i) m[i] = {_indexed_expr(BINARY_OPS[algorithm.op].cuda_expr)};",
            "gs::store<V>(out + e * head_len + f, m);",
        ]
    return "\n".join(lines)


def _store_dot(value: str) -> str:
    """Store a head's dot ``value`` at ``out[i]``, added to the sum of the earlier launches'
    slices that ``out`` holds when ``accumulate`` (features_per_launch)."""
    return f"out[i] = gs::from_acc<T>(accumulate ? gs::to_acc(out[i]) + {value} : {value});"


_REDUCE_PARTIAL = f"""\
#pragma unroll
for (int offset = LANES / 2; offset > 0; offset /= 2) {{
    partial += __shfl_xor_sync(mask, partial, offset, LANES);
}}
if (lane == 0) {{
    const long long i = e * num_heads + h;
    {_store_dot("partial")}
}}"""


def _edge_body(algorithm: SddmmAlgorithm) -> list[str]:
    targets = algorithm.targets()
    indices = []
    if "u" in targets:
        indices.append("const long long u = col[p];")
    if "v" in targets:
        indices.append("const long long v = dst[p];")
    indices.append(f"const long long e = {'eid[p]' if algorithm.has_eid else 'p'};")
    indices += _scalar_loads(algorithm, targets)
    vectors = [
        "#pragma unroll",
        "for (int k = 0; k < K; ++k) {",
        "    const int d = d0 + k * LANES * V + lane * V;",
        "    if (d < d_end) {",
        "        const int f = h * head_len + d;" if algorithm.is_dot else
        "        const int f = d;",
        indent(_feature_work(algorithm, cached=set()), 8),
        "    }",
        "}",
    ]
    passes = ["for (int d0 = d_begin; d0 < d_end; d0 += SLICE) {", indent("\n".join(vectors), 4), "}"]
    if algorithm.is_dot:
        heads = ["for (int h = 0; h < num_heads; ++h) {",
                 "    A partial = 0;",
                 indent("\n".join(passes), 4),
                 indent(_REDUCE_PARTIAL, 4),
                 "}"]
    else:
        heads = passes
    return [
        "const long long stride = (long long)gridDim.x * GROUPS;",
        "for (long long p = (long long)blockIdx.x * GROUPS + threadIdx.x / LANES; p < num_edges;",
        "     p += stride) {  // the group's lanes share p, so they leave together",
        indent("\n".join([*indices, *heads]), 4),
        "}",
    ]


def _v_cache(algorithm: SddmmAlgorithm) -> tuple[set[str], list[str]]:
    """The operands read from ``v``'s row, and code that holds the chunk's features of
    them in registers (``{a,b}_cache[K][V]``, zero past ``limit``): ``v`` is the same for
    every edge of a row."""
    cached = {name for name, target, layout in _operands(algorithm)
              if target == "v" and layout is not Layout.SCALAR}
    lines = []
    for name, target, layout in _operands(algorithm):
        if name not in cached:
            continue
        var = _VAR[name]
        lines += [
            f"A {var}_cache[K][V];",
            "#pragma unroll",
            "for (int k = 0; k < K; ++k) {",
            "    const int f = base + k * LANES * V + lane * V;",
            "    if (f < limit) {",
            indent(_load_operand(name, target, layout), 8),
            "        #pragma unroll",
            f"        for (int i = 0; i < V; ++i) {var}_cache[k][i] = {var}[i];",
            "    } else {",
            "        #pragma unroll",
            f"        for (int i = 0; i < V; ++i) {var}_cache[k][i] = 0;",
            "    }",
            "}",
        ]
    return cached, lines


def _row_start(algorithm: SddmmAlgorithm) -> list[str]:
    """The warp's destination row ``v`` and its CSR range; empty rows and rows past the
    end leave at once (whole warps, so no shuffle misses a lane)."""
    return [
        "const long long v = (long long)blockIdx.x * GROUPS + threadIdx.x / 32;",
        "if (v >= num_rows) return;",
        "const long long start = rowptr[v];",
        "const long long end = rowptr[v + 1];",
        "if (start == end) return;",
        "const int sub = (threadIdx.x % 32) / LANES;  // the lane group within the warp",
        *_scalar_loads(algorithm, {"v"}),
    ]


def _lane_features(algorithm: SddmmAlgorithm, cached: set[str]) -> list[str]:
    """The loop over a lane's ``K`` vectors of one edge, in the row skeletons (``v``'s
    features read from the warp's ``cached`` registers)."""
    return [
        "#pragma unroll",
        "for (int k = 0; k < K; ++k) {",
        "    const int f = base + k * LANES * V + lane * V;",
        "    if (f < limit) {",
        indent(_feature_work(algorithm, cached), 8),
        "    }",
        "}",
    ]


def _chunks(algorithm: SddmmAlgorithm) -> list[str]:
    """The opening of the loop over a warp's chunks (closed by the caller), one per
    ``blockIdx.y`` step: a head for ``dot``, a slice of ``SLICE`` features otherwise.
    Either way the chunk covers features ``base .. limit - 1`` (virtual indices) of the
    launch's range ``d_begin .. d_end - 1``, so ``features_per_launch`` slices these
    skeletons as it does the edge skeleton."""
    if algorithm.is_dot:
        return ["for (int h = blockIdx.y; h < num_heads; h += gridDim.y) {",
                "    const int base = h * head_len + d_begin;",
                "    const int limit = h * head_len + d_end;"]
    return ["const int num_chunks = (d_end - d_begin + SLICE - 1) / SLICE;",
            "for (int c = blockIdx.y; c < num_chunks; c += gridDim.y) {",
            "    const int base = d_begin + c * SLICE;",
            "    const int limit = d_end;"]


def _row_body(algorithm: SddmmAlgorithm) -> list[str]:
    cached, cache_lines = _v_cache(algorithm)
    edge_targets = algorithm.targets() - {"v"}
    edge = []
    if "u" in edge_targets:
        edge.append("const long long u = col[p];")
    edge.append(f"const long long e = {'eid[p]' if algorithm.has_eid else 'p'};")
    edge += _scalar_loads(algorithm, edge_targets)
    if algorithm.is_dot:
        edge.append("A partial = 0;")
    edge += _lane_features(algorithm, cached)
    if algorithm.is_dot:
        edge.append(_REDUCE_PARTIAL)
    return [
        "constexpr int EDGES = 32 / LANES;  // edges a warp handles at a time",
        *_row_start(algorithm),
        *_chunks(algorithm),
        indent("\n".join([
            *cache_lines,
            "for (long long p = start + sub; p < end; p += EDGES) {",
            indent("\n".join(edge), 4),
            "}",
        ]), 4),
        "}",
    ]


# The transposed butterfly (a reduce-scatter by shuffles). Each of a group's LANES lanes
# holds sums[0 .. B-1]: its partial dot of each of the batch's B edges. At the step of
# width `half` (B/2, B/4, ..., 1) a lane and its partner `lane ^ half` split the live
# sums[0 .. 2*half-1]: the lane whose `half` bit is clear keeps the first half and sends
# the second, its partner keeps the second and sends the first, and each adds what it
# receives to what it keeps, so sums[i] now covers edge (i + the halves it kept) of twice
# as many lanes. After log2(B) steps (B/2 + B/4 + ... + 1 = B - 1 shuffles) sums[0] is
# edge `lane % B`'s partial over the B lanes that agree with `lane` beyond bit log2(B);
# log2(LANES / B) plain butterfly steps (one shuffle each) add up those LANES / B blocks.
# So B edges take B - 1 + log2(LANES / B) shuffles, against log2(LANES) each one at a time.
_TRANSPOSED_REDUCE = """\
// Counted steps: the unroller must see a constant trip count, or sums[] goes to memory.
#pragma unroll
for (int step = 1; step < B; step *= 2) {
    const int half = B / 2 / step;
    const bool upper = lane & half;
    #pragma unroll
    for (int i = 0; i < half; ++i) {
        const A keep = upper ? sums[i + half] : sums[i];
        const A give = upper ? sums[i] : sums[i + half];
        sums[i] = keep + __shfl_xor_sync(mask, give, half, LANES);
    }
}
#pragma unroll
for (int offset = B; offset < LANES; offset *= 2) {
    sums[0] += __shfl_xor_sync(mask, sums[0], offset, LANES);
}"""


def _transposed_body(algorithm: SddmmAlgorithm, batch: int, by_edge: bool) -> list[str]:
    """Batches of edges: ``dot`` on ``row_transposed`` (``by_edge`` False) and every
    operator on ``edge_transposed`` (``by_edge`` True).

    ``row_transposed``: a warp walks one destination row with ``v``'s features of the head
    in registers. ``edge_transposed``: a warp walks a fixed range of ``edges_per_warp`` CSR
    positions, whatever rows they belong to, and reads ``v`` per edge (in CSR order a
    group's edges mostly share it, so those loads should mostly hit L1; not profiled).
    Either way the warp's groups of ``LANES`` lanes take turns at batches of ``B``
    consecutive edges. For ``dot`` each lane adds up its slice of the head for every edge
    of the batch (``sums[j]`` for edge ``p0 + j``; edges past the end add nothing), the
    transposed butterfly leaves edge ``j``'s dot in lane ``j``, and lanes ``0 .. B-1``
    write the batch's outputs, consecutive for consecutive edges when edge ids are CSR
    positions; other operators store each edge's messages as they go.

    The indices of a batch (source, and destination on ``edge_transposed``) are loaded one
    batch ahead, into ``B`` registers per lane and index: otherwise each batch waits for
    its index loads (streamed from DRAM) before its gathers can start, two round trips per
    batch where the gathers alone need one. Every lane of the group loads the indices
    itself (one broadcast load per edge), where a lane loading the batch's and shuffling
    them out would spend the shuffles the butterfly saves.
    """
    if by_edge:
        cached, cache_lines = set(), []
        edge_targets = algorithm.targets()
    else:
        cached, cache_lines = _v_cache(algorithm)
        edge_targets = algorithm.targets() - {"v"}
    prefetched = [(target, array) for target, array in (("u", "col"), ("v", "dst"))
                  if target in edge_targets]
    edge = [f"const long long {target} = batch_{target}[j];" for target, _ in prefetched]
    if "e" in edge_targets or not algorithm.is_dot:  # element-wise stores go to out[e]
        edge.append(f"const long long e = {'eid[p]' if algorithm.has_eid else 'p'};")
    edge += _scalar_loads(algorithm, edge_targets)
    edge += _lane_features(algorithm, cached)

    def load_next_indices(first: str) -> list[str]:
        return [
            "#pragma unroll",
            "for (int j = 0; j < B; ++j) {",
            f"    const long long p = {first} + j;",
            *(f"    next_{target}[j] = p < end ? {array}[p] : 0;" for target, array in prefetched),
            "}",
        ]

    take_batch = [
        *(f"I batch_{target}[B];" for target, _ in prefetched),
        "#pragma unroll",
        "for (int j = 0; j < B; ++j) {",
        *(f"    batch_{target}[j] = next_{target}[j];" for target, _ in prefetched),
        "}",
        *load_next_indices("p0 + STRIDE"),
    ] if prefetched else []
    if algorithm.is_dot:
        work = [
            "A sums[B];",
            "#pragma unroll",
            "for (int j = 0; j < B; ++j) {",
            "    const long long p = p0 + j;",
            "    A partial = 0;",
            "    if (p < end) {",
            indent("\n".join(edge), 8),
            "    }",
            "    sums[j] = partial;",
            "}",
            _TRANSPOSED_REDUCE,
            "if (lane < B && p0 + lane < end) {",
            "    const long long p = p0 + lane;",
            f"    const long long i = {'eid[p]' if algorithm.has_eid else 'p'} * num_heads + h;",
            f"    {_store_dot('sums[0]')}",
            "}",
        ]
    else:
        work = [
            "#pragma unroll",
            "for (int j = 0; j < B; ++j) {",
            "    const long long p = p0 + j;",
            "    if (p < end) {",
            indent("\n".join(edge), 8),
            "    }",
            "}",
        ]
    walk = [
        *_chunks(algorithm),
        indent("\n".join([
            *cache_lines,
            *(f"I next_{target}[B];  // the group's next batch's {array}"
              for target, array in prefetched),
            *(load_next_indices("start + sub * B") if prefetched else []),
            "// the group's lanes share p0, so they leave together",
            "for (long long p0 = start + sub * B; p0 < end; p0 += STRIDE) {",
            indent("\n".join([*take_batch, *work]), 4),
            "}",
        ]), 4),
        "}",
    ]
    head = [f"constexpr int B = {batch};  // edges per group and batch",
            "constexpr int STRIDE = 32 / LANES * B;  // edges a warp takes per batch"]
    if not by_edge:
        return [*head, *_row_start(algorithm), *walk]
    return [
        *head,
        f"constexpr long long RANGE = STRIDE * {_RANGE_BATCHES};  // edges a warp walks",
        "const int sub = (threadIdx.x % 32) / LANES;  // the lane group within the warp",
        "const long long range_stride = (long long)gridDim.x * GROUPS * RANGE;",
        "for (long long start = ((long long)blockIdx.x * GROUPS + threadIdx.x / 32) * RANGE;",
        "     start < num_edges; start += range_stride) {  // whole warps leave together",
        "    const long long end = start + RANGE < num_edges ? start + RANGE : num_edges;",
        indent("\n".join(walk), 4),
        "}",
    ]


def _min_blocks(algorithm: SddmmAlgorithm, schedule: SddmmSchedule) -> int:
    """Blocks per SM the register allocation must allow.

    Given only the block size, ptxas aims at full occupancy (32 registers per thread) and
    spills to get there. The gathers need registers for loads in flight more than they
    need the last warps: the budget is 64 registers per thread (half occupancy), and 128
    where each lane holds twice as much, in fp64 or with ``v``'s features cached (row
    skeletons; ``row_transposed`` also holds a batch of partial sums).
    """
    heavy = algorithm.dtype == torch.float64 or schedule.skeleton != "edge"
    return max(1, (512 if heavy else 1024) // schedule.threads)


@functools.lru_cache(maxsize=4096)
def generate(algorithm: SddmmAlgorithm, schedule: SddmmSchedule) -> SddmmProgram:
    """The g-SDDMM program for ``algorithm`` under ``schedule``. Pure; no GPU needed."""
    schedule.validate()
    scalar = SCALAR_TYPES[algorithm.dtype]
    body = [
        f"using T = {scalar};",
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
    if schedule.skeleton == "edge":
        body += _edge_body(algorithm)
    elif schedule.skeleton == "row_transposed" and algorithm.is_dot:
        body += _transposed_body(algorithm, schedule.edges_per_batch, by_edge=False)
    elif schedule.skeleton == "edge_transposed":
        body += _transposed_body(algorithm, schedule.edges_per_batch, by_edge=True)
    else:  # only a dot has a reduction to transpose: other operators run the row code
        body += _row_body(algorithm)
    index = INDEX_TYPES[algorithm.index_dtype]
    source = f"""// gsparse g-SDDMM: {algorithm}
// schedule {schedule}: {schedule.to_json()}
{PRELUDE}
using I = {index};

extern "C" __global__ void __launch_bounds__({schedule.threads}, {_min_blocks(algorithm, schedule)})
{KERNEL_NAME}(const I* __restrict__ rowptr, const I* __restrict__ col,
        const I* __restrict__ dst, const I* __restrict__ eid,
        const {scalar}* __restrict__ lhs, const {scalar}* __restrict__ rhs,
        const int* __restrict__ lhs_offset, const int* __restrict__ rhs_offset,
        {scalar}* __restrict__ out,
        long long num_rows, long long num_edges, int num_heads, int head_len,
        long long lhs_len, long long rhs_len, int d_begin, int d_end, int accumulate)
{{
{indent(chr(10).join(body), 4)}
}}
"""
    return SddmmProgram(source, KERNEL_NAME, schedule, algorithm.is_dot)


# --------------------------------------------------------------------------- launch


@functools.lru_cache(maxsize=1024)
def _kernel(algorithm: SddmmAlgorithm, schedule: SddmmSchedule,
            device_index: int) -> tuple[runtime.Kernel, str]:
    """The loaded kernel and its description for errors, found without hashing the source
    again on every call."""
    program = generate(algorithm, schedule)
    context = f"{algorithm} | schedule {schedule}"
    kernel = runtime.get_kernel(program.source, program.kernel_name, context=context,
                                device=device_index)
    return kernel, context


def _allocate(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Output storage; the kernel writes every element. Tests poison it through this hook."""
    return torch.empty(shape, dtype=dtype, device=device)


def run_sddmm(
    g: Graph,
    op: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    lhs_target: str,
    rhs_target: str,
    out_shape: tuple[int, ...],
    schedule: SddmmSchedule | None = None,
) -> torch.Tensor:
    """g-SDDMM with a generated kernel; operands as the front end hands them to backends.

    ``lhs`` / ``rhs`` are ``[rows, *shape]`` with rows on their target (edge operands in
    user edge order) and the rank of ``out_shape``; for ``dot``, ``out_shape`` ends in 1
    and the operands' last dimension is the one reduced. Returns ``[num_edges, *out_shape]``
    in user edge order.

    Raises ValueError when a forced ``schedule`` is invalid, needs wider vectors than the
    operands' alignment allows, or is a row or transposed skeleton whose slice cannot hold
    a ``dot`` head.
    """
    binop = BINARY_OPS[op]
    operand = lhs if lhs is not None else rhs
    dtype, device = operand.dtype, operand.device
    lhs = lhs.contiguous() if binop.uses_lhs else None
    rhs = rhs.contiguous() if binop.uses_rhs else None
    out = _allocate((g.num_edges, *out_shape), dtype, device)
    if binop.reduces_last_dim:
        head_len = operand.shape[-1]
        num_heads = math.prod(out_shape[:-1])
        full_shape = (*out_shape[:-1], head_len)
    else:
        num_heads, head_len, full_shape = 1, math.prod(out_shape), tuple(out_shape)
    if out.numel() == 0:
        return out
    if head_len == 0:  # a dot over nothing
        return out.zero_()
    if num_heads * head_len > _MAX_INT32:
        raise ValueError(f"{num_heads * head_len} features per edge; generated kernels index "
                         f"the features of one row with 32-bit integers (at most {_MAX_INT32})")

    if schedule is not None and not isinstance(schedule, SddmmSchedule):
        raise TypeError(f"schedule must be an SddmmSchedule, got {type(schedule).__name__}")
    full = [t for t in (lhs, rhs) if t is not None and tuple(t.shape[1:]) == full_shape]
    if not binop.reduces_last_dim:
        full.append(out)  # element-wise results are stored as vectors too
    key = _PlanKey(op, lhs_target if binop.uses_lhs else None, rhs_target if binop.uses_rhs else None,
                   None if lhs is None else tuple(lhs.shape[1:]),
                   None if rhs is None else tuple(rhs.shape[1:]), full_shape, num_heads, dtype,
                   vector_limit(head_len, full, dtype), schedule, device)
    plan = g.derived(("gsparse.kernels.sddmm.plan", key), lambda g: _plan(g, key))
    plan(lhs, rhs, out)
    return out


@dataclass(frozen=True)
class _PlanKey:
    """Everything a g-SDDMM launch depends on besides the operands' data."""

    op: str
    lhs_target: str | None
    rhs_target: str | None
    lhs_shape: tuple[int, ...] | None
    rhs_shape: tuple[int, ...] | None
    full_shape: tuple[int, ...]
    num_heads: int
    dtype: torch.dtype
    vector_ok: int
    schedule: SddmmSchedule | None
    device: torch.device


def _plan(g: Graph, key: _PlanKey) -> Callable[[torch.Tensor | None, torch.Tensor | None, torch.Tensor], None]:
    """The launches of one g-SDDMM on ``g``: schedule chosen (or checked), kernel compiled
    and loaded, grid and scalar arguments computed. Kept with the graph, so that a repeated
    call only fills in the operands' pointers."""
    binop = BINARY_OPS[key.op]
    head_len = key.full_shape[-1] if binop.reduces_last_dim else math.prod(key.full_shape)
    dtype, schedule = key.dtype, key.schedule
    if schedule is None:
        schedule = default_schedule(g, head_len, dtype, key.vector_ok,
                                    dot=binop.reduces_last_dim)
    else:
        schedule.validate()
        if schedule.vector_width > key.vector_ok:
            raise ValueError(
                f"schedule {schedule} moves {schedule.vector_width} features at a time, but these "
                f"operands allow at most {key.vector_ok} ({head_len} features per head; vector "
                f"accesses need the head length to be a multiple of the width and aligned "
                f"data pointers)")
        if (schedule.features_per_launch and binop.reduces_last_dim
                and element_size(dtype) < 4):
            raise ValueError(
                f"schedule {schedule} splits a {dtype} dot across launches, which would round "
                f"its partial sums to {dtype} in between; use features_per_launch=0")
        launch_len = schedule.launch_len(head_len)
        if (schedule.skeleton != "edge" and binop.reduces_last_dim
                and schedule.feature_slice < launch_len):
            raise ValueError(
                f"schedule {schedule} is a {schedule.skeleton} skeleton whose slice of "
                f"{schedule.feature_slice} features cannot hold the {launch_len} features of a "
                f"dot head that one launch covers; widen lanes, features_per_thread or "
                f"vector_width, set features_per_launch to the slice, or use the edge "
                f"skeleton")

    def layout(shape: tuple[int, ...] | None) -> Layout | None:
        return None if shape is None else operand_layout(shape, key.full_shape)

    algorithm = SddmmAlgorithm(
        op=key.op,
        lhs_target=key.lhs_target,
        rhs_target=key.rhs_target,
        lhs_layout=layout(key.lhs_shape),
        rhs_layout=layout(key.rhs_shape),
        dtype=dtype,
        index_dtype=g.index_dtype,
        has_eid=g.eid is not None,
    )
    program = generate(algorithm, schedule)
    device_index = key.device.index if key.device.index is not None else torch.cuda.current_device()
    kernel, context = _kernel(algorithm, schedule, device_index)
    walks_rows = schedule.skeleton in _ROW_SKELETONS
    targets = algorithm.targets()

    grid, block = program.grid(g.num_edges, g.num_dst, key.num_heads, head_len), program.block
    graph_args = [
        g.rowptr if walks_rows else None,
        g.col if "u" in targets else None,
        g.csr_dst if not walks_rows and "v" in targets else None,
        g.eid,
    ]
    operand_offsets = [indexed_offsets(key.lhs_shape, key.full_shape, key.device),
                       indexed_offsets(key.rhs_shape, key.full_shape, key.device)]
    scalars = [
        runtime.i64(g.num_dst),
        runtime.i64(g.num_edges),
        runtime.i32(key.num_heads),
        runtime.i32(head_len),
        runtime.i64(0 if key.lhs_shape is None else math.prod(key.lhs_shape)),
        runtime.i64(0 if key.rhs_shape is None else math.prod(key.rhs_shape)),
    ]
    step = schedule.launch_len(head_len)
    # (first feature, end, whether to add to out's partial sums) of each launch
    ranges = [(runtime.i32(begin), runtime.i32(min(head_len, begin + step)), runtime.i32(int(begin > 0)))
              for begin in range(0, head_len, step)]

    launches = [kernel.prepare(grid, block, [*graph_args, runtime.OPERAND, runtime.OPERAND,
                                             *operand_offsets, runtime.OPERAND, *scalars,
                                             *feature_range], context=context)
                for feature_range in ranges]

    def launch(lhs, rhs, out) -> None:
        for prepared in launches:
            prepared(lhs, rhs, out)

    return launch
