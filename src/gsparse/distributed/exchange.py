"""Moving node features between ranks, with autograd: the halo exchange and its adjoint.

A rank's edges read source nodes that other ranks own (its *halo*). :class:`HaloPlan` is
the fixed plan of one :class:`~gsparse.distributed.DistGraph`: which of my rows each peer
needs (``send_index``, grouped by peer) and how many rows I receive from each owner
(``recv_counts``, in the order of my halo). Both directions are one
``torch.distributed.all_to_all_single`` with uneven splits:

* **gather** (forward): ``halo = x[send_index]`` routed to the ranks that read it;
* **scatter** (its adjoint, for gradients): halo rows routed back to their owners and
  summed into them (``index_add`` at ``send_index``).

Where the halos are nearly every remote row of 3 or more ranks (``plan.dense``: sources
drawn without locality), the overlapped exchange of :func:`start_gather` all-gathers
every rank's rows instead, and its adjoint is a reduce-scatter: the same bytes within
:data:`DENSE_HALO`, in one collective, without gathering rows into a send buffer or
adding received rows at scattered positions.

The backward of a gather is a scatter and vice versa, so that gradients with respect to
source-node features reach their owners. :func:`start_gather` starts a gather without
waiting; the operators compute their local edges meanwhile (see
:mod:`gsparse.distributed.ops`), and in the backward pass the same split holds: the
halo's gradient is sent back while the local edges' gradients are computed.

Every rank of the group must make the same sequence of exchange calls, as with any
collective: the operators exchange exactly when the graph needs it on some rank, which
is a property of the whole graph, never of one rank's share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.autograd.function import once_differentiable

__all__ = ["CommStats", "HaloPlan", "Pending", "DENSE_HALO", "start_gather", "receive", "gather", "scatter",
           "allgather"]

# A plan of 3 or more ranks is dense when the largest halo holds at least this share of
# the remote rows. On 4 H200s with uniform sources (every remote row in the halo) the
# all-to-all path cost 8% more per epoch than the all-gather moving the same bytes (22.24
# against 20.50 ms), so the all-gather pays while it moves at most about 1/0.9 of the
# halo's bytes. Between 2 ranks an all-to-all is one send and one receive, as an
# all-gather is, and the all-gather only adds bytes (the gathered gradient covers my own
# rows too): overlapped, it gained nothing on 2 H200s (products-like epochs 1-3% slower
# with uniform sources, equal with 90% locality).
DENSE_HALO = 0.9


@dataclass
class CommStats:
    """Bytes and messages this rank sent to other ranks, by all exchanges of a graph."""

    bytes_sent: int = 0
    exchanges: int = 0

    def reset(self) -> None:
        """Start counting again from zero."""
        self.bytes_sent = 0
        self.exchanges = 0


@dataclass(eq=False)
class HaloPlan:
    """Who sends what to whom for one rank (see the module docstring).

    Attributes:
        send_index: ``[S]`` local rows to send, grouped by receiving rank.
        send_counts: ``[P]`` rows sent to each rank (``sum = S``).
        recv_counts: ``[P]`` halo rows received from each owner (``sum = num_halo``).
        num_local: rows of the local feature matrix (source nodes this rank owns).
        group: the process group.
        active: whether any rank of the group has a halo; when not, nothing is exchanged.
        rows_max: the most source rows any rank owns (an all-gather's block).
        dense: the overlapped exchange all-gathers (see the module docstring).
        stats: counters of what this plan sent.
    """

    send_index: torch.Tensor
    send_counts: list[int]
    recv_counts: list[int]
    num_local: int
    group: Any
    active: bool
    rows_max: int
    dense: bool = False
    stats: CommStats = field(default_factory=CommStats)

    @property
    def num_halo(self) -> int:
        return sum(self.recv_counts)

    def _count(self, rows: int, t: torch.Tensor) -> None:
        self.stats.bytes_sent += rows * math.prod(t.shape[1:]) * t.element_size()
        self.stats.exchanges += 1


def _all_to_all(plan: HaloPlan, send: torch.Tensor, send_counts: list[int], recv_counts: list[int],
                async_op: bool):
    recv = send.new_empty((sum(recv_counts), *send.shape[1:]))
    plan._count(sum(send_counts), send)
    work = dist.all_to_all_single(recv, send.contiguous(), recv_counts, send_counts, group=plan.group,
                                  async_op=async_op)
    return recv, work


def _gather_now(plan: HaloPlan, x: torch.Tensor, async_op: bool):
    send = x.index_select(0, plan.send_index)
    recv, work = _all_to_all(plan, send, plan.send_counts, plan.recv_counts, async_op)
    return send, recv, work


def _scatter_now(plan: HaloPlan, y: torch.Tensor, async_op: bool):
    return _all_to_all(plan, y.contiguous(), plan.recv_counts, plan.send_counts, async_op)


def _add_at_owners(plan: HaloPlan, into: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
    return into.index_add(0, plan.send_index, recv.to(into.dtype))


def _allgather_now(plan: HaloPlan, x: torch.Tensor, async_op: bool):
    """``[world * rows_max, *shape]`` every rank's rows, rank ``q``'s at ``q * rows_max``."""
    world = len(plan.send_counts)
    padded = x
    if x.shape[0] != plan.rows_max:
        padded = x.new_zeros((plan.rows_max, *x.shape[1:]))
        padded[:x.shape[0]] = x
    padded = padded.contiguous()
    out = x.new_empty((world * plan.rows_max, *x.shape[1:]))
    plan._count((world - 1) * plan.rows_max, padded)
    work = _all_gather_tensor(out, padded, group=plan.group, async_op=async_op)
    return padded, out, work


def _reduce_scatter_now(plan: HaloPlan, grad: torch.Tensor, async_op: bool):
    """The adjoint of :func:`_allgather_now`: ``[rows_max, *shape]`` the sum over the ranks
    of their gradient for my block."""
    world = len(plan.send_counts)
    grad = grad.contiguous()
    mine = grad.new_empty((plan.rows_max, *grad.shape[1:]))
    plan._count((world - 1) * plan.rows_max, grad)
    work = _reduce_scatter_tensor(mine, grad, group=plan.group, async_op=async_op)
    return mine, work


def _add_received(plan: HaloPlan, into: torch.Tensor, recv: torch.Tensor, dense: bool) -> torch.Tensor:
    """``into`` plus the gradient that came back for my rows (by a scatter, or by a
    reduce-scatter after an all-gather)."""
    if dense:
        return into + recv[:plan.num_local].to(into.dtype)
    return _add_at_owners(plan, into, recv)


@dataclass(eq=False)
class _BackwardSplit:
    """Where the gather's backward leaves its scatter in flight for :class:`_Join` to finish."""

    work: Any = None
    recv: torch.Tensor | None = None
    send: torch.Tensor | None = None
    dense: bool = False


class _Join(torch.autograd.Function):
    """Identity on the local features. Its backward runs last (it waits on every use of
    its output, the halo's arrival included) and adds the halo's gradient, whose scatter
    :class:`_Arrive`'s backward started, to the local edges' gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, plan: HaloPlan, split: _BackwardSplit) -> torch.Tensor:
        ctx.plan, ctx.split = plan, split
        return x.view_as(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        split = ctx.split
        if split.work is not None:
            split.work.wait()
            grad = _add_received(ctx.plan, grad, split.recv, split.dense)
            split.work = split.recv = split.send = None
        return grad, None, None


class _Arrive(torch.autograd.Function):
    """The halo ``x[send_index]`` of the peers (every rank's rows when the plan is dense),
    once the gather started on ``x`` arrived.

    Backward: the scatter of the halo's gradient back to its owners (a reduce-scatter when
    dense). With a :class:`_BackwardSplit` it is only started, and :class:`_Join` finishes
    it; without, it completes here and returns the gradient of ``x``.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, plan: HaloPlan, pending: _Ready, split: _BackwardSplit | None,
                dense: bool):
        ctx.plan, ctx.split, ctx.num_local, ctx.dense = plan, split, x.shape[0], dense
        return pending.wait()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        plan, split, dense = ctx.plan, ctx.split, ctx.dense
        send_back = _reduce_scatter_now if dense else _scatter_now
        if split is not None:
            split.recv, split.work = send_back(plan, grad, async_op=True)
            split.send, split.dense = grad, dense  # grad kept alive until the exchange completes
            return None, None, None, None, None
        recv, _ = send_back(plan, grad, async_op=False)
        zeros = grad.new_zeros((ctx.num_local, *grad.shape[1:]))
        return _add_received(plan, zeros, recv, dense), None, None, None, None


@dataclass(eq=False)
class Pending:
    """A gather in flight: :attr:`source` is what the local edges should read (``x``, tied
    into autograd so that the halo's gradient joins its own), :meth:`wait` what the
    boundary edges read (the halo, or every rank's rows when the plan is dense)."""

    plan: HaloPlan
    source: torch.Tensor
    _recv: torch.Tensor
    _work: Any
    _send: torch.Tensor
    _split: _BackwardSplit | None
    _halo: torch.Tensor | None = None

    def wait(self) -> torch.Tensor:
        """``[num_halo, *shape]`` the halo rows, grouped by owner (dense plans:
        ``[world * rows_max, *shape]``, rank ``q``'s rows at ``q * rows_max``); differentiable."""
        if self._halo is None:
            self._halo = _Arrive.apply(self.source, self.plan, _Ready(self._recv, self._work), self._split,
                                       self.plan.dense)
            self._send = self._recv = self._work = None
        return self._halo


@dataclass(eq=False)
class _Ready:
    recv: torch.Tensor
    work: Any

    def wait(self) -> torch.Tensor:
        if self.work is not None:
            self.work.wait()
        return self.recv


def start_gather(plan: HaloPlan, x: torch.Tensor) -> Pending:
    """Start sending ``x[send_index]`` ``[num_local, *shape]`` to the peers (all of ``x`` to
    every peer when the plan is dense), and return at once.

    Compute with ``pending.source`` in place of ``x`` meanwhile, then ``pending.wait()``:
    the backward pass then overlaps in the same way (the halo's gradient is in flight
    while the gradient of the local part is computed).
    """
    split = _BackwardSplit() if torch.is_grad_enabled() and x.requires_grad else None
    source = _Join.apply(x, plan, split) if split is not None else x
    start = _allgather_now if plan.dense else _gather_now
    send, recv, work = start(plan, x.detach(), async_op=True)
    return Pending(plan, source, recv, work, send, split)


def receive(plan: HaloPlan, x: torch.Tensor) -> torch.Tensor:
    """What the boundary edges of the overlapped operators read, without overlap: the halo
    (:func:`gather`), or every rank's rows (:func:`allgather`) when the plan is dense."""
    return allgather(plan, x) if plan.dense else gather(plan, x)


def gather(plan: HaloPlan, x: torch.Tensor) -> torch.Tensor:
    """``[num_halo, *shape]``: the halo rows of ``x`` ``[num_local, *shape]``, differentiable
    (its backward scatters the gradient back to the owners and sums it there)."""
    _, recv, work = _gather_now(plan, x.detach(), async_op=False)
    return _Arrive.apply(x, plan, _Ready(recv, work), None, False)


class _Scatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y: torch.Tensor, plan: HaloPlan, reduce: str) -> torch.Tensor:
        ctx.plan = plan
        recv, _ = _scatter_now(plan, y, async_op=False)
        shape = (plan.num_local, *y.shape[1:])
        if reduce == "sum":
            return _add_at_owners(plan, y.new_zeros(shape), recv)
        index = plan.send_index.view(-1, *([1] * (y.dim() - 1))).expand_as(recv)
        out = y.new_full(shape, float("-inf") if reduce == "amax" else float("inf"))
        return out.scatter_reduce(0, index, recv, reduce)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        _, recv, _ = _gather_now(ctx.plan, grad, async_op=False)
        return recv, None, None


def scatter(plan: HaloPlan, y: torch.Tensor, reduce: str = "sum") -> torch.Tensor:
    """``[num_local, *shape]``: each halo row of ``y`` ``[num_halo, *shape]`` sent to its owner
    and reduced there over the ranks that sent one (``"sum"``, ``"amax"`` or ``"amin"``;
    rows nobody sent are 0, -inf and +inf). Differentiable for ``"sum"`` (the backward is
    a gather)."""
    if reduce != "sum" and torch.is_grad_enabled() and y.requires_grad:
        raise ValueError(f"scatter with reduce {reduce!r} is not differentiable; detach y")
    return _Scatter.apply(y, plan, reduce)


# ---------------------------------------------------------------------- the naive baseline

# torch 2.13 renamed the tensor forms of these collectives; older releases have the old names.
_all_gather_tensor = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_tensor = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def allgather(plan: HaloPlan, x: torch.Tensor) -> torch.Tensor:
    """The naive exchange: all ranks' source features ``[world * rows_max, *shape]``, rank
    ``q``'s rows at ``q * rows_max``; differentiable (its backward is a reduce-scatter)."""
    _, out, _ = _allgather_now(plan, x.detach(), async_op=False)
    return _Arrive.apply(x, plan, _Ready(out, None), None, True)
