"""1-D partitions of a graph's destination rows across ranks, and what they cost.

A :class:`Partition` says which rank owns each node: rank ``r`` owns the destination rows
(and, for a square graph, the source nodes) in ``partition.nodes(r)``, computes their
outputs and holds their features. Three ways to get one:

* :func:`range_partition`: contiguous id ranges with about the same number of edges each.
  Needs only the in-degrees, which :func:`in_degrees` counts from chunked or memory-mapped
  edge arrays: it runs on any graph that fits on disk.
* :func:`locality_partition`: our own locality-preserving partition for in-memory square
  graphs: a reverse Cuthill-McKee order (breadth-first graph growing) cut into balanced
  pieces, refined by size-constrained label propagation.
* :func:`metis_partition`: METIS k-way through ``pymetis``, where it is installed.

Every method balances the same cost, ``in-degree + 1`` per row (the edges a rank reduces,
plus one output row). :func:`partition_report` measures a partition: edge cut, halo sizes
(remote source nodes each rank needs, per owner) and load imbalance; it streams over the
edges as well.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from ..graph import Graph

__all__ = [
    "Partition",
    "PartitionReport",
    "METHODS",
    "in_degrees",
    "range_partition",
    "locality_partition",
    "metis_partition",
    "partition",
    "partition_report",
]

METHODS = ("auto", "metis", "locality", "range")
"""The methods :func:`partition` takes."""
DEFAULT_CHUNK = 1 << 22  # edges per chunk when streaming: about 80 bytes each while in use

# An edge array: a NumPy array (np.memmap included), a 1-D tensor, or an iterable of chunks.
EdgeArray = np.ndarray | torch.Tensor | Iterable[Any]


def _check_parts(num_parts: Any) -> int:
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)):
        raise TypeError(f"num_parts must be an int, got {type(num_parts).__name__}")
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    return int(num_parts)


@dataclass(frozen=True, eq=False)
class Partition:
    """Owners of nodes ``0..num_nodes-1`` among ``num_parts`` ranks.

    Either contiguous ranges (``bounds``: rank ``r`` owns ``[bounds[r], bounds[r+1])``) or
    an arbitrary ``assignment`` (``[num_nodes]`` owner of each node); the other is ``None``.
    A rank's nodes are always listed in increasing id order, which is the local order of
    its rows and features. Build with :meth:`from_bounds` or :meth:`from_assignment`.
    """

    num_nodes: int
    num_parts: int
    method: str
    bounds: torch.Tensor | None = None
    assignment: torch.Tensor | None = None

    @classmethod
    def from_bounds(cls, bounds: Any, method: str = "range") -> Partition:
        """Ranges from ``[num_parts + 1]`` non-decreasing offsets starting at 0."""
        b = torch.as_tensor(np.asarray(bounds) if not isinstance(bounds, torch.Tensor) else bounds)
        b = b.to("cpu", torch.int64)
        if b.dim() != 1 or b.numel() < 2:
            raise ValueError(f"bounds must be 1-D with num_parts + 1 >= 2 entries, got shape {tuple(b.shape)}")
        if int(b[0]) != 0:
            raise ValueError(f"bounds[0] must be 0, got {int(b[0])}")
        if bool((b[1:] < b[:-1]).any()):
            raise ValueError(f"bounds must be non-decreasing, got {b.tolist()}")
        return cls(int(b[-1]), b.numel() - 1, method, bounds=b)

    @classmethod
    def from_assignment(cls, assignment: Any, num_parts: int, method: str = "assignment") -> Partition:
        """Any assignment: ``assignment[v]`` in ``[0, num_parts)`` is the owner of node ``v``."""
        num_parts = _check_parts(num_parts)
        a = torch.as_tensor(np.asarray(assignment) if not isinstance(assignment, torch.Tensor) else assignment)
        if a.dim() != 1 or a.is_floating_point() or a.dtype == torch.bool:
            raise ValueError(f"assignment must be a 1-D integer array, got {a.dtype} of shape {tuple(a.shape)}")
        a = a.to("cpu", torch.int64)
        if a.numel() and (int(a.min()) < 0 or int(a.max()) >= num_parts):
            raise ValueError(f"assignment must lie in [0, {num_parts}), got values in "
                             f"[{int(a.min())}, {int(a.max())}]")
        return cls(a.numel(), num_parts, method, assignment=a)

    def owner(self, ids: torch.Tensor) -> torch.Tensor:
        """``[n]`` int64 owner rank of each node id in ``ids`` (on ``ids``' device)."""
        ids = ids.long()
        if self.bounds is not None:
            return torch.searchsorted(self._on(ids.device, "bounds"), ids, right=True) - 1
        return self._on(ids.device, "assignment")[ids]

    def nodes(self, rank: int) -> torch.Tensor:
        """``[n_r]`` int64 ids of the nodes ``rank`` owns, increasing (on the CPU)."""
        if self.bounds is not None:
            return torch.arange(int(self.bounds[rank]), int(self.bounds[rank + 1]))
        return self._members[int(self._starts[rank]):int(self._starts[rank + 1])]

    def local_index(self, ids: torch.Tensor) -> torch.Tensor:
        """``[k]`` int64 position of each node of ``ids`` (``[k]``) among its owner's nodes
        (:meth:`nodes`)."""
        ids = ids.long()
        if self.bounds is not None:
            return ids - self._on(ids.device, "bounds")[self.owner(ids)]
        return self._on(ids.device, "_position")[ids]

    def sizes(self) -> torch.Tensor:
        """``[num_parts]`` number of nodes each rank owns."""
        if self.bounds is not None:
            return self.bounds[1:] - self.bounds[:-1]
        return self._starts[1:] - self._starts[:-1]

    @cached_property
    def _members(self) -> torch.Tensor:
        return torch.argsort(self.assignment, stable=True)  # by owner, then by id

    @cached_property
    def _starts(self) -> torch.Tensor:
        starts = torch.zeros(self.num_parts + 1, dtype=torch.int64)
        torch.cumsum(torch.bincount(self.assignment, minlength=self.num_parts), 0, out=starts[1:])
        return starts

    @cached_property
    def _position(self) -> torch.Tensor:
        position = torch.empty(self.num_nodes, dtype=torch.int64)
        position[self._members] = torch.arange(self.num_nodes) - self._starts[self.assignment[self._members]]
        return position

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (broadcast to the ranks) without the caches, which may hold CUDA copies.
        return {k: getattr(self, k) for k in ("num_nodes", "num_parts", "method", "bounds", "assignment")}

    def _on(self, device: torch.device, name: str) -> torch.Tensor:
        # One copy per device, kept: owner() runs on every edge chunk and on the GPU.
        cache = self.__dict__.setdefault("_copies", {})
        key = (name, device)
        if key not in cache:
            cache[key] = getattr(self, name).to(device)
        return cache[key]

    def __repr__(self) -> str:
        return (f"Partition(method={self.method!r}, num_nodes={self.num_nodes}, "
                f"num_parts={self.num_parts}, sizes={self.sizes().tolist()})")


# ---------------------------------------------------------------------- streaming inputs


def _chunks(array: EdgeArray, chunk_size: int) -> Iterator[np.ndarray]:
    """``array`` in writable int64 NumPy chunks of at most ``chunk_size`` entries: a slice
    at a time of an array or memory map (never the whole of it), or the chunks an
    iterable yields."""
    if isinstance(array, torch.Tensor):
        array = array.detach().cpu().numpy()
    if isinstance(array, np.ndarray):
        if array.ndim != 1:
            raise ValueError(f"an edge array must be 1-D, got shape {array.shape}")
        for start in range(0, array.shape[0], chunk_size):
            yield np.array(array[start:start + chunk_size], dtype=np.int64)  # a copy: maps are read-only
        return
    for chunk in array:
        if isinstance(chunk, torch.Tensor):
            chunk = chunk.detach().cpu().numpy()
        yield np.array(chunk, dtype=np.int64).reshape(-1)


def in_degrees(dst: EdgeArray, num_nodes: int, *, chunk_size: int = DEFAULT_CHUNK) -> np.ndarray:
    """``[num_nodes]`` int64 in-degree of each node, counted chunk by chunk from the
    destinations of the edges (a NumPy array or ``np.memmap``, a tensor, or an iterable of
    chunks). Memory: 8 bytes per node, plus one chunk and a count over the id range the
    chunk spans (small when the edges come sorted by destination)."""
    deg = np.zeros(num_nodes, dtype=np.int64)
    for chunk in _chunks(dst, chunk_size):
        if chunk.size == 0:
            continue
        lo, hi = int(chunk.min()), int(chunk.max())
        if lo < 0 or hi >= num_nodes:
            raise ValueError(f"dst has ids outside [0, {num_nodes}): [{lo}, {hi}] in a chunk")
        deg[lo:hi + 1] += np.bincount(chunk - lo, minlength=hi - lo + 1)
    return deg


def _row_costs(degrees: np.ndarray) -> np.ndarray:
    """Running sum of ``in-degree + 1`` over the rows, float64, in one new array."""
    cum = degrees.astype(np.float64)
    cum += 1.0
    return np.cumsum(cum, out=cum)


def _balanced_cuts(cum: np.ndarray, num_parts: int) -> np.ndarray:
    """``[num_parts + 1]`` offsets cutting the rows, whose costs have the running sum
    ``cum``, into contiguous pieces whose costs are as close as possible to
    ``total / num_parts`` each."""
    if cum.size == 0:
        return np.zeros(num_parts + 1, dtype=np.int64)
    total = cum[-1]
    targets = total * np.arange(1, num_parts) / num_parts
    # A cut after position i leaves cum[i] behind it; take the closer of the two cuts
    # around each target.
    after = np.searchsorted(cum, targets, side="left")
    before_sum = np.where(after > 0, cum[np.maximum(after - 1, 0)], 0.0)
    after_sum = cum[np.minimum(after, cum.size - 1)]
    cuts = np.where(after_sum - targets < targets - before_sum, after + 1, after)
    cuts = np.maximum.accumulate(np.clip(cuts, 0, cum.size))
    return np.concatenate([[0], cuts, [cum.size]]).astype(np.int64)


def range_partition(degrees: Any, num_parts: int) -> Partition:
    """Contiguous row ranges balanced by edges: ``num_parts`` ranges whose ``in-degree + 1``
    sums are as equal as contiguous cuts allow.

    Args:
        degrees: ``[num_nodes]`` in-degree of each destination row (from
            :func:`in_degrees` for edge arrays too large to load, or ``graph.in_degrees()``).
        num_parts: the number of ranks.

    Memory: the running sum of the costs, 8 bytes per node besides the degrees; no edges.
    """
    num_parts = _check_parts(num_parts)
    deg = degrees.detach().cpu().numpy() if isinstance(degrees, torch.Tensor) else np.asarray(degrees)
    if deg.ndim != 1:
        raise ValueError(f"degrees must be 1-D ([num_nodes]), got shape {deg.shape}")
    return Partition.from_bounds(_balanced_cuts(_row_costs(deg), num_parts), "range")


# ---------------------------------------------------------------------- locality-preserving


def _symmetric_adjacency(graph: Graph):
    """The undirected simple graph of a square ``graph`` as SciPy CSR (no self loops)."""
    import scipy.sparse as sp

    if graph.num_src != graph.num_dst:
        raise ValueError(f"locality-preserving partitions need a square graph, got {graph.num_src} source "
                         f"and {graph.num_dst} destination nodes (use range_partition)")
    n = graph.num_dst
    src, dst = (t.detach().cpu().numpy().astype(np.int64) for t in graph.edges())
    keep = src != dst
    rows, cols = np.concatenate([dst[keep], src[keep]]), np.concatenate([src[keep], dst[keep]])
    adj = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = 1.0
    return adj


def _row_weights(graph: Graph) -> np.ndarray:
    """``in-degree + 1`` of each row: the cost every method balances."""
    return graph.in_degrees().detach().cpu().numpy().astype(np.int64) + 1


def _refine(adj, assignment: np.ndarray, weight: np.ndarray, num_parts: int, rounds: int,
            imbalance: float, rng: np.random.Generator) -> np.ndarray:
    """Size-constrained label propagation: a node moves to the part holding most of its
    neighbours when that cuts fewer edges and the part stays under ``imbalance`` times the
    mean weight. Half of the nodes, drawn at random, may move per round, so that two
    neighbours rarely swap past each other."""
    capacity = imbalance * weight.sum() / num_parts
    n = assignment.size
    for _ in range(rounds):
        onehot = np.zeros((n, num_parts), dtype=np.float32)
        onehot[np.arange(n), assignment] = 1.0
        counts = np.asarray(adj @ onehot)
        best = counts.argmax(axis=1)
        gain = counts[np.arange(n), best] - counts[np.arange(n), assignment]
        movers = np.nonzero((gain > 0) & (rng.random(n) < 0.5))[0]
        if movers.size == 0:
            break
        load = np.bincount(assignment, weights=weight, minlength=num_parts)
        moved = False
        for part in range(num_parts):
            cand = movers[best[movers] == part]
            if cand.size == 0:
                continue
            cand = cand[np.argsort(-gain[cand], kind="stable")]
            fits = load[part] + np.cumsum(weight[cand]) <= capacity
            accepted = cand[:int(np.argmin(fits)) if not fits.all() else cand.size]
            if accepted.size:
                np.subtract.at(load, assignment[accepted], weight[accepted])
                load[part] += weight[accepted].sum()
                assignment[accepted] = part
                moved = True
        if not moved:
            break
    return assignment


def locality_partition(graph: Graph, num_parts: int, *, refine_rounds: int = 8, imbalance: float = 1.05,
                       seed: int = 0) -> Partition:
    """A locality-preserving partition of a square graph, without METIS.

    Nodes are ordered by reverse Cuthill-McKee on the symmetrised graph (breadth-first
    graph growing: neighbours get nearby positions), the order is cut into ``num_parts``
    pieces of equal ``in-degree + 1`` weight, and ``refine_rounds`` rounds of
    size-constrained label propagation then move boundary nodes to the part of most of
    their neighbours while every part stays under ``imbalance`` times the mean weight.
    In memory, on the CPU: about 16 bytes per edge and ``4 * num_parts`` per node.
    """
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    num_parts = _check_parts(num_parts)
    adj = _symmetric_adjacency(graph)
    weight = _row_weights(graph)
    n = graph.num_dst
    if n == 0:
        return Partition.from_assignment(np.zeros(0, dtype=np.int64), num_parts, "locality")
    order = np.asarray(reverse_cuthill_mckee(adj, symmetric_mode=True), dtype=np.int64)
    cuts = _balanced_cuts(np.cumsum(weight[order], dtype=np.float64), num_parts)
    assignment = np.empty(n, dtype=np.int64)
    assignment[order] = np.repeat(np.arange(num_parts), np.diff(cuts))
    assignment = _refine(adj, assignment, weight.astype(np.float64), num_parts, refine_rounds, imbalance,
                         np.random.default_rng(seed))
    return Partition.from_assignment(assignment, num_parts, "locality")


def metis_partition(graph: Graph, num_parts: int, *, seed: int = 0) -> Partition:
    """METIS k-way partition of a square graph (``pymetis``), vertex weights ``in-degree + 1``.

    Raises ImportError when ``pymetis`` is not installed (``pip install pymetis``).
    """
    try:
        import pymetis
    except ImportError:
        raise ImportError("metis_partition needs pymetis (pip install pymetis); "
                          "locality_partition and range_partition need nothing") from None
    num_parts = _check_parts(num_parts)
    adj = _symmetric_adjacency(graph)
    if num_parts == 1 or graph.num_dst == 0:
        return Partition.from_assignment(np.zeros(graph.num_dst, dtype=np.int64), num_parts, "metis")
    options = pymetis.Options(seed=seed)
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2; older releases take xadj/adjncy
        graph_arg = {"adjacency": pymetis.CSRAdjacency(adj.indptr, adj.indices)}
    else:
        graph_arg = {"xadj": adj.indptr, "adjncy": adj.indices}
    _, membership = pymetis.part_graph(num_parts, **graph_arg, vweights=_row_weights(graph), options=options)
    return Partition.from_assignment(np.asarray(membership, dtype=np.int64), num_parts, "metis")


def _have_pymetis() -> bool:
    try:
        import pymetis  # noqa: F401
    except ImportError:
        return False
    return True


def partition(graph: Graph, num_parts: int, method: str = "auto", *, seed: int = 0) -> Partition:
    """Partition ``graph``'s destination rows into ``num_parts`` parts.

    ``method``: ``"metis"``, ``"locality"`` (square graphs), ``"range"`` (any graph), or
    ``"auto"``: METIS where ``pymetis`` is installed, else ``"locality"``, for square
    graphs; ``"range"`` for bipartite ones.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "auto":
        square = graph.num_src == graph.num_dst
        method = ("metis" if _have_pymetis() else "locality") if square else "range"
    if method == "metis":
        return metis_partition(graph, num_parts, seed=seed)
    if method == "locality":
        return locality_partition(graph, num_parts, seed=seed)
    return range_partition(graph.in_degrees(), num_parts)


# ---------------------------------------------------------------------- report


@dataclass(frozen=True)
class PartitionReport:
    """What a partition costs.

    Attributes:
        method: how the partition was made.
        rows, edges: ``[P]`` destination rows and incoming edges of each rank.
        edge_cut: edges whose source node another rank owns (they need the halo).
        halo: ``[P]`` distinct remote source nodes each rank needs (its halo).
        halo_matrix: ``[P][P]``, ``halo_matrix[r][q]`` = nodes of rank ``q`` that rank ``r``
            needs; row ``r`` sums to ``halo[r]``, column ``q`` is what ``q`` sends.
    """

    method: str
    rows: list[int]
    edges: list[int]
    edge_cut: int
    halo: list[int]
    halo_matrix: list[list[int]]

    @property
    def num_parts(self) -> int:
        """The number of ranks ``P``."""
        return len(self.rows)

    @property
    def num_edges(self) -> int:
        """The number of edges of the whole graph."""
        return sum(self.edges)

    @property
    def cut_fraction(self) -> float:
        """``edge_cut / num_edges`` (0 without edges)."""
        return self.edge_cut / self.num_edges if self.num_edges else 0.0

    @property
    def row_imbalance(self) -> float:
        """Max / mean of ``rows`` (1 is perfect balance; 1 when the mean is 0)."""
        return _imbalance(self.rows)

    @property
    def edge_imbalance(self) -> float:
        """Max / mean of ``edges`` (1 is perfect balance; 1 when the mean is 0)."""
        return _imbalance(self.edges)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-serialisable dict: the fields and the derived ratios."""
        return {"method": self.method, "num_parts": self.num_parts, "rows": self.rows, "edges": self.edges,
                "edge_cut": self.edge_cut, "cut_fraction": self.cut_fraction, "halo": self.halo,
                "halo_matrix": self.halo_matrix, "row_imbalance": self.row_imbalance,
                "edge_imbalance": self.edge_imbalance}

    def markdown(self) -> str:
        """One line per rank (rows, edges, halo, nodes it sends), then the totals."""
        lines = [f"partition: {self.method}, {self.num_parts} parts, edge cut {self.edge_cut} "
                 f"({100 * self.cut_fraction:.1f}%), imbalance rows {self.row_imbalance:.3f} "
                 f"edges {self.edge_imbalance:.3f}", "",
                 "| rank | rows | edges | halo | sends |", "| ---: | ---: | ---: | ---: | ---: |"]
        for r in range(self.num_parts):
            sends = sum(self.halo_matrix[q][r] for q in range(self.num_parts))
            lines.append(f"| {r} | {self.rows[r]} | {self.edges[r]} | {self.halo[r]} | {sends} |")
        return "\n".join(lines) + "\n"


def _imbalance(values: list[int]) -> float:
    mean = sum(values) / len(values) if values else 0.0
    return max(values) / mean if mean > 0 else 1.0


def partition_report(src: EdgeArray | Graph, dst: EdgeArray | None, partition: Partition,
                     src_partition: Partition | None = None, *,
                     chunk_size: int = DEFAULT_CHUNK) -> PartitionReport:
    """Edge cut, halo sizes and load imbalance of ``partition``, streaming over the edges.

    Args:
        src, dst: the edges' source and destination ids, as NumPy arrays (``np.memmap``
            works and is read a chunk at a time), tensors, or iterables of matching chunks;
            or a :class:`~gsparse.Graph` as ``src`` and ``None`` as ``dst``.
        partition: owners of the destination rows.
        src_partition: owners of the source nodes; defaults to ``partition`` (square graphs).

    Memory: ``ceil(P / 8)`` bytes per source node (which ranks need it) and about 80
    bytes per edge of one chunk; never the whole edge list.
    """
    if isinstance(src, Graph):
        src, dst = src.edges()
    if dst is None:
        raise ValueError("dst must be given unless src is a Graph")
    src_partition = partition if src_partition is None else src_partition
    parts = partition.num_parts
    if src_partition.num_parts != parts:
        raise ValueError(f"src_partition has {src_partition.num_parts} parts but partition has {parts}")
    edges = np.zeros(parts, dtype=np.int64)
    cut = 0
    needs = np.zeros((src_partition.num_nodes, (parts + 7) // 8), dtype=np.uint8)
    for s, d in zip(_chunks(src, chunk_size), _chunks(dst, chunk_size), strict=True):
        if s.size != d.size:
            raise ValueError(f"src and dst chunks differ in length: {s.size} and {d.size}")
        od = partition.owner(torch.from_numpy(d)).numpy()
        os_ = src_partition.owner(torch.from_numpy(s)).numpy()
        edges += np.bincount(od, minlength=parts)
        remote = od != os_
        cut += int(remote.sum())
        s_remote, od_remote = s[remote], od[remote]
        for r in np.unique(od_remote):
            # Fancy-index OR: duplicate ids all write the same value, so each bit is set once.
            needs[s_remote[od_remote == r], r // 8] |= np.uint8(1 << (r % 8))
    halo_matrix = np.zeros((parts, parts), dtype=np.int64)
    for start in range(0, src_partition.num_nodes, chunk_size):
        block = needs[start:start + chunk_size]
        owners = src_partition.owner(torch.arange(start, start + block.shape[0])).numpy()
        for r in range(parts):
            wanted = (block[:, r // 8] >> (r % 8)) & 1
            halo_matrix[r] += np.bincount(owners[wanted.astype(bool)], minlength=parts)
    return PartitionReport(partition.method, partition.sizes().tolist(), edges.tolist(), cut,
                           halo_matrix.sum(axis=1).tolist(), halo_matrix.tolist())
