"""The operators as ``torch.library`` custom ops: differentiable, traceable, autocast-aware.

A :class:`~gsparse.Graph` is not a tensor, so every op takes the graph's
:attr:`~gsparse.Graph.parts` ``(rowptr, col, eid, num_src)`` instead; the implementation
finds the live graph that owns them (and its caches: reverse graph, COO) with
``Graph._find``. To ``torch.compile`` each op is one opaque node with a fake
implementation that only computes the output shape, so models trace without graph breaks.

Operands reach these ops as the front ends shaped them: feature dimensions padded to the
same count (DGL broadcasting), one dtype. Backward passes are written with these same ops
(plus dense PyTorch ops), so they run on whichever backend serves the device, trace under
``torch.compile`` and can be differentiated again. Gradients follow DGL:

* g-SpMM sum/mean: the node gradient is a g-SpMM on the reverse graph (on the eager path,
  a sampled block whose reverse graph is not built scatters over its own edges instead:
  :mod:`gsparse._block_scatter`), the edge gradient a g-SDDMM; max/min send each output
  gradient to the winning edge's operands only, found through the ``arg_u``/``arg_e``
  indices of the forward pass.
* g-SDDMM: an operand on a node gathers the gradients of its edges with a g-SpMM (on the
  graph for ``v``, on the reverse graph for ``u``); an operand on the edge takes them as is.
* Broadcast feature dimensions are summed back to the operand's shape.

Plain eager calls whose operands require grad skip the custom ops' dispatch, which costs
far more host time than a small graph's kernels: the front ends hand their resolved call
(:mod:`gsparse._calls`) to :mod:`gsparse._resolved`, whose ``autograd.Function`` backward
runs this module's formulas, with the graph at hand. The custom ops stay the registered
operators, which ``torch.compile`` traces.
"""

import math
from typing import Optional

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from . import _block_scatter, _calls, _resolved, backends
from ._checks import broadcast_shapes
from .algebra import BINARY_OPS, REDUCERS
from .graph import Graph

__all__ = ["spmm", "spmm_arg", "sddmm", "edge_softmax", "edge_softmax_grad", "gat_attention",
           "gat_attention_grad", "autocast_operands",
           "needs_grad", "direct_call_ok", "contiguous"]

Parts = tuple[Tensor, Tensor, Optional[Tensor], int]


def _graph(rowptr: Tensor, col: Tensor, eid: Optional[Tensor], num_src: int, transpose: bool) -> Graph:
    g = Graph._find(rowptr, col, eid, num_src)
    return g.reverse() if transpose else g


def contiguous(t: Optional[Tensor]) -> Optional[Tensor]:
    """``t`` in contiguous layout, as backends take their operands (None stays None)."""
    return None if t is None else t.contiguous()


def _operand(lhs: Optional[Tensor], rhs: Optional[Tensor]) -> Tensor:
    return lhs if lhs is not None else rhs


# ---------------------------------------------------------------------- forward ops


@torch.library.custom_op("gsparse::spmm", mutates_args=())
def spmm(
    rowptr: Tensor,
    col: Tensor,
    eid: Optional[Tensor],
    num_src: int,
    op: str,
    reduce: str,
    lhs: Optional[Tensor],
    rhs: Optional[Tensor],
    out_shape: list[int],
    transpose: bool,
) -> Tensor:
    """g-SpMM ``[rows, *out_shape]`` on the graph (``transpose``: on its reverse graph,
    whose rows are the source nodes). Differentiable for sum and mean; max/min gradients
    need the winners, which :func:`spmm_arg` keeps."""
    g = _graph(rowptr, col, eid, num_src, transpose)
    return backends.for_device(g.device).spmm(
        g, op, reduce, contiguous(lhs), contiguous(rhs), tuple(out_shape))


@spmm.register_fake
def _spmm_fake(rowptr, col, eid, num_src, op, reduce, lhs, rhs, out_shape, transpose):
    rows = num_src if transpose else rowptr.shape[0] - 1
    return _operand(lhs, rhs).new_empty((rows, *out_shape))


@torch.library.custom_op("gsparse::spmm_arg", mutates_args=())
def spmm_arg(
    rowptr: Tensor,
    col: Tensor,
    eid: Optional[Tensor],
    num_src: int,
    op: str,
    reduce: str,
    lhs: Optional[Tensor],
    rhs: Optional[Tensor],
    out_shape: list[int],
    transpose: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    """g-SpMM max/min with its winners: ``(out, arg_u, arg_e)``, the indices int64 of
    ``out``'s shape (-1 in rows with no edges). Differentiable in ``out``."""
    g = _graph(rowptr, col, eid, num_src, transpose)
    out, arg_u, arg_e = backends.for_device(g.device).spmm(
        g, op, reduce, contiguous(lhs), contiguous(rhs), tuple(out_shape), with_arg=True)
    return out, arg_u, arg_e


@spmm_arg.register_fake
def _spmm_arg_fake(rowptr, col, eid, num_src, op, reduce, lhs, rhs, out_shape, transpose):
    out = _spmm_fake(rowptr, col, eid, num_src, op, reduce, lhs, rhs, out_shape, transpose)
    return out, out.new_empty(out.shape, dtype=torch.int64), out.new_empty(out.shape, dtype=torch.int64)


@torch.library.custom_op("gsparse::sddmm", mutates_args=())
def sddmm(
    rowptr: Tensor,
    col: Tensor,
    eid: Optional[Tensor],
    num_src: int,
    op: str,
    lhs: Optional[Tensor],
    rhs: Optional[Tensor],
    lhs_target: str,
    rhs_target: str,
    out_shape: list[int],
) -> Tensor:
    """g-SDDMM ``[num_edges, *out_shape]`` in edge order."""
    g = _graph(rowptr, col, eid, num_src, False)
    return backends.for_device(g.device).sddmm(
        g, op, contiguous(lhs), contiguous(rhs), lhs_target, rhs_target, tuple(out_shape))


@sddmm.register_fake
def _sddmm_fake(rowptr, col, eid, num_src, op, lhs, rhs, lhs_target, rhs_target, out_shape):
    return _operand(lhs, rhs).new_empty((col.shape[0], *out_shape))


@torch.library.custom_op("gsparse::edge_softmax", mutates_args=())
def edge_softmax(
    rowptr: Tensor, col: Tensor, eid: Optional[Tensor], num_src: int, logits: Tensor, norm_by: str
) -> Tensor:
    """Edge softmax ``[num_edges, *shape]`` over each destination's (``norm_by="dst"``) or
    source's (``"src"``) edges."""
    g = _graph(rowptr, col, eid, num_src, False)
    return backends.for_device(g.device).edge_softmax(g, logits.contiguous(), norm_by)


@edge_softmax.register_fake
def _edge_softmax_fake(rowptr, col, eid, num_src, logits, norm_by):
    return torch.empty_like(logits, memory_format=torch.contiguous_format)


@torch.library.custom_op("gsparse::edge_softmax_grad", mutates_args=())
def edge_softmax_grad(
    rowptr: Tensor, col: Tensor, eid: Optional[Tensor], num_src: int, y: Tensor, grad: Tensor, norm_by: str
) -> Tensor:
    """The gradient of an edge softmax's logits from its output ``y`` and the gradient
    ``grad`` of ``y``: one fused pass over each row (see ``Backend.edge_softmax_grad``)."""
    g = _graph(rowptr, col, eid, num_src, False)
    return backends.for_device(g.device).edge_softmax_grad(g, y.contiguous(), grad.contiguous(), norm_by)


@edge_softmax_grad.register_fake
def _edge_softmax_grad_fake(rowptr, col, eid, num_src, y, grad, norm_by):
    return torch.empty_like(y, memory_format=torch.contiguous_format)


@torch.library.custom_op("gsparse::gat_attention", mutates_args=())
def gat_attention(
    rowptr: Tensor, col: Tensor, eid: Optional[Tensor], num_src: int, score_src: Tensor,
    score_dst: Tensor, edge_scores: Optional[Tensor], masked: Optional[Tensor], negative_slope: float
) -> Tensor:
    """GAT's attention ``[num_edges, *shape]`` (see ``Backend.gat_attention``)."""
    g = _graph(rowptr, col, eid, num_src, False)
    return backends.for_device(g.device).gat_attention(
        g, score_src.contiguous(), score_dst.contiguous(), contiguous(edge_scores), contiguous(masked),
        negative_slope)


@gat_attention.register_fake
def _gat_attention_fake(rowptr, col, eid, num_src, score_src, score_dst, edge_scores, masked, negative_slope):
    return score_src.new_empty((col.shape[0], *score_src.shape[1:]))


@torch.library.custom_op("gsparse::gat_attention_grad", mutates_args=())
def gat_attention_grad(
    rowptr: Tensor, col: Tensor, eid: Optional[Tensor], num_src: int, y: Tensor, grad: Tensor,
    score_src: Tensor, score_dst: Tensor, edge_scores: Optional[Tensor], masked: Optional[Tensor],
    negative_slope: float
) -> tuple[Tensor, Tensor]:
    """``(dz, d_dst)`` of GAT's attention from its output ``y`` and the gradient ``grad`` of
    ``y``: one fused pass over each row (see ``Backend.gat_attention_grad``)."""
    g = _graph(rowptr, col, eid, num_src, False)
    return backends.for_device(g.device).gat_attention_grad(
        g, y.contiguous(), grad.contiguous(), score_src.contiguous(), score_dst.contiguous(),
        contiguous(edge_scores), contiguous(masked), negative_slope)


@gat_attention_grad.register_fake
def _gat_attention_grad_fake(rowptr, col, eid, num_src, y, grad, score_src, score_dst, edge_scores,
                             masked, negative_slope):
    return (torch.empty_like(y, memory_format=torch.contiguous_format),
            y.new_empty((rowptr.shape[0] - 1, *y.shape[1:])))


# ---------------------------------------------------------------------- backward helpers


def _sum_to(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``grad`` ``[rows, *b]`` summed over the dimensions where an operand of ``shape``
    ``[rows, *s]`` was broadcast (``s`` has 1, ``b`` more), so that it has that shape."""
    dims = [d for d in range(1, grad.dim()) if shape[d] == 1 and grad.shape[d] != 1]
    return grad.sum(dim=dims, keepdim=True) if dims else grad


def _features(*tensors: Tensor) -> list[int]:
    return list(broadcast_shapes(*(tuple(t.shape[1:]) for t in tensors)))


def _spmm(parts: Parts, op: str, reduce: str, lhs: Optional[Tensor], rhs: Optional[Tensor],
          out_shape: list[int], transpose: bool, lhs_over_degree: bool = False) -> Tensor:
    """A g-SpMM inside a backward formula: through the resolved calls of the graph when the
    eager path has it at hand (``parts`` carries it), else through the custom op.
    ``lhs_over_degree``: ``lhs`` is first divided by the degrees of its rows (a mean's
    gradient); a block's scatter of ``copy_lhs`` divides in its own pass."""
    g = getattr(parts, "graph", None)
    eager = g is not None and _calls.eager()
    scatters = (eager and transpose and reduce == "sum"
                and _block_scatter.takes(g, op, lhs, rhs, tuple(out_shape)))
    if lhs_over_degree and not (scatters and op == "copy_lhs"):
        lhs = lhs / _degrees(parts, not transpose, lhs.dtype).view(-1, *([1] * (lhs.dim() - 1)))
        lhs_over_degree = False
    if scatters:
        return _block_scatter.scatter(g, op, lhs, rhs, tuple(out_shape), lhs_over_degree)
    if eager:
        if transpose:
            g = g.reverse()
        key = ("spmm-internal", op, reduce, _calls.facts(lhs), _calls.facts(rhs), tuple(out_shape))
        call = _calls.find(g, key)
        if call is None and _plain(key, g):
            call = _calls.store(g, key, _calls.Call(
                g, _calls.resolve_spmm(g, op, reduce, lhs, rhs, tuple(out_shape)), (None, None),
                tuple(out_shape), (op, reduce)))
        if call is not None:
            return _resolved.spmm_resolved(call, lhs, rhs)
    return spmm(*parts, op, reduce, lhs, rhs, out_shape, transpose)


def _sddmm(parts: Parts, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor], lhs_target: str,
           rhs_target: str, out_shape: list[int]) -> Tensor:
    """A g-SDDMM inside a backward formula (see :func:`_spmm`)."""
    g = getattr(parts, "graph", None)
    if g is not None and _calls.eager():
        key = ("sddmm-internal", op, _calls.facts(lhs), _calls.facts(rhs), lhs_target, rhs_target,
               tuple(out_shape))
        call = _calls.find(g, key)
        if call is None and _plain(key, g):
            call = _calls.store(g, key, _calls.Call(
                g, _calls.resolve_sddmm(g, op, lhs, rhs, lhs_target, rhs_target, tuple(out_shape)),
                (None, None), tuple(out_shape), (op, lhs_target, rhs_target)))
        if call is not None:
            return _resolved.sddmm_resolved(call, lhs, rhs)
    return sddmm(*parts, op, lhs, rhs, lhs_target, rhs_target, out_shape)


def _plain(key: tuple, g: Graph) -> bool:
    """Whether a call with ``key`` may be resolved and kept: plain tensors, autocast off."""
    return False not in key and not torch.is_autocast_enabled(g.device.type)


def _spmm_sum(parts: Parts, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor], transpose: bool,
              lhs_over_degree: bool = False) -> Tensor:
    shapes = [t for t in (lhs, rhs) if t is not None]
    return _spmm(parts, op, "sum", lhs, rhs, _features(*shapes), transpose, lhs_over_degree)


def _to_target(parts: Parts, grad: Tensor, target: str, factor: Optional[Tensor] = None,
               factor_target: str = "e") -> Tensor:
    r"""``Σ_{e : target(e) = r} grad_e ⊙ factor[factor_target(e)]`` for each row ``r`` of
    ``target`` (``u``: source nodes, ``v``: destination nodes, ``e``: edges).

    ``grad`` is ``[num_edges, *shape]``; ``factor`` (optional) lives on ``factor_target``.
    A node target is a g-SpMM: on the graph for ``v``, on its reverse graph for ``u``.
    """
    if target == "e":
        if factor is None:
            return grad
        return _sddmm(parts, "mul", grad, factor, "e", factor_target, _features(grad, factor))
    transpose = target == "u"
    if factor is None:
        return _spmm_sum(parts, "copy_rhs", None, grad, transpose)
    if factor_target == target:  # constant over the row: factor it out of the sum
        return factor * _spmm_sum(parts, "copy_rhs", None, grad, transpose)
    if factor_target == "e":
        return _spmm_sum(parts, "copy_rhs", None, grad * factor, transpose)
    return _spmm_sum(parts, "mul", factor, grad, transpose)


def _degrees(parts: Parts, transpose: bool, dtype: torch.dtype) -> Tensor:
    """Rows' edge counts, clamped to 1 (mean divides by it): in-degrees of the graph, or of
    its reverse graph (out-degrees) when ``transpose``."""
    rowptr, col, _, num_src = parts
    if transpose:
        ones = torch.ones(col.shape[0], dtype=dtype, device=col.device)
        deg = torch.zeros(num_src, dtype=dtype, device=col.device).index_add(0, col.long(), ones)
    else:
        deg = (rowptr[1:] - rowptr[:-1]).to(dtype)
    return deg.clamp(min=1)


def _edge_products(parts: Parts, lhs: Tensor, grad: Tensor, like: tuple[int, ...], lhs_target: str,
                   grad_target: str) -> Tensor:
    """``lhs[lhs_target(e)] ⊙ grad[grad_target(e)]`` per edge, for an edge operand shaped
    ``like`` (a shape). When ``like`` is broadcast along the last dimension (attention weights
    ``[E, H, 1]`` against features ``[N, H, C]``), the sum over that dimension is taken by a
    g-SDDMM ``dot`` so that the ``[E, H, C]`` products are never materialised."""
    if len(like) > 1 and like[-1] == 1 and grad.shape[-1] > 1 and lhs.shape[-1] == grad.shape[-1]:
        outer = list(broadcast_shapes(tuple(lhs.shape[1:-1]), tuple(grad.shape[1:-1])))
        return _sddmm(parts, "dot", lhs, grad, lhs_target, grad_target, [*outer, 1])
    return _sddmm(parts, "mul", lhs, grad, lhs_target, grad_target, _features(lhs, grad))


def save_operands(ctx, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor], need_lhs: bool,
                  need_rhs: bool, *extra: Tensor) -> None:
    """Save for the backward the operands its formulas read (:meth:`BinaryOp.backward_reads`;
    None for the others) and every operand's shape (``ctx.shapes``), then ``extra``. A copy's
    or a sum's features are not read back: keeping them would hold an ``[N, F]`` tensor per
    layer until the backward for its shape alone."""
    reads_lhs, reads_rhs = BINARY_OPS[op].backward_reads(need_lhs, need_rhs)
    ctx.shapes = (None if lhs is None else lhs.shape, None if rhs is None else rhs.shape)
    ctx.save_for_backward(lhs if reads_lhs else None, rhs if reads_rhs else None, *extra)


def _spmm_setup(ctx, inputs, output) -> None:
    rowptr, col, eid, num_src, op, reduce, lhs, rhs, out_shape, transpose = inputs
    ctx.parts = (rowptr, col, eid, num_src)
    ctx.op, ctx.reduce, ctx.transpose = op, reduce, transpose
    save_operands(ctx, op, lhs, rhs, ctx.needs_input_grad[6], ctx.needs_input_grad[7])


def _spmm_grads(parts: Parts, op: str, reduce: str, transpose: bool, lhs: Optional[Tensor],
                rhs: Optional[Tensor], shapes: tuple, grad: Tensor, need_lhs: bool, need_rhs: bool):
    """``(d_lhs, d_rhs)`` of a g-SpMM sum or mean (None where not needed); ``lhs`` and
    ``rhs`` as :func:`save_operands` kept them, ``shapes`` theirs."""
    # A mean's gradient over its rows' degrees: divided here where the edge gradient reads it
    # too, else by the node gradient's g-SpMM (a block's scatter divides in its own pass).
    over_degree = REDUCERS[reduce].divides_by_degree
    if over_degree and need_rhs:
        deg = _degrees(parts, transpose, grad.dtype)
        grad = grad / deg.view(-1, *([1] * (grad.dim() - 1)))
        over_degree = False
    # Targets of the forward's destination rows and sources, named on the original graph.
    dst, src = ("u", "v") if transpose else ("v", "u")
    d_lhs = d_rhs = None
    binop = BINARY_OPS[op]
    if need_lhs:
        factor = binop.lhs_grad_factor
        if factor is None:
            d = _spmm_sum(parts, "copy_lhs", grad, None, not transpose, over_degree)
        else:
            d = _spmm_sum(parts, "mul" if factor == "rhs" else "div", grad, rhs, not transpose, over_degree)
        d_lhs = _sum_to(d, shapes[0])
    if need_rhs:
        if binop.rhs_grad_factor is None:
            d = _sddmm(parts, "copy_lhs", grad, None, dst, "u", list(grad.shape[1:]))
        else:
            d = _edge_products(parts, lhs, grad, shapes[1], src, dst)
        if binop.rhs_grad_over_rhs_squared:
            d = d / (rhs * rhs)
        if binop.rhs_grad_sign < 0:
            d = -d
        d_rhs = _sum_to(d, shapes[1])
    return d_lhs, d_rhs


def _spmm_backward(ctx, grad: Tensor):
    if REDUCERS[ctx.reduce].keeps_arg:
        raise RuntimeError(f"gsparse::spmm with reduce {ctx.reduce!r} keeps no winners to "
                           f"differentiate; gsparse::spmm_arg does (gsparse.gspmm picks it)")
    lhs, rhs = ctx.saved_tensors
    d_lhs, d_rhs = _spmm_grads(ctx.parts, ctx.op, ctx.reduce, ctx.transpose, lhs, rhs, ctx.shapes, grad,
                               ctx.needs_input_grad[6], ctx.needs_input_grad[7])
    return None, None, None, None, None, None, d_lhs, d_rhs, None, None


spmm.register_autograd(_spmm_backward, setup_context=_spmm_setup)


def _gather_rows(t: Tensor, index: Tensor, shape) -> Tensor:
    """``t[index]`` elementwise: ``t`` ``[rows, *s]`` broadcast to ``shape``, ``index`` of
    ``shape`` with -1 read as row 0 (masked by the caller)."""
    return t.expand(t.shape[0], *shape[1:]).gather(0, index.clamp(min=0))


def _spmm_arg_setup(ctx, inputs, output) -> None:
    rowptr, col, eid, num_src, op, reduce, lhs, rhs, out_shape, transpose = inputs
    _, arg_u, arg_e = output
    ctx.op = op
    ctx.rows = (num_src, rowptr.shape[0] - 1) if transpose else (rowptr.shape[0] - 1, num_src)
    ctx.num_edges = col.shape[0]
    save_operands(ctx, op, lhs, rhs, ctx.needs_input_grad[6], ctx.needs_input_grad[7], arg_u, arg_e)
    ctx.mark_non_differentiable(arg_u, arg_e)


def _spmm_arg_backward(ctx, grad: Tensor, _grad_arg_u, _grad_arg_e):
    lhs, rhs, arg_u, arg_e = ctx.saved_tensors
    d_lhs, d_rhs = _spmm_arg_grads(ctx.op, ctx.rows, ctx.num_edges, lhs, rhs, ctx.shapes, arg_u, arg_e, grad,
                                   ctx.needs_input_grad[6], ctx.needs_input_grad[7])
    return None, None, None, None, None, None, d_lhs, d_rhs, None, None


def _spmm_arg_grads(op: str, rows: tuple[int, int], num_edges: int, lhs: Optional[Tensor],
                    rhs: Optional[Tensor], shapes: tuple, arg_u: Tensor, arg_e: Tensor, grad: Tensor,
                    need_lhs: bool, need_rhs: bool):
    """``(d_lhs, d_rhs)`` of a g-SpMM max or min with winners ``arg_u``/``arg_e``; ``rows``
    is (output rows, ``lhs`` rows); operands and ``shapes`` as :func:`save_operands` kept them."""
    binop = BINARY_OPS[op]
    if num_edges == 0:  # no winners; the index arithmetic below needs an edge to point at
        return tuple(None if shape is None else grad.new_zeros(shape) for shape in shapes)
    found = arg_e >= 0
    grad = grad.masked_fill(~found, 0)
    d_lhs = d_rhs = None
    if need_lhs:
        factor = binop.lhs_grad_factor
        g = grad
        if factor is not None:
            y = _gather_rows(rhs, arg_e, grad.shape)
            g = grad * y if factor == "rhs" else grad / y.masked_fill(~found, 1)
        d = torch.zeros((rows[1], *grad.shape[1:]), dtype=grad.dtype, device=grad.device)
        d_lhs = _sum_to(d.scatter_add(0, arg_u.clamp(min=0), g), shapes[0])
    if need_rhs:
        g = grad
        if binop.rhs_grad_factor is not None:
            g = grad * _gather_rows(lhs, arg_u, grad.shape)
        if binop.rhs_grad_over_rhs_squared:
            y = _gather_rows(rhs, arg_e, grad.shape).masked_fill(~found, 1)
            g = g / (y * y)
        if binop.rhs_grad_sign < 0:
            g = -g
        d = torch.zeros((num_edges, *grad.shape[1:]), dtype=grad.dtype, device=grad.device)
        d_rhs = _sum_to(d.scatter_add(0, arg_e.clamp(min=0), g), shapes[1])
    return d_lhs, d_rhs


spmm_arg.register_autograd(_spmm_arg_backward, setup_context=_spmm_arg_setup)


def _sddmm_setup(ctx, inputs, output) -> None:
    rowptr, col, eid, num_src, op, lhs, rhs, lhs_target, rhs_target, out_shape = inputs
    ctx.parts = (rowptr, col, eid, num_src)
    ctx.op, ctx.targets = op, (lhs_target, rhs_target)
    save_operands(ctx, op, lhs, rhs, ctx.needs_input_grad[5], ctx.needs_input_grad[6])


def _sddmm_backward(ctx, grad: Tensor):
    lhs, rhs = ctx.saved_tensors
    d_lhs, d_rhs = _sddmm_grads(ctx.parts, ctx.op, ctx.targets, lhs, rhs, ctx.shapes, grad,
                                ctx.needs_input_grad[5], ctx.needs_input_grad[6])
    return None, None, None, None, None, d_lhs, d_rhs, None, None, None


def _sddmm_grads(parts: Parts, op: str, targets: tuple[str, str], lhs: Optional[Tensor],
                 rhs: Optional[Tensor], shapes: tuple, grad: Tensor, need_lhs: bool, need_rhs: bool):
    """``(d_lhs, d_rhs)`` of a g-SDDMM (None where not needed); operands and ``shapes`` as
    :func:`save_operands` kept them."""
    binop = BINARY_OPS[op]
    lt, rt = targets
    d_lhs = d_rhs = None
    if need_lhs:
        factor = binop.lhs_grad_factor
        if factor is None:
            d = _to_target(parts, grad, lt)
        else:
            d = _to_target(parts, grad, lt, rhs if factor == "rhs" else torch.reciprocal(rhs), rt)
        d_lhs = _sum_to(d, shapes[0])
    if need_rhs:
        if binop.rhs_grad_factor is None:
            d = _to_target(parts, grad, rt)
        else:
            d = _to_target(parts, grad, rt, lhs, lt)
        if binop.rhs_grad_over_rhs_squared:
            d = d / (rhs * rhs)
        if binop.rhs_grad_sign < 0:
            d = -d
        d_rhs = _sum_to(d, shapes[1])
    return d_lhs, d_rhs


sddmm.register_autograd(_sddmm_backward, setup_context=_sddmm_setup)


def _edge_softmax_setup(ctx, inputs, output) -> None:
    rowptr, col, eid, num_src, logits, norm_by = inputs
    ctx.parts = (rowptr, col, eid, num_src)
    ctx.norm_by = norm_by
    ctx.save_for_backward(output)


def _edge_softmax_backward(ctx, grad: Tensor):
    (y,) = ctx.saved_tensors
    return None, None, None, None, _edge_softmax_grad(ctx.parts, ctx.norm_by, y, grad), None


def _edge_softmax_grad(parts: Parts, norm_by: str, y: Tensor, grad: Tensor) -> Tensor:
    r"""``dz_e = y_e (dy_e - Σ_{e' ~ e} dy_{e'} y_{e'})``, the sum over the edges sharing
    ``e``'s destination (or source).

    One fused pass of the backend where :func:`_fused_grad_pays`; a sampled block's, on the
    eager path, straight to it without a second derivative (the custom op's dispatch costs
    more host time than a small graph's kernel). Otherwise four operations: a product, a
    g-SpMM of the row sums, a g-SDDMM spreading them back, a difference."""
    g = getattr(parts, "graph", None)
    if g is not None and g.sync_free and _calls.eager():
        if direct_call_ok(y, grad):
            return backends.for_device(g.device).edge_softmax_grad(g, y.contiguous(), grad.contiguous(), norm_by)
        return edge_softmax_grad(*parts, y, grad, norm_by)
    if _fused_grad_pays(parts, norm_by, y):
        return edge_softmax_grad(*parts, y, grad, norm_by)
    target = "v" if norm_by == "dst" else "u"
    gy = grad * y
    row_sum = _to_target(parts, gy, target)
    return gy - _sddmm(parts, "mul", y, row_sum, "e", target, list(y.shape[1:]))


def _fused_grad_pays(parts: Parts, norm_by: str, y: Tensor) -> bool:
    """Whether the fused pass costs less than the four operations. On a GPU it reads ``y``
    and ``dy`` twice and writes ``dz`` along the rows: in edge order where the rows'
    positions are the edge ids (destinations' rows of a graph without ``eid``), else
    gathering each edge's values. An edge's values that fill a 32-byte sector gather at a
    stream's cost; narrower ones waste the rest of a sector five times, where the four
    operations gather once (measured on an H200: 0.73-0.96x the four operations at one head
    in fp32 with edge ids, 1.1-4x everywhere else on large graphs). On the CPU the fused
    pass was the faster everywhere (1.02-1.48x on a 1.2M-edge graph; docs/performance.md)."""
    edge_ordered = norm_by == "dst" and parts[2] is None
    return not y.is_cuda or edge_ordered or math.prod(y.shape[1:]) * y.element_size() >= 32


edge_softmax.register_autograd(_edge_softmax_backward, setup_context=_edge_softmax_setup)


def _edge_softmax_grad_setup(ctx, inputs, output) -> None:
    rowptr, col, eid, num_src, y, grad, norm_by = inputs
    ctx.parts = (rowptr, col, eid, num_src)
    ctx.norm_by = norm_by
    ctx.save_for_backward(y, grad)


def _edge_softmax_grad_backward(ctx, ddz: Tensor):
    y, dy = ctx.saved_tensors
    d_y, d_dy = _softmax_grad_vjp(ctx.parts, ctx.norm_by, y, dy, ddz, ctx.needs_input_grad[4],
                                  ctx.needs_input_grad[5])
    return None, None, None, None, d_y, d_dy, None


def _softmax_grad_vjp(parts: Parts, norm_by: str, y: Tensor, dy: Tensor, ddz: Tensor, need_y: bool,
                      need_dy: bool) -> tuple[Optional[Tensor], Optional[Tensor]]:
    r"""The second derivatives of an edge softmax's gradient ``dz = y ⊙ (dy - s)``, given the
    gradient ``ddz`` of ``dz``: with ``s_r = Σ dy ⊙ y`` and ``t_r = Σ ddz ⊙ y`` over row ``r``
    of each edge, ``∂/∂dy = y ⊙ (ddz - t)`` (the same gradient of ``ddz``) and
    ``∂/∂y = ddz ⊙ (dy - s) - dy ⊙ t``. Both need ``t``, summed once."""
    if not need_y:
        return None, _edge_softmax_grad(parts, norm_by, y, ddz) if need_dy else None
    target, shape = ("v" if norm_by == "dst" else "u"), list(y.shape[1:])
    s = _to_target(parts, dy * y, target)
    t = _to_target(parts, ddz * y, target)
    d_y = (ddz * dy - _sddmm(parts, "mul", ddz, s, "e", target, shape)
           - _sddmm(parts, "mul", dy, t, "e", target, shape))
    d_dy = ddz * y - _sddmm(parts, "mul", y, t, "e", target, shape) if need_dy else None
    return d_y, d_dy


edge_softmax_grad.register_autograd(_edge_softmax_grad_backward, setup_context=_edge_softmax_grad_setup)


def _gat_attention_setup(ctx, inputs, output) -> None:
    rowptr, col, eid, num_src, score_src, score_dst, edge_scores, masked, negative_slope = inputs
    ctx.parts = (rowptr, col, eid, num_src)
    ctx.negative_slope = negative_slope
    ctx.save_for_backward(output, score_src, score_dst, edge_scores, masked)


def _gat_attention_backward(ctx, grad: Tensor):
    y, score_src, score_dst, edge_scores, masked = ctx.saved_tensors
    d_src, d_dst, d_edge = _gat_attention_grads(
        ctx.parts, y, grad, score_src, score_dst, edge_scores, masked, ctx.negative_slope,
        *ctx.needs_input_grad[4:7])
    return None, None, None, None, d_src, d_dst, d_edge, None, None


def _gat_attention_grads(parts: Parts, y: Tensor, grad: Tensor, score_src: Tensor, score_dst: Tensor,
                         edge_scores: Optional[Tensor], masked: Optional[Tensor], negative_slope: float,
                         need_src: bool, need_dst: bool, need_edge: bool):
    """``(d_src, d_dst, d_edge)`` of GAT's attention (None where not needed): one fused pass
    gives the logits' gradient before the LeakyReLU (``d_edge``) and its sum over each
    destination's edges (``d_dst``); a g-SpMM of the reverse graph sums it into the sources'.
    A plain eager call goes to the backend straight (see :func:`_edge_softmax_grad`)."""
    g = getattr(parts, "graph", None)
    if g is not None and _calls.eager() and direct_call_ok(y, grad, score_src, score_dst, edge_scores):
        dz, d_dst = backends.for_device(g.device).gat_attention_grad(
            g, y.contiguous(), grad.contiguous(), score_src.contiguous(), score_dst.contiguous(),
            contiguous(edge_scores), masked, negative_slope)
    else:
        dz, d_dst = gat_attention_grad(*parts, y, grad, score_src, score_dst, edge_scores, masked,
                                       negative_slope)
    d_src = _to_target(parts, dz, "u") if need_src else None
    return d_src, d_dst if need_dst else None, dz if need_edge else None


gat_attention.register_autograd(_gat_attention_backward, setup_context=_gat_attention_setup)


def _gat_attention_grad_setup(ctx, inputs, output) -> None:
    rowptr, col, eid, num_src, y, grad, score_src, score_dst, edge_scores, masked, negative_slope = inputs
    ctx.parts = (rowptr, col, eid, num_src)
    ctx.negative_slope = negative_slope
    ctx.save_for_backward(y, grad, score_src, score_dst, edge_scores, masked)


def _gat_attention_grad_backward(ctx, d_dz: Optional[Tensor], d_ddst: Optional[Tensor]):
    r"""Second derivatives of GAT's attention: ``dz = c ⊙ y ⊙ (dy - s)`` with ``c`` the
    LeakyReLU's slope at each logit (0 where masked), and ``d_dst`` its row sums. ``c`` is
    constant where it has a derivative, so the scores get none; ``y`` and ``dy`` get the edge
    softmax's second derivatives of ``c ⊙ (d_dz + d_ddst[v])``."""
    y, dy, score_src, score_dst, edge_scores, masked = ctx.saved_tensors
    parts, shape = ctx.parts, list(y.shape[1:])
    upstream = torch.zeros_like(y) if d_dz is None else d_dz
    if d_ddst is not None:
        upstream = upstream + _sddmm(parts, "copy_rhs", None, d_ddst, "e", "v", shape)
    with torch.no_grad():
        pre = _sddmm(parts, "add", score_src, score_dst, "u", "v", shape)
        if edge_scores is not None:
            pre = pre + edge_scores
        slope = torch.where(pre > 0, 1.0, ctx.negative_slope).to(y.dtype)
        if masked is not None:
            slope = slope.masked_fill(masked.view(-1, *([1] * len(shape))), 0)
    d_y, d_dy = _softmax_grad_vjp(parts, "dst", y, dy, upstream * slope, ctx.needs_input_grad[4],
                                  ctx.needs_input_grad[5])
    return None, None, None, None, d_y, d_dy, None, None, None, None, None


gat_attention_grad.register_autograd(_gat_attention_grad_backward, setup_context=_gat_attention_grad_setup)


# ---------------------------------------------------------------------- autocast


def autocast_operands(device: torch.device, *tensors: Optional[Tensor],
                      dtype: Optional[torch.dtype] = None) -> tuple[Optional[Tensor], ...]:
    """The operands as autocast would hand them to a matmul-like op on ``device``.

    Inside an enabled ``torch.autocast`` region for ``device``'s type, float16, bfloat16
    and float32 operands are cast to ``dtype`` (default: the region's lower-precision dtype);
    float64 operands stay, as autocast leaves them. Outside such a region, unchanged.
    """
    if not torch.is_autocast_enabled(device.type):
        return tensors
    target = dtype if dtype is not None else torch.get_autocast_dtype(device.type)
    return tuple(
        t.to(target) if isinstance(t, Tensor) and t.is_floating_point() and t.dtype != torch.float64 else t
        for t in tensors
    )


def needs_grad(*tensors: Optional[Tensor]) -> bool:
    """Whether autograd will want gradients of any of ``tensors``."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def direct_call_ok(*tensors: Optional[Tensor]) -> bool:
    """Whether a front end may call the backend directly instead of through its custom op.

    The custom op's dispatch (autograd wrapper, redispatch, fake-tensor checks) costs tens
    of microseconds of Python per call, more than a small graph's kernel. It is only needed
    when autograd wants gradients or something traces the call (``torch.compile``, fake or
    other subclass tensors, a dispatch mode); a plain eager call without gradients runs the
    same backend function without it.
    """
    return (not torch.compiler.is_compiling()
            and not needs_grad(*tensors)
            and _get_current_dispatch_mode() is None
            and all(t is None or type(t) is Tensor for t in tensors))
