"""Partitions and their reports, on hand-checked graphs; streaming inputs; no processes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gsparse
from gsparse import distributed as gd

# 6 nodes: (src, dst) pairs, a self loop at 2.
EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3), (2, 2), (4, 1)]


def _graph(edges=EDGES, num_src=6, num_dst=6) -> gsparse.Graph:
    return gsparse.Graph.from_edge_index(torch.tensor(edges).T.reshape(2, -1), num_src=num_src, num_dst=num_dst)


def _planted(clusters: int = 4, size: int = 30, seed: int = 0) -> tuple[gsparse.Graph, torch.Tensor]:
    """Dense clusters with a few edges between them, node ids shuffled; and each node's cluster."""
    gen = torch.Generator().manual_seed(seed)
    n = clusters * size
    cluster = torch.arange(n) // size
    src = torch.randint(0, n, (8 * n,), generator=gen)
    dst = cluster[src] * size + torch.randint(0, size, (8 * n,), generator=gen)
    across = torch.randint(0, n, (n // 10,), generator=gen)
    src, dst = torch.cat([src, across]), torch.cat([dst, torch.randint(0, n, (n // 10,), generator=gen)])
    perm = torch.randperm(n, generator=gen)
    return gsparse.Graph.from_edge_index(torch.stack([perm[src], perm[dst]]), num_nodes=n), cluster[torch.argsort(perm)]


def test_range_report_counts_cut_halo_and_imbalance_by_hand():
    report = gd.partition_report(_graph(), None, gd.Partition.from_bounds([0, 3, 6]))
    assert report.rows == [3, 3] and report.edges == [5, 4]
    assert report.edge_cut == 4  # 5->0 and 4->1 into rank 0; 2->3 and 0->3 into rank 1
    assert report.halo == [2, 2] and report.halo_matrix == [[0, 2], [2, 0]]  # {4, 5} and {0, 2}
    assert report.row_imbalance == 1.0 and report.edge_imbalance == pytest.approx(5 / 4.5)
    assert report.cut_fraction == pytest.approx(4 / 9)


def test_assignment_report_counts_each_remote_source_once_by_hand():
    part = gd.Partition.from_assignment([0, 1, 0, 1, 0, 1], 2)
    report = gd.partition_report(_graph(), None, part)
    assert report.rows == [3, 3] and report.edges == [4, 5]
    assert report.edge_cut == 8  # only the self loop 2->2 stays on its rank
    assert report.halo == [3, 3]  # rank 1 reads 0 and 4 twice each: still 3 nodes
    assert report.halo_matrix == [[0, 3], [3, 0]]


def test_bipartite_report_has_a_rank_without_halo():
    edges = [(0, 0), (1, 0), (3, 1), (2, 1), (3, 0)]
    report = gd.partition_report(_graph(edges, 4, 2), None, gd.Partition.from_bounds([0, 1, 2]),
                                 gd.Partition.from_bounds([0, 2, 4]))
    assert report.edges == [3, 2] and report.edge_cut == 1
    assert report.halo == [1, 0] and report.halo_matrix == [[0, 1], [0, 0]]


def test_reports_stream_from_memory_maps_and_chunk_iterables(tmp_path):
    graph, _ = _planted()
    src, dst = (t.numpy().astype(np.int64) for t in graph.edges())
    maps = []
    for name, values in (("src", src), ("dst", dst)):
        m = np.lib.format.open_memmap(tmp_path / f"{name}.npy", mode="w+", dtype=np.int64, shape=values.shape)
        m[:] = values
        m.flush()
        maps.append(np.load(tmp_path / f"{name}.npy", mmap_mode="r"))
    deg = gd.in_degrees(maps[1], graph.num_dst, chunk_size=7)
    assert deg.tolist() == graph.in_degrees().tolist()
    part = gd.range_partition(deg, 3)
    whole = gd.partition_report(graph, None, part)
    assert gd.partition_report(maps[0], maps[1], part, chunk_size=7) == whole
    chunks = lambda a: (a[i:i + 50] for i in range(0, a.size, 50))
    assert gd.partition_report(chunks(src), chunks(dst), part) == whole
    assert gd.in_degrees(chunks(dst), graph.num_dst).tolist() == deg.tolist()


def test_range_partition_cuts_at_the_closest_balance_point():
    # Weights (in-degree + 1) 11, 1, 1, 11, 11, 11: the half is 23, reached closest after 4 rows (24).
    assert gd.range_partition([10, 0, 0, 10, 10, 10], 2).bounds.tolist() == [0, 4, 6]
    assert gd.range_partition(np.zeros(0, dtype=np.int64), 3).bounds.tolist() == [0, 0, 0, 0]
    few = gd.range_partition([1, 1], 4)
    assert few.sizes().sum() == 2 and few.num_parts == 4 and (few.sizes() == 0).any()


def test_range_partition_balances_edges_of_skewed_rows():
    rng = np.random.default_rng(0)
    deg = np.round(rng.lognormal(3.0, 1.1, 20_000)).astype(np.int64)  # COV about 1.5, as products
    part = gd.range_partition(deg, 8)
    edges = np.add.reduceat(deg, part.bounds[:-1].numpy())
    assert edges.max() / edges.mean() < 1.01


@pytest.mark.parametrize("kind", ["range", "assignment"])
def test_partition_maps_nodes_to_owners_and_back(kind):
    gen = torch.Generator().manual_seed(0)
    part = gd.Partition.from_bounds([0, 5, 5, 12]) if kind == "range" else \
        gd.Partition.from_assignment(torch.randint(0, 3, (12,), generator=gen), 3)
    ids = torch.arange(12)
    owner, local = part.owner(ids), part.local_index(ids)
    for v in range(12):
        assert int(part.nodes(int(owner[v]))[local[v]]) == v
    assert sum(part.nodes(r).numel() for r in range(3)) == 12 == int(part.sizes().sum())
    assert all(bool((part.nodes(r).diff() > 0).all()) for r in range(3))  # increasing ids


def test_locality_partition_finds_planted_clusters():
    graph, _ = _planted()
    ranged = gd.partition_report(graph, None, gd.range_partition(graph.in_degrees(), 4))
    local = gd.partition_report(graph, None, gd.locality_partition(graph, 4))
    assert local.edge_cut < 0.25 * ranged.edge_cut, (local.edge_cut, ranged.edge_cut)
    assert local.edge_imbalance < 1.1


def test_metis_partition_finds_planted_clusters():
    pytest.importorskip("pymetis")
    graph, _ = _planted()
    report = gd.partition_report(graph, None, gd.partition(graph, 4, "metis"))
    assert report.edge_cut < 0.2 * graph.num_edges and report.edge_imbalance < 1.1


def test_partition_picks_a_method_and_rejects_bad_arguments():
    graph, _ = _planted()
    assert gd.partition(graph, 2).method in ("metis", "locality")
    assert gd.partition(_graph([(0, 0)], 3, 2), 2).method == "range"  # bipartite: auto is range
    with pytest.raises(ValueError, match="method must be one of"):
        gd.partition(graph, 2, "spectral")
    with pytest.raises(ValueError, match="num_parts must be >= 1, got 0"):
        gd.range_partition(graph.in_degrees(), 0)
    with pytest.raises(ValueError, match="need a square graph, got 3 source and 2 destination"):
        gd.locality_partition(_graph([(0, 0)], 3, 2), 2)
    with pytest.raises(ValueError, match=r"assignment must lie in \[0, 2\)"):
        gd.Partition.from_assignment([0, 2], 2)
    with pytest.raises(ValueError, match="bounds must be non-decreasing"):
        gd.Partition.from_bounds([0, 3, 2])
