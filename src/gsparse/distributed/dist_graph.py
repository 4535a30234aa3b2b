"""DistGraph: one rank's share of a graph partitioned by destination rows.

Rank ``r`` owns the destination rows ``dst_nodes`` (a :class:`Partition` gives them), all
their incoming edges, and the source nodes ``src_nodes`` (the same nodes for a square
graph). Its edges read sources that other ranks own: its *halo*. The share is stored as

* ``local``: a :class:`gsparse.Graph`, CSR over my rows, whose sources are numbered
  ``[my source nodes | halo nodes]``: ``0..num_src-1`` are mine (in ``src_nodes`` order),
  ``num_src + h`` is ``halo_nodes[h]``; the halo is grouped by owner, then by id;
* ``plan``: the :class:`~gsparse.distributed.exchange.HaloPlan`: which of my source rows
  each peer reads (sent forward) and where the halo's gradients go back (the reverse
  direction, for the backward passes);
* for the overlapped operators, the local edges split into *inner* edges (sources of
  mine) and *boundary* edges (sources in the halo), each a Graph over all my rows.

Feature tensors given to the distributed operators are this rank's rows only: source
features ``[num_src, *shape]`` (``x[dg.src_nodes]``), destination features
``[num_dst, *shape]``, edge features ``[num_edges, *shape]`` in this rank's edge order
(``edge_ids`` gives their global ids when the graph was built from a global one).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
import torch.distributed as dist

from ..derived import DerivedCache
from ..graph import Graph
from .exchange import DENSE_HALO, CommStats, HaloPlan
from .partition import Partition, PartitionReport

__all__ = ["DistGraph", "DistSelfLoops", "EXCHANGES"]

EXCHANGES = ("overlap", "halo", "allgather")
"""How the operators obtain the halo (a :class:`DistGraph`'s ``exchange``)."""


@dataclass(frozen=True)
class DistSelfLoops:
    """``DistGraph`` counterpart of ``gsparse.nn``'s self loops: ``graph`` has this rank's
    edges that are not self loops, then one loop per row, in CSR order; ``origin`` ``[E']``
    maps each of its edges to its id in the original rank-local edge order, or ``E + i``
    for the loop added at row ``i`` (int32 where the ids fit); ``loop_edge`` ``[N]`` is the
    last original self loop of each row (-1 for none)."""

    graph: DistGraph
    origin: torch.Tensor
    loop_edge: torch.Tensor


def _group_info(group: Any) -> tuple[Any, int, int]:
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("torch.distributed is not initialised: call torch.distributed.init_process_group "
                           "first (torchrun sets up its environment)")
    group = dist.group.WORLD if group is None else group
    return group, dist.get_rank(group), dist.get_world_size(group)


def _csr_positions(rowptr: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """CSR positions of the edges of ``rows``, row by row (each row's own order kept)."""
    starts, ends = rowptr[rows].long(), rowptr[rows + 1].long()
    counts = ends - starts
    total = int(counts.sum())
    offsets = torch.repeat_interleave(starts - (torch.cumsum(counts, 0) - counts), counts, output_size=total)
    return torch.arange(total, device=rowptr.device) + offsets


def _csr_rows(local: Graph) -> torch.Tensor:
    """``[E]`` int64 row of each CSR position, built for the caller alone (``Graph.csr_dst``
    would stay cached with the graph)."""
    return torch.repeat_interleave(torch.arange(local.num_dst, device=local.device), local.in_degrees().long(),
                                   output_size=local.num_edges)


def _subgraph(local: Graph, keep: torch.Tensor, col: torch.Tensor, num_src: int) -> tuple[Graph, torch.Tensor]:
    """The CSR positions ``keep`` (a mask) of ``local`` as a Graph over all its rows with
    sources ``col`` (``[kept]``), and ``[kept_edges]`` the local edge ids of its edges in its
    own edge order (increasing: the subgraph keeps the local edge order)."""
    rows = _csr_rows(local)[keep]
    rowptr = torch.zeros(local.num_dst + 1, dtype=torch.int64, device=keep.device)
    torch.cumsum(torch.bincount(rows, minlength=local.num_dst), 0, out=rowptr[1:])
    positions = torch.nonzero(keep).flatten()
    ids = positions if local.eid is None else local.eid.long()[positions]
    edges, eid = torch.sort(ids)  # eid[k]: rank of the k-th CSR edge's id among the kept ids
    csr_eid = torch.empty_like(eid)
    csr_eid[eid] = torch.arange(eid.numel(), device=eid.device)
    graph = Graph.from_csr(rowptr, col, num_src, eid=csr_eid).with_index_dtype(local.index_dtype)
    return graph, edges.to(local.index_dtype)  # kept with the graph: 4 bytes an edge where ids fit


class _EdgeSet:
    """One rank's edges over its rows (``local``, sources ``[mine | halo]``) and what the
    strategies derive from them, built once and shared by every strategy's view
    (:meth:`DistGraph.with_exchange`) of the graph."""

    def __init__(self, local: Graph, num_src: int, num_halo: int) -> None:
        self.local, self.num_src, self.num_halo = local, num_src, num_halo
        self._gathered: Graph | None = None
        self._boundary_gathered: tuple[Graph, torch.Tensor] | None = None

    @cached_property
    def inner(self) -> tuple[Graph, torch.Tensor]:
        col = self.local.col.long()
        keep = col < self.num_src
        return _subgraph(self.local, keep, col[keep], self.num_src)

    @cached_property
    def boundary(self) -> tuple[Graph, torch.Tensor]:
        col = self.local.col.long()
        keep = col >= self.num_src
        return _subgraph(self.local, keep, col[keep] - self.num_src, self.num_halo)

    @cached_property
    def edge_merge(self) -> torch.Tensor:
        (_, inner), (_, outer) = self.inner, self.boundary
        device = self.local.device
        merge = torch.empty(self.local.num_edges, dtype=torch.int64, device=device)
        merge[inner] = torch.arange(inner.numel(), device=device)
        merge[outer] = inner.numel() + torch.arange(outer.numel(), device=device)
        return merge

    def boundary_gathered(self, halo_slot: torch.Tensor, num_slots: int) -> tuple[Graph, torch.Tensor]:
        """:attr:`boundary` with halo node ``h`` at ``halo_slot[h]`` among ``num_slots``
        sources (built on the first call)."""
        if self._boundary_gathered is None:
            graph, edges = self.boundary
            col = halo_slot[graph.col.long()] if graph.num_edges else graph.col
            relabelled = Graph.from_csr(graph.rowptr, col, num_slots, eid=graph.eid)
            self._boundary_gathered = relabelled.with_index_dtype(graph.index_dtype), edges
        return self._boundary_gathered

    def gathered(self, halo_slot: torch.Tensor, first_slot: int, num_slots: int) -> Graph:
        """The edges with my source ``i`` at ``first_slot + i`` and halo node ``h`` at
        ``halo_slot[h]``, among ``num_slots`` sources (built on the first call)."""
        if self._gathered is None:
            col = self.local.col.long()
            mine = col < self.num_src
            far = halo_slot[(col - self.num_src).clamp(min=0)] if self.num_halo else col
            self._gathered = Graph.from_csr(self.local.rowptr, torch.where(mine, first_slot + col, far), num_slots,
                                            eid=self.local.eid).with_index_dtype(self.local.index_dtype)
        return self._gathered

    @cached_property
    def self_loops(self) -> tuple[_EdgeSet, torch.Tensor, torch.Tensor]:
        """``(edges, origin, loop_edge)`` of :class:`DistSelfLoops`; local source ``i`` must be row ``i``.

        Read from the CSR, not from ``local.edges()``, whose cache would keep 16 bytes an
        edge for the rest of the graph's life (a tenth of a rank's peak at papers100M sizes).
        """
        local, n, num_edges = self.local, self.local.num_dst, self.local.num_edges
        device = local.device
        src, dst = local.col.long(), _csr_rows(local)
        ids = torch.arange(num_edges, device=device) if local.eid is None else local.eid.long()
        # Local source i is row i (same nodes, same order); halo sources are >= n: never loops.
        is_loop = src == dst
        kept = torch.nonzero(~is_loop).flatten()
        nodes = torch.arange(n, device=device)
        edge_index = torch.stack([torch.cat([src[kept], nodes]), torch.cat([dst[kept], nodes])])
        staged = Graph.from_edge_index(edge_index, num_src=local.num_src, num_dst=n)
        origin = torch.cat([ids[kept], num_edges + nodes])
        if staged.eid is not None:
            origin = origin[staged.eid.long()]
        loops = torch.nonzero(is_loop).flatten()
        loop_edge = torch.full((n,), -1, dtype=torch.int64, device=device)
        loop_edge.scatter_reduce_(0, dst[loops], ids[loops], "amax")
        looped = Graph.from_csr(staged.rowptr, staged.col, local.num_src).with_index_dtype(local.index_dtype)
        # origin is kept with the graph: 4 bytes an edge where the ids fit.
        origin = origin.to(torch.int32) if num_edges + n < 2**31 else origin
        return _EdgeSet(looped, self.num_src, self.num_halo), origin, loop_edge


class DistGraph:
    """One rank's share of a graph partitioned by destination rows (see the module docstring).

    Build on every rank of ``group`` at once (construction is collective) with
    :meth:`from_global`, :meth:`from_local_csr` or :meth:`from_local_edges`. It goes where
    a :class:`gsparse.Graph` goes in :func:`gsparse.distributed.gspmm`, ``gsddmm``,
    ``edge_softmax`` and, through the ``__gsparse_function__`` protocol, in ``gsparse``'s
    own operators and ``gsparse.nn`` layers.

    ``exchange`` picks how the operators obtain the halo: ``"overlap"`` (default: start the
    halo exchange, compute the inner edges, then the boundary edges once it arrived; where
    the halos are nearly every remote row, the exchange is an all-gather, ``dense_halo``),
    ``"halo"`` (exchange, then one pass over all edges) or ``"allgather"`` (the naive
    baseline: all-gather every rank's source features, then one pass).
    """

    def __init__(self, edges: _EdgeSet, plan: HaloPlan, *, partition: Partition, src_partition: Partition,
                 dst_nodes: torch.Tensor, src_nodes: torch.Tensor, halo_nodes: torch.Tensor,
                 halo_index: torch.Tensor, edge_ids: torch.Tensor | None, rows_max: int, rank: int,
                 world_size: int, exchange: str, _internal: bool = False) -> None:
        if not _internal:
            raise TypeError("DistGraph is built with DistGraph.from_global, from_local_csr or from_local_edges")
        if exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, got {exchange!r}")
        self._edges, self.plan = edges, plan
        self.partition, self.src_partition = partition, src_partition
        self.dst_nodes, self.src_nodes, self.halo_nodes = dst_nodes, src_nodes, halo_nodes
        self._halo_index = halo_index  # position of each halo node among its owner's source nodes
        self.edge_ids, self._rows_max = edge_ids, rows_max
        self.rank, self.world_size, self.exchange = rank, world_size, exchange
        # What the layers derive from this share (normalised weights; see gsparse.derived).
        self.layers: DerivedCache = DerivedCache("structures of the gsparse.nn layers")

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_local_csr(cls, rowptr: torch.Tensor, col: torch.Tensor, partition: Partition, *,
                       src_partition: Partition | None = None, eid: torch.Tensor | None = None,
                       edge_ids: torch.Tensor | None = None, group: Any = None,
                       device: torch.device | str | None = None, exchange: str = "overlap",
                       index_dtype: torch.dtype | None = None, dense_halo: bool | None = None) -> DistGraph:
        """This rank's rows as a CSR with global source ids. Collective over ``group``.

        Args:
            rowptr: ``[num_dst + 1]`` offsets over this rank's rows, in ``partition.nodes(rank)``
                order.
            col: ``[E]`` global source id of each CSR position.
            partition: owners of the destination rows (the same object on every rank).
            src_partition: owners of the source nodes; defaults to ``partition`` (a square
                graph). A bipartite graph needs its own.
            eid: ``[E]`` rank-local edge id of each CSR position (a permutation of
                ``0..E-1``); ``None``: CSR order is this rank's edge order.
            edge_ids: ``[E]`` global ids of this rank's edges in its edge order, kept for
                the caller (``dg.edge_ids``), optional.
            group: the process group (default: the world). The backend must handle
                tensors on ``device`` (gloo: CPU, NCCL: CUDA).
            device: where the graph lives; defaults to ``rowptr``'s device.
            exchange: ``"overlap"``, ``"halo"`` or ``"allgather"`` (see the class).
            index_dtype: ``torch.int32`` or ``torch.int64`` for the local CSR; the default
                is int32 where counts fit.
            dense_halo: whether the overlapped exchange all-gathers every rank's rows
                rather than sending each peer the rows it reads; ``None`` (default):
                with 3 or more ranks, where the largest halo holds at least
                ``exchange.DENSE_HALO`` of the remote rows (sources drawn without locality).
        """
        group, rank, world = _group_info(group)
        src_partition = partition if src_partition is None else src_partition
        for name, p in (("partition", partition), ("src_partition", src_partition)):
            if not isinstance(p, Partition):
                raise TypeError(f"{name} must be a gsparse.distributed.Partition, got {type(p).__name__}")
            if p.num_parts != world:
                raise ValueError(f"{name} has {p.num_parts} parts but the group has {world} ranks")
        device = torch.device(device) if device is not None else rowptr.device
        rowptr, col = rowptr.to(device), col.to(device).long()
        dst_nodes = partition.nodes(rank).to(device)
        if rowptr.dim() != 1 or rowptr.numel() != dst_nodes.numel() + 1:
            raise ValueError(f"rowptr must have num_dst + 1 = {dst_nodes.numel() + 1} entries (rank {rank} "
                             f"owns {dst_nodes.numel()} rows), got shape {tuple(rowptr.shape)}")
        if col.numel() and (int(col.min()) < 0 or int(col.max()) >= src_partition.num_nodes):
            raise ValueError(f"col must hold global source ids in [0, {src_partition.num_nodes}), "
                             f"got [{int(col.min())}, {int(col.max())}]")
        src_nodes = src_partition.nodes(rank).to(device)
        owner = src_partition.owner(col)
        mine = owner == rank
        remote_ids, remote_pos = torch.unique(col[~mine], return_inverse=True)
        remote_owner = src_partition.owner(remote_ids)
        by_owner = torch.argsort(remote_owner, stable=True)  # ids stay increasing within an owner
        halo_nodes = remote_ids[by_owner]
        slot = torch.empty_like(by_owner)
        slot[by_owner] = torch.arange(by_owner.numel(), device=device)
        ext = torch.empty_like(col)
        ext[mine] = src_partition.local_index(col[mine])
        ext[~mine] = src_nodes.numel() + slot[remote_pos]
        local = Graph.from_csr(rowptr, ext, src_nodes.numel() + halo_nodes.numel(),
                               eid=None if eid is None else eid.to(device))
        if index_dtype is not None:
            local = local.with_index_dtype(index_dtype)
        recv_counts = torch.bincount(remote_owner, minlength=world)
        plan = _exchange_plan(group, rank, world, src_partition, halo_nodes, recv_counts, src_nodes.numel(),
                              device, dense_halo)
        edges = _EdgeSet(local, src_nodes.numel(), halo_nodes.numel())
        return cls(edges, plan, partition=partition, src_partition=src_partition, dst_nodes=dst_nodes,
                   src_nodes=src_nodes, halo_nodes=halo_nodes, halo_index=src_partition.local_index(halo_nodes),
                   edge_ids=None if edge_ids is None else edge_ids.to(device), rows_max=plan.rows_max,
                   rank=rank, world_size=world, exchange=exchange, _internal=True)

    @classmethod
    def from_local_edges(cls, src: torch.Tensor, dst: torch.Tensor, partition: Partition,
                         **kwargs: Any) -> DistGraph:
        """This rank's edges as global ``(src [E], dst [E])`` ids, in this rank's edge order;
        every ``dst`` must be owned by this rank. Keyword arguments as :meth:`from_local_csr`.
        Collective."""
        _, rank, _ = _group_info(kwargs.get("group"))
        if src.shape != dst.shape or src.dim() != 1:
            raise ValueError(f"src and dst must be 1-D of one length, got {tuple(src.shape)} and {tuple(dst.shape)}")
        dst = dst.long()
        if dst.numel() and not bool((partition.owner(dst) == rank).all()):
            bad = dst[partition.owner(dst) != rank][0]
            raise ValueError(f"dst holds node {int(bad)}, which rank {rank} does not own")
        row = partition.local_index(dst)
        order = torch.argsort(row, stable=True)
        num_rows = int(partition.sizes()[rank])
        rowptr = torch.zeros(num_rows + 1, dtype=torch.int64, device=dst.device)
        torch.cumsum(torch.bincount(row, minlength=num_rows), 0, out=rowptr[1:])
        return cls.from_local_csr(rowptr, src.long()[order], partition, eid=order, **kwargs)

    @classmethod
    def from_global(cls, graph: Graph, partition: Partition, *, src_partition: Partition | None = None,
                    **kwargs: Any) -> DistGraph:
        """This rank's share of ``graph``, which every rank holds (on any device; only this
        rank's rows are copied to ``device``, by default ``graph.device``). Its edges
        keep the global graph's order (``edge_ids`` increasing) and each row the global
        CSR order; the local CSR keeps the global one's index dtype unless ``index_dtype``
        says otherwise. ``src_partition`` defaults to ``partition`` for a square graph and to
        equal ranges of source nodes for a bipartite one. Collective."""
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a gsparse.Graph, got {type(graph).__name__}")
        if partition.num_nodes != graph.num_dst:
            raise ValueError(f"partition covers {partition.num_nodes} nodes but the graph has "
                             f"{graph.num_dst} destination nodes")
        _, rank, world = _group_info(kwargs.get("group"))
        if src_partition is None:
            if graph.num_src == graph.num_dst:
                src_partition = partition
            else:
                bounds = torch.div(torch.arange(world + 1) * graph.num_src, world, rounding_mode="floor")
                src_partition = Partition.from_bounds(bounds, "range")
        if src_partition.num_nodes != graph.num_src:
            raise ValueError(f"src_partition covers {src_partition.num_nodes} nodes but the graph has "
                             f"{graph.num_src} source nodes")
        rows = partition.nodes(rank).to(graph.device)
        positions = _csr_positions(graph.rowptr, rows)
        ids = positions if graph.eid is None else graph.eid.long()[positions]
        edge_ids, eid = torch.sort(ids)
        csr_eid = torch.empty_like(eid)
        csr_eid[eid] = torch.arange(eid.numel(), device=eid.device)
        rowptr = torch.zeros(rows.numel() + 1, dtype=torch.int64, device=graph.device)
        torch.cumsum(graph.in_degrees()[rows].long(), 0, out=rowptr[1:])
        kwargs.setdefault("device", graph.device)
        kwargs.setdefault("index_dtype", graph.index_dtype)
        return cls.from_local_csr(rowptr, graph.col[positions], partition, src_partition=src_partition,
                                  eid=csr_eid, edge_ids=edge_ids, **kwargs)

    # ------------------------------------------------------------------ properties

    @property
    def local(self) -> Graph:
        """This rank's edges as a :class:`gsparse.Graph`, a CSR over its rows whose sources
        are numbered ``[my sources | halo]``."""
        return self._edges.local

    @property
    def group(self) -> Any:
        """The ``torch.distributed`` process group the graph is partitioned over."""
        return self.plan.group

    @property
    def num_src(self) -> int:
        """The number of source nodes this rank owns, the rows of its source features."""
        return self.plan.num_local

    @property
    def num_dst(self) -> int:
        """The number of destination rows this rank owns, the rows of its outputs."""
        return self.local.num_dst

    @property
    def num_edges(self) -> int:
        """The number of edges into this rank's rows (the rows of its edge features)."""
        return self.local.num_edges

    @property
    def num_halo(self) -> int:
        """The number of remote source nodes this rank's edges read (its halo)."""
        return self.plan.num_halo

    @property
    def device(self) -> torch.device:
        """The device of this rank's graph and features."""
        return self.local.device

    @property
    def index_dtype(self) -> torch.dtype:
        """The integer dtype of the local graph's indices (int32 or int64)."""
        return self.local.index_dtype

    @property
    def comm(self) -> CommStats:
        """What this rank sent to others so far (shared by the graphs derived from this one)."""
        return self.plan.stats

    def in_degrees(self) -> torch.Tensor:
        """``[num_dst]`` in-degree of each of my rows (all its edges are on this rank)."""
        return self.local.in_degrees()

    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(src, dst)`` of my edges in my edge order, in local numbering: ``src`` in
        ``[my sources | halo]``, ``dst`` a row of mine."""
        return self.local.edges()

    def __repr__(self) -> str:
        return (f"DistGraph(rank={self.rank}/{self.world_size}, num_src={self.num_src}, num_dst={self.num_dst}, "
                f"num_edges={self.num_edges}, num_halo={self.num_halo}, exchange={self.exchange!r}, "
                f"device={self.device})")

    def with_exchange(self, exchange: str) -> DistGraph:
        """The same share with another ``exchange`` strategy (structures are shared)."""
        if exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, got {exchange!r}")
        other = copy.copy(self)
        other.exchange = exchange
        other.layers = DerivedCache(self.layers.holds)
        return other

    def _with_edges(self, edges: _EdgeSet) -> DistGraph:
        """Another edge set over the same rows, sources and halo (the plan is shared)."""
        return DistGraph(edges, self.plan, partition=self.partition, src_partition=self.src_partition,
                         dst_nodes=self.dst_nodes, src_nodes=self.src_nodes, halo_nodes=self.halo_nodes,
                         halo_index=self._halo_index, edge_ids=None, rows_max=self._rows_max, rank=self.rank,
                         world_size=self.world_size, exchange=self.exchange, _internal=True)

    # ------------------------------------------------------------------ derived structures

    @property
    def inner(self) -> tuple[Graph, torch.Tensor]:
        """``(graph, edges)``, the edges into this rank's rows whose source it owns and their
        local edge ids ``[E_inner]``."""
        return self._edges.inner

    @property
    def boundary(self) -> tuple[Graph, torch.Tensor]:
        """``(graph, edges)``, the edges into this rank's rows whose source is in the halo
        and their local edge ids ``[E_boundary]``. Sources are numbered as the overlapped
        exchange delivers them (``exchange.start_gather``): the halo ``0..num_halo-1``, or
        with a dense plan every rank's rows, rank ``q``'s source ``i`` at
        ``q * rows_max + i``."""
        if not self.plan.dense:
            return self._edges.boundary
        return self._edges.boundary_gathered(self._halo_slot, self.world_size * self._rows_max)

    @cached_property
    def _halo_slot(self) -> torch.Tensor:
        """``[num_halo]`` each halo node's row in the all-gathered feature matrix (kept: the
        overlapped operators of a dense plan name it on every call)."""
        owners = torch.repeat_interleave(torch.arange(self.world_size, device=self.device),
                                         torch.tensor(self.plan.recv_counts, device=self.device),
                                         output_size=self.num_halo)
        return owners * self._rows_max + self._halo_index

    @property
    def edge_merge(self) -> torch.Tensor:
        """``[num_edges]``, where each local edge is in ``cat([inner edges, boundary edges])``."""
        return self._edges.edge_merge

    @property
    def gathered(self) -> Graph:
        """This rank's edges with sources numbered as in the all-gathered feature matrix,
        where rank ``q``'s source ``i`` is row ``q * rows_max + i`` (for the ``"allgather"``
        baseline)."""
        return self._edges.gathered(self._halo_slot, self.rank * self._rows_max, self.world_size * self._rows_max)

    @property
    def rows_max(self) -> int:
        """The most source nodes any rank owns (the all-gather's block size)."""
        return self._rows_max

    def self_loops(self) -> DistSelfLoops:
        """This share with its self loops replaced by one loop per row, as ``gsparse.nn``
        builds for GCN and GAT; kept with the graph. Needs a square graph partitioned the
        same way for sources and destinations."""
        return self.layers.get("self_loops", lambda: _dist_self_loops(self))

    def partition_report(self) -> PartitionReport:
        """The partition's report from every rank's share (collective; no global graph needed)."""
        halo = torch.tensor(self.plan.recv_counts, dtype=torch.int64, device=self.device)
        cut = int((self.local.col.long() >= self.num_src).sum())
        mine = torch.cat([torch.tensor([self.num_dst, self.num_edges, cut], device=self.device), halo])
        everyone = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(everyone, mine, group=self.group)
        rows = torch.stack(everyone).cpu()
        return PartitionReport(self.partition.method, rows[:, 0].tolist(), rows[:, 1].tolist(),
                               int(rows[:, 2].sum()), rows[:, 3:].sum(1).tolist(), rows[:, 3:].tolist())

    # ------------------------------------------------------------------ gsparse's protocol

    def __gsparse_function__(self, func: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        """Run ``func`` (``gsparse.gspmm``, ``gsddmm``, ``edge_softmax``, ``gat_attention`` or
        ``gsparse.nn``'s ``self_loops``) on this share: the hook through which gsparse's
        operators and layers accept a DistGraph."""
        from . import ops

        name = func.__name__
        if name == "gat_attention":
            return ops.gat_attention(*args, **kwargs)
        if name in ("gspmm", "gsddmm", "edge_softmax"):
            if kwargs.get("schedule") is not None:
                raise ValueError("schedule cannot be forced on a DistGraph (each rank's kernels pick their own)")
            kwargs = {k: v for k, v in kwargs.items() if k != "schedule"}
            return getattr(ops, name)(*args, **kwargs)
        if name == "self_loops":
            return self.self_loops()
        raise TypeError(f"{func.__module__}.{func.__qualname__} does not accept a DistGraph")


def _exchange_plan(group: Any, rank: int, world: int, src_partition: Partition, halo_nodes: torch.Tensor,
                   recv_counts: torch.Tensor, num_local: int, device: torch.device,
                   dense_halo: bool | None) -> HaloPlan:
    """Tell each owner which of its nodes I read; learn which of mine each peer reads."""
    recv_counts = recv_counts.to(device)
    send_counts = torch.empty_like(recv_counts)
    dist.all_to_all_single(send_counts, recv_counts, group=group)
    recv_list, send_list = recv_counts.tolist(), send_counts.tolist()
    wanted = halo_nodes.new_empty(sum(send_list))
    dist.all_to_all_single(wanted, halo_nodes.contiguous(), send_list, recv_list, group=group)
    if wanted.numel() and not bool((src_partition.owner(wanted) == rank).all()):
        raise ValueError(f"rank {rank} is asked for source nodes it does not own: the ranks were given "
                         f"different partitions")
    most = torch.tensor([halo_nodes.numel(), num_local], device=device)
    dist.all_reduce(most, dist.ReduceOp.MAX, group=group)
    largest_halo, rows_max = (int(v) for v in most.tolist())
    # Dense: the largest halo is nearly every remote row (collective: the same everywhere).
    if dense_halo is None:
        dense_halo = world > 2 and largest_halo >= DENSE_HALO * (world - 1) * rows_max
    return HaloPlan(src_partition.local_index(wanted), send_list, recv_list, num_local, group,
                    largest_halo > 0, rows_max, bool(dense_halo))


def _dist_self_loops(g: DistGraph) -> DistSelfLoops:
    if g.src_partition is not g.partition and not torch.equal(g.src_nodes, g.dst_nodes):
        raise ValueError(f"self loops need a square graph with one partition of its nodes, got rank "
                         f"{g.rank} owning {g.num_src} source and {g.num_dst} destination nodes")
    edges, origin, loop_edge = g._edges.self_loops
    return DistSelfLoops(g._with_edges(edges), origin, loop_edge)
