"""The PyTorch-ops backend: materialises per-edge messages, then scatters them.

On the CPU, sums and means of node features weighted by one scalar per edge (or per edge
and head, or by 1) run as CSR times dense products instead (PyTorch's ``embedding_bag``
with the CSR rows as bags, or ``torch.sparse.mm``, by feature width), and dot products of
the two endpoints' features as sampled dense products: PyTorch does both without per-edge
message tensors.

Runs on any device PyTorch supports. Half-precision inputs accumulate in float32 and
are rounded once at the end, like the generated kernels. Results are always new tensors.
"""

from __future__ import annotations

import math
import threading
import warnings

import torch

from ..algebra import BINARY_OPS, REDUCERS
from ..graph import Graph


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _row_index(index: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``index`` ([E]) viewed so that it broadcasts over ``like``'s feature dimensions."""
    return index.view(-1, *([1] * (like.dim() - 1))).expand_as(like)


def _edges_in_csr_order(g: Graph, t: torch.Tensor) -> torch.Tensor:
    return t if g.eid is None else t.index_select(0, g.eid.long())


def _winners(g: Graph, messages: torch.Tensor, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(arg_u, arg_e)`` of a max/min: the first CSR position of each row whose message
    equals the row's result, as source node and user edge id; -1 in rows with no edges."""
    num_edges = g.num_edges
    if num_edges == 0:
        return (torch.full(out.shape, -1, dtype=torch.int64, device=g.device),
                torch.full(out.shape, -1, dtype=torch.int64, device=g.device))
    dst = g.csr_dst.long()
    position = torch.arange(num_edges, device=g.device).view(-1, *([1] * (messages.dim() - 1)))
    candidate = torch.where(messages == out[dst], position, num_edges)
    first = torch.full(out.shape, num_edges, dtype=torch.int64, device=g.device)
    first.scatter_reduce_(0, _row_index(dst, candidate), candidate, "amin", include_self=True)
    empty = first == num_edges
    first.masked_fill_(empty, 0)
    arg_u = g.col.long()[first].masked_fill_(empty, -1)
    arg_e = (first if g.eid is None else g.eid.long()[first]).masked_fill_(empty, -1)
    return arg_u, arg_e


def unchecked_csr(rowptr: torch.Tensor, col: torch.Tensor, values: torch.Tensor,
                  shape: tuple[int, int]) -> torch.Tensor:
    """A ``torch.sparse`` CSR matrix over indices already validated (a graph's): without
    PyTorch's invariant checks and its "beta" warning."""
    global _beta_warning_seen
    if _beta_warning_seen:  # PyTorch warns once per process; catching it costs microseconds
        return torch.sparse_csr_tensor(rowptr, col, values, shape, check_invariants=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        matrix = torch.sparse_csr_tensor(rowptr, col, values, shape, check_invariants=False)
    _beta_warning_seen = True
    return matrix


_beta_warning_seen = False
_FULL_PRECISION = (torch.float32, torch.float64)
_MOST_HEADS = 64  # per-head products beyond this would cost more than the messages
# Which CPU kernel sums rows (measured on Cora and on 0.2M- and 2M-edge presets, one thread):
# PyTorch's embedding_bag over the CSR rows is 1.6-4x faster than torch.sparse.mm (MKL) from
# 16 features per row on, unless rows are long (a mean over 128: 1.4x slower at 16, par at
# 64). Below 16 features torch.sparse.mm is up to 1.4x faster, on a CSR kept with the graph
# (int32 indices, which MKL takes without a cast); with weights, on small graphs, the CSR's
# values are set per call (_WeightedAdjacency): building a CSR per call costs more than
# torch.sparse.mm saves over embedding_bag there.
_BAG_FEATURES = 16
_BAG_FEATURES_LONG_ROWS = 64
_LONG_ROWS = 128
_SMALL_GRAPH_EDGES = 100_000
_grad_enabled = torch.is_grad_enabled


def _csr_product(matrix: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``matrix @ x``, ``matrix`` a ``torch.sparse`` CSR, ``x`` float32 or float64: the
    product of ``torch.sparse.mm``, by ``torch.addmm`` with ``beta=0``, which ignores its
    input, without the zero matrix that ``torch.sparse.mm`` allocates, fills and copies
    into the result first (5% of a weighted sum's time on Cora at 4 features)."""
    return torch.addmm(_NOTHING[x.dtype], matrix, x, beta=0)


# Inputs that torch.addmm ignores (beta=0), of each dtype it may be asked for.
_NOTHING = {dtype: torch.zeros((), dtype=dtype) for dtype in _FULL_PRECISION}


def _edge_index64(g: Graph) -> torch.Tensor | None:
    """``[E]`` int64 user edge id of each CSR position (None in CSR order), kept with the graph."""
    return None if g.eid is None else g.cpu.get("eid64", lambda: g.eid.long())


def _wide(g: Graph, features: int) -> bool:
    """Whether sums of ``features`` per row run as ``embedding_bag`` (else ``torch.sparse.mm``)."""
    return features >= (_BAG_FEATURES_LONG_ROWS if g.num_edges > _LONG_ROWS * g.num_dst else _BAG_FEATURES)


def _adjacency(g: Graph, dtype: torch.dtype) -> torch.Tensor:
    """The graph's CSR with all values 1, kept with the graph."""
    return g.cpu.get(("adjacency", dtype), lambda: unchecked_csr(
        g.rowptr, g.col, torch.ones(g.num_edges, dtype=dtype), (g.num_dst, g.num_src)))


def _weighted_adjacency(g: Graph, dtype: torch.dtype) -> _WeightedAdjacency:
    return g.cpu.get(("weighted adjacency", dtype), lambda: _WeightedAdjacency(g, dtype))


def _row_sum(g: Graph, x: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``out_v = Σ_{e → v} w_e x_{u(e)}`` over the CSR rows, ``[num_dst, F]``: ``x``
    ``[num_src, F]`` contiguous, ``weights`` ``[E]`` in the user's edge order or None (all
    1). A CSR times dense product, by PyTorch's ``embedding_bag`` with the rows as bags or
    by ``torch.sparse.mm``, whichever is faster for the shape: no ``[E, F]`` messages."""
    wide = _wide(g, x.shape[1])
    if weights is None:
        if wide:
            return torch.embedding_bag(x, g._col, g._rowptr, False, 0, False, None, True)[0]
        return _csr_product(_adjacency(g, x.dtype), x)
    if not wide and g.num_edges <= _SMALL_GRAPH_EDGES and not _records(x, weights):
        return _weighted_adjacency(g, x.dtype).product(x, weights)
    in_csr_order = _in_csr_order(g, weights)
    if wide or g.num_edges <= _SMALL_GRAPH_EDGES:
        return torch.embedding_bag(x, g._col, g._rowptr, False, 0, False, in_csr_order, True)[0]
    return _csr_product(unchecked_csr(g._rowptr, g._col, in_csr_order, (g.num_dst, g.num_src)), x)


def _records(x: torch.Tensor, weights: torch.Tensor) -> bool:
    """Whether autograd records a product of ``x`` and ``weights``."""
    return _grad_enabled() and (weights.requires_grad or x.requires_grad)


def _in_csr_order(g: Graph, weights: torch.Tensor) -> torch.Tensor:
    eid = _edge_index64(g)
    return weights if eid is None else weights.index_select(0, eid)


class _WeightedAdjacency:
    """A small graph's CSR whose values each narrow weighted sum sets to its weights.

    On a small graph, building a CSR per call costs more than ``torch.sparse.mm`` saves over
    ``embedding_bag``; this one is built once, and each call writes its weights into the
    CSR's values (in CSR order: through the graph's edge permutation) before the product.
    Nothing of one call's weights is kept for the next, so no change to them, in place or
    behind autograd's back (``.data``), can meet a stale CSR. The values are the one thing
    calls share: a call that finds another thread writing them takes ``embedding_bag``
    instead, and no product may be recorded by autograd, which would save the CSR for
    backward (:func:`_row_sum` checks; the bound runs of resolved calls never record, their
    front end records through its own ``autograd.Function``).
    """

    def __init__(self, g: Graph, dtype: torch.dtype) -> None:
        self._lock = threading.Lock()
        self._eid = _edge_index64(g)
        self._rowptr, self._col = g._rowptr, g._col
        self._values = torch.empty(g.num_edges, dtype=dtype)
        self._matrix = unchecked_csr(g._rowptr, g._col, self._values, (g.num_dst, g.num_src))

    def product(self, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``A x``, ``A`` the adjacency weighted by ``weights`` (``[E]``, in the user's edge
        order, ``x``'s dtype): ``[num_dst, F]``."""
        if self._lock.acquire(False):  # positional: a keyword costs a third of a microsecond
            try:
                if self._eid is None:
                    self._values.copy_(weights)
                else:
                    torch.index_select(weights, 0, self._eid, out=self._values)
                return _csr_product(self._matrix, x)
            finally:
                self._lock.release()
        in_csr_order = weights if self._eid is None else weights.index_select(0, self._eid)
        return torch.embedding_bag(x, self._col, self._rowptr, False, 0, False, in_csr_order, True)[0]


def _sparse_product(g: Graph, op: str, reduce: str, lhs: torch.Tensor | None,
                    rhs: torch.Tensor | None, out_shape: tuple[int, ...]) -> torch.Tensor | None:
    """Sum or mean of ``lhs`` rows weighted by one scalar per edge (or by 1), or by one
    scalar per edge and head (``rhs`` ``[E, *heads, 1, ...]`` as in GAT), as CSR times
    dense products (:func:`_row_sum`), one per head. None where the operands are not of
    that form."""
    reducer, binop = REDUCERS[reduce], BINARY_OPS[op]
    if reducer.keeps_arg or lhs is None or tuple(lhs.shape[1:]) != tuple(out_shape):
        return None
    if (lhs.dim() == 2 and lhs.dtype in _FULL_PRECISION and not reducer.divides_by_degree
            and not torch.is_autocast_enabled("cpu")):
        # The common case (GCN, GraphSAGE: [N, F] features, one weight per edge or none)
        # without reshapes or casts: on small graphs each costs a fair part of the call.
        if binop.copies == "lhs":
            return _row_sum(g, lhs, None)
        if binop.scales and not binop.reduces_last_dim and rhs.numel() == g.num_edges:
            return _row_sum(g, lhs, rhs.view(-1))
    acc = _accumulation_dtype(lhs.dtype)
    if binop.copies == "lhs":
        heads, weights = 1, None
    elif binop.scales and not binop.reduces_last_dim:
        shape = tuple(rhs.shape[1:])
        k = len(shape)
        while k and shape[k - 1] == 1:
            k -= 1
        heads = math.prod(shape[:k])
        if shape[:k] != tuple(out_shape[:k]) or heads > _MOST_HEADS:
            return None
        weights = (rhs.reshape(g.num_edges, heads) if heads > 1 else rhs.reshape(g.num_edges)).to(acc)
    else:
        return None
    features = math.prod(out_shape)
    # The front end already applied autocast; the sums accumulate in float32 or wider.
    with torch.autocast("cpu", enabled=False):
        if heads == 1:
            out = _row_sum(g, lhs.reshape(g.num_src, features).to(acc), weights)
        else:
            x = lhs.reshape(g.num_src, heads, features // heads).to(acc)
            out = torch.stack([_row_sum(g, x[:, h].contiguous(), weights[:, h].contiguous())
                               for h in range(heads)], 1)
    if reducer.divides_by_degree:
        degree = g.cpu.get(("degree", acc), lambda: g.in_degrees().clamp(min=1).to(acc).unsqueeze(1))
        out = out.reshape(g.num_dst, features).div_(degree)
    return out.reshape(g.num_dst, *out_shape).to(lhs.dtype)


def _sampled_ok(g: Graph) -> bool:
    """Whether PyTorch's ``sampled_addmm`` computes every edge of ``g``: it does for any
    pattern, repeated entries included, unless the pattern holds more entries than the
    dense matrix has elements, where it fails (PyTorch 2.13; the tests pin this down)."""
    return g.num_edges <= g.num_dst * g.num_src


def _sampled_dot(g: Graph, lhs: torch.Tensor, rhs: torch.Tensor, lhs_target: str, rhs_target: str,
                 out_shape: tuple[int, ...]) -> torch.Tensor | None:
    """``u . v`` on every edge (per head) as sampled dense products, one per head: PyTorch's
    ``sampled_addmm`` instead of gathering both endpoints' rows. None for other forms, and
    for patterns ``sampled_addmm`` cannot take (:func:`_sampled_ok`)."""
    if {lhs_target, rhs_target} != {"u", "v"} or not _sampled_ok(g):
        return None
    by_target = {lhs_target: lhs, rhs_target: rhs}
    u, v = by_target["u"], by_target["v"]
    head_len = u.shape[-1]
    full_shape = (*out_shape[:-1], head_len)
    heads = math.prod(out_shape[:-1])
    if tuple(u.shape[1:]) != full_shape or tuple(v.shape[1:]) != full_shape or heads > _MOST_HEADS:
        return None
    acc = _accumulation_dtype(u.dtype)
    u = u.reshape(g.num_src, heads, head_len).to(acc)
    v = v.reshape(g.num_dst, heads, head_len).to(acc)
    parts = []
    pattern = unchecked_csr(g.rowptr, g.col, torch.zeros(g.num_edges, dtype=acc), (g.num_dst, g.num_src))
    with torch.autocast("cpu", enabled=False):
        for h in range(heads):
            parts.append(torch.sparse.sampled_addmm(pattern, v[:, h], u[:, h].t(), beta=0).values())
    in_csr_order = torch.stack(parts, 1)
    out = in_csr_order if g.eid is None else torch.empty_like(in_csr_order).index_copy_(
        0, g.eid.long(), in_csr_order)
    return out.reshape(g.num_edges, *out_shape).to(lhs.dtype)


def _bound_row_sum(g: Graph, op: str, reduce: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None,
                   out_shape: tuple[int, ...]):
    """For the common case of :func:`_sparse_product` (``[N, F]`` float32/64 features, one
    weight per edge or none, a sum): ``run(lhs, rhs)`` with the kernel and its CSR picked
    once; None for other calls."""
    reducer, binop = REDUCERS[reduce], BINARY_OPS[op]
    if (g.device.type != "cpu" or reducer.keeps_arg or reducer.divides_by_degree or lhs is None
            or lhs.dim() != 2 or lhs.dtype not in _FULL_PRECISION or tuple(lhs.shape[1:]) != tuple(out_shape)):
        return None
    narrow = not _wide(g, lhs.shape[1])
    if binop.copies == "lhs":
        if narrow:
            adjacency = _adjacency(g, lhs.dtype)
            return lambda lhs, rhs: _csr_product(adjacency, lhs.contiguous())
        return lambda lhs, rhs: _row_sum(g, lhs.contiguous(), None)
    if not (binop.scales and not binop.reduces_last_dim and rhs is not None and rhs.numel() == g.num_edges):
        return None
    if narrow and g.num_edges <= _SMALL_GRAPH_EDGES:
        product = _weighted_adjacency(g, lhs.dtype).product

        def run(lhs, rhs):
            return product(lhs.contiguous(), rhs if rhs.dim() == 1 else rhs.reshape(-1))
    else:
        def run(lhs, rhs):
            return _row_sum(g, lhs.contiguous(), rhs if rhs.dim() == 1 else rhs.reshape(-1))
    run.flat_rhs = True  # one weight per edge, in any shape: the front end need not pad it
    return run


class _TorchBackend:
    # Its runs make operands contiguous themselves and read them at any address (see
    # backends.LAYOUT_DEPENDENT): what it binds for a call depends on their shapes and dtypes.
    layout_independent = True

    def bind_spmm(self, g, op, reduce, lhs, rhs, out_shape, with_arg=False):
        """``run(lhs, rhs)``: :meth:`spmm` for operands with these shapes, dtypes and devices,
        with what it decides per call decided here, once (the front ends keep it for calls
        repeated with the same facts)."""
        bound = None if with_arg else _bound_row_sum(g, op, reduce, lhs, rhs, out_shape)
        if bound is not None:
            return bound
        return lambda lhs, rhs: self.spmm(g, op, reduce, None if lhs is None else lhs.contiguous(),
                                          None if rhs is None else rhs.contiguous(), out_shape,
                                          with_arg=with_arg)

    def spmm(self, g, op, reduce, lhs, rhs, out_shape, schedule=None, with_arg=False):
        if with_arg and not REDUCERS[reduce].keeps_arg:
            raise ValueError(f"with_arg needs reduce max or min, got {reduce!r}")
        if g.device.type == "cpu" and (product := _sparse_product(g, op, reduce, lhs, rhs, out_shape)) is not None:
            return product
        binop = BINARY_OPS[op]
        dtype = (lhs if lhs is not None else rhs).dtype
        acc = _accumulation_dtype(dtype)
        # index_select, not t[index]: PyTorch's advanced indexing gathers rows 3-4x slower
        a = lhs.index_select(0, g.col.long()).to(acc) if binop.uses_lhs else None
        b = _edges_in_csr_order(g, rhs).to(acc) if binop.uses_rhs else None
        messages = binop.torch_fn(a, b).expand(g.num_edges, *out_shape)
        dst = g.csr_dst.long()
        out = torch.zeros((g.num_dst, *out_shape), dtype=acc, device=g.device)
        if REDUCERS[reduce].keeps_arg:
            # include_self=False leaves rows with no edges at their initial 0, as DGL does.
            out.scatter_reduce_(0, _row_index(dst, messages), messages,
                                REDUCERS[reduce].scatter_reduce, include_self=False)
        else:
            out.index_add_(0, dst, messages)
        if REDUCERS[reduce].divides_by_degree:
            degree = g.in_degrees().clamp(min=1).to(acc)
            out /= degree.view(-1, *([1] * len(out_shape)))
        if with_arg:
            return (out.to(dtype), *_winners(g, messages, out))
        return out.to(dtype)

    def sddmm(self, g, op, lhs, rhs, lhs_target, rhs_target, out_shape, schedule=None):
        if (BINARY_OPS[op].reduces_last_dim and g.device.type == "cpu" and g.num_edges
                and (dot := _sampled_dot(g, lhs, rhs, lhs_target, rhs_target, out_shape)) is not None):
            return dot
        binop = BINARY_OPS[op]
        dtype = (lhs if lhs is not None else rhs).dtype
        acc = _accumulation_dtype(dtype)
        src, dst = g.edges()
        by_target = {"u": src.long(), "v": dst.long(), "e": None}

        def gather(t: torch.Tensor, target: str) -> torch.Tensor:
            index = by_target[target]
            return (t if index is None else t.index_select(0, index)).to(acc)

        a = gather(lhs, lhs_target) if binop.uses_lhs else None
        b = gather(rhs, rhs_target) if binop.uses_rhs else None
        result = binop.torch_fn(a, b)
        if (binop.uses_lhs and binop.uses_rhs and result.dtype == dtype
                and result.shape == (g.num_edges, *out_shape)):
            return result  # a fresh tensor already
        # Copied into a new tensor: a copy of an edge operand must not alias it.
        out = torch.empty((g.num_edges, *out_shape), dtype=dtype, device=g.device)
        return out.copy_(result.expand(g.num_edges, *out_shape))

    def edge_softmax(self, g, logits, norm_by):
        group, num_groups = _softmax_groups(g, norm_by)
        x = logits.to(_accumulation_dtype(logits.dtype))
        shape = (num_groups, *x.shape[1:])
        row_max = torch.full(shape, float("-inf"), dtype=x.dtype, device=x.device)
        row_max.scatter_reduce_(0, _row_index(group, x), x, "amax", include_self=True)
        exp = torch.exp(x - row_max.index_select(0, group))
        row_sum = torch.zeros(shape, dtype=x.dtype, device=x.device).index_add_(0, group, exp)
        return (exp / row_sum.index_select(0, group)).to(logits.dtype)

    def edge_softmax_grad(self, g, y, grad, norm_by):
        group, num_groups = _softmax_groups(g, norm_by)
        accumulation = _accumulation_dtype(y.dtype)
        y_acc = y.to(accumulation)
        gy = grad.to(accumulation) * y_acc
        row_sum = torch.zeros((num_groups, *gy.shape[1:]), dtype=accumulation, device=gy.device)
        row_sum.index_add_(0, group, gy)
        return (gy - y_acc * row_sum.index_select(0, group)).to(y.dtype)


    def gat_attention(self, g, score_src, score_dst, edge_scores, masked, negative_slope):
        logits = self._gat_logits(g, score_src, score_dst, edge_scores)
        logits = torch.nn.functional.leaky_relu(logits, negative_slope)
        if masked is not None:
            logits = logits.masked_fill(_per_edge(masked, logits), float("-inf"))
        return self.edge_softmax(g, logits, "dst")

    def gat_attention_grad(self, g, y, grad, score_src, score_dst, edge_scores, masked, negative_slope):
        dz = self.edge_softmax_grad(g, y, grad, "dst")
        if masked is not None:
            dz = dz.masked_fill(_per_edge(masked, dz), 0)
        pre = self._gat_logits(g, score_src, score_dst, edge_scores)
        dz = torch.ops.aten.leaky_relu_backward(dz, pre, negative_slope, False)
        return dz, self.spmm(g, "copy_rhs", "sum", None, dz, tuple(dz.shape[1:]))

    def _gat_logits(self, g, score_src, score_dst, edge_scores):
        """GAT's logits before the LeakyReLU, rounded as the separate operations round them."""
        logits = self.sddmm(g, "add", score_src, score_dst, "u", "v", tuple(score_src.shape[1:]))
        return logits if edge_scores is None else logits + edge_scores


def _per_edge(masked: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``masked`` ``[E]`` viewed to broadcast over ``values`` ``[E, *shape]``."""
    return masked.view(-1, *([1] * (values.dim() - 1)))


def _softmax_groups(g, norm_by: str) -> tuple[torch.Tensor, int]:
    """Each edge's group for an edge softmax (its destination or source) as int64, kept
    with the graph, and the number of groups."""
    group = g.cpu.get(("softmax_group", norm_by), lambda: g.edges()[1 if norm_by == "dst" else 0].long())
    return group, g.num_dst if norm_by == "dst" else g.num_src


BACKEND = _TorchBackend()
