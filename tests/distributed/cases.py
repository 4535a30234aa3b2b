"""Named graphs, partitions and features shared by the test process and the pool's ranks.

Every rank rebuilds the same global graph and features from their names and seeds, runs
the distributed operator on its share, and sends back NumPy arrays; the test process
runs the single-process operator on the whole graph and compares.
"""

from __future__ import annotations

import torch

import gsparse
from gsparse import distributed as gd

# ---------------------------------------------------------------------- graphs


def make_graph(kind: str, seed: int = 0) -> gsparse.Graph:
    """Small graphs covering what partitions get wrong.

    * ``square``: 48 nodes, 300 random edges in unsorted order, self loops, duplicate edges,
      empty rows and one long row;
    * ``bipartite``: 37 sources, 53 destinations, 260 edges;
    * ``int64``: ``square`` with int64 indices;
    * ``clustered``: 48 nodes; rows 0-11 read only nodes 0-11, rows 12-23 only nodes 0-23,
      the others anywhere (under the ``even`` partition into 2 or 4 parts rank 0 has no
      halo and the others have one);
    * ``blocks``: 48 nodes, edges only inside blocks of 12 (under the ``even`` partition
      into 1, 2 or 4 parts no rank has a halo);
    * ``edgeless``: 20 nodes, no edges.
    """
    gen = torch.Generator().manual_seed(seed)
    if kind == "edgeless":
        return gsparse.Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.int64), num_nodes=20)
    if kind == "bipartite":
        src = torch.randint(0, 37, (260,), generator=gen)
        dst = torch.randint(0, 53, (260,), generator=gen)
        dst[dst % 7 == 3] = 5
        return gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_src=37, num_dst=53)
    n, e = 48, 300
    dst = torch.randint(0, n, (e,), generator=gen)
    src = torch.randint(0, n, (e,), generator=gen)
    if kind in ("square", "int64"):
        dst[dst % 9 == 4] = 7  # a long row, and empty rows
        src[::17] = dst[::17]  # self loops
        src[1::23], dst[1::23] = src[0::23][: src[1::23].numel()], dst[0::23][: dst[1::23].numel()]  # duplicates
        g = gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n)
        return g.with_index_dtype(torch.int64) if kind == "int64" else g
    block = dst // 12
    if kind == "blocks":
        src = block * 12 + src % 12
    elif kind == "clustered":
        src = torch.where(block == 0, src % 12, torch.where(block == 1, src % 24, src))
    else:
        raise ValueError(f"unknown graph kind {kind!r}")
    return gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n)


def make_partition(graph: gsparse.Graph, kind: str, parts: int) -> gd.Partition:
    """``range`` (edge-balanced ranges), ``even`` (ranges of equal node counts),
    ``scattered`` (node v on rank v % parts: every rank's nodes interleave), ``empty``
    (the last rank owns nothing when there are 2 or more), ``locality``."""
    n = graph.num_dst
    if kind == "range":
        return gd.range_partition(graph.in_degrees(), parts)
    if kind == "even":
        return gd.Partition.from_bounds([n * r // parts for r in range(parts + 1)])
    if kind == "scattered":
        return gd.Partition.from_assignment(torch.arange(n) % parts, parts)
    if kind == "empty":
        if parts == 1:
            return gd.Partition.from_bounds([0, n])
        cuts = torch.div(torch.arange(parts) * n, parts - 1, rounding_mode="floor")
        return gd.Partition.from_bounds(torch.cat([cuts, torch.tensor([n])]))
    if kind == "locality":
        return gd.locality_partition(graph, parts)
    raise ValueError(f"unknown partition kind {kind!r}")


def features(shape, seed: int, dtype=torch.float64, away_from_zero: bool = False) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if away_from_zero:
        values = (torch.rand(shape, generator=gen, dtype=torch.float64) + 0.5) * \
            (torch.randint(0, 2, shape, generator=gen) * 2 - 1)
    else:
        values = torch.randn(shape, generator=gen, dtype=torch.float64)
    return values.to(dtype)


def device_of(group) -> torch.device:
    """Where a rank of ``group`` keeps its share: its GPU under NCCL, else the CPU."""
    if torch.distributed.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def rows_of(t: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``t[index]`` on ``index``'s device (the global references are built on the CPU)."""
    return t.to(index.device)[index]


# Test names of the overlapped exchange with its halo form forced: "overlap" alone decides.
DENSE_FORCED = {"overlap-allgather": True, "overlap-halo": False}


def share(group, graph_kind: str, part_kind: str, exchange: str = "overlap") -> tuple[gsparse.Graph, gd.DistGraph]:
    """The whole graph (on the CPU) and this rank's share of it (on :func:`device_of`)."""
    graph = make_graph(graph_kind)
    parts = torch.distributed.get_world_size(group)
    dense = DENSE_FORCED.get(exchange)
    dg = gd.DistGraph.from_global(graph, make_partition(graph, part_kind, parts), group=group,
                                  exchange="overlap" if dense is not None else exchange, device=device_of(group),
                                  dense_halo=dense)
    return graph, dg


# ---------------------------------------------------------------------- operator cases

# Operand shapes (lhs feature shape, rhs feature shape) that broadcast.
SPMM_SHAPES = (((3,), (3,)), ((2, 3), (1, 3)), ((1,), (4,)))
SDDMM_TARGETS = ("u", "v", "e")


def spmm_cases(full: bool = True):
    """Every (op, reducer, operand shapes), or (``full=False``) one case per reducer."""
    if not full:
        yield from (("mul", "sum", SPMM_SHAPES[1]), ("copy_lhs", "mean", SPMM_SHAPES[0]),
                    ("add", "max", SPMM_SHAPES[1]), ("div", "min", SPMM_SHAPES[0]))
        return
    for op in gsparse.algebra.SPMM_OPS:
        for reduce in gsparse.algebra.REDUCERS:
            for shapes in SPMM_SHAPES[:1] if op.startswith("copy") else SPMM_SHAPES:
                yield op, reduce, shapes


def sddmm_cases(full: bool = True):
    """Every (op, lhs target, rhs target) with broadcasting shapes, or (``full=False``) a
    case per target pair that reads a source node."""
    if not full:
        yield from (("dot", "u", "v", ((2, 3), (2, 3))), ("mul", "e", "u", ((2, 3), (1, 3))),
                    ("add", "u", "u", ((2, 3), (1, 3))), ("div", "u", "e", ((1, 3), (2, 3))))
        return
    for op in gsparse.algebra.SDDMM_OPS:
        for lt in SDDMM_TARGETS:
            for rt in SDDMM_TARGETS:
                if op == "copy_lhs" and rt != "v" or op == "copy_rhs" and lt != "u":
                    continue  # the unused operand's target does not matter
                shapes = ((2, 3), (1, 3)) if op != "dot" else ((2, 3), (2, 3))
                yield op, lt, rt, shapes


def _rows(graph, target: str) -> int:
    return {"u": graph.num_src, "v": graph.num_dst, "e": graph.num_edges}[target]


def spmm_inputs(graph, op, shapes, seed, dtype=torch.float64):
    lhs = features((graph.num_src, *shapes[0]), seed, dtype)
    rhs = features((graph.num_edges, *shapes[1]), seed + 1, dtype, away_from_zero=op == "div")
    return lhs, rhs


def sddmm_inputs(graph, op, lt, rt, shapes, seed, dtype=torch.float64):
    lhs = features((_rows(graph, lt), *shapes[0]), seed, dtype)
    rhs = features((_rows(graph, rt), *shapes[1]), seed + 1, dtype, away_from_zero=op == "div")
    return lhs, rhs


def _slice(t: torch.Tensor, dg: gd.DistGraph, target: str) -> torch.Tensor:
    index = {"u": dg.src_nodes, "v": dg.dst_nodes, "e": dg.edge_ids}[target]
    return rows_of(t, index).detach().clone().requires_grad_(True)


def _numpy(t):
    return None if t is None else t.detach().cpu().numpy()


def dist_spmm(group, graph_kind, part_kind, exchange, dtype, full):
    """Every g-SpMM case on this rank's share: its output rows and the gradients of its
    operands for an output gradient that is this rank's rows of a seeded global one."""
    graph, dg = share(group, graph_kind, part_kind, exchange)
    results = []
    for i, (op, reduce, shapes) in enumerate(spmm_cases(full)):
        lhs, rhs = spmm_inputs(graph, op, shapes, 10 * i, dtype)
        x, y = _slice(lhs, dg, "u"), _slice(rhs, dg, "e")
        out = gd.gspmm(dg, op, reduce, x, y)
        grad = rows_of(features((graph.num_dst, *out.shape[1:]), 10 * i + 5, dtype), dg.dst_nodes)
        out.backward(grad)
        results.append((_numpy(out), _numpy(x.grad), _numpy(y.grad)))
    return _numpy(dg.dst_nodes), _numpy(dg.src_nodes), _numpy(dg.edge_ids), results


def dist_sddmm(group, graph_kind, part_kind, exchange, dtype, full):
    graph, dg = share(group, graph_kind, part_kind, exchange)
    results = []
    for i, (op, lt, rt, shapes) in enumerate(sddmm_cases(full)):
        lhs, rhs = sddmm_inputs(graph, op, lt, rt, shapes, 10 * i, dtype)
        x, y = _slice(lhs, dg, lt), _slice(rhs, dg, rt)
        out = gd.gsddmm(dg, op, x, y, lt, rt)
        grad = rows_of(features((graph.num_edges, *out.shape[1:]), 10 * i + 5, dtype), dg.edge_ids)
        out.backward(grad)
        results.append((_numpy(out), _numpy(x.grad), _numpy(y.grad)))
    return _numpy(dg.dst_nodes), _numpy(dg.src_nodes), _numpy(dg.edge_ids), results


def dist_edge_softmax(group, graph_kind, part_kind, exchange, dtype):
    graph, dg = share(group, graph_kind, part_kind, exchange)
    results = []
    for i, norm_by in enumerate(("dst", "src")):
        logits = _slice(features((graph.num_edges, 2, 1), 7 + i, dtype), dg, "e")
        out = gd.edge_softmax(dg, logits, norm_by=norm_by)
        out.backward(rows_of(features((graph.num_edges, 2, 1), 17 + i, dtype), dg.edge_ids))
        results.append((_numpy(out), _numpy(logits.grad)))
    return _numpy(dg.edge_ids), results


BAD_CALLS = ("rows", "op", "dtype", "broadcast", "target", "dot", "norm_by", "positional norm_by")


def bad_call(call: str, g, ops) -> tuple[str, str] | None:
    """The error of a bad call on ``g`` (a DistGraph with ``ops`` = gsparse.distributed, or
    a Graph with ``ops`` = gsparse), as ``(type name, message)``."""
    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, dtype=dtype, device=g.device)

    x = randn(g.num_src, 3, dtype=torch.float64)
    calls = {
        "rows": lambda: ops.gspmm(g, "copy_lhs", "sum", randn(g.num_src + 1, 3)),
        "op": lambda: ops.gspmm(g, "pow", "sum", x),
        "dtype": lambda: ops.gspmm(g, "mul", "sum", x, randn(g.num_edges, 3)),
        "broadcast": lambda: ops.gspmm(g, "add", "sum", x, randn(g.num_edges, 4, dtype=torch.float64)),
        "target": lambda: ops.gsddmm(g, "add", x, x, "u", "w"),
        "dot": lambda: ops.gsddmm(g, "dot", x, randn(g.num_dst, 4, dtype=torch.float64), "u", "v"),
        "norm_by": lambda: ops.edge_softmax(g, randn(g.num_edges, 1), norm_by="both"),
        "positional norm_by": lambda: ops.edge_softmax(g, randn(g.num_edges, 1), "src"),
    }
    try:
        calls[call]()
    except (TypeError, ValueError) as error:
        return type(error).__name__, str(error)
    return None


def dist_errors(group):
    """Every bad call's error on this rank's share, and the share's counts."""
    _, dg = share(group, "square", "range")
    wrong_graph = None
    try:
        gd.gspmm(dg.local, "copy_lhs", "sum", torch.randn(dg.local.num_src, 3, device=dg.device))
    except TypeError as error:
        wrong_graph = str(error)
    return (dg.num_src, dg.num_dst, dg.num_edges), {c: bad_call(c, dg, gd) for c in BAD_CALLS}, wrong_graph


# ---------------------------------------------------------------------- structure


def dist_structure(group, graph_kind, part_kind):
    """The share's sizes, halo and plan, and whether its local CSR reads the same global
    sources as the global graph's edges (checked on the rank)."""
    graph, dg = share(group, graph_kind, part_kind)
    src, _ = graph.edges()
    ext_src = dg.edges()[0].long().cpu()
    global_src = torch.cat([dg.src_nodes, dg.halo_nodes]).cpu()[ext_src]
    same_sources = bool((global_src == src.long()[dg.edge_ids.cpu()]).all())
    owners = dg.src_partition.owner(dg.halo_nodes.cpu())
    return {
        "rows": dg.num_dst, "halo": dg.num_halo, "active": dg.plan.active, "same_sources": same_sources,
        "index_dtype": str(dg.index_dtype), "halo_sorted": bool((owners.diff() >= 0).all()),
        "recv_counts": dg.plan.recv_counts, "send_counts": dg.plan.send_counts,
        "halo_owner_counts": torch.bincount(owners, minlength=dg.world_size).tolist(),
        "mine_not_in_halo": not bool((owners == dg.rank).any()),
        "report": dg.partition_report().to_dict(),
    }


def dist_from_local_edges(group):
    """g-SpMM on a share built from this rank's edges alone (int64 ids, int64 local CSR,
    edges given in reverse order) and on the share of the global graph."""
    graph = make_graph("square")
    part = make_partition(graph, "range", torch.distributed.get_world_size(group))
    rank = torch.distributed.get_rank(group)
    src, dst = (t.long() for t in graph.edges())
    mine = torch.nonzero(part.owner(dst) == rank).flatten().flip(0)
    device = device_of(group)
    dg = gd.DistGraph.from_local_edges(src[mine], dst[mine], part, group=group, index_dtype=torch.int64,
                                       edge_ids=mine, device=device)
    ref = gd.DistGraph.from_global(graph, part, group=group, device=device)
    x = rows_of(features((graph.num_src, 3), 1), dg.src_nodes)
    w = features((graph.num_edges, 1), 2)
    out = gd.gspmm(dg, "mul", "max", x, rows_of(w, dg.edge_ids))
    want = gd.gspmm(ref, "mul", "max", x, rows_of(w, ref.edge_ids))
    return str(dg.local.index_dtype), _numpy(out), _numpy(want)


def dist_adjoint(group):
    """``<gather(x), y>`` and ``<x, scatter(y)>`` summed over the ranks: equal for adjoints."""
    from gsparse.distributed import exchange

    _, dg = share(group, "square", "scattered")
    gen = torch.Generator().manual_seed(dg.rank)
    x = torch.randn(dg.num_src, 2, generator=gen, dtype=torch.float64).to(dg.device)
    y = torch.randn(dg.num_halo, 2, generator=gen, dtype=torch.float64).to(dg.device)
    sums = torch.stack([(exchange.gather(dg.plan, x) * y).sum(), (x * exchange.scatter(dg.plan, y)).sum()])
    torch.distributed.all_reduce(sums, group=group)
    return sums.tolist()


def dist_bad_partition(group):
    graph = make_graph("square")
    world, rank = torch.distributed.get_world_size(group), torch.distributed.get_rank(group)
    halves = gd.Partition.from_bounds([0, graph.num_dst // 2, graph.num_dst])
    errors, device = [], device_of(group)
    for call in (lambda: gd.DistGraph.from_global(graph, gd.range_partition(graph.in_degrees(), world + 1),
                                                  group=group, device=device),
                 # every rank passes an edge into a row of the next rank: all of them refuse it
                 lambda: gd.DistGraph.from_local_edges(torch.tensor([0]), halves.nodes((rank + 1) % world)[-1:],
                                                       halves, group=group, device=device)):
        try:
            call()
        except ValueError as error:
            errors.append(str(error))
    return errors


def dist_receive_adjoint(group):
    """``<receive(x), y>`` and ``<x, d receive^T y>`` summed over the ranks, on a plan forced
    dense (all-gather, reduce-scatter) and on one forced not (gather, scatter)."""
    from gsparse.distributed import exchange

    sums = []
    for name in ("overlap-allgather", "overlap-halo"):
        _, dg = share(group, "square", "scattered", name)
        gen = torch.Generator().manual_seed(dg.rank)
        x = torch.randn(dg.num_src, 2, generator=gen, dtype=torch.float64).to(dg.device).requires_grad_()
        got = exchange.receive(dg.plan, x)
        y = torch.randn(got.shape, generator=gen, dtype=torch.float64).to(dg.device)
        got.backward(y)
        sums.append(torch.stack([(got.detach() * y).sum(), (x.detach() * x.grad).sum()]))
    total = torch.stack(sums)
    torch.distributed.all_reduce(total, group=group)
    return total.tolist()


def dist_density(group):
    """``plan.dense`` as decided for a complete graph (every remote node in every halo) and
    for a ring (each row reads its neighbour: halos of one node)."""
    n = 16
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    complete = gsparse.Graph.from_edge_index(torch.stack([src.flatten(), dst.flatten()]), num_nodes=n)
    ring = gsparse.Graph.from_edge_index(torch.stack([(torch.arange(n) + 1) % n, torch.arange(n)]), num_nodes=n)
    parts = torch.distributed.get_world_size(group)
    return [gd.DistGraph.from_global(g, make_partition(g, "even", parts), group=group,
                                     device=device_of(group)).plan.dense for g in (complete, ring)]
