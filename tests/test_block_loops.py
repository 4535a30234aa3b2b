"""A sampled block's self-loop graph and GCN's weights in fixed kernels (``gsparse._block_loops``):
the programs, what the host hands the kernels, and the kernels against the PyTorch path and the
generic normalisation (g-SpMM and g-SDDMM on the loop graph)."""

from __future__ import annotations

import pytest
import torch

import gsparse._block_loops as block_loops
import gsparse._graph_build as graph_build
from gsparse import Graph, nn as gnn
from gsparse.nn import gcn_conv
from gsparse.nn._graph import _loop_graph_in_torch, self_loops
from gsparse.runtime import compile_cuda

from cuda_path import cuda_path_on_cpu
from kernels.support import needs_nvrtc

gpu = pytest.mark.gpu


def _block(seed: int, n: int = 300, e: int = 2000, device: str = "cpu", dst_sorted: bool = True) -> Graph:
    """A square block with self loops (two at one node), rows of no edge and a hub row."""
    gen = torch.Generator().manual_seed(seed)
    ei = torch.stack([torch.randint(0, n, (e,), generator=gen),
                      torch.randint(0, n // 2, (e,), generator=gen)])
    ei[1, : e // 10] = 7  # a hub row
    ei[0, e // 10: e // 10 + 12] = ei[1, e // 10: e // 10 + 12]  # self loops
    ei[:, e // 10 + 12] = ei[:, e // 10]
    if dst_sorted:
        ei = ei[:, torch.argsort(ei[1], stable=True)]
    return Graph.from_block(ei.to(device), num_src=n, num_dst=n, dst_sorted=dst_sorted)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_kernel_compiles_without_spills(arch):
    names = set()
    for index in block_loops.PROGRAMS:
        binary = compile_cuda(block_loops.source(index), arch=arch, cache=None)
        assert all(r.spill_stores == 0 and r.spill_loads == 0 for r in binary.resources.values())
        names |= set(binary.resources)
    # the loop graph for each pair of index types a block and its loop graph can have (the
    # loop graph's are at least as wide), the degrees and the weights per index type and dtype
    assert names == {"block_loops_i32_i32", "block_loops_i32_i64", "block_loops_i64_i64"} | {
        f"loop_{kind}_{index}_{dtype}" for kind in ("degrees", "weights") for index in ("i32", "i64")
        for dtype in ("f32", "f64")}


@pytest.mark.parametrize("dst_sorted", [True, False])
def test_the_host_hands_the_loop_kernel_the_blocks_rows(dst_sorted):
    """On the CUDA host path (launches computed by a model of the kernels, tests/cuda_path.py):
    one launch builds the loop graph the PyTorch path builds."""
    block = _block(1, dst_sorted=dst_sorted)
    want_graph, want_edges, want_masked = _loop_graph_in_torch(block)
    with cuda_path_on_cpu() as loader:
        loops = self_loops(block)
    assert loader.order == ["block_loops_i32_i32"]
    assert torch.equal(loops.graph.rowptr, want_graph.rowptr) and torch.equal(loops.edges, want_edges)
    assert torch.equal(loops.masked, want_masked) and torch.equal(loops.graph.csr_dst, want_edges[1])
    assert loops.graph.sync_free and loops.graph.eid is None


def test_an_int64_block_keeps_int64_indices_in_its_loop_graph():
    """The programs have no loop graph narrower than its block: a block made int64 (few
    edges, so the counts alone would take int32) gets an int64 loop graph on both paths."""
    block = _block(1).with_index_dtype(torch.int64)
    assert block.sync_free and block.index_dtype == torch.int64
    want_graph, want_edges, _ = _loop_graph_in_torch(block)
    with cuda_path_on_cpu() as loader:
        loops = self_loops(block)
    assert loader.order == ["block_loops_i64_i64"]
    assert loops.graph.index_dtype == want_graph.index_dtype == torch.int64
    assert torch.equal(loops.edges, want_edges)


@pytest.mark.parametrize("dtype", block_loops.WEIGHT_DTYPES)
@pytest.mark.parametrize("improved", [False, True])
def test_the_host_hands_the_weight_kernels_what_gives_the_pytorch_paths_weights(improved, dtype):
    block = _block(2)
    _, want = gcn_conv._block_weights(block, improved, dtype)  # the PyTorch path, on the CPU
    with cuda_path_on_cpu() as loader:
        graph, got = gcn_conv._block_weights(_block(2), improved, dtype)
    suffix = {torch.float32: "f32", torch.float64: "f64"}[dtype]
    assert loader.order == ["block_loops_i32_i32", f"loop_degrees_i32_{suffix}", f"loop_weights_i32_{suffix}"]
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert got.shape == (graph.num_edges,) and got.dtype == dtype


def test_a_block_without_nodes_launches_nothing():
    block = Graph.from_block(torch.empty(2, 0, dtype=torch.int64), num_src=0, num_dst=0)
    with cuda_path_on_cpu() as loader:
        graph, w = gcn_conv._block_weights(block, False, torch.float32)
    assert loader.order == [] and graph.rowptr.tolist() == [0] and w.numel() == 0


# ---------------------------------------------------------------------- on the GPU


@gpu
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dst_sorted", [True, False])
def test_the_loop_kernel_builds_the_pytorch_paths_loop_graph(dst_sorted, index_dtype, monkeypatch):
    if index_dtype == torch.int64:  # a small graph of int64 indices
        monkeypatch.setattr(graph_build, "_INT32_MAX", 100)
    block = _block(3, device="cuda", dst_sorted=dst_sorted)
    assert block.index_dtype == index_dtype
    graph, edges, masked = block_loops.loop_graph(block)
    want_graph, want_edges, want_masked = _loop_graph_in_torch(block)
    assert graph.index_dtype == want_graph.index_dtype == index_dtype
    assert torch.equal(graph.rowptr, want_graph.rowptr) and torch.equal(edges, want_edges)
    src, dst = block.edges()
    assert torch.equal(masked, want_masked) and int(masked.sum()) == int((src == dst).sum()) >= 13


@gpu
@pytest.mark.parametrize("dtype", block_loops.WEIGHT_DTYPES)
@pytest.mark.parametrize("improved", [False, True])
def test_the_weight_kernels_give_the_generic_normalisation(improved, dtype):
    """Against g-SpMM and g-SDDMM on the same loop graph (``gcn_conv._normalize``), in the
    same order of products: equal up to the inverse square root's last bits."""
    block = _block(4, device="cuda")
    graph, w = gcn_conv._normalize(block, None, improved, True, dtype)
    loops = self_loops(block)
    got = block_loops.gcn_weights(loops.graph, loops.edges, loops.masked, improved, dtype)
    tolerance = 1e-15 if dtype == torch.float64 else 1e-6
    torch.testing.assert_close(got, w, rtol=tolerance, atol=0)


@gpu
@pytest.mark.parametrize("name", ["gcn", "gcn-improved", "gat"])
def test_layers_on_a_gpu_block_match_the_validated_graph(name):
    make = {"gcn": lambda: gnn.GCNConv(8, 4), "gcn-improved": lambda: gnn.GCNConv(8, 4, improved=True),
            "gat": lambda: gnn.GATConv(8, 3, heads=2)}[name]
    torch.manual_seed(0)
    layer = make().cuda()
    block = _block(5, device="cuda", dst_sorted=False)
    src, dst = block.edges()
    validated = Graph.from_edge_index(torch.stack([src, dst]), num_nodes=block.num_dst)
    x = torch.randn(block.num_dst, 8, device="cuda")
    torch.testing.assert_close(layer(x, block), layer(x, validated), rtol=1e-5, atol=1e-5)
