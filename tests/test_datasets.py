"""Workload graphs: generator statistics, seeds, presets, and the loaders of every format."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
import torch

from gsparse import datasets
from gsparse.datasets import Clustered, LogNormal, PowerLaw, synthetic


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


# ------------------------------------------------------------------ synthetic graphs


@pytest.mark.parametrize("mean, cov", [(4.0, 0.5), (20.0, 1.0), (50.0, 1.88), (200.0, 1.63)])
@pytest.mark.parametrize("locality", [None, Clustered(0.8, 128)])
def test_lognormal_mean_and_cov_match_the_request(mean, cov, locality):
    g = synthetic(10_000, LogNormal(mean, cov), locality=locality, seed=3)
    stats = g.row_stats
    assert _rel(stats.mean, mean) < 0.05
    assert _rel(stats.cov, cov) < 0.05
    assert g.num_edges == round(10_000 * mean)
    assert g.num_src == g.num_dst == 10_000


@pytest.mark.parametrize("exponent", [2.5, 3.0])
def test_power_law_mean_and_tail_exponent_match_the_request(exponent):
    g = synthetic(200_000, PowerLaw(8.0, exponent), seed=1)
    deg = g.in_degrees().double()
    assert _rel(float(deg.mean()), 8.0) < 0.05
    # P(X > x) ~ x^-(exponent - 1): the survival falls by 4^(exponent - 1) from x to 4x.
    x = 4 * 8.0 * (exponent - 2) / (exponent - 1)
    slope = math.log(float((deg > 4 * x).double().mean()) / float((deg > x).double().mean())) / math.log(4)
    assert _rel(-slope, exponent - 1) < 0.05


@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.9])
def test_clustered_columns_put_the_requested_fraction_in_the_row_block(fraction):
    block = 256
    g = synthetic(20_000, LogNormal(30, 1.2), locality=Clustered(fraction, block), seed=0)
    row, col = g.csr_dst.long(), g.col.long()
    inside = float(((row // block) == (col // block)).double().mean())
    # The rest is drawn outside the block, so the fraction holds up to per-row rounding.
    assert abs(inside - fraction) < 0.01


def test_seeds_are_reproducible_and_distinct():
    a = synthetic(5_000, LogNormal(20, 1.5), seed=7)
    b = synthetic(5_000, LogNormal(20, 1.5), seed=7)
    c = synthetic(5_000, LogNormal(20, 1.5), seed=8)
    assert torch.equal(a.rowptr, b.rowptr) and torch.equal(a.col, b.col)
    assert not torch.equal(a.col, c.col)


def test_rows_are_sorted_or_shuffled_and_duplicates_can_be_excluded():
    g = synthetic(3_000, LogNormal(40, 1.0), seed=0, allow_duplicates=False)
    row, col = g.csr_dst.long(), g.col.long()
    key = row * g.num_src + col
    assert bool((key[1:] > key[:-1]).all())  # sorted within rows and no repeated neighbour
    shuffled = synthetic(3_000, LogNormal(40, 1.0), seed=0, allow_duplicates=False, sort_rows=False)
    assert torch.equal(shuffled.rowptr, g.rowptr)
    assert not torch.equal(shuffled.col, g.col)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: LogNormal(-1, 1), ValueError, "LogNormal.mean must be positive, got -1"),
        (lambda: LogNormal(5, -0.1), ValueError, "LogNormal.cov must be >= 0"),
        (lambda: LogNormal("5", 1), TypeError, "LogNormal.mean must be a real number, got str"),
        (lambda: PowerLaw(5, 1.5), ValueError, "PowerLaw.exponent must be > 2"),
        (lambda: Clustered(1.5, 10), ValueError, r"Clustered.fraction must lie in \[0, 1\], got 1.5"),
        (lambda: Clustered(0.5, 0), ValueError, "Clustered.block_size must be >= 1, got 0"),
        (lambda: synthetic(0, LogNormal(1, 1)), ValueError, "num_nodes must be >= 1, got 0"),
        (lambda: synthetic(10, LogNormal(20, 1)), ValueError, "degree.mean = 20 exceeds num_nodes = 10"),
        (lambda: synthetic(10, (2, 1)), TypeError, "degree must be a LogNormal or a PowerLaw, got tuple"),
        (lambda: synthetic(100, LogNormal(50, 5.0)), ValueError, "out of reach on num_nodes = 100"),
        (lambda: synthetic(100, LogNormal(2, 1), seed=-1), ValueError, "seed must be >= 0, got -1"),
    ],
)
def test_bad_generator_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ------------------------------------------------------------------ presets


def test_presets_cover_the_papers_and_the_report():
    assert datasets.SUITES["gsparse"] == ("reddit-like", "proteins-like", "products-like")
    assert len(datasets.SUITES["spmm-report"]) == 13
    reddit = datasets.PRESETS["reddit-like"]
    assert (reddit.num_nodes, round(reddit.mean), reddit.cov) == (232_965, 492, 1.63)
    assert (datasets.PRESETS["proteins-like"].num_nodes, round(datasets.PRESETS["proteins-like"].mean)) \
        == (132_534, 597)
    assert (datasets.PRESETS["products-like"].num_nodes, round(datasets.PRESETS["products-like"].mean)) \
        == (2_449_029, 51)


@pytest.mark.parametrize("name", sorted(datasets.PRESETS))
def test_scaled_presets_keep_mean_and_cov(name):
    p = datasets.PRESETS[name]
    g = datasets.preset(name, scale=datasets.scale_for_edges(name, 150_000))
    assert _rel(g.row_stats.mean, p.mean) < 0.05
    assert _rel(g.row_stats.cov, p.cov) < 0.05


def test_preset_arguments_are_checked():
    with pytest.raises(ValueError, match="name must be one of"):
        datasets.preset("reddit")
    with pytest.raises(ValueError, match="scale must be positive, got 0"):
        datasets.preset("reddit-like", scale=0)
    with pytest.raises(ValueError, match="fewer than its mean row length"):
        datasets.preset("reddit-like", scale=1e-4)


# ------------------------------------------------------------------ real graphs


@pytest.fixture
def shared_data():
    """The folder of the real graphs shipped with gsparse."""
    return Path(datasets.cora.__code__.co_filename).parent / "data"


@pytest.mark.parametrize(
    "name, nodes, edges, features, classes, split",
    [
        ("cora", 2708, 10858, (2708, 1433), 7, (140, 500, 1000)),
        ("citeseer", 3327, 9464, (3327, 3703), 6, (120, 500, 1000)),
        ("pubmed_cites", 19717, 44338, None, None, None),
    ],
)
def test_real_graphs_ship_with_the_package(shared_data, name, nodes, edges, features, classes, split,
                                           tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./.data, no $GSPARSE_DATA_DIR: the shipped copy
    monkeypatch.delenv(datasets.DATA_DIR_ENV, raising=False)
    loader = {"cora": datasets.cora, "citeseer": datasets.citeseer, "pubmed_cites": datasets.pubmed}[name]
    for d in (datasets.real_graph(name), loader()):
        assert d.name == name and d.num_nodes == nodes
        assert (d.graph.num_src, d.graph.num_dst, d.graph.num_edges) == (nodes, nodes, edges)
        assert (None if d.features is None else tuple(d.features.shape)) == features
        assert d.num_features == (None if features is None else features[1])
        assert d.num_classes == classes
        if split is None:
            assert d.train_idx is None and d.labels is None
        else:
            assert (d.train_idx.numel(), d.val_idx.numel(), d.test_idx.numel()) == split
        # Edge ids follow the file's order: edge i is column i of edge_index.
        raw = np.load(shared_data / f"{name}.npz")["edge_index"]
        assert d.edge_index.dtype == torch.int64 and np.array_equal(d.edge_index.numpy(), raw)


@pytest.mark.parametrize("loader, repeated, loops, coalesced", [
    (datasets.cora, 302, 0, 10556),  # PyG's Planetoid Cora: 10,556 edges
    (datasets.citeseer, 236, 248, 9228),
    (datasets.pubmed, 0, 3, 44338),
])
def test_shipped_graphs_keep_the_published_multi_edges_and_coalesce_merges_them(loader, repeated, loops,
                                                                                  coalesced):
    g = loader().graph
    src, dst = g.edges()
    assert g.num_edges - torch.unique(src * g.num_src + dst).numel() == repeated
    assert int((src == dst).sum()) == loops
    assert g.coalesce().num_edges == coalesced


def test_data_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(tmp_path))
    assert datasets.data_dirs() == [tmp_path]
    assert datasets.real_graph("cora").graph.num_edges == 10858  # the shipped copy
    with pytest.raises(FileNotFoundError, match=f"cora.npz is in none of \\['{tmp_path}'\\]"):
        datasets.real_graph("cora", data_dir=tmp_path)
    np.savez(tmp_path / "cora.npz", edge_index=np.array([[0, 1], [1, 2]], dtype=np.int32))
    assert datasets.real_graph("cora").graph.num_edges == 2  # the folder's copy comes first
    with pytest.raises(ValueError, match="name must be one of"):
        datasets.real_graph("reddit")


# ------------------------------------------------------------------ user files

_EDGES = np.array([[0, 1, 2, 2, 4], [1, 2, 0, 3, 0]])


def _check_edges(g, edges=_EDGES):
    src, dst = g.edges()
    assert sorted(zip(src.tolist(), dst.tolist())) == sorted(zip(*edges.tolist()))


def test_edge_lists_load(tmp_path):
    txt = tmp_path / "g.txt"
    txt.write_text("# source destination\n" + "\n".join(f"{s} {d} 0.5" for s, d in _EDGES.T) + "\n")
    _check_edges(datasets.load_graph(txt))
    csv = tmp_path / "g.csv"
    csv.write_text("% comment\n" + "\n".join(f"{s},{d}" for s, d in _EDGES.T) + "\n")
    _check_edges(datasets.load_graph(csv))


def test_matrix_market_and_scipy_npz_load_with_rows_as_sources(tmp_path):
    matrix = sp.coo_matrix((np.ones(5), (_EDGES[0], _EDGES[1])), shape=(5, 5))
    scipy.io.mmwrite(tmp_path / "g.mtx", matrix)
    _check_edges(datasets.load_graph(tmp_path / "g.mtx"))
    sp.save_npz(tmp_path / "m.npz", matrix.tocsr())
    _check_edges(datasets.load_graph(tmp_path / "m.npz"))
    np.savez(tmp_path / "e.npz", edge_index=_EDGES.astype(np.int32), num_nodes=np.int64(7))
    g = datasets.load_graph(tmp_path / "e.npz")
    _check_edges(g)
    assert g.num_src == 7


@pytest.mark.parametrize(
    "name, content, match",
    [
        ("bad.txt", "0 1\n1 x\n", "is not an edge list of integer pairs"),
        ("empty.txt", "# nothing\n", "holds no edges"),
        ("neg.txt", "0 1\n-3 1\n", "node ids must be non-negative, found -3"),
        ("bad.npz", "not a zip", "is not a readable .npz file"),
        ("bad.mtx", "%%MatrixMarket nonsense\n", "is not a readable Matrix Market file"),
        ("g.graphml", "<graph/>", "unknown graph file extension '.graphml'"),
    ],
)
def test_bad_files_get_clear_errors(tmp_path, name, content, match):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=match):
        datasets.load_graph(path)


def test_bad_npz_layouts_get_clear_errors(tmp_path):
    np.savez(tmp_path / "other.npz", weights=np.ones(3))
    with pytest.raises(ValueError, match=r"holds neither an 'edge_index' nor a SciPy sparse matrix"):
        datasets.load_graph(tmp_path / "other.npz")
    np.savez(tmp_path / "shape.npz", edge_index=np.zeros((3, 4), dtype=np.int64))
    with pytest.raises(ValueError, match=r"'edge_index' must have shape \[2, E\], got \(3, 4\)"):
        datasets.load_graph(tmp_path / "shape.npz")
    np.savez(tmp_path / "float.npz", edge_index=np.zeros((2, 4)))
    with pytest.raises(ValueError, match="'edge_index' must hold integers, got dtype float64"):
        datasets.load_graph(tmp_path / "float.npz")
    np.savez(tmp_path / "range.npz", edge_index=np.array([[0, 5], [1, 1]]), num_nodes=np.int64(3))
    with pytest.raises(ValueError, match="holds node ids >= num_nodes = 3"):
        datasets.load_graph(tmp_path / "range.npz")
    np.savez(tmp_path / "labels.npz", edge_index=np.array([[0, 1], [1, 0]]), y=np.zeros(5, dtype=np.int64))
    with pytest.raises(ValueError, match="'y' has 5 labels but the graph has 2 nodes"):
        datasets.load_npz(tmp_path / "labels.npz")
    scipy.io.mmwrite(tmp_path / "dense.mtx", np.eye(3))
    with pytest.raises(ValueError, match="holds a dense Matrix Market array"):
        datasets.load_graph(tmp_path / "dense.mtx")
    with pytest.raises(FileNotFoundError, match="no such graph file"):
        datasets.load_graph(tmp_path / "missing.txt")


def test_workload_resolves_presets_real_graphs_and_files(tmp_path, shared_data):
    w = datasets.workload("products-like", max_edges=50_000)
    assert w.name == "products-like" and w.graph.num_edges < 120_000 and "scale" in w.source
    assert datasets.workload("cora").graph.num_edges == 10858
    path = tmp_path / "mine.txt"
    path.write_text("0 1\n1 2\n")
    w = datasets.workload(str(path))
    assert (w.name, w.graph.num_edges) == ("mine", 2)
    with pytest.raises(ValueError, match="is neither a preset"):
        datasets.workload("reddit")
