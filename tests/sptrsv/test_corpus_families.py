"""The corpus families of ``gsparse.datasets.triangular`` (geometric, community, arrow,
tree): the structure each promises, with its parameters given and as ``generate`` draws
them. The checks every family shares (canonical triangle, values, determinism, upper =
transpose) are in test_matrices.py."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.analysis import dependency_graph, levels


def _off(matrix: sp.csr_array) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the strictly lower entries."""
    coo = matrix.tocoo()
    keep = coo.row != coo.col
    return coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64)


def _levels(matrix: sp.csr_array) -> int:
    graph = dependency_graph(matrix.indptr, matrix.indices, True)
    return int(levels(graph.ptr, graph.deps).max()) + 1


def _degrees(matrix: sp.csr_array) -> np.ndarray:
    rows, cols = _off(matrix)
    return np.bincount(rows, minlength=matrix.shape[0]) + np.bincount(cols, minlength=matrix.shape[0])


def test_corpus_families_are_listed_after_the_benchmark_ones():
    assert triangular.FAMILIES == triangular.BENCHMARK_FAMILIES + triangular.CORPUS_FAMILIES
    assert len(triangular.BENCHMARK_FAMILIES) == 8 and len(set(triangular.FAMILIES)) == 12
    assert triangular.CORPUS_FAMILIES == ("geometric", "community", "arrow", "tree")


@pytest.mark.parametrize("family", triangular.CORPUS_FAMILIES)
def test_generate_builds_what_parameters_names(family):
    drawn = triangular.parameters(family, 2000, 5)
    build = getattr(triangular, family)
    want = build(**drawn, upper=True)
    got = triangular.generate(family, 2000, 5, upper=True)
    assert got.shape == (2000, 2000) and (got != want).nnz == 0


@pytest.mark.parametrize("family", triangular.CORPUS_FAMILIES)
def test_drawn_parameters_cover_their_ranges(family):
    draws = [triangular.parameters(family, 50_000, seed) for seed in range(60)]
    if family == "geometric":
        assert {d["k"] for d in draws} == set(range(4, 13)) and {d["dims"] for d in draws} == {2, 3}
        assert {d["ordering"] for d in draws} == set(triangular.GEOMETRIC_ORDERINGS)
    elif family == "community":
        assert all(d["sizes"].sum() == 50_000 and d["sizes"].min() >= 1 and d["sizes"].max() <= 25_000
                   and len(d["sizes"]) >= 2 for d in draws)
        medians = [np.median(d["sizes"]) for d in draws]
        assert min(medians) < 30 and max(medians) > 2000
        assert 3 <= min(d["mean_degree"] for d in draws) < 5 and 18 < max(d["mean_degree"] for d in draws) <= 20
        assert 0.5 <= min(d["intra"] for d in draws) < 0.55 and 0.9 < max(d["intra"] for d in draws) <= 0.95
        assert {d["ordered"] for d in draws} == {True, False}
    elif family == "arrow":
        borders = [d["border"] for d in draws]
        assert min(borders) < 6 and max(borders) > 150 and max(borders) <= 300
        assert {d["body"] for d in draws} == set(triangular.ARROW_BODIES)
        assert {d["scattered"] for d in draws} == {True, False}
    else:
        windows = [d["window"] for d in draws]
        assert min(windows) <= 3 and max(windows) > 3000 and max(windows) <= 10_000
        assert {d["max_parents"] for d in draws} == {1, 2, 3}
        forests = [d["forests"] for d in draws]
        assert 1 in forests and max(forests) > 20 and max(forests) <= 64
    again = triangular.parameters(family, 50_000, 3)
    assert again.keys() == draws[3].keys() and all(np.array_equal(again[key], draws[3][key]) for key in again)


# ---------------------------------------------------------------- geometric


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("k", [4, 9])
def test_geometric_in_draw_order_joins_each_point_to_its_k_nearest(dims, k):
    n = 1500
    factor = triangular.geometric(n, k, dims, ordering="random", seed=4)
    points = np.random.default_rng(4).random((n, dims))  # the generator's first draw
    _, near = cKDTree(points).query(points, k + 1)
    pattern = sp.coo_array((np.ones(n * (k + 1)), (np.repeat(np.arange(n), k + 1), near.ravel())), shape=(n, n))
    pattern = ((pattern + pattern.T) != 0).toarray()
    np.testing.assert_array_equal(factor.toarray() != 0, np.tril(pattern))
    degree = _degrees(factor)
    assert degree.min() >= k and k < degree.mean() < 2 * k


@pytest.mark.parametrize("dims", [2, 3])
def test_geometric_orderings_renumber_one_graph_and_spatial_ones_keep_neighbours_near(dims):
    n, k = 20_000, 6
    factors = {o: triangular.geometric(n, k, dims, ordering=o, seed=2) for o in triangular.GEOMETRIC_ORDERINGS}
    nnz = {f.nnz for f in factors.values()}
    degrees = {tuple(np.sort(_degrees(f))) for f in factors.values()}
    assert len(nnz) == 1 and len(degrees) == 1  # one graph, three numberings
    spread = {o: np.mean(np.subtract(*_off(f))) for o, f in factors.items()}
    depth = {o: _levels(f) for o, f in factors.items()}
    assert spread["random"] > n / 4 and spread["morton"] < n / 20 and spread["cells"] < n / 20
    assert depth["random"] < 40 and depth["morton"] > 5 * depth["random"] and depth["cells"] > 5 * depth["random"]


def test_generated_geometric_rows_have_about_k_entries():
    for seed in range(6):
        k = triangular.parameters("geometric", 3000, seed)["k"]
        degree = _degrees(triangular.generate("geometric", 3000, seed))
        assert degree.min() >= k and 0.5 * k < np.mean(np.diff(triangular.generate("geometric", 3000, seed).indptr) - 1) < k


# ---------------------------------------------------------------- community


@pytest.mark.parametrize("intra", [0.5, 0.8, 0.95])
def test_community_keeps_the_drawn_share_of_entries_inside_communities(intra):
    sizes = np.random.default_rng(1).integers(200, 800, 40)
    member = np.repeat(np.arange(len(sizes)), sizes)
    factor = triangular.community(sizes, 6.0, intra, ordered=True, seed=3)
    rows, cols = _off(factor)
    assert abs(np.mean(member[rows] == member[cols]) - intra) < 0.02
    assert abs(len(rows) / sizes.sum() - 3.0) < 0.1  # n * mean_degree / 2 edges, few duplicates


def test_community_order_is_by_block_or_random():
    sizes = np.full(100, 200)
    ordered = triangular.community(sizes, 8.0, 0.9, ordered=True, seed=1)
    shuffled = triangular.community(sizes, 8.0, 0.9, ordered=False, seed=1)
    assert ordered.nnz == shuffled.nnz
    assert np.mean(np.subtract(*_off(ordered))) < 0.15 * np.mean(np.subtract(*_off(shuffled)))
    assert _levels(ordered) > 4 * _levels(shuffled)


def test_generated_communities_hold_the_drawn_intra_share():
    checked = 0
    for seed in range(30):
        drawn = triangular.parameters("community", 20_000, seed)
        if not drawn["ordered"]:
            continue  # renumbered: the communities are not blocks of rows
        member = np.repeat(np.arange(len(drawn["sizes"])), drawn["sizes"])
        rows, cols = _off(triangular.generate("community", 20_000, seed))
        share = np.mean(member[rows] == member[cols])
        # Duplicates merge in small communities (a few nodes, many draws), lowering the share.
        assert drawn["intra"] - (0.12 if np.median(drawn["sizes"]) < 50 else 0.03) < share < drawn["intra"] + 0.02
        checked += 1
    assert checked >= 10


# ---------------------------------------------------------------- arrow


@pytest.mark.parametrize("scattered", [False, True])
@pytest.mark.parametrize("body", triangular.ARROW_BODIES)
def test_arrow_has_exactly_the_border_rows_long(body, scattered):
    n, border = 20_000, 25
    factor = triangular.arrow(n, border, 0.5, body=body, body_degree=2.0, bandwidth=8, skew=3.0,
                              scattered=scattered, seed=6)
    length = np.diff(factor.indptr) - 1
    long_rows = np.flatnonzero(length > 100)
    if scattered:
        assert 20 <= len(long_rows) <= border and long_rows.min() < n - border
    else:
        np.testing.assert_array_equal(long_rows, np.arange(n - border, n))
        # min(fill * i, 2 n / border) draws: 1,600, about 1,540 distinct
        assert (length[long_rows] > 1400).all() and length[long_rows].sum() <= 2 * n
    body_rows = np.setdiff1d(np.arange(n), long_rows)
    assert length[body_rows].max() < 20 and 1.6 < length[body_rows].mean() <= 2.05  # Poisson(2), duplicates merged
    rows, cols = _off(factor)
    in_body = np.isin(rows, body_rows)
    if body == "band":
        assert (rows[in_body] - cols[in_body]).max() <= 8
    else:  # early columns read by many rows
        reads = np.bincount(cols[in_body], minlength=n)
        assert reads[: n // 100].sum() > 0.15 * in_body.sum()


def test_an_arrow_border_reads_a_large_share_of_the_rows_before_it():
    factor = triangular.arrow(5000, 4, 0.6, scattered=False, border_entries=10**6, seed=2)
    length = np.diff(factor.indptr) - 1
    share = length[-4:] / np.arange(4996, 5000)
    assert (share > 0.42).all() and (share < 0.48).all()  # 1 - exp(-0.6) of the rows, duplicates merged
    capped = np.diff(triangular.arrow(5000, 4, 0.6, scattered=False, seed=2).indptr)[-4:] - 1
    assert (capped < 2500).all() and (capped > 1800).all()  # 2 n / border draws each


def test_generated_arrows_have_the_drawn_border():
    for seed in range(8):
        drawn = triangular.parameters("arrow", 20_000, seed)
        length = np.diff(triangular.generate("arrow", 20_000, seed).indptr) - 1
        long_rows = np.flatnonzero(length > 60)
        assert 0.8 * drawn["border"] <= len(long_rows) <= drawn["border"], (seed, drawn["border"], len(long_rows))
        if not drawn["scattered"]:
            assert long_rows.min() >= 20_000 - drawn["border"]


# ---------------------------------------------------------------- tree


@pytest.mark.parametrize("max_parents", [1, 3])
def test_tree_rows_depend_on_up_to_max_parents_rows_within_the_window(max_parents):
    n, window = 10_000, 50
    factor = triangular.tree(n, window, max_parents, seed=8)
    length = np.diff(factor.indptr) - 1
    assert length[0] == 0 and length[1:].min() >= 1 and length.max() <= max_parents
    rows, cols = _off(factor)
    assert (rows - cols).max() <= window and (rows - cols).max() > 0.9 * window
    if max_parents == 1:  # one tree: every row reaches row 0
        assert connected_components(factor, directed=False)[0] == 1
    else:
        assert length.mean() > 1.5


def test_tree_levels_shrink_as_the_window_grows():
    depth = [_levels(triangular.tree(20_000, window, 1, seed=1)) for window in (1, 4, 64, 1024)]
    assert depth[0] == 20_000 and depth[0] > 2 * depth[1] > 0 and depth[1] > 5 * depth[2] > 0
    assert depth[2] > 5 * depth[3] and depth[3] < 150


@pytest.mark.parametrize("forests", [2, 7])
def test_interleaved_forests_stay_apart(forests):
    factor = triangular.tree(5000, 1, 1, forests=forests, seed=3)
    count, label = connected_components(factor, directed=False)
    assert count == forests
    assert len(np.unique(label[:200])) == forests  # interleaved, not one after another
    assert _levels(factor) < 5000 / forests * 1.5


def test_generated_trees_stay_within_the_drawn_window():
    for seed in range(10):
        drawn = triangular.parameters("tree", 5000, seed)
        rows, cols = _off(triangular.generate("tree", 5000, seed))
        count = connected_components(triangular.generate("tree", 5000, seed), directed=False)[0]
        assert count <= drawn["forests"]
        if drawn["forests"] == 1:
            assert (rows - cols).max() <= drawn["window"]


@pytest.mark.parametrize("call,exc,match", [
    (lambda: triangular.geometric(10, 10), ValueError, r"k must be < n, got k = 10 for n = 10"),
    (lambda: triangular.geometric(10, 3, 4), ValueError, r"dims must be 2 or 3, got 4"),
    (lambda: triangular.geometric(10, 3, ordering="hilbert"), ValueError, r"ordering must be one of"),
    (lambda: triangular.community([5], 2.0, 0.5), ValueError, r"sizes must be at least two positive integers"),
    (lambda: triangular.community([5, 0], 2.0, 0.5), ValueError, r"sizes must be at least two positive integers"),
    (lambda: triangular.community([5, 5], 2.0, 1.5), ValueError, r"intra must lie in \[0.0, 1.0\], got 1.5"),
    (lambda: triangular.arrow(10, 10, 0.5), ValueError, r"border must be < n, got 10 for n = 10"),
    (lambda: triangular.arrow(10, 2, 0.5, body="dense"), ValueError, r"body must be one of \('band', 'skewed'\)"),
    (lambda: triangular.arrow(10, 2, 0.5, skew=0.5), ValueError, r"skew must lie in \[1.0, 100.0\], got 0.5"),
    (lambda: triangular.tree(10, 0), ValueError, r"window must be >= 1, got 0"),
    (lambda: triangular.tree(10, 2, forests=2.0), TypeError, r"forests must be an int, got float"),
    (lambda: triangular.parameters("road", 100, 0), ValueError, r"family must be one of \('geometric'"),
])
def test_corpus_generator_errors_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
