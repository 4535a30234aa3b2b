"""Graph construction, derived structures, conversions and input validation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from graphs import edge_lists
from hypothesis import given, settings

import gsparse
from gsparse import Graph


def dense_adjacency(g: Graph) -> torch.Tensor:
    """``[num_src, num_dst]`` edge counts, the structure every constructor must preserve."""
    a = torch.zeros(g.num_src, g.num_dst, dtype=torch.int64)
    src, dst = g.edges()
    a.index_put_((src.long(), dst.long()), torch.ones(g.num_edges, dtype=torch.int64), accumulate=True)
    return a


@settings(max_examples=100, deadline=None)
@given(edges=edge_lists())
def test_from_edge_index_keeps_every_edge_in_user_order(edges):
    edge_index, num_src, num_dst = edges
    g = Graph.from_edge_index(edge_index, num_src=num_src, num_dst=num_dst)
    assert (g.num_src, g.num_dst, g.num_edges) == (num_src, num_dst, edge_index.shape[1])
    src, dst = g.edges()
    assert torch.equal(src.long(), edge_index[0]) and torch.equal(dst.long(), edge_index[1])
    assert g.rowptr.dtype == g.col.dtype == torch.int32
    assert torch.equal(g.in_degrees().long(), torch.bincount(edge_index[1], minlength=num_dst))
    assert torch.equal(g.out_degrees().long(), torch.bincount(edge_index[0], minlength=num_src))
    # Each CSR row lists its edges in increasing edge id (a stable order, like DGL's).
    eid = torch.arange(g.num_edges) if g.eid is None else g.eid.long()
    for v in range(g.num_dst):
        row = eid[g.rowptr[v]:g.rowptr[v + 1]]
        assert torch.equal(row, row.sort().values)


@settings(max_examples=100, deadline=None)
@given(edges=edge_lists())
def test_reverse_is_the_transpose_with_the_same_edge_ids(edges):
    edge_index, num_src, num_dst = edges
    g = Graph.from_edge_index(edge_index, num_src=num_src, num_dst=num_dst)
    r = g.reverse()
    assert (r.num_src, r.num_dst, r.num_edges) == (g.num_dst, g.num_src, g.num_edges)
    rsrc, rdst = r.edges()
    src, dst = g.edges()
    assert torch.equal(rsrc, dst) and torch.equal(rdst, src)
    assert r.reverse() is g


def test_from_csr_round_trip_and_identity_eid_is_dropped():
    rowptr = torch.tensor([0, 2, 2, 3])
    col = torch.tensor([1, 0, 2])
    g = Graph.from_csr(rowptr, col, num_src=4)
    assert g.num_src == 4 and g.num_dst == 3 and g.eid is None
    assert torch.equal(g.edges()[0].long(), col) and torch.equal(g.edges()[1].long(), torch.tensor([0, 0, 2]))
    g2 = Graph.from_csr(rowptr, col, eid=torch.tensor([0, 1, 2]))
    assert g2.eid is None and g2.num_src == 3
    g3 = Graph.from_csr(rowptr, col, eid=torch.tensor([2, 0, 1]))
    assert torch.equal(g3.edges()[0].long(), torch.tensor([0, 2, 1]))


def test_from_scipy_and_torch_sparse_use_rows_as_sources():
    m = sp.coo_matrix((np.ones(3), ([0, 2, 1], [1, 1, 0])), shape=(3, 2))
    for g in (Graph.from_scipy(m), Graph.from_scipy(m.tocsr()),
              Graph.from_torch_sparse(torch.sparse_coo_tensor(torch.tensor([[0, 2, 1], [1, 1, 0]]),
                                                              torch.ones(3), (3, 2))),
              Graph.from_torch_sparse(torch.tensor(m.toarray(), dtype=torch.float32).to_sparse_csr())):
        assert (g.num_src, g.num_dst, g.num_edges) == (3, 2, 3)
        assert torch.equal(dense_adjacency(g), torch.tensor(m.toarray(), dtype=torch.int64))
    # Edge ids follow the storage order of the matrix.
    src, dst = Graph.from_scipy(m).edges()
    assert src.tolist() == [0, 2, 1] and dst.tolist() == [1, 1, 0]


def test_bipartite_and_empty_graphs():
    g = Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.int64), num_src=3, num_dst=5)
    assert (g.num_src, g.num_dst, g.num_edges) == (3, 5, 0)
    out = gsparse.copy_u_sum(g, torch.randn(3, 2))
    assert torch.equal(out, torch.zeros(5, 2))
    assert g.row_stats == gsparse.RowStats(0.0, 0, 0.0)
    assert Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.int64)).num_dst == 0


def test_row_stats_and_degree_sorted_rows():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2, 0, 1, 0], [2, 2, 2, 0, 0, 1]]))
    stats = g.row_stats
    assert stats.mean == 2.0 and stats.max == 3
    assert stats.cov == pytest.approx(np.std([2, 1, 3]) / 2)
    assert g.degree_sorted_rows.tolist() == [2, 0, 1]


def test_stats_are_the_sizes_and_row_statistics_rules_read():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2, 0, 1, 0], [2, 2, 2, 0, 0, 1]]), num_src=4)
    assert g.stats == gsparse.GraphStats(num_src=4, num_dst=3, num_edges=6, rows=g.row_stats)
    assert g.stats is g.stats  # computed once
    empty = Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.int64), num_src=3, num_dst=5)
    assert empty.stats == gsparse.GraphStats(3, 5, 0, gsparse.RowStats(0.0, 0, 0.0))


def test_derived_structures_live_in_their_owners_cache():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    gsparse.copy_u_sum(g, torch.randn(2, 3))
    gsparse.edge_softmax(g, torch.randn(2))
    # the CPU backend keeps its structures apart from the generated kernels' plans
    assert len(g.cpu) > 0 and len(g.plans) == len(g.schedules) == len(g.layouts) == 0


def test_index_dtype_and_to():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    g64 = g.with_index_dtype(torch.int64)
    assert g64.rowptr.dtype == g64.col.dtype == torch.int64
    assert g.to("cpu") is g
    with pytest.raises(TypeError, match="dtype must be torch.int32 or torch.int64"):
        g.with_index_dtype(torch.float32)


def test_coalesce_merges_duplicates():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 0, 0], [1, 0, 1, 1]]))
    w = torch.tensor([1.0, 2.0, 3.0, 4.0])
    merged, summed = g.coalesce(w)
    assert merged.num_edges == 2
    src, dst = merged.edges()
    weights = {(int(s), int(d)): float(x) for s, d, x in zip(src, dst, summed)}
    assert weights == {(1, 0): 2.0, (0, 1): 8.0}
    _, first = g.coalesce(w, reduce="first")
    assert sorted(first.tolist()) == [1.0, 2.0]
    _, maxed = g.coalesce(w, reduce="max")
    assert sorted(maxed.tolist()) == [2.0, 4.0]
    alone = g.coalesce()  # without weights: the graph alone, as PyG's coalesce
    assert isinstance(alone, Graph) and torch.equal(alone.edge_index, merged.edge_index)
    with pytest.raises(ValueError, match="reduce must be one of"):
        g.coalesce(w, reduce="median")
    with pytest.raises(ValueError, match="edge_weight has shape"):
        g.coalesce(torch.ones(3))


# ---------------------------------------------------------------- bad inputs

@pytest.mark.parametrize("call, error, message", [
    (lambda: Graph.from_csr(torch.tensor([0, 2, 1, 3]), torch.tensor([0, 0, 0])), ValueError,
     r"rowptr must be non-decreasing: rowptr\[2\] = 1 < rowptr\[1\] = 2"),
    (lambda: Graph.from_csr(torch.tensor([1, 2]), torch.tensor([0])), ValueError, r"rowptr\[0\] must be 0"),
    (lambda: Graph.from_csr(torch.tensor([0, 2]), torch.tensor([0])), ValueError,
     r"rowptr\[-1\] = 2 must equal the number of entries of col \(1\)"),
    (lambda: Graph.from_csr(torch.tensor([0, 2]), torch.tensor([0, 5]), num_src=3), ValueError,
     r"col\[1\] = 5 is out of range: expected 0 <= col < num_src = 3"),
    (lambda: Graph.from_csr(torch.tensor([0, 2]), torch.tensor([0, -1])), ValueError, r"col\[1\] = -1"),
    (lambda: Graph.from_csr(torch.tensor([0.0, 1.0]), torch.tensor([0])), TypeError, "rowptr must have dtype"),
    (lambda: Graph.from_csr([0, 1], torch.tensor([0])), TypeError, "rowptr must be a torch.Tensor"),
    (lambda: Graph.from_csr(torch.tensor([[0, 1]]), torch.tensor([0])), ValueError, "rowptr must have 1 dimension"),
    (lambda: Graph.from_csr(torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64)),
     ValueError, "rowptr must have at least one entry"),
    (lambda: Graph.from_csr(torch.tensor([0, 2]), torch.tensor([0, 1]), eid=torch.tensor([1, 1])), ValueError,
     "eid must be a permutation of 0..1: edge id 0 appears 0 times"),
    (lambda: Graph.from_csr(torch.tensor([0, 2]), torch.tensor([0, 1]), eid=torch.tensor([0, 2])), ValueError,
     r"eid\[1\] = 2 is out of range"),
    (lambda: Graph.from_csr(torch.tensor([0, 1]), torch.tensor([0]), num_src=-1), ValueError,
     "num_src must be non-negative"),
    (lambda: Graph.from_csr(torch.tensor([0, 1]), torch.tensor([0]), num_src=1.5), TypeError, "num_src must be an int"),
    (lambda: Graph.from_edge_index(torch.tensor([[0, 1, 2]])), ValueError, r"edge_index must have shape \[2, E\]"),
    (lambda: Graph.from_edge_index(torch.tensor([[0, 1], [0, 4]]), num_dst=3), ValueError,
     r"edge_index\[1\]\[1\] = 4 is out of range: expected 0 <= edge_index\[1\] < num_dst = 3"),
    (lambda: Graph.from_edge_index(torch.tensor([[0, -2], [0, 1]])), ValueError, r"edge_index\[0\]\[1\] = -2"),
    (lambda: Graph.from_edge_index(torch.tensor([[0.0], [1.0]])), TypeError, "edge_index must have dtype int32 or int64"),
    (lambda: Graph.from_scipy(np.eye(3)), TypeError, "matrix must be a SciPy sparse matrix"),
    (lambda: Graph.from_torch_sparse(torch.eye(3)), ValueError, "layout torch.sparse_coo, torch.sparse_csr or torch.sparse_csc"),
    (lambda: Graph(torch.tensor([0]), torch.tensor([]), None, 0), TypeError, "Graph is built with"),
])
def test_bad_graph_inputs_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_from_edge_index_is_square_by_default_as_in_pyg_and_dgl():
    edge_index = torch.tensor([[0, 1, 5], [1, 2, 0]])
    g = Graph.from_edge_index(edge_index)
    assert (g.num_src, g.num_dst) == (6, 6)  # the largest index of either row, plus one
    g = Graph.from_edge_index(edge_index, 9)  # PyG's num_nodes, positional
    assert (g.num_src, g.num_dst) == (9, 9)
    g = Graph.from_edge_index(edge_index, num_src=6, num_dst=3)
    assert (g.num_src, g.num_dst) == (6, 3)
    g = Graph.from_edge_index(edge_index, num_dst=4)  # the other count from its own row
    assert (g.num_src, g.num_dst) == (6, 4)
    with pytest.raises(ValueError, match="give num_nodes .* or num_src / num_dst"):
        Graph.from_edge_index(edge_index, 6, num_src=6)
    with pytest.raises(ValueError, match=r"edge_index\[0\]\[2\] = 5 is out of range"):
        Graph.from_edge_index(edge_index, 4)


def _adjacencies(edge_index: torch.Tensor, n: int) -> dict[str, torch.Tensor]:
    """PyG's transposed adjacency ``adj_t`` (rows are destinations) in each torch.sparse layout."""
    values = torch.arange(1.0, edge_index.shape[1] + 1)
    with torch.sparse.check_sparse_tensor_invariants(False):
        coo = torch.sparse_coo_tensor(edge_index.flip(0), values, (n, n))
        return {"coo": coo, "csr": coo.to_sparse_csr(), "csc": coo.to_sparse_csc()}


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
def test_from_pyg_reads_a_sparse_adj_t_as_transposed(layout):
    edge_index = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 0, 1, 3]])
    adj_t = _adjacencies(edge_index, 5)[layout]
    g = Graph.from_pyg(adj_t)
    assert (g.num_src, g.num_dst, g.num_edges) == (5, 5, 5)
    x = torch.randn(5, 3)
    # The values, in storage order, are the edge weights in edge order.
    weights = adj_t.values() if layout != "coo" else adj_t._values()
    torch.testing.assert_close(gsparse.u_mul_e_sum(g, x, weights), adj_t.to_dense() @ x)
    # DGL's convention reads the same tensor the other way around.
    torch.testing.assert_close(gsparse.copy_u_sum(Graph.from_torch_sparse(adj_t), x),
                               (adj_t.to_dense() != 0).float().t() @ x)


def test_from_pyg_reads_edge_index_and_edge_index_objects():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    assert Graph.from_pyg(edge_index).num_dst == 3
    assert Graph.from_pyg(edge_index, num_nodes=7).num_src == 7
    pyg = pytest.importorskip("torch_geometric")
    g = Graph.from_pyg(pyg.EdgeIndex(edge_index, sparse_size=(4, 4)))
    assert (g.num_src, g.num_dst) == (4, 4) and torch.equal(g.edge_index, edge_index)
    with pytest.raises(TypeError, match="adj must be an edge_index tensor"):
        Graph.from_pyg([[0, 1], [1, 0]])


def test_edges_are_int64_in_the_users_order():
    edge_index = torch.tensor([[2, 0, 1], [0, 2, 1]], dtype=torch.int32)
    g = Graph.from_edge_index(edge_index)
    src, dst = g.edges()
    assert src.dtype == dst.dtype == torch.int64 and g.index_dtype == torch.int32
    assert torch.equal(g.edge_index, edge_index.long())


def test_absurd_node_counts_are_refused_before_allocating():
    edge_index = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 0]])
    with pytest.raises(ValueError, match=r"num_dst = 1,000,000,000,000,000, num_edges = 4 would need about .* GB .* free on cpu"):
        Graph.from_edge_index(edge_index, num_src=3, num_dst=10**15)
    with pytest.raises(ValueError, match=r"num_nodes = 10,000,000,000,000,000, num_edges = 4 would need"):
        Graph.from_edge_index(edge_index, 10**16)
    with pytest.raises(ValueError, match="would need"):
        Graph.from_csr(torch.tensor([0, 1]), torch.tensor([0]), num_src=10**16)


def test_memory_a_gpu_caches_unused_counts_as_free(monkeypatch):
    """PyTorch keeps freed GPU memory for reuse: a graph built after a larger one was freed
    must not be refused for want of what the allocator holds unused."""
    from gsparse import _index_checks

    gib = 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2 * gib, 140 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 100 * gib)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 10 * gib)
    _index_checks.check_fits("cuda", 10**8, 10**8, 10**9)  # about 43 GB: 92 GiB are free
    with pytest.raises(ValueError, match=r"more than the 98\.8 GB free on cuda"):
        _index_checks.check_fits("cuda", 10**8, 10**8, 3 * 10**9)
