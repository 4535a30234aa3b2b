"""Mini-batch training steps replayed from one CUDA graph.

A sampler hands over blocks of a different size every step, so an eager step pays the
host's time for every operator launch and every autograd node, step after step: on a
two-layer model that host time, not the GPU's work, bounds the step. A CUDA graph replays a
whole step (gather, forward, loss, backward, optimizer) with one host call, but only on
tensors of fixed sizes at fixed addresses. :class:`StaticBlocks` gives the blocks such
sizes: buffers of static capacity per level of nodes and per layer of edges, into which
each step's blocks are copied, with the unused capacity filled by edges among *trash*
nodes that no real node reads; :class:`CapturedStep` captures a step written on those
buffers and replays it, capturing again when a batch outgrows them.

Why the results are those of the unpadded blocks: a real destination's edges are its own
(trash edges join trash nodes only), so its aggregation, degree, normalisation and
softmax are unchanged; rows beyond the real ones (dummy and trash) compute finite values
that no real row reads, and the loss reads the seeds' rows only. Each trash row takes at
most ``max_degree`` edges and each trash source feeds one trash row, so no padded row is
longer than a real one, in the graph or in its reverse (the backward).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..graph import Graph

__all__ = ["StaticBlocks", "CapturedStep"]

# Each level's static node count is a multiple of this (8 elements of 2 bytes fill 16).
LEVEL_ROWS = 8


class StaticBlocks:
    """A step's sampled blocks in buffers of static sizes, for a step captured in a CUDA graph.

    Levels of nodes are numbered from the input: level 0 holds every node the step reads
    (``n_id``), level ``L`` the seeds; each level's nodes are a prefix of the level before
    (a sampler's local ids: seeds first, then what each hop adds). Layer ``l``'s edges go
    from level ``l`` to level ``l + 1``, sorted by destination, as neighbour samplers emit
    them. Capacities start at the first batch's sizes plus ``margin`` (each level's rounded
    up to a multiple of 8 nodes) and grow (by the same margin over the batch that needed
    it) when a batch does not fit; :attr:`version` counts the growths, each of which
    reallocates the buffers, so that a captured step must be captured again
    (:class:`CapturedStep` does it).

    Args:
        max_degree: the most edges any destination has in any layer (the largest fanout);
            the trash rows keep to it, and it is the graphs' ``max_degree``.
        square: build each layer's graph on its source level's nodes (GCN and GAT on blocks,
            as PyG's ``trim_to_layer`` runs them, slicing the rows the next layer needs);
            else bipartite, from the source level to the destination level (GraphSAGE).
        margin: capacity kept above the sizes that set it, and the share of a layer's edge
            capacity its trash rows can absorb.

    Attributes:
        n_id: ``[C_0]`` int64: the step's node ids, then zeros (gather ``x[n_id]``).
        sizes: ``(C_0, ..., C_L)``: each level's static node count, trash nodes included.
        edge_index: per layer, the ``[2, K_l]`` static edge list.
        version: how many times the buffers were (re)allocated: 0 before the first batch,
            then one more for each growth.
    """

    def __init__(self, max_degree: int, *, square: bool = False, margin: float = 0.05) -> None:
        if not isinstance(max_degree, int) or isinstance(max_degree, bool) or max_degree < 1:
            raise ValueError(f"max_degree must be a positive int (the largest fanout), got {max_degree!r}")
        if not isinstance(margin, (int, float)) or isinstance(margin, bool) or not 0 < margin <= 4:
            raise ValueError(f"margin must be a number in (0, 4], got {margin!r}")
        self.max_degree, self.square, self.margin = max_degree, square, float(margin)
        self.version = 0
        self._nodes: list[int] = []  # per level: capacity of real nodes
        self._edges: list[int] = []  # per layer: edge capacity
        self._trash_rows: list[int] = []  # per layer: trash rows (each up to max_degree edges)
        self.n_id = torch.empty(0, dtype=torch.int64)
        self.sizes: tuple[int, ...] = ()
        self.edge_index: list[torch.Tensor] = []
        self._trash: list[torch.Tensor] = []

    def load(self, n_id: torch.Tensor, num_nodes: Sequence[int], edge_index: Sequence[torch.Tensor]) -> bool:
        """Copy a step's blocks into the buffers (device copies, no synchronisation).

        Args:
            n_id: ``[N_0]`` the step's node ids (level 0), on the device of the edges.
            num_nodes: ``(N_0, ..., N_L)``, each level's node count (``N_0 = len(n_id)``,
                non-increasing).
            edge_index: ``L`` edge lists ``[2, E_l]`` of local ids (sources of level ``l``,
                destinations of level ``l + 1``), sorted by destination.

        Returns:
            ``True`` when the blocks fit the buffers as they were; ``False`` when the
            capacities grew (new buffers, :attr:`version` increased) to take them.
        """
        num_nodes = self._check(n_id, num_nodes, edge_index)
        fits = (self.n_id.device == n_id.device and len(num_nodes) == len(self._nodes)
                and all(n <= c for n, c in zip(num_nodes, self._nodes))
                and all(e.shape[1] <= k and k - e.shape[1] <= r * self.max_degree
                        for e, k, r in zip(edge_index, self._edges, self._trash_rows)))
        if not fits:
            self._grow(num_nodes, [e.shape[1] for e in edge_index], n_id.device)
        count = n_id.numel()
        self.n_id[:count].copy_(n_id)
        self.n_id[count:].zero_()
        for static, trash, edges in zip(self.edge_index, self._trash, edge_index):
            used = edges.shape[1]
            static[:, :used].copy_(edges)
            static[:, used:].copy_(trash[:, :static.shape[1] - used])
        return fits

    def graphs(self) -> list[Graph]:
        """Each layer's graph over the static buffers (:meth:`gsparse.Graph.from_block`),
        from the input layer: build them inside the captured step, so that every replay
        rebuilds them from the batch just loaded."""
        if not self.edge_index:
            raise RuntimeError("StaticBlocks.graphs: load a batch first")
        return [Graph.from_block(edges, num_src=self.sizes[layer],
                                 num_dst=self.sizes[layer if self.square else layer + 1],
                                 dst_sorted=True, max_degree=self.max_degree)
                for layer, edges in enumerate(self.edge_index)]

    def _check(self, n_id: torch.Tensor, num_nodes: Sequence[int], edge_index: Sequence[torch.Tensor]) -> list[int]:
        if not isinstance(n_id, torch.Tensor) or n_id.dim() != 1:
            raise ValueError(f"n_id must be a 1-D tensor of node ids, got {_describe(n_id)}")
        num_nodes = [int(n) for n in num_nodes]
        if len(num_nodes) < 2 or len(edge_index) != len(num_nodes) - 1:
            raise ValueError(f"num_nodes must give L + 1 node counts for L edge lists: got {len(num_nodes)} "
                             f"counts and {len(edge_index)} edge lists")
        if num_nodes[0] != n_id.numel():
            raise ValueError(f"num_nodes[0] must be len(n_id) = {n_id.numel()}, got {num_nodes[0]}")
        if any(a < b for a, b in zip(num_nodes, num_nodes[1:])) or num_nodes[-1] < 1:
            raise ValueError(f"num_nodes must be positive and non-increasing (each level a prefix of the "
                             f"one before), got {num_nodes}")
        for layer, edges in enumerate(edge_index):
            if (not isinstance(edges, torch.Tensor) or edges.dim() != 2 or edges.shape[0] != 2
                    or edges.dtype not in (torch.int32, torch.int64) or edges.device != n_id.device):
                raise ValueError(f"edge_index[{layer}] must be a [2, E] int32 or int64 tensor on {n_id.device}, "
                                 f"got {_describe(edges)}")
        return num_nodes

    def _grow(self, num_nodes: list[int], num_edges: list[int], device: torch.device) -> None:
        """New capacities: the larger of the old and the batch's sizes with the margin."""
        def at_least(old: list[int], new: list[int]) -> list[int]:
            # capacities never shrink, unless the blocks' depth changed
            return [max(n, o) for n, o in zip(new, old)] if len(old) == len(new) else new

        edges = at_least(self._edges, [math.ceil(e * (1 + self.margin)) for e in num_edges])
        # Trash rows absorb the gap between a layer's capacity and its batch's edges: the
        # margin's share of the capacity, or this batch's gap when it is larger.
        rows = at_least(self._trash_rows, [math.ceil(max(k - e, self.margin * k) / self.max_degree) + 1
                                           for k, e in zip(edges, num_edges)])
        nodes = at_least(self._nodes, [math.ceil(n * (1 + self.margin)) for n in num_nodes])
        # Level k's trash nodes: layer k's trash sources (and, square, its trash rows), and
        # bipartite, layer k - 1's trash rows.
        levels = len(nodes)
        trash = [max(rows[k] if k < levels - 1 else 0, 0 if self.square or k == 0 else rows[k - 1])
                 for k in range(levels)]
        for k in range(levels - 1, -1, -1):
            if k < levels - 1:  # each level a prefix of the one before
                nodes[k] = max(nodes[k], nodes[k + 1] + trash[k + 1] - trash[k])
            # Whole multiples of LEVEL_ROWS: a level's [nodes, F] tensors then split into
            # 16-byte vectors at any F, which PyTorch's vectorised kernels require of the
            # element count (dropout over the gathered features at 602: 1.7x slower on an
            # odd count of rows).
            nodes[k] += -(nodes[k] + trash[k]) % LEVEL_ROWS
        self._nodes, self._edges, self._trash_rows = nodes, edges, rows
        self.sizes = tuple(n + t for n, t in zip(nodes, trash))
        self.n_id = torch.zeros(self.sizes[0], dtype=torch.int64, device=device)
        self._trash = []
        for layer, capacity in enumerate(edges):
            row = torch.arange(capacity, device=device) // self.max_degree
            src_base = nodes[layer]
            dst_base = nodes[layer] if self.square else nodes[layer + 1]
            self._trash.append(torch.stack([src_base + row, dst_base + row]))
        self.edge_index = [trash.clone() for trash in self._trash]
        self.version += 1


class CapturedStep:
    """A training step on :class:`StaticBlocks`, replayed from a CUDA graph.

    ``step()`` reads the batch from ``blocks`` (``blocks.n_id``, ``blocks.graphs()``,
    ``blocks.sizes``) and does everything a step does: ``optimizer.zero_grad(set_to_none=
    True)``, forward, loss, backward, ``optimizer.step()``; the optimizer must be
    capturable (``torch.optim.Adam(..., capturable=True)``). Call this object after each
    ``blocks.load(...)``. On the first call, and after the blocks' capacities grew, it runs
    ``step`` eagerly on a side stream (that is the batch's step: kernels are loaded and the
    optimizer's state made on the way) and captures it; every other call replays the
    capture. Returns what ``step`` returned (on replays, the captured outputs, overwritten
    by each replay: clone what must outlive the next step).

    Only CUDA tensors capture: on another device every call runs ``step`` eagerly.
    """

    def __init__(self, step: Callable[[], Any], blocks: StaticBlocks) -> None:
        self.step, self.blocks = step, blocks
        self._graph: torch.cuda.CUDAGraph | None = None
        self._version = -1
        self._outputs: Any = None
        self.captures = 0

    def __call__(self) -> Any:
        device = self.blocks.n_id.device
        if device.type != "cuda":
            return self.step()
        if self._graph is not None and self._version == self.blocks.version:
            self._graph.replay()
            return self._outputs
        self._graph = self._outputs = None  # the old capture's memory goes back first
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            outputs = self.step()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._outputs = self.step()
        self._graph, self._version = graph, self.blocks.version
        self.captures += 1
        return outputs


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {list(value.shape)} {value.dtype} tensor on {value.device}"
    return type(value).__name__
