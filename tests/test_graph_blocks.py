"""Graphs of sampled blocks: built on their device without reading it back, equal to the
graphs the validating constructors build, with derived structures built the same way."""

from __future__ import annotations

import math

import pytest
import torch
from graphs import edge_lists
from hypothesis import given, settings

import gsparse._graph_build as graph_build
from gsparse import Graph, nn as gnn
from gsparse.graph import RowStats
from gsparse.kernels import memory

from cuda_path import NoHostReads, cuda_path_on_cpu


def _same_graph(a: Graph, b: Graph) -> None:
    """Same sizes, CSR and edge ids (``None`` and the identity alike), index dtype."""
    assert (a.num_src, a.num_dst, a.num_edges, a.index_dtype) == (b.num_src, b.num_dst, b.num_edges,
                                                                 b.index_dtype)
    assert torch.equal(a.rowptr.long(), b.rowptr.long()) and torch.equal(a.col.long(), b.col.long())
    identity = torch.arange(a.num_edges)
    ea = identity if a.eid is None else a.eid.long()
    eb = identity if b.eid is None else b.eid.long()
    assert torch.equal(ea, eb)


@settings(max_examples=100, deadline=None)
@given(edges=edge_lists())
def test_a_block_from_an_edge_list_is_the_validated_graph_with_its_derived_structures(edges):
    edge_index, num_src, num_dst = edges
    by_dst = edge_index[:, torch.argsort(edge_index[1], stable=True)]
    cases = [  # (block, the same graph from the validating constructor)
        (Graph.from_block(edge_index, num_src=num_src, num_dst=num_dst), edge_index),
        (Graph.from_block(edge_index.to(torch.int32), num_src=num_src, num_dst=num_dst), edge_index),
        (Graph.from_block(by_dst, num_src=num_src, num_dst=num_dst, dst_sorted=True), by_dst),
    ]
    for block, edges_in in cases:
        want = Graph.from_edge_index(edges_in, num_src=num_src, num_dst=num_dst)
        assert block.sync_free and not want.sync_free
        assert "csr_dst" in block.__dict__  # the sorted destinations, at hand: no expansion
        _same_graph(block, want)
        for x, y in zip(block.edges(), want.edges()):
            assert torch.equal(x.long(), y.long())
        assert torch.equal(block.in_degrees(), want.in_degrees())
        assert torch.equal(block.out_degrees(), want.out_degrees())
        assert torch.equal(block.csr_dst, want.csr_dst)
        rev, want_rev = block.reverse(), want.reverse()
        assert "csr_dst" in rev.__dict__  # the sorted sources
        assert torch.equal(rev.csr_dst.long(), want_rev.csr_dst.long())
        assert rev.csr_dst.dtype == rev.index_dtype and block.csr_dst.dtype == block.index_dtype
        assert rev.sync_free and rev.reverse() is block
        assert torch.equal(rev.rowptr, want_rev.rowptr) and torch.equal(rev.col, want_rev.col)
        for x, y in zip(rev.edges(), want_rev.edges()):
            assert torch.equal(x, y)


@settings(max_examples=60, deadline=None)
@given(edges=edge_lists())
def test_a_block_from_a_samplers_csr_is_the_validated_graph(edges):
    edge_index, num_src, num_dst = edges
    want = Graph.from_edge_index(edge_index, num_src=num_src, num_dst=num_dst)
    block = Graph.from_block_csr(want.rowptr.long(), want.col.long(), num_src=num_src,
                                 eid=None if want.eid is None else want.eid.long())
    _same_graph(block, want)
    assert block.sync_free and block.reverse().num_edges == want.num_edges


def test_block_stats_are_what_the_host_knows():
    ei = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 2]])
    block = Graph.from_block(ei, num_src=6, num_dst=4)
    stats = block.stats
    assert (stats.num_src, stats.num_dst, stats.num_edges) == (6, 4, 6)
    assert stats.rows.mean == 1.5 and stats.rows.max == 6 and not stats.rows.exact
    assert math.isnan(stats.rows.cov)
    assert Graph.from_block(ei, num_src=6, num_dst=4, max_degree=3).stats.rows.max == 3
    assert block.row_stats == Graph.from_edge_index(ei, num_src=6, num_dst=4).row_stats  # exact on request
    empty = Graph.from_block(torch.zeros(2, 0, dtype=torch.int64), num_src=3, num_dst=2)
    assert empty.stats.rows == RowStats(0.0, 0, 0.0)
    # the validated constructors keep exact statistics
    assert Graph.from_edge_index(ei, num_src=6, num_dst=4).stats.rows.exact


def test_conversions_keep_a_block_a_block():
    block = Graph.from_block(torch.tensor([[0, 1], [1, 0]]), num_src=2, num_dst=2, max_degree=1)
    for other in (block.to("cpu"), block.with_index_dtype(torch.int64)):
        assert other.sync_free and other.stats.rows.max == 1


@pytest.mark.parametrize("bad, message", [
    (dict(edge_index=torch.tensor([[0, 5], [0, 1]])), "index out of range"),
    (dict(edge_index=torch.tensor([[0, -1], [0, 1]])), "index out of range"),
    (dict(edge_index=torch.tensor([[0, 1], [0, 4]])), "index out of range"),
    (dict(edge_index=torch.tensor([[0, 1], [1, 0]]), dst_sorted=True), "out of order"),
    (dict(edge_index=torch.tensor([[0, 1, 2], [1, 1, 1]]), max_degree=2), "more than max_degree = 2"),
])
def test_bad_blocks_raise_on_the_cpu(bad, message):
    with pytest.raises(ValueError, match=message):
        Graph.from_block(num_src=3, num_dst=2, **bad)


def test_unchecked_blocks_skip_validation():
    g = Graph.from_block(torch.tensor([[0, 1], [1, 0]]), num_src=2, num_dst=2, dst_sorted=True, check=False)
    assert g.num_edges == 2  # trusted: the caller's promise, not checked


@pytest.mark.parametrize("rowptr, col, eid, message", [
    ([1, 2], [0, 1], None, "rowptr must run from 0"),
    ([0, 2, 1, 3], [0, 1, 0], None, "without decreasing"),
    ([0, 1, 2], [0, 1, 0], None, "rowptr must run from 0"),
    ([0, 1, 2], [0, 7], None, "col in"),
    ([0, 1, 2], [0, 1], [0, 2], "eid in"),
])
def test_bad_block_csrs_raise_on_the_cpu(rowptr, col, eid, message):
    with pytest.raises(ValueError, match=message):
        Graph.from_block_csr(torch.tensor(rowptr), torch.tensor(col), num_src=3,
                             eid=None if eid is None else torch.tensor(eid))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dst_sorted", [True, False])
def test_a_block_from_a_strided_edge_list_has_contiguous_indices(dtype, dst_sorted):
    # A transposed [E, 2] view of the index dtype was kept strided, so the CSR's col (and
    # the GPU check kernel's sorted destinations) were strided views the kernels read densely.
    ei = torch.tensor([[0, 1, 2, 0], [0, 0, 1, 2]], dtype=dtype).t().contiguous().t()
    g = Graph.from_block(ei, num_src=3, num_dst=3, dst_sorted=dst_sorted, max_degree=2)
    assert g.col.is_contiguous() and g.rowptr.is_contiguous()
    assert g.col.tolist() == [0, 1, 2, 0] and g.rowptr.tolist() == [0, 2, 3, 4]


def test_block_inputs_are_checked_for_type_and_shape():
    with pytest.raises(TypeError, match="edge_index must have dtype int32 or int64"):
        Graph.from_block(torch.zeros(2, 3), num_src=1, num_dst=1)
    with pytest.raises(ValueError, match="edge_index must have shape"):
        Graph.from_block(torch.zeros(3, 3, dtype=torch.int64), num_src=1, num_dst=1)
    with pytest.raises(TypeError, match="num_src must be an int"):
        Graph.from_block(torch.zeros(2, 3, dtype=torch.int64), num_src=1.5, num_dst=1)


@pytest.mark.parametrize("layer", ["gcn", "gcn-improved", "gcn-weights", "gat", "gat-edges", "sage"])
@pytest.mark.parametrize("dst_sorted", [True, False])
def test_building_a_block_and_training_a_layer_on_it_reads_nothing_back(monkeypatch, layer, dst_sorted):
    # The CUDA backend's host path on the CPU, with the checks a GPU runs: nothing in the block's
    # construction, its derived structures, schedules, plans, forward or backward reads a value.
    monkeypatch.setattr(graph_build, "check_on_device", lambda ok, m: torch._assert_async(ok, m))
    torch.manual_seed(0)
    ei = torch.randint(0, 40, (2, 300))
    ei[1, :20] = ei[0, :20]  # self loops, which the square layers must mask
    if dst_sorted:
        ei = ei[:, torch.argsort(ei[1], stable=True)]
    module = {"gcn": lambda: gnn.GCNConv(8, 4), "gcn-improved": lambda: gnn.GCNConv(8, 4, improved=True),
              "gcn-weights": lambda: gnn.GCNConv(8, 4), "gat": lambda: gnn.GATConv(8, 3, heads=2),
              "gat-edges": lambda: gnn.GATConv(8, 3, heads=2, edge_dim=2),
              "sage": lambda: gnn.SAGEConv(8, 4)}[layer]()
    # Per-edge values read the loops' origin (and GCN's weights their loop_edge).
    extra = {"gcn-weights": [torch.rand(300)], "gat-edges": [torch.randn(300, 2)]}.get(layer, [])
    with cuda_path_on_cpu() as loader, memory.poisoned():
        x = torch.randn(40, 8, requires_grad=True)
        with NoHostReads():
            g = Graph.from_block(ei, num_src=40, num_dst=40, dst_sorted=dst_sorted, max_degree=300)
            module(x, g, *extra).sum().backward()
    assert loader.order  # the kernels were launched (recorded)


@pytest.mark.gpu
@pytest.mark.parametrize("layer", ["gcn", "gat", "sage"])
def test_gpu_block_construction_and_training_never_synchronise(layer):
    def block(seed: int, n: int, e: int, sort: bool) -> tuple[torch.Tensor, int]:
        gen = torch.Generator().manual_seed(seed)
        ei = torch.randint(0, n, (2, e), generator=gen)
        if sort:
            ei = ei[:, torch.argsort(ei[1], stable=True)]
        return ei.cuda(), n

    module = {"gcn": lambda: gnn.GCNConv(32, 16), "gat": lambda: gnn.GATConv(32, 4, heads=4),
              "sage": lambda: gnn.SAGEConv(32, 16)}[layer]().cuda()
    # Sorted, sorted by the block (a bound too loose to bucket) and bucketed (rows of ~13
    # edges, at most about 30): a warm-up block (kernels compiled), then fresh ones.
    for seed, sort, bound in ((0, True, 40_011), (1, False, 40_011), (2, False, 64)):
        for fresh in (False, True):
            ei, n = block(2 * seed + fresh, 3_000 + 7 * fresh, 40_000 + 11 * fresh, sort)
            x = torch.randn(n, 32, device="cuda", requires_grad=True)
            torch.cuda.synchronize()
            if fresh:
                torch.cuda.set_sync_debug_mode("error")
            try:
                g = Graph.from_block(ei, num_src=n, num_dst=n, dst_sorted=sort, max_degree=bound)
                module(x, g).square().sum().backward()
            finally:
                torch.cuda.set_sync_debug_mode(0)
            torch.cuda.synchronize()
            assert x.grad is not None and torch.isfinite(x.grad).all()
