"""Distributed g-SpMM, g-SDDMM and edge softmax against the single-process operators.

Each rank computes its share; the test process compares every rank's rows (and the
gradients of its operands) with the single-process result on the whole graph, at
float32 (fp32 rounding: the distributed sums add in another order) and float64.
"""

from __future__ import annotations

import pytest
import torch
from cases import (
    BAD_CALLS,
    bad_call,
    dist_edge_softmax,
    dist_errors,
    dist_sddmm,
    dist_spmm,
    features,
    make_graph,
    sddmm_cases,
    sddmm_inputs,
    spmm_cases,
    spmm_inputs,
)
from pool import WORLD_SIZES
from torch.testing import assert_close

import gsparse

# (graph, partition): what each covers is in cases.make_graph / make_partition.
LAYOUTS = [
    ("square", "range"),
    ("bipartite", "range"),
    ("int64", "scattered"),  # int64 indices; every rank's nodes interleave
    ("clustered", "even"),  # rank 0 has no halo, the others have
    ("blocks", "even"),  # no rank has a halo: nothing is exchanged
    ("edgeless", "range"),
    ("square", "empty"),  # the last rank owns no rows
    ("square", "locality"),
]
# "overlap-allgather" / "overlap-halo": the overlapped strategy with its exchange forced.
EXCHANGES = ("overlap", "overlap-allgather", "overlap-halo", "halo", "allgather")
# Every operator case on the two main layouts with the default strategy, which combines
# partial results per reducer; one case per reducer or target pair elsewhere: the other
# strategies run the single-process operator once on exchanged features.
FULL = ("square", "bipartite")
RUNS = [(g, "range", x) for g in FULL for x in EXCHANGES] + [(g, p, "overlap") for g, p in LAYOUTS[2:]]


def _full(graph_kind: str, exchange: str) -> bool:
    return graph_kind in FULL and exchange.startswith("overlap")


def _np(t):
    return torch.from_numpy(t) if t is not None else None


def _check(got, want, what):
    if want is None:
        assert got is None, f"{what}: expected no gradient"
        return
    assert_close(_np(got), want.detach(), msg=lambda m: f"{what}: {m}")


def _reference(fn, operands, grad):
    operands = [t.clone().requires_grad_(True) for t in operands]
    out = fn(*operands)
    out.backward(grad)
    return out, [t.grad for t in operands]


@pytest.mark.parametrize("world_size", WORLD_SIZES)
@pytest.mark.parametrize("graph_kind,part_kind,exchange,dtype",
                         [pytest.param(*run, torch.float32, id="-".join(run)) for run in RUNS] +
                         [pytest.param("square", "range", "overlap", torch.float64, id="square-range-overlap-fp64")])
def test_gspmm_matches_single_process(pool, world_size, graph_kind, part_kind, exchange, dtype):
    full = _full(graph_kind, exchange)
    ranks = pool.run(dist_spmm, world_size, graph_kind, part_kind, exchange, dtype, full)
    graph = make_graph(graph_kind)
    for i, (op, reduce, shapes) in enumerate(spmm_cases(full)):
        lhs, rhs = spmm_inputs(graph, op, shapes, 10 * i, dtype)
        uses = gsparse.algebra.BINARY_OPS[op]
        out, (d_lhs, d_rhs) = _reference(
            lambda x, y: gsparse.gspmm(graph, op, reduce, x if uses.uses_lhs else None, y if uses.uses_rhs else None),
            (lhs, rhs), features((graph.num_dst, *_out_shape(graph, op, shapes)), 10 * i + 5, dtype))
        for rank, (dst_nodes, src_nodes, edge_ids, results) in enumerate(ranks):
            got_out, got_lhs, got_rhs = results[i]
            what = f"rank {rank} {op}/{reduce} {shapes}"
            _check(got_out, out[dst_nodes], f"{what} output")
            _check(got_lhs, None if not uses.uses_lhs else d_lhs[src_nodes], f"{what} d_lhs")
            _check(got_rhs, None if not uses.uses_rhs else d_rhs[edge_ids], f"{what} d_rhs")


def _out_shape(graph, op, shapes):
    uses = gsparse.algebra.BINARY_OPS[op]
    kept = [s for s, used in zip(shapes, (uses.uses_lhs, uses.uses_rhs)) if used]
    return torch.broadcast_shapes(*kept)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
@pytest.mark.parametrize("graph_kind,part_kind,exchange", RUNS)
def test_gsddmm_matches_single_process(pool, world_size, graph_kind, part_kind, exchange):
    dtype, full = torch.float32, _full(graph_kind, exchange)
    ranks = pool.run(dist_sddmm, world_size, graph_kind, part_kind, exchange, dtype, full)
    graph = make_graph(graph_kind)
    for i, (op, lt, rt, shapes) in enumerate(sddmm_cases(full)):
        lhs, rhs = sddmm_inputs(graph, op, lt, rt, shapes, 10 * i, dtype)
        uses = gsparse.algebra.BINARY_OPS[op]
        probe = gsparse.gsddmm(graph, op, lhs, rhs, lt, rt)
        out, (d_lhs, d_rhs) = _reference(lambda x, y: gsparse.gsddmm(graph, op, x, y, lt, rt), (lhs, rhs),
                                         features(probe.shape, 10 * i + 5, dtype))
        for rank, (dst_nodes, src_nodes, edge_ids, results) in enumerate(ranks):
            got_out, got_lhs, got_rhs = results[i]
            rows = {"u": src_nodes, "v": dst_nodes, "e": edge_ids}
            what = f"rank {rank} {lt}_{op}_{rt}"
            _check(got_out, out[edge_ids], f"{what} output")
            _check(got_lhs, d_lhs[rows[lt]] if uses.uses_lhs else None, f"{what} d_lhs")
            _check(got_rhs, d_rhs[rows[rt]] if uses.uses_rhs else None, f"{what} d_rhs")


@pytest.mark.parametrize("world_size", WORLD_SIZES)
@pytest.mark.parametrize("graph_kind,part_kind,exchange", RUNS)
def test_edge_softmax_matches_single_process(pool, world_size, graph_kind, part_kind, exchange):
    dtype = torch.float32
    ranks = pool.run(dist_edge_softmax, world_size, graph_kind, part_kind, exchange, dtype)
    graph = make_graph(graph_kind)
    for i, norm_by in enumerate(("dst", "src")):
        logits = features((graph.num_edges, 2, 1), 7 + i, dtype)
        out, (d_logits,) = _reference(lambda z: gsparse.edge_softmax(graph, z, norm_by=norm_by), (logits,),
                                      features((graph.num_edges, 2, 1), 17 + i, dtype))
        for rank, (edge_ids, results) in enumerate(ranks):
            got_out, got_grad = results[i]
            _check(got_out, out[edge_ids], f"rank {rank} norm_by={norm_by} output")
            _check(got_grad, d_logits[edge_ids], f"rank {rank} norm_by={norm_by} d_logits")


@pytest.mark.parametrize("world_size", [2])
def test_bad_inputs_raise_the_single_process_errors(pool, world_size):
    for rank, (counts, errors, wrong_graph) in enumerate(pool.run(dist_errors, world_size)):
        num_src, num_dst, num_edges = counts
        edges = torch.zeros(2, num_edges, dtype=torch.int64)
        single = gsparse.Graph.from_edge_index(edges, num_src=num_src, num_dst=num_dst)
        for call in BAD_CALLS:
            assert errors[call] is not None, f"rank {rank}: {call} raised nothing"
            assert errors[call] == bad_call(call, single, gsparse), \
                f"rank {rank}: {call}: {errors[call]} differs from the single-process error"
        assert "DistGraph" in wrong_graph and "Graph" in wrong_graph
