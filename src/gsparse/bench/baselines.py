"""What the suite measures: each benchmark case, its implementations, and their reference check.

A :class:`Case` is one operator instance (``spmm/copy_lhs_sum``, ``sddmm/u_dot_v``,
``softmax/dst``, ...). For a graph, a feature length and a dtype it draws random inputs,
knows how many bytes must move at least (the memory floor), and offers implementations:

* ``gsparse`` — our public front end (:func:`gsparse.gspmm`, :func:`gsparse.gsddmm`,
  :func:`gsparse.edge_softmax`), with the default schedule or a forced one;
* ``torch.sparse`` — ``torch.sparse.mm`` on a torch sparse CSR with the graph's indices (on
  a CUDA device that is cuSPARSE's SpMM; on the CPU, PyTorch's sparse kernels), and
  ``torch.sparse.sampled_addmm`` for the SDDMM;
* ``PyG`` — PyTorch Geometric's message-passing path: ``index_select`` of the source
  features, then ``torch_geometric.utils.scatter`` with the case's reducer (PyTorch's
  ``index_add_`` / ``scatter_reduce_`` when PyG is not installed; :func:`~.scatter.pyg_backend` says
  which), and for SDDMM the gather of both ends and the op (then a sum for ``dot``). It is
  the baseline of the cases cuSPARSE has no routine for (mean, max, multi-head add/mul);
* ``PyTorch`` — edge softmax written with PyTorch scatter ops (scatter max, exp, scatter
  sum, divide), as most GNN codes do.

These names (:data:`GSPARSE`, :data:`TORCH_SPARSE`, :data:`PYG`, :data:`PYTORCH`) are the
same in the console lines, the JSON document and the report.

**The reference check.** Before any time is accepted, every output is compared with a
float64 result computed with PyTorch ops on the device, on a *sample* of destination rows
(all rows of small graphs; on big graphs random rows up to about 4M reference elements):
``‖out − ref‖ / ‖ref‖`` over the sampled entries must stay under the dtype's tolerance
(:data:`TOLERANCE`) and NaN never passes. The sample keeps the check cheap on 100M-edge
graphs while still catching wrong indexing anywhere in a row, and it is independent of
every implementation measured (cuSPARSE included), so a shared mistake cannot pass.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

import gsparse

from ..algebra import BINARY_OPS, REDUCERS
from ..graph import Graph
from ..kernels import sddmm as sddmm_kernels
from ..kernels import spmm as spmm_kernels
from .scatter import scatter as _scatter
from .scatter import torch_scatter as _torch_scatter

__all__ = ["CASES", "OPS", "TOLERANCE", "Case", "Impl", "Inputs", "Sample", "GSPARSE",
           "TORCH_SPARSE", "PYG", "PYTORCH"]

# The implementations' names: console, JSON document and report all use these.
GSPARSE = "gsparse"
TORCH_SPARSE = "torch.sparse"  # cuSPARSE on a GPU, PyTorch's sparse kernels (MKL) on a CPU
PYG = "PyG"
PYTORCH = "PyTorch"  # plain PyTorch scatter ops

_HEADS = 8  # heads of the multi-head g-SDDMM cases: [N, 8, F / 8], e.g. [N, 8, 16] at F = 128


def _multihead_case(op: str, rhs_target: str) -> Case:
    """``u_add_v`` or ``u_mul_e`` with ``_HEADS`` heads (GAT-like shapes): node features
    ``[N, heads, F / heads]``, edge weights ``[E, heads, 1]``, against the PyG gather."""
    rhs = "y" if rhs_target == "v" else "w"
    combine = BINARY_OPS[op].torch_fn

    def reference(i: Inputs, s: Sample) -> torch.Tensor:
        lhs = i.tensors["x"][i.graph.col.long()[s.positions]].double()
        rows = s.rows[s.segment] if rhs_target == "v" else s.edge_ids
        return combine(lhs, i.tensors[rhs][rows].double()).reshape(rows.numel(), -1)

    def pyg(x: torch.Tensor, other: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return combine(x.index_select(0, src), other.index_select(0, dst) if rhs_target == "v" else other)

    def floor(g: Graph, feature_len: int, elem: int) -> tuple[int, int]:
        """CSR and edge ids, the node features once, the edge weights, the output."""
        idx = g.index_dtype.itemsize
        graph_bytes = idx * (g.num_dst + 1 + g.num_edges + (g.num_edges if g.eid is not None else 0))
        other = g.num_dst * feature_len if rhs_target == "v" else g.num_edges * _HEADS
        dense = elem * (g.num_src * feature_len + other + g.num_edges * feature_len)
        return graph_bytes + dense, elem * feature_len * g.num_edges

    return Case(
        op="sddmm",
        name=f"u_{op}_{rhs_target}_{_HEADS}heads",
        baseline=PYG,
        operands={"x": ("src", True), rhs: ("dst", True) if rhs_target == "v" else ("edge", False)},
        reference=reference,
        ours=lambda i, schedule: gsparse.gsddmm(i.graph, op, i.tensors["x"], i.tensors[rhs], "u",
                                                rhs_target, schedule=schedule),
        ours_pick=_edges_of,
        baselines=(Impl(PYG, lambda i: (i.tensors["x"], i.tensors[rhs], i.src, i.dst), pyg, _edges_of),),
        floor_bytes=floor,
        kernel_task=lambda i: ("sddmm", sddmm_kernels.task_for(
            i.graph, op, i.tensors["x"], i.tensors[rhs], "u", rhs_target, tuple(i.tensors["x"].shape[1:]))),
        heads=_HEADS,
    )


# ‖out − ref‖ / ‖ref‖ accepted per dtype (float32 arithmetic lands far under its bound).
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 5e-3, torch.bfloat16: 2e-2}

# Reference elements (rows x features) a check computes at most, beyond the first row.
_REFERENCE_BUDGET = 4 << 20
_MIN_SAMPLE_ROWS = 16


@dataclass(frozen=True, eq=False)
class Inputs:
    """One independent set of inputs for a cell: the graph and its random operands.

    ``tensors`` holds the case's operands (``x`` ``[num_src, F]``, ``y`` ``[num_dst, F]``,
    ``w`` ``[E]``, ``logits`` ``[E, H]``; multi-head cases: ``[rows, heads, F / heads]`` and
    ``w`` ``[E, heads, 1]``), edge operands in the graph's edge order.
    ``src``/``dst`` are ``[E]`` int64 endpoints in edge order (what a PyG user holds).
    """

    graph: Graph
    tensors: dict[str, torch.Tensor]
    src: torch.Tensor
    dst: torch.Tensor


@dataclass(frozen=True, eq=False)
class Sample:
    """Sampled destination rows and the CSR positions of their edges.

    ``rows`` ``[R]`` int64; ``positions`` ``[P]`` int64 CSR positions of their edges, row
    by row; ``segment`` ``[P]`` the index into ``rows`` of each position; ``edge_ids``
    ``[P]`` the user edge id of each position.
    """

    rows: torch.Tensor
    positions: torch.Tensor
    segment: torch.Tensor
    edge_ids: torch.Tensor


def sample_rows(g: Graph, feature_len: int, gen: torch.Generator) -> Sample:
    """Random destination rows whose reference fits the budget (every row when it fits)."""
    deg = g.in_degrees().long()
    order = torch.randperm(g.num_dst, generator=gen, device=g.device)
    cost = (deg[order] + 1) * max(feature_len, 1)
    keep = max(_MIN_SAMPLE_ROWS, int((torch.cumsum(cost, 0) <= _REFERENCE_BUDGET).sum()))
    rows = torch.sort(order[:keep]).values
    counts = deg[rows]
    segment = torch.repeat_interleave(torch.arange(rows.numel(), device=g.device), counts)
    starts = g.rowptr.long()[rows]
    first = torch.cumsum(counts, 0) - counts
    positions = starts[segment] + torch.arange(segment.numel(), device=g.device) - first[segment]
    edge_ids = positions if g.eid is None else g.eid.long()[positions]
    return Sample(rows, positions, segment, edge_ids)


@dataclass(frozen=True)
class Impl:
    """One implementation of a case.

    ``prepare(inputs)`` builds what it holds before the timed region (a sparse tensor, an
    index) and returns the argument tuple of ``run``; ``run(*args)`` is the timed call;
    ``pick(out, sample)`` returns the sampled entries of ``out`` as float64, shaped as the
    case's reference.
    """

    name: str
    prepare: Callable[[Inputs], tuple[Any, ...]]
    run: Callable[..., torch.Tensor]
    pick: Callable[[torch.Tensor, Sample], torch.Tensor]


def _csr_tensor(g: Graph, values: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        # "Sparse CSR support is in beta": the warning would repeat for every cell.
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(g.rowptr, g.col, values, (g.num_dst, g.num_src),
                                       check_invariants=False)


def _in_csr_order(g: Graph, edge_values: torch.Tensor) -> torch.Tensor:
    return edge_values if g.eid is None else edge_values[g.eid.long()]


def _rows_of(out: torch.Tensor, s: Sample) -> torch.Tensor:
    return out[s.rows].double()


def _edges_of(out: torch.Tensor, s: Sample) -> torch.Tensor:
    return out.reshape(out.shape[0], -1)[s.edge_ids].double()


def _csr_values_of(out: torch.Tensor, s: Sample) -> torch.Tensor:
    return out.values()[s.positions].double().unsqueeze(-1)


@dataclass(frozen=True)
class Case:
    """One operator instance of the suite.

    Attributes:
        op: the operator family (``spmm``, ``sddmm``, ``softmax``): the CLI's ``--ops``.
        name: the case within it (``copy_lhs_sum``, ``u_mul_e_sum``, ``u_dot_v``, ``dst``).
        baseline: the implementation speedups are reported against (cuSPARSE where it exists).
        kernel_task: the generated-kernel operator (a key of
            :data:`gsparse.kernels.OPERATORS`) and task of the case's call on some inputs,
            which give a sweep the space and the schedule the default path runs; ``None``
            when the case has no schedules (edge softmax).
        operands: operand name -> (rows: ``src``/``dst``/``edge``, has a feature axis).
        heads: 1, or the heads of a multi-head case: its node operands are then
            ``[rows, heads, F / heads]`` and its edge weights ``[E, heads, 1]``, and it runs
            at the feature lengths ``F`` that ``heads`` divides (:meth:`runs_at`).
        swept_by_default: whether ``--sweep`` sweeps the case; the others only with
            ``--sweep-all``. By default only the case compared with cuSPARSE of each
            family is, which takes a third to a quarter of the device time of them all.
    """

    op: str
    name: str
    baseline: str
    operands: dict[str, tuple[str, bool]]
    reference: Callable[[Inputs, Sample], torch.Tensor]
    ours: Callable[[Inputs, Any], torch.Tensor]
    ours_pick: Callable[[torch.Tensor, Sample], torch.Tensor]
    baselines: tuple[Impl, ...]
    floor_bytes: Callable[[Graph, int, int], tuple[int, int]]
    kernel_task: Callable[[Inputs], tuple[str, Any]] | None = None
    heads: int = 1
    swept_by_default: bool = False

    @property
    def label(self) -> str:
        return f"{self.op}/{self.name}"

    def runs_at(self, feature_len: int) -> bool:
        """Whether the case has a cell at this feature length (``heads`` must divide it)."""
        return feature_len % self.heads == 0

    def make_inputs(
        self,
        g: Graph,
        feature_len: int,
        dtype: torch.dtype,
        gen: torch.Generator,
        endpoints: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> Inputs:
        """Fresh random operands (never zeros): features ``N(0, 1)``, edge weights in ``[0.5, 1.5)``.

        ``endpoints`` are ``g``'s ``(src, dst)`` as int64, when the caller keeps them across
        cells (on a 100M-edge graph they take seconds and gigabytes to rebuild).
        """
        rows = {"src": g.num_src, "dst": g.num_dst, "edge": g.num_edges}
        features = (feature_len,) if self.heads == 1 else (self.heads, feature_len // self.heads)
        tensors = {}
        for name, (kind, featured) in self.operands.items():
            if featured:
                shape = (rows[kind], *features)
            else:
                shape = (rows[kind],) if self.heads == 1 else (rows[kind], self.heads, 1)
            if kind == "edge" and not featured:
                t = torch.rand(shape, generator=gen, device=g.device) + 0.5
            else:
                t = torch.randn(shape, generator=gen, device=g.device)
            tensors[name] = t.to(dtype)
        if endpoints is None:
            src, dst = g.edges()
            endpoints = (src.long(), dst.long())
        return Inputs(g, tensors, *endpoints)

    def implementations(self, schedule: Any = None) -> list[Impl]:
        """``gsparse`` (with ``schedule``, ``None`` for the default) followed by the baselines."""
        ours = Impl(GSPARSE, lambda i: (i,), lambda i: self.ours(i, schedule), self.ours_pick)
        return [ours, *self.baselines]


# ------------------------------------------------------------------ g-SpMM


def _spmm_reference(weighted: bool, reduce: str) -> Callable[[Inputs, Sample], torch.Tensor]:
    def reference(i: Inputs, s: Sample) -> torch.Tensor:
        x = i.tensors["x"]
        msg = x[i.graph.col.long()[s.positions]].double()
        if weighted:
            msg = msg * i.tensors["w"][s.edge_ids].double().unsqueeze(-1)
        return _torch_scatter(msg, s.segment, s.rows.numel(), reduce)

    return reference


def _spmm_floor(weighted: bool) -> Callable[[Graph, int, int], tuple[int, int]]:
    """Bytes read/written once (CSR, x, out, weights) and bytes of gathered source rows."""

    def floor(g: Graph, feature_len: int, elem: int) -> tuple[int, int]:
        idx = g.index_dtype.itemsize
        graph_bytes = idx * (g.num_dst + 1 + g.num_edges)
        edge_bytes = 0
        if weighted:
            edge_bytes = elem * g.num_edges + (idx * g.num_edges if g.eid is not None else 0)
        dense = elem * feature_len * (g.num_src + g.num_dst)
        return graph_bytes + edge_bytes + dense, elem * feature_len * g.num_edges

    return floor


def _cusparse_spmm_prepare(weighted: bool) -> Callable[[Inputs], tuple[Any, ...]]:
    def prepare(i: Inputs) -> tuple[Any, ...]:
        x = i.tensors["x"]
        if weighted:
            values = _in_csr_order(i.graph, i.tensors["w"])
        else:
            values = torch.ones(i.graph.num_edges, dtype=x.dtype, device=x.device)
        return _csr_tensor(i.graph, values), x

    return prepare


def _pyg_spmm_prepare(weighted: bool, reduce: str) -> Callable[[Inputs], tuple[Any, ...]]:
    def prepare(i: Inputs) -> tuple[Any, ...]:
        w = i.tensors["w"].unsqueeze(-1) if weighted else None
        return i.tensors["x"], w, i.src, i.dst, i.graph.num_dst, reduce

    return prepare


def _pyg_spmm(x: torch.Tensor, w: torch.Tensor | None, src: torch.Tensor, dst: torch.Tensor,
              num_dst: int, reduce: str) -> torch.Tensor:
    msg = x.index_select(0, src)
    if w is not None:
        msg = msg * w
    return _scatter(msg, dst, num_dst, reduce)


def _spmm_case(name: str, weighted: bool, swept_by_default: bool, reduce: str = "sum") -> Case:
    """``copy_lhs`` (or ``u_mul_e`` when ``weighted``) with ``reduce``. cuSPARSE computes
    sums only: the other reducers are compared with the PyG path."""
    operands = {"x": ("src", True)}
    if weighted:
        operands["w"] = ("edge", False)

    def ours(i: Inputs, schedule: Any) -> torch.Tensor:
        if weighted:
            return gsparse.gspmm(i.graph, "mul", reduce, i.tensors["x"], i.tensors["w"].unsqueeze(-1),
                                 schedule=schedule)
        return gsparse.gspmm(i.graph, "copy_lhs", reduce, i.tensors["x"], schedule=schedule)

    pyg = Impl(PYG, _pyg_spmm_prepare(weighted, reduce), _pyg_spmm, _rows_of)
    # cuSPARSE multiplies: it computes sums only
    if not REDUCERS[reduce].keeps_arg and not REDUCERS[reduce].divides_by_degree:
        baselines = (Impl(TORCH_SPARSE, _cusparse_spmm_prepare(weighted), torch.sparse.mm, _rows_of), pyg)
    else:
        baselines = (pyg,)
    return Case(
        op="spmm",
        name=name,
        baseline=baselines[0].name,
        operands=operands,
        reference=_spmm_reference(weighted, reduce),
        ours=ours,
        ours_pick=_rows_of,
        baselines=baselines,
        floor_bytes=_spmm_floor(weighted),
        kernel_task=lambda i: ("spmm", spmm_kernels.task_for(
            i.graph, "mul" if weighted else "copy_lhs", reduce, i.tensors["x"],
            i.tensors["w"].unsqueeze(-1) if weighted else None, tuple(i.tensors["x"].shape[1:]))),
        swept_by_default=swept_by_default,
    )


# ------------------------------------------------------------------ g-SDDMM


def _sddmm_reference(i: Inputs, s: Sample) -> torch.Tensor:
    u = i.graph.col.long()[s.positions]
    v = s.rows[s.segment]
    return (i.tensors["x"][u].double() * i.tensors["y"][v].double()).sum(-1, keepdim=True)


def _sddmm_floor(g: Graph, feature_len: int, elem: int) -> tuple[int, int]:
    """CSR, both node feature tensors once, one output per edge; one gathered row per edge."""
    idx = g.index_dtype.itemsize
    graph_bytes = idx * (g.num_dst + 1 + g.num_edges + (g.num_edges if g.eid is not None else 0))
    dense = elem * feature_len * (g.num_src + g.num_dst) + elem * g.num_edges
    return graph_bytes + dense, elem * feature_len * g.num_edges


def _cusparse_sddmm_prepare(i: Inputs) -> tuple[Any, ...]:
    x, y = i.tensors["x"], i.tensors["y"]
    pattern = _csr_tensor(i.graph, torch.ones(i.graph.num_edges, dtype=x.dtype, device=x.device))
    return pattern, y, x.t()


def _cusparse_sddmm(pattern: torch.Tensor, y: torch.Tensor, xt: torch.Tensor) -> torch.Tensor:
    # out[v, u] = y[v] . x[u] on the graph's pattern; beta = 0 ignores the pattern's values.
    return torch.sparse.sampled_addmm(pattern, y, xt, beta=0.0, alpha=1.0)


def _pyg_sddmm(x: torch.Tensor, y: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    return (x.index_select(0, src) * y.index_select(0, dst)).sum(-1)


def _sddmm_case() -> Case:
    return Case(
        op="sddmm",
        name="u_dot_v",
        baseline=TORCH_SPARSE,
        operands={"x": ("src", True), "y": ("dst", True)},
        reference=_sddmm_reference,
        ours=lambda i, schedule: gsparse.gsddmm(i.graph, "dot", i.tensors["x"], i.tensors["y"], "u", "v",
                                                schedule=schedule),
        ours_pick=_edges_of,
        baselines=(
            Impl(TORCH_SPARSE, _cusparse_sddmm_prepare, _cusparse_sddmm, _csr_values_of),
            Impl(PYG, lambda i: (i.tensors["x"], i.tensors["y"], i.src, i.dst), _pyg_sddmm, _edges_of),
        ),
        floor_bytes=_sddmm_floor,
        kernel_task=lambda i: ("sddmm", sddmm_kernels.task_for(i.graph, "dot", i.tensors["x"], i.tensors["y"],
                                                               "u", "v", (1,))),
        swept_by_default=True,
    )


# ------------------------------------------------------------------ edge softmax


def _softmax_reference(i: Inputs, s: Sample) -> torch.Tensor:
    z = i.tensors["logits"][s.edge_ids].double()
    size = (s.rows.numel(), z.shape[1])
    index = s.segment.unsqueeze(-1).expand_as(z)
    row_max = torch.full(size, float("-inf"), dtype=torch.float64, device=z.device)
    row_max.scatter_reduce_(0, index, z, "amax")
    e = torch.exp(z - row_max[s.segment])
    total = torch.zeros(size, dtype=torch.float64, device=z.device).index_add_(0, s.segment, e)
    return e / total[s.segment]


def _softmax_floor(g: Graph, heads: int, elem: int) -> tuple[int, int]:
    """Row offsets (and edge ids when edges are permuted), logits read once, output written once."""
    idx = g.index_dtype.itemsize
    graph_bytes = idx * (g.num_dst + 1 + (g.num_edges if g.eid is not None else 0))
    return graph_bytes + 2 * elem * heads * g.num_edges, 0


def _torch_softmax(logits: torch.Tensor, dst: torch.Tensor, num_dst: int) -> torch.Tensor:
    x = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    index = dst.unsqueeze(-1).expand_as(x)
    row_max = torch.full((num_dst, x.shape[1]), float("-inf"), dtype=x.dtype, device=x.device)
    row_max.scatter_reduce_(0, index, x, "amax")
    e = torch.exp(x - row_max.index_select(0, dst))
    total = _scatter(e, dst, num_dst)
    return (e / total.index_select(0, dst)).to(logits.dtype)


def _softmax_case() -> Case:
    return Case(
        op="softmax",
        name="dst",
        baseline=PYTORCH,
        operands={"logits": ("edge", True)},
        reference=_softmax_reference,
        ours=lambda i, schedule: gsparse.edge_softmax(i.graph, i.tensors["logits"]),
        ours_pick=_edges_of,
        baselines=(
            Impl(PYTORCH, lambda i: (i.tensors["logits"], i.dst, i.graph.num_dst), _torch_softmax, _edges_of),
        ),
        floor_bytes=_softmax_floor,
    )


CASES: dict[str, tuple[Case, ...]] = {
    "spmm": (_spmm_case("copy_lhs_sum", weighted=False, swept_by_default=True),
             _spmm_case("u_mul_e_sum", weighted=True, swept_by_default=False),
             _spmm_case("copy_lhs_mean", weighted=False, swept_by_default=False, reduce="mean"),
             _spmm_case("copy_lhs_max", weighted=False, swept_by_default=False, reduce="max")),
    "sddmm": (_sddmm_case(), _multihead_case("add", "v"), _multihead_case("mul", "e")),
    "softmax": (_softmax_case(),),
}
OPS = tuple(CASES)
