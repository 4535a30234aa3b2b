"""Graph families, orderings, structure statistics and the corpus registry."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from gsparse import Graph
from gsparse.datasets import (FAMILIES, ORDERINGS, STENCILS, Choice, LogNormal, PowerLaw, Range, Regular,
                              banded_graph, block_model_graph, citation_graph, clique_graph, community_graph, corpus, describe_structure, hub_graph,
                              lattice_edge_count, lattice_graph, node_order, random_graph, relabel, reorder,
                              popular_graph, rmat_graph, road_graph, sample_blocks, small_world_graph)
from gsparse.datasets.orderings import _components, _undirected


def _edge_keys(g: Graph) -> torch.Tensor:
    """Sorted ``dst * num_src + src`` of every edge: the edge multiset."""
    return torch.sort(g.csr_dst.long() * g.num_src + g.col.long()).values


def _rows_sorted(g: Graph) -> bool:
    key = g.csr_dst.long() * g.num_src + g.col.long()
    return bool((key[1:] >= key[:-1]).all())


def _same(a: Graph, b: Graph) -> bool:
    return a.num_src == b.num_src and torch.equal(a.rowptr, b.rowptr) and torch.equal(a.col, b.col)


# ------------------------------------------------------------------ every family, through the registry


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_builds_sorted_graphs_of_the_requested_size_for_several_seeds(name):
    family = FAMILIES[name]
    for seed, target in enumerate((1_000, 4_000, 20_000)):
        parameters = family.draw(np.random.default_rng(seed), num_edges=target)
        g = family.build(parameters, seed=seed)
        low = 0.1 if name == "rmat" and parameters["simple"] else 0.5
        high = 2.0 if name == "sampled" else 1.05  # a sampled block has at least one seed's hops
        assert low * target <= g.num_edges <= high * target, (parameters, g)
        assert _rows_sorted(g)
        assert g.num_src >= 1 and g.num_dst >= 1


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_same_seed_rebuilds_the_same_graph_and_another_seed_another(name):
    family = FAMILIES[name]
    parameters = family.draw(np.random.default_rng(5), num_edges=5_000)
    # Lattices are deterministic: only a random ordering makes their seed matter.
    parameters["ordering"] = "random" if name == "lattice" else "natural"
    a = family.build(parameters, seed=1)
    assert _same(a, family.build(parameters, seed=1))
    assert not _same(a, family.build(parameters, seed=2))


def test_max_edges_caps_the_target():
    parameters = FAMILIES["lognormal"].draw(np.random.default_rng(0), num_edges=50_000)
    assert FAMILIES["lognormal"].build(parameters, max_edges=2_000).num_edges == 2_000


# ------------------------------------------------------------------ degree laws and bipartite shapes


def test_degree_laws_give_their_mean_and_shape():
    lognormal = random_graph(20_000, LogNormal(30, 1.0), seed=0).row_stats
    assert abs(lognormal.mean - 30) < 1e-9 and abs(lognormal.cov - 1.0) < 0.1
    regular = random_graph(1_000, Regular(12), seed=0).in_degrees()
    assert bool((regular == 12).all())
    jittered = random_graph(1_000, Regular(10, 3), seed=0).in_degrees()
    assert int(jittered.min()) == 7 and int(jittered.max()) == 13
    deg = random_graph(100_000, PowerLaw(8.0, 2.5), seed=1).in_degrees().double()
    # Pareto tail P(X > x) ~ x^-(exponent - 1): the survival falls by 4^1.5 = 8 from x to 4x.
    ratio = float((deg > 80).double().mean() / (deg > 20).double().mean())
    assert 6 < 1 / ratio < 10


@pytest.mark.parametrize("num_dst, num_src", [(200, 20_000), (20_000, 200)])
def test_bipartite_graphs_are_tall_or_wide_with_uniform_sources(num_dst, num_src):
    g = random_graph(num_dst, LogNormal(16, 0.5), num_src=num_src, seed=3)
    assert (g.num_dst, g.num_src, g.num_edges) == (num_dst, num_src, 16 * num_dst)
    used = g.out_degrees()
    assert float(used.double().mean()) == pytest.approx(16 * num_dst / num_src)


def test_degree_law_arguments_are_named():
    with pytest.raises(ValueError, match="degree.mean = 30 exceeds num_src = 20"):
        random_graph(100, Regular(30), num_src=20)
    with pytest.raises(ValueError, match=r"Regular.jitter must lie in \[0, mean = 2\], got 3"):
        Regular(2, 3)
    with pytest.raises(TypeError, match="degree must be a LogNormal, PowerLaw or Regular, got int"):
        random_graph(100, 5)


# ------------------------------------------------------------------ locality: communities and blocks


@pytest.mark.parametrize("p", [0.3, 0.7, 0.95])
def test_community_sources_fall_inside_with_probability_p(p):
    size = 512
    g = community_graph(8_192, LogNormal(20, 1.0), size, p, seed=2)
    row, col = g.csr_dst.long(), g.col.long()
    inside = float(((row // size) == (col // size)).double().mean())
    assert abs(inside - p) < 0.01  # 164K Bernoulli draws: 4 standard deviations


def test_one_community_holding_every_node_keeps_every_source_inside():
    g = community_graph(300, Regular(5), 1_000, 0.2, seed=0)
    assert g.num_edges == 1_500 and int(g.col.max()) < 300


def _blocks(num_nodes: int, seed: int) -> torch.Tensor:
    """Block of each node: the components of the model with every source in its own block."""
    g = block_model_graph(num_nodes, 30 * num_nodes, 12, size_spread=1.5, within_fraction=1.0, seed=seed)
    return _components(*_undirected(g))


def test_block_model_blocks_are_unequal_and_keep_the_within_fraction():
    block = _blocks(6_000, seed=4)
    sizes = torch.bincount(block)
    sizes = sizes[sizes > 0]
    assert sizes.numel() == 12 and int(sizes.sum()) == 6_000
    assert int(sizes.max()) > 5 * int(sizes.min())
    # Same seed, so the same block sizes in the same order.
    g = block_model_graph(6_000, 180_000, 12, size_spread=1.5, within_fraction=0.7, seed=4)
    assert g.num_edges == 180_000
    within = float((block[g.csr_dst.long()] == block[g.col.long()]).double().mean())
    assert abs(within - 0.7) < 0.01


# ------------------------------------------------------------------ hubs and R-MAT


def test_hub_rows_and_hub_columns_have_the_requested_degrees():
    n = 20_000
    g = hub_graph(n, LogNormal(6, 0.5), hub_rows=3, hub_row_degree=15_000, hub_columns=2,
                  hub_column_share=0.4, seed=1)
    rows = g.in_degrees()
    assert int((rows >= 15_000).sum()) == 3 and int(torch.sort(rows).values[-4]) < 100
    cols = g.out_degrees().double() / n
    top = torch.sort(cols, descending=True).values
    assert abs(float(top[0]) - 0.4) < 0.02 and abs(float(top[1]) - 0.4) < 0.02
    assert float(top[2]) < 0.05


def test_banded_sources_lie_within_the_band_wrapped_at_the_ends():
    n, width = 5_000, 40
    g = banded_graph(n, LogNormal(12, 0.8), width, seed=3)
    assert g.num_edges == 12 * n and _rows_sorted(g)
    distance = (g.col.long() - g.csr_dst.long()).abs()
    distance = torch.minimum(distance, n - distance)  # wrapped
    assert int(distance.max()) <= width and float(distance.double().mean()) > width / 3
    assert describe_structure(g).block_spread < 0.05  # a block of rows reads a narrow range


def test_popular_sources_feed_most_rows_and_zero_popularity_is_uniform():
    g = popular_graph(20_000, Regular(8), 1.2, num_src=5_000, seed=4)
    assert (g.num_dst, g.num_src, g.num_edges) == (20_000, 5_000, 160_000)
    reads = torch.sort(g.out_degrees().double(), descending=True).values
    assert float(reads[:50].sum()) > 0.5 * g.num_edges  # 1% of the sources take most edges
    flat = popular_graph(20_000, Regular(8), 0.0, num_src=5_000, seed=4).out_degrees().double()
    assert float(flat.std() / flat.mean()) < 0.2  # Poisson(32): cov about 0.18
    with pytest.raises(ValueError, match="popularity"):
        popular_graph(10, Regular(2), -1.0)


def test_citations_go_to_earlier_papers_recent_ones_or_the_already_cited():
    recent = citation_graph(20_000, LogNormal(8, 0.5), 0.0, 50, seed=3)
    row, col = recent.csr_dst.long(), recent.col.long()
    assert int(recent.rowptr[1]) == 0  # paper 0 has no earlier paper to cite
    assert bool(((row - col >= 1) & (row - col <= 50)).all())  # only the 50 papers before
    assert abs(recent.num_edges / 20_000 - 8) < 0.1
    cited = citation_graph(20_000, LogNormal(8, 0.5), 1.0, 50, seed=3)
    row, col = cited.csr_dst.long(), cited.col.long()
    assert bool((col < row).all()) and not bool(((row - col) <= 50).all())
    # The cited get cited: a hundred papers (0.5%) hold a tenth of all citations; by
    # recency alone every paper is cited about 8 times.
    held = torch.sort(cited.out_degrees().double(), descending=True).values
    assert float(held[:100].sum()) > 0.1 * cited.num_edges
    assert float(recent.out_degrees().double()[100:-100].std()) < 4
    for bad, match in (({"num_nodes": 1}, "num_nodes"), ({"preferential": 1.5}, "preferential"),
                       ({"window": 0}, "window")):
        arguments = {"num_nodes": 100, "degree": LogNormal(4, 0.5), "preferential": 0.5, "window": 10, **bad}
        with pytest.raises(ValueError, match=match):
            citation_graph(**arguments)


def test_cliques_join_every_pair_of_a_group_once_both_ways():
    g = clique_graph(3_000, torch.full((400,), 6), local_share=1.0, window=40, seed=2)
    dst, src = g.csr_dst.long(), g.col.long()
    assert torch.equal(_edge_keys(g), torch.sort(src * 3_000 + dst).values)  # symmetric
    assert bool((src != dst).all()) and bool((torch.unique(dst * 3_000 + src).numel() == g.num_edges))
    gap = (dst - src).abs()
    assert bool((torch.minimum(gap, 3_000 - gap) < 40).all())  # local groups stay in their window
    assert 0.8 * 400 * 30 <= g.num_edges <= 400 * 30  # at most s (s - 1) a group
    one = clique_graph(10, torch.tensor([4]), seed=1)
    assert one.num_edges == 12 and int((one.in_degrees() > 0).sum()) == 4  # one group: a 4-clique
    popular = clique_graph(5_000, torch.full((2_000,), 5), popularity=1.2, seed=3).out_degrees().double()
    assert float(torch.sort(popular, descending=True).values[:50].sum()) > 0.2 * float(popular.sum())
    for bad, match in (({"group_sizes": torch.tensor([1, 3])}, "group_sizes must lie in"),
                       ({"group_sizes": torch.tensor([2.0])}, "integer tensor"),
                       ({"popularity": -1.0}, "popularity"), ({"local_share": 2.0}, "local_share"),
                       ({"window": 1}, "window")):
        with pytest.raises(ValueError, match=match):
            clique_graph(**{"num_nodes": 100, "group_sizes": torch.tensor([3, 4]), **bad})


def test_rmat_is_skewed_with_graph500_parameters_and_flat_with_equal_quadrants():
    skewed = rmat_graph(14, 16, seed=0)
    assert skewed.num_edges == 16 * 2**14
    assert skewed.row_stats.max > 50 * skewed.row_stats.mean and skewed.row_stats.cov > 2
    assert int(skewed.out_degrees().max()) > 50 * 16
    flat = rmat_graph(14, 16, a=0.25, b=0.25, c=0.25, seed=0)
    assert flat.row_stats.cov < 0.4


def test_rmat_picks_each_quadrant_with_its_probability():
    g = rmat_graph(12, 64, a=0.5, b=0.2, c=0.1, seed=1)  # d = 0.2
    dst, src = g.csr_dst.long(), g.col.long()
    half = 2**11
    for level_bit in (half, 1):  # the first level and the last
        bottom, right = (dst & level_bit) > 0, (src & level_bit) > 0
        assert abs(float(bottom.double().mean()) - 0.3) < 0.005  # c + d
        assert abs(float(right.double().mean()) - 0.4) < 0.005  # b + d
        assert abs(float((bottom & right).double().mean()) - 0.2) < 0.005  # d


def test_simple_rmat_has_no_self_loops_or_repeated_edges():
    g = rmat_graph(10, 16, simple=True, seed=3)
    keys = _edge_keys(g)
    assert bool((keys[1:] != keys[:-1]).all())
    assert not bool((g.csr_dst == g.col).any())
    assert g.num_edges < 16 * 2**10
    with pytest.raises(ValueError, match=r"a \+ b \+ c must be <= 1"):
        rmat_graph(4, a=0.6, b=0.3, c=0.3)


# ------------------------------------------------------------------ meshes


@pytest.mark.parametrize("stencil, shape", [(4, (5, 7)), (8, (5, 7)), (6, (4, 5, 3)), (26, (4, 5, 3))])
def test_lattice_interior_rows_have_the_stencil_degree(stencil, shape):
    g = lattice_graph(shape, stencil)
    assert g.num_edges == lattice_edge_count(shape, stencil)
    assert torch.equal(_edge_keys(g), _edge_keys(g.reverse()))  # symmetric
    deg = g.in_degrees().reshape(shape)
    interior = deg[tuple(slice(1, -1) for _ in shape)]
    assert bool((interior == stencil).all())
    assert int(deg.flatten()[0]) == {4: 2, 8: 3, 6: 3, 26: 7}[stencil]  # a corner
    assert not bool((g.csr_dst == g.col).any())


def test_lattice_stencils_and_shapes_are_checked():
    assert sorted(STENCILS) == [4, 6, 8, 26]
    with pytest.raises(ValueError, match="shape must be a sequence of 3 sizes for the 26-neighbour"):
        lattice_graph((4, 4), 26)
    with pytest.raises(ValueError, match=r"stencil must be one of \[4, 6, 8, 26\] neighbours, got 5"):
        lattice_graph((4, 4), 5)


def test_road_networks_are_grids_with_deletions_and_shortcuts():
    assert _same(road_graph(6, 9, deletion=0.0, shortcuts=0.0), lattice_graph((6, 9), 4))
    g = road_graph(100, 100, deletion=0.3, shortcuts=0.01, seed=2)
    grid = lattice_edge_count((100, 100), 4)
    assert abs(g.num_edges - (0.7 * grid + 2 * 100)) < 0.03 * grid
    far = (g.csr_dst.long() - g.col.long()).abs()
    assert int(((far != 1) & (far != 100)).sum()) == 2 * 100  # every shortcut, both ways
    assert torch.equal(_edge_keys(g), _edge_keys(g.reverse()))


def test_small_world_without_rewiring_is_the_ring_and_with_it_stays_symmetric():
    ring = small_world_graph(50, 6, 0.0)
    offset = (ring.col.long() - ring.csr_dst.long()) % 50
    assert ring.num_edges == 300 and bool((ring.in_degrees() == 6).all())
    assert sorted(set(offset.tolist())) == [1, 2, 3, 47, 48, 49]
    g = small_world_graph(5_000, 10, 0.1, seed=1)
    assert torch.equal(_edge_keys(g), _edge_keys(g.reverse())) and not bool((g.csr_dst == g.col).any())
    far = ((g.col.long() - g.csr_dst.long()) % 5_000 + 5) % 5_000 > 10  # off the ring, both ways
    assert abs(int(far.sum()) - 2 * 0.1 * 25_000) < 0.1 * 5_000 and 49_800 < g.num_edges <= 50_000
    with pytest.raises(ValueError, match="k must be even"):
        small_world_graph(10, 3, 0.1)


# ------------------------------------------------------------------ sampled blocks


@pytest.mark.parametrize("replace", [False, True])
def test_sampled_blocks_respect_the_fanout_and_relabel_consistently(replace):
    base = random_graph(3_000, PowerLaw(12, 2.3), seed=0).coalesce()  # no multi-edges
    base_keys = set(_edge_keys(base).tolist())
    blocks = sample_blocks(base, 64, [4, 7], replace=replace, seed=1)
    assert len(blocks) == 2 and blocks[-1].graph.num_dst == 64
    for fanout, block in zip([7, 4], blocks):
        g, src = block.graph, block.src_nodes
        assert g.num_src == src.numel() and torch.unique(src).numel() == src.numel()
        assert torch.equal(block.dst_nodes, src[: g.num_dst])
        full = base.in_degrees().long()[block.dst_nodes]
        expected = torch.where(full > 0, fanout, 0) if replace else torch.clamp(full, max=fanout)
        assert torch.equal(g.in_degrees().long(), expected)
        dst, col = block.dst_nodes[g.csr_dst.long()], src[g.col.long()]
        assert set((dst * base.num_src + col).tolist()) <= base_keys
        if not replace:
            keys = g.csr_dst.long() * g.num_src + g.col.long()
            assert bool((keys[1:] != keys[:-1]).all())  # distinct neighbours per row
    assert torch.equal(blocks[0].dst_nodes, blocks[1].src_nodes)


def test_sampling_needs_a_square_graph_and_valid_seeds():
    with pytest.raises(ValueError, match="graph must be square"):
        sample_blocks(random_graph(10, Regular(2), num_src=20), 2, [2])
    with pytest.raises(ValueError, match="seeds must be distinct"):
        sample_blocks(random_graph(10, Regular(2)), torch.tensor([1, 1]), [2])
    with pytest.raises(ValueError, match="fanouts must be a non-empty sequence"):
        sample_blocks(random_graph(10, Regular(2)), 2, [])


# ------------------------------------------------------------------ orderings


@pytest.mark.parametrize("ordering", ORDERINGS)
@pytest.mark.parametrize("square", [True, False])
def test_orderings_are_permutations_that_keep_the_edge_multiset(ordering, square):
    g = (community_graph(2_000, LogNormal(8, 1.0), 128, 0.8, seed=0) if square
         else random_graph(300, LogNormal(8, 1.0), num_src=2_000, seed=0))
    dst_order, src_order = node_order(g, ordering, seed=3)
    assert torch.equal(torch.sort(dst_order).values, torch.arange(g.num_dst))
    assert torch.equal(torch.sort(src_order).values, torch.arange(g.num_src))
    if square:
        assert torch.equal(dst_order, src_order)
    h = relabel(g, dst_order, src_order)
    assert _rows_sorted(h)
    back = torch.sort(dst_order[h.csr_dst.long()] * g.num_src + src_order[h.col.long()]).values
    assert torch.equal(back, _edge_keys(g))


def test_relabel_and_orderings_reject_bad_arguments():
    g = random_graph(4, Regular(2), seed=0)
    with pytest.raises(ValueError, match="dst_order must be a permutation of 0..3"):
        relabel(g, torch.tensor([0, 1, 1, 3]), torch.arange(4))
    with pytest.raises(ValueError, match=r"src_order must be a tensor of shape \(4,\), got \(3,\)"):
        relabel(g, torch.arange(4), torch.arange(3))
    with pytest.raises(ValueError, match="ordering must be one of"):
        reorder(g, "bfs")


def test_orderings_move_locality_and_row_lengths_the_right_way():
    grid = lattice_graph((60, 60), 4)
    natural = describe_structure(grid).block_spread
    scrambled = reorder(grid, "random", seed=0)
    random_spread = describe_structure(scrambled).block_spread
    restored = describe_structure(reorder(scrambled, "rcm")).block_spread
    assert natural < 0.1 and random_spread > 0.9 and restored < 2 * natural
    skewed = reorder(random_graph(2_000, LogNormal(10, 1.5), seed=0), "degree")
    assert bool((skewed.in_degrees()[1:] <= skewed.in_degrees()[:-1]).all())


def test_rcm_orders_each_component_contiguously():
    # Two disjoint paths, interleaved ids: 0-2-4-6 and 1-3-5, plus the isolated node 7.
    edges = torch.tensor([[0, 2, 2, 4, 4, 6, 1, 3, 3, 5], [2, 0, 4, 2, 6, 4, 3, 1, 5, 3]])
    g = Graph.from_edge_index(edges, num_nodes=8)
    order = node_order(g, "rcm")[0].tolist()
    # Cuthill-McKee from each component's lowest-degree node, then reversed.
    assert order == [7, 5, 3, 1, 6, 4, 2, 0]
    h = reorder(g, "rcm")
    assert int((h.csr_dst.long() - h.col.long()).abs().max()) == 1


# ------------------------------------------------------------------ structure statistics


def test_describe_structure_matches_hand_computed_values():
    # Rows: 0: [0, 1], 1: [1], 2 and 3 empty, 4: [4, 7], 5: [0], 6: [6], 7: [6, 7].
    rowptr = torch.tensor([0, 2, 3, 3, 3, 5, 6, 7, 9])
    g = Graph.from_csr(rowptr, torch.tensor([0, 1, 1, 4, 7, 0, 6, 6, 7]), num_src=8)
    s = describe_structure(g, rows_per_block=2, window=1)
    assert (s.num_src, s.num_dst, s.num_edges, s.row_max, s.col_max) == (8, 8, 9, 2, 2)
    assert s.row_mean == pytest.approx(9 / 8)
    assert s.empty_rows == 0.25
    # Row lengths 2 1 0 0 2 1 1 2: mean 9/8, E[x^2] = 15/8.
    assert s.row_cov == pytest.approx(math.sqrt(15 / 8 - 81 / 64) / (9 / 8))
    # Out-degrees 2 2 0 0 1 0 2 2: mean 9/8, E[x^2] = 17/8.
    assert s.col_cov == pytest.approx(math.sqrt(17 / 8 - 81 / 64) / (9 / 8))
    # Blocks {0, 1, 1}, {} , {4, 7, 0}, {6, 6, 7}: standard deviations sqrt(2)/3, -,
    # sqrt(74)/3, sqrt(2)/3 over 8 / sqrt(12); ranges 2/8, -, 8/8, 2/8.
    assert s.block_spread == pytest.approx(math.sqrt(2) / 3 / (8 / math.sqrt(12)))
    assert s.block_range == 0.25
    # |source - row| <= 1 for all edges but 4 <- 7 and 5 <- 0.
    assert s.window_fraction == pytest.approx(7 / 9)
    # Lengths 2 1 0 0 2 1 1 2 in steps of 1, 2 (2 2 0 0 2 2 2 2), 4, ... 32 lanes.
    assert s.lane_padding == (1.0, 12 / 9, 24 / 9, 48 / 9, 96 / 9, 192 / 9)
    # what the schedule rules read, as the graph's own statistics give it
    stats = s.stats()
    assert (stats.num_src, stats.num_dst, stats.num_edges) == (8, 8, 9)
    assert (stats.rows.mean, stats.rows.max, stats.rows.exact) == (s.row_mean, 2, True)
    assert stats.rows.cov == pytest.approx(g.stats.rows.cov) and stats.rows.mean == pytest.approx(g.stats.rows.mean)


def test_describe_structure_scales_the_window_to_bipartite_shapes():
    # num_dst = 2, num_src = 8: rows sit at source positions 1.5 and 5.5.
    g = Graph.from_csr(torch.tensor([0, 2, 3]), torch.tensor([0, 7, 5]), num_src=8)
    s = describe_structure(g, rows_per_block=1, window=2)
    assert s.window_fraction == pytest.approx(2 / 3)
    # Blocks {0, 7} (spread 3.5 / (8 / sqrt 12)) and {5} (0): the lower median is 0.
    assert s.block_spread == 0.0 and s.block_range == pytest.approx(1 / 8)
    empty = describe_structure(Graph.from_csr(torch.zeros(4, dtype=torch.int64), torch.zeros(0, dtype=torch.int64),
                                              num_src=5))
    assert (empty.num_edges, empty.empty_rows, empty.block_spread) == (0, 1.0, 0.0)


def test_describe_structure_is_the_same_over_the_edges_in_passes(monkeypatch):
    """Large graphs are described in passes over the edges (bounded temporaries): passes of
    a few edges, cutting row blocks, give the same statistics to the last bit."""
    from gsparse import _edge_passes

    graphs = [random_graph(3_000, LogNormal(5, 1.0), num_src=700, seed=1),
              community_graph(2_000, LogNormal(12.0, 0.8), 200, 0.7, seed=2)]
    whole = [describe_structure(g, rows_per_block=5, window=40) for g in graphs]
    monkeypatch.setattr(_edge_passes, "PASS_EDGES", 7)
    for g, expected in zip(graphs, whole):
        assert describe_structure(g, rows_per_block=5, window=40) == expected


def test_uniform_sources_have_block_spread_near_one():
    s = describe_structure(random_graph(5_000, Regular(40), seed=0))
    assert abs(s.block_spread - 1) < 0.05 and s.block_range > 0.95


@pytest.mark.gpu
def test_describe_structure_synchronises_once_on_a_gpu():
    g = random_graph(100_000, LogNormal(20, 1.0), seed=0, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            describe_structure(g)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert len([w for w in caught if "synchroniz" in str(w.message)]) <= 1



@pytest.mark.gpu
def test_a_small_gpu_graph_is_described_on_the_host_without_a_kernel():
    # The first use of each PyTorch reduction costs a GPU process tens of ms: a small graph's
    # statistics (the model's inputs at a first call) are computed from one copy instead.
    on_host = random_graph(3_000, LogNormal(4, 1.0), seed=0)
    g = on_host.to("cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        structure, rows = describe_structure(g), g.row_stats
        dst, order = g.csr_dst, g.degree_sorted_rows
        torch.cuda.synchronize()
    kernels = [e.name for e in profile.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower()]
    assert kernels == []
    assert (structure, rows) == (describe_structure(on_host), on_host.row_stats)
    assert dst.is_cuda and order.is_cuda
    assert torch.equal(dst.cpu(), on_host.csr_dst) and torch.equal(order.cpu(), on_host.degree_sorted_rows)


# ------------------------------------------------------------------ the registry and the corpus


def test_registry_draws_stay_in_their_documented_ranges():
    rng = np.random.default_rng(0)
    for name, family in FAMILIES.items():
        for _ in range(40):
            parameters = family.draw(rng, min_edges=2_000, max_edges=300_000)
            assert 2_000 <= parameters["num_edges"] <= 300_000
            assert parameters["ordering"] in ORDERINGS
            assert set(parameters) == {"num_edges", "ordering", *family.space}, name
            for key, space in family.space.items():
                assert parameters[key] in space, (name, key, parameters[key])


def test_ranges_and_choices_sample_inside_themselves():
    rng = np.random.default_rng(1)
    whole = Range(1, 16, log=True, integer=True)
    values = [whole.sample(rng) for _ in range(500)]
    assert all(isinstance(v, int) and v in whole for v in values) and {1, 16} <= set(values)
    assert 2.5 not in whole and 17 not in whole
    choice = Choice(("a", "b"), (0.0, 1.0))
    assert {choice.sample(rng) for _ in range(20)} == {"b"}


def test_corpus_is_deterministic_and_spreads_sizes_log_uniformly():
    def run(families, seed):
        return [(name, p, g) for name, p, g in corpus(families, 6, seed=seed, min_edges=1_000, max_edges=64_000)]

    first = run(["regular", "lattice"], 7)
    again = run(["regular", "lattice"], 7)
    assert [(n, p) for n, p, _ in first] == [(n, p) for n, p, _ in again]
    assert all(_same(a, b) for (_, _, a), (_, _, b) in zip(first, again))
    assert [n for n, _, _ in first[:2]] == ["regular", "lattice"]  # round robin
    alone = run(["lattice"], 7)
    assert [p for n, p, _ in first if n == "lattice"] == [p for _, p, _ in alone]
    assert [p for _, p, _ in run(["regular"], 8)] != [p for n, p, _ in first if n == "regular"]
    # Six strata of [log 1e3, log 64e3]: one target in each.
    targets = sorted(p["num_edges"] for n, p, _ in first if n == "regular")
    edges = np.exp(np.linspace(math.log(1_000), math.log(64_000), 7))
    assert all(lo - 1 <= t <= hi + 1 for t, lo, hi in zip(targets, edges[:-1], edges[1:]))
    for name, parameters, graph in first:
        rebuilt = FAMILIES[name].build(parameters, seed=parameters["seed"], max_edges=64_000)
        assert _same(graph, rebuilt)


def test_the_corpus_yields_the_families_added_after_the_first_thirteen():
    new = ["knn", "molecules", "small_world", "citation", "cliques"]
    drawn = [(name, g) for name, _, g in corpus(new, 1, seed=0, min_edges=1_000, max_edges=3_000)]
    assert [name for name, _ in drawn] == new and all(g.num_edges >= 500 for _, g in drawn)


def test_corpus_and_build_arguments_are_checked():
    with pytest.raises(ValueError, match="families must be a non-empty selection"):
        next(corpus(["no_such_family"]))
    with pytest.raises(ValueError, match="max_edges must be >= 5000, got 10"):
        next(corpus(["regular"], min_edges=5_000, max_edges=10))
    with pytest.raises(ValueError, match=r"parameters of family 'rmat' lack \['ordering', 'edge_factor'"):
        FAMILIES["rmat"].build({"num_edges": 1_000})


def test_citation_and_clique_corpus_draws_reach_their_size_even_when_tiny():
    """A citation graph of n papers holds at most n (n - 1) / 2 edges: tiny targets with a
    high mean degree still get enough papers. (A cliques graph's least group makes 2.)"""
    for name in ("citation", "cliques"):
        for target in (1, 5, 30, 1_000):
            parameters = FAMILIES[name].draw(np.random.default_rng(target), num_edges=target)
            parameters["mean_degree" if name == "citation" else "mean_size"] = 60.0
            g = FAMILIES[name].build(parameters, seed=1)
            assert g.num_edges <= max(2, 1.05 * target), (name, target, g)
            assert g.num_edges >= 0.7 * target or target < 30, (name, target, g)
