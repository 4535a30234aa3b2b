"""Block-diagonal batches of small graphs (gsparse.datasets.batched)."""

from __future__ import annotations

import pytest
import torch

from gsparse.datasets import small_graph_batch
from gsparse.datasets.orderings import _components, _undirected


def _component_sizes(g) -> torch.Tensor:
    label = _components(*_undirected(g))
    return torch.bincount(label)[torch.unique(label)]


@pytest.mark.parametrize("mean_nodes, mean_degree, self_loops", [(18, 2.1, False), (40, 3.7, True), (9, 6.0, False)])
def test_a_batch_is_block_diagonal_symmetric_and_has_the_requested_sizes(mean_nodes, mean_degree, self_loops):
    g = small_graph_batch(300, mean_nodes, mean_degree, size_cov=0.5, self_loops=self_loops, seed=4)
    assert g.num_dst == 300 * mean_nodes
    dst, src = g.csr_dst.long(), g.col.long()
    keys = torch.sort(dst * g.num_src + src).values
    assert torch.equal(keys, torch.sort(src * g.num_src + dst).values) and bool((keys[1:] > keys[:-1]).all())
    assert int((dst == src).sum()) == (g.num_dst if self_loops else 0)
    # Trees from d >= 2 make every graph one component: 300 components, none joined.
    sizes = _component_sizes(g)
    assert sizes.numel() == 300 and int(sizes.min()) >= 2
    assert float(sizes.double().std() / sizes.double().mean()) == pytest.approx(0.5, abs=0.1)
    degree = (g.num_edges - (g.num_dst if self_loops else 0)) / g.num_dst
    assert 0.65 * mean_degree <= degree <= mean_degree + 0.05  # merged bonds: 9 nodes at d = 6 keep 4.3


def test_below_degree_two_the_graphs_are_forests_of_fragments():
    g = small_graph_batch(400, 20, 1.5, seed=5)
    assert g.num_edges / g.num_dst == pytest.approx(1.5 * 19 / 20, rel=0.05)
    assert _component_sizes(g).numel() > 400


def test_batch_arguments_are_named():
    with pytest.raises(ValueError, match="mean_nodes must be >= 2, got 1.5"):
        small_graph_batch(4, 1.5, 2.0)
    with pytest.raises(ValueError, match="mean_degree must be positive"):
        small_graph_batch(4, 10, 0.0)
