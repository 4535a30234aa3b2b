"""k-nearest-neighbour graphs of point clouds (gsparse.datasets.geometric)."""

from __future__ import annotations

import pytest
import torch

from gsparse.datasets import EXACT_POINTS, knn_graph, point_cloud
from gsparse.datasets.geometric import _morton_order, _unit_cube


def _nodes_in_graph_order(points: torch.Tensor) -> torch.Tensor:
    """The points renumbered as knn_graph numbers its nodes (Morton order)."""
    unit = _unit_cube(points.float())
    return unit[_morton_order(unit, 0.0)]


def _exact_neighbours(unit: torch.Tensor, query: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Brute force: ``([q, n] distances, [q, k] the k nearest other points)``."""
    distance = torch.cdist(unit[query].double(), unit.double())
    distance[torch.arange(query.numel()), query] = float("inf")
    return distance, torch.topk(distance, k, 1, largest=False).indices


@pytest.mark.parametrize("dim, clusters", [(2, 0), (3, 30)])
def test_every_row_holds_k_distinct_nearest_points_on_a_small_cloud(dim, clusters):
    points = point_cloud(1_500, dim, clusters, seed=1)
    g = knn_graph(points, 8)
    assert g.num_edges == 1_500 * 8 and bool((g.in_degrees() == 8).all())
    rows = g.col.long().view(1_500, 8)
    assert bool((rows[:, 1:] > rows[:, :-1]).all())  # sorted and distinct
    unit = _nodes_in_graph_order(points)
    _, nearest = _exact_neighbours(unit, torch.arange(1_500), 8)
    assert torch.equal(rows, torch.sort(nearest, 1).values)  # small clouds are searched exactly


@pytest.mark.parametrize("dim, clusters, k", [(2, 100, 6), (3, 0, 16)])
def test_the_approximate_search_finds_nearly_all_nearest_points(dim, clusters, k):
    n = EXACT_POINTS + 2_000
    points = point_cloud(n, dim, clusters, seed=2)
    g = knn_graph(points, k)
    rows = g.col.long().view(n, k)
    assert bool((rows[:, 1:] > rows[:, :-1]).all()) and not bool((rows == torch.arange(n)[:, None]).any())
    query = torch.arange(0, n, 37)
    distance, nearest = _exact_neighbours(_nodes_in_graph_order(points), query, k)
    found = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(rows[query], nearest))
    assert found / (query.numel() * k) > 0.93  # 0.95-0.99 measured on such clouds
    # A missed neighbour is replaced by a point hardly farther than the true k-th.
    kth = distance.gather(1, nearest).max(1).values
    assert float((distance.gather(1, rows[query]).max(1).values / kth).max()) < 1.6


def test_natural_order_is_spatial_and_symmetrising_keeps_every_row_at_least_k():
    points = point_cloud(5_000, 2, 0, seed=3)
    g = knn_graph(points, 10)
    assert float((g.col.long() - g.csr_dst.long()).abs().double().median()) < 50  # 1% of the ids
    s = knn_graph(points, 10, symmetric=True)
    keys = torch.sort(s.csr_dst.long() * s.num_src + s.col.long()).values
    reverse = torch.sort(s.col.long() * s.num_src + s.csr_dst.long()).values
    assert torch.equal(keys, reverse) and bool((keys[1:] > keys[:-1]).all())
    assert int(s.in_degrees().min()) >= 10 and 10 * 5_000 < s.num_edges < 2 * 10 * 5_000


def test_knn_arguments_are_named():
    with pytest.raises(ValueError, match="k must be below the 5 points"):
        knn_graph(point_cloud(5, 2), 5)
    with pytest.raises(ValueError, match=r"points must be a \[n, 2\] or \[n, 3\] tensor, got \(4, 4\)"):
        knn_graph(torch.rand(4, 4), 2)
    with pytest.raises(ValueError, match="dim must be <= 3"):
        point_cloud(10, 4)
