"""The backward of a g-SpMM on a sampled block through its own edges (``gsparse._block_scatter``):
which calls take it, what the host hands the kernel, and the kernel itself against the
float64 reference, the g-SpMM sum on the reverse graph."""

from __future__ import annotations

import contextlib

import pytest
import torch

import gsparse
import gsparse._block_scatter as block_scatter
import gsparse._graph_build as graph_build
from gsparse import Graph, nn as gnn
from gsparse.runtime import compile_cuda
from gsparse.target import H100

from cuda_path import cuda_path_on_cpu
from kernels.support import needs_nvrtc

gpu = pytest.mark.gpu

# (op, feature shape of lhs, of rhs, of the output): plain rows, one feature, a width that is
# not a multiple of the lanes, heads against per-head edge weights (GAT's attention) and
# per-head edge gradients.
CASES = [
    ("copy_lhs", (8,), None, (8,)),
    ("copy_lhs", (1,), None, (1,)),
    ("copy_lhs", (37,), None, (37,)),
    ("copy_rhs", None, (3,), (3,)),
    ("mul", (6,), (1,), (6,)),
    ("mul", (2, 5), (2, 1), (2, 5)),
    ("mul", (4,), (4,), (4,)),
    ("div", (2, 3), (2, 1), (2, 3)),
    ("copy_rhs", None, (4, 1), (4, 1)),
]


def _block(seed: int, num_src: int = 40, num_dst: int = 15, edges: int = 120, device: str = "cpu",
           dst_sorted: bool = True) -> Graph:
    gen = torch.Generator().manual_seed(seed)
    ei = torch.stack([torch.randint(0, num_src, (edges,), generator=gen),
                      torch.randint(0, num_dst, (edges,), generator=gen)])
    if dst_sorted:
        ei = ei[:, torch.argsort(ei[1], stable=True)]
    return Graph.from_block(ei.to(device), num_src=num_src, num_dst=num_dst, dst_sorted=dst_sorted)


def _operands(g: Graph, lhs_shape, rhs_shape, dtype: torch.dtype, seed: int):
    gen = torch.Generator().manual_seed(seed)

    def make(rows: int, shape):
        # away from zero: div divides by rhs
        return None if shape is None else (torch.rand(rows, *shape, generator=gen, dtype=torch.float64) + 0.5)

    lhs, rhs = make(g.num_dst, lhs_shape), make(g.num_edges, rhs_shape)
    return [None if t is None else t.to(dtype).to(g.device) for t in (lhs, rhs)]


def _reference(g: Graph, op: str, lhs, rhs) -> torch.Tensor:
    """The g-SpMM sum on the reverse graph in float64 on the CPU (the oracle), of a graph
    validated from ``g``'s edges (``g`` keeps no reverse graph)."""
    src, dst = (t.cpu() for t in g.edges())
    reverse = Graph.from_edge_index(torch.stack([dst, src]), num_src=g.num_dst, num_dst=g.num_src)
    lhs, rhs = [None if t is None else t.double().cpu() for t in (lhs, rhs)]
    return gsparse.gspmm(reverse, op, "sum", lhs, rhs)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_scatter_kernel_compiles_without_spills(arch):
    names = set()
    for dtype, index in block_scatter.PROGRAMS:
        binary = compile_cuda(block_scatter.source(dtype, index), arch=arch, cache=None)
        assert set(binary.resources) == {block_scatter._signature(op, dtype, index, vector).name
                                         for op in block_scatter._KERNEL_OPS
                                         for vector in block_scatter.vector_widths(dtype)}
        assert all(r.spill_stores == 0 and r.spill_loads == 0 for r in binary.resources.values())
        names |= set(binary.resources)
    assert len(names) == 5 * 2 * (3 + 1)  # ops, index types, vectors of float32 and of float64


@pytest.mark.parametrize("dst_sorted", [True, False])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_the_host_hands_the_kernel_what_the_reverse_graph_sums(case, dst_sorted):
    """On the CUDA host path (launches computed by a model of the kernel, tests/cuda_path.py):
    the arguments the host passes give the reference's sums, through the block's edge ids
    when its edges were not sorted."""
    op, lhs_shape, rhs_shape, out_shape = case
    g = _block(3, dst_sorted=dst_sorted)
    assert (g.eid is None) == dst_sorted
    lhs, rhs = _operands(g, lhs_shape, rhs_shape, torch.float64, 1)
    want = _reference(g, op, lhs, rhs)
    with cuda_path_on_cpu() as loader:
        assert block_scatter.takes(g, op, lhs, rhs, out_shape)
        got = block_scatter.scatter(g, op, lhs, rhs, out_shape)
    assert loader.order == [f"block_scatter_{op}_f64_i32_v1"]
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert not g.reverse_built


def test_only_blocks_without_a_reverse_graph_scatter_and_never_deterministically():
    lhs = torch.randn(15, 8)
    with cuda_path_on_cpu():
        block = _block(0)
        assert block_scatter.takes(block, "copy_lhs", lhs, None, (8,))
        validated = Graph.from_edge_index(torch.stack([block.col.long(), block.csr_dst.long()]),
                                          num_src=40, num_dst=15)
        assert not block_scatter.takes(validated, "copy_lhs", lhs, None, (8,))  # not a block
        block.reverse()
        assert not block_scatter.takes(block, "copy_lhs", lhs, None, (8,))  # the reverse is there
        fresh = _block(1)
        deterministic = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            assert not block_scatter.takes(fresh, "copy_lhs", lhs, None, (8,))
        finally:
            torch.use_deterministic_algorithms(deterministic)
    assert not block_scatter.takes(fresh, "copy_lhs", lhs, None, (8,))  # the CPU backend's device


@pytest.mark.parametrize("op, lhs, rhs, out_shape", [
    ("copy_lhs", torch.randn(15, 8, dtype=torch.bfloat16), None, (8,)),  # rounds at every add
    ("copy_lhs", torch.randn(15, 8, dtype=torch.float16), None, (8,)),
    ("mul", torch.randn(15, 2, 4), torch.randn(120, 1, 4), (2, 4)),  # spread over a middle dim
    ("mul", torch.randn(15, 4), torch.randn(120, 4, dtype=torch.float64), (4,)),  # two dtypes
    ("add", torch.randn(15, 4), torch.randn(120, 4), (4,)),  # not a product
])
def test_what_the_kernel_cannot_read_takes_the_reverse_graph(op, lhs, rhs, out_shape):
    with cuda_path_on_cpu():
        assert not block_scatter.takes(_block(0), op, lhs, rhs, out_shape)


def test_outputs_larger_than_the_l2_share_take_the_reverse_graph(monkeypatch):
    g, lhs = _block(0), torch.randn(15, 8)
    out_bytes = g.num_src * 8 * 4
    with cuda_path_on_cpu():  # an H100's 50 MB of L2
        monkeypatch.setattr(block_scatter, "MAX_OUTPUT_IN_L2", out_bytes / H100.l2_bytes)
        assert block_scatter.takes(g, "copy_lhs", lhs, None, (8,))
        monkeypatch.setattr(block_scatter, "MAX_OUTPUT_IN_L2", (out_bytes - 1) / H100.l2_bytes)
        assert not block_scatter.takes(g, "copy_lhs", lhs, None, (8,))


LAYERS = {
    "sage": (lambda: gnn.SAGEConv(8, 4), True, "copy_lhs_over_degree"),  # the mean's gradient
    "gcn": (lambda: gnn.GCNConv(8, 4), False, "mul"),
    "gat": (lambda: gnn.GATConv(8, 3, heads=2), False, "mul"),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_layers_backward_on_a_block_builds_no_reverse_graph(name):
    make, bipartite, op = LAYERS[name]
    torch.manual_seed(0)
    layer = make()
    g = _block(2, num_src=40, num_dst=15 if bipartite else 40)
    x = torch.randn(40, 8, requires_grad=True)
    with cuda_path_on_cpu() as loader:
        out = layer((x, x[:15]), g) if bipartite else layer(x, g)
        out.sum().backward()
    assert any(name.startswith(f"block_scatter_{op}_f32_i32_v") for name in loader.order)
    assert not g.reverse_built and x.grad is not None


@pytest.mark.parametrize("op, rhs_shape", [("copy_lhs", None), ("mul", (1,)), ("div", (1,))])
def test_a_means_gradient_is_divided_by_the_degrees_in_the_scatters_pass(op, rhs_shape, monkeypatch):
    """The node gradient of a g-SpMM mean on a block gives the validated graph's gradient;
    for copy_lhs (GraphSAGE's mean) the scatter divides by the degrees in its pass, with no
    torch ops for them on the host path."""
    import gsparse._ops as ops

    g = _block(4, dst_sorted=False)
    src, dst = g.edges()
    validated = Graph.from_edge_index(torch.stack([src, dst]), num_src=g.num_src, num_dst=g.num_dst)
    gen = torch.Generator().manual_seed(5)
    x = torch.rand(g.num_src, 6, generator=gen, dtype=torch.float64) + 0.5
    w = None if rhs_shape is None else \
        torch.rand(g.num_edges, *rhs_shape, generator=gen, dtype=torch.float64) + 0.5
    grads = []
    for graph in (validated, g):
        leaf = x.clone().requires_grad_()
        out = gsparse.gspmm(graph, op, "mean", leaf, w)
        with cuda_path_on_cpu() if graph is g else contextlib.nullcontext() as loader:
            if graph is g and op == "copy_lhs":
                monkeypatch.setattr(ops, "_degrees", lambda *a: pytest.fail("degrees computed on the host"))
            (out * out).sum().backward()
        grads.append(leaf.grad)
    kernel = "copy_lhs_over_degree" if op == "copy_lhs" else op
    scatters = [name for name in loader.order if name.startswith("block_scatter")]
    assert scatters == [f"block_scatter_{kernel}_f64_i32_v1"]
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------- on the GPU


@gpu
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dtype", block_scatter.DTYPES)
@pytest.mark.parametrize("dst_sorted", [True, False])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_the_kernel_sums_what_the_reverse_graph_sums(case, dst_sorted, dtype, index_dtype, monkeypatch):
    op, lhs_shape, rhs_shape, out_shape = case
    if index_dtype == torch.int64:  # a small graph of int64 indices
        monkeypatch.setattr(graph_build, "_INT32_MAX", 100)
    # a hub source (many atomic adds on one row) and sources with no edge
    g = _block(5, num_src=300, num_dst=200, edges=3000, device="cuda", dst_sorted=dst_sorted)
    assert g.index_dtype == index_dtype
    lhs, rhs = _operands(g, lhs_shape, rhs_shape, dtype, 2)
    got = block_scatter.scatter(g, op, lhs, rhs, out_shape)
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got.double().cpu(), _reference(g, op, lhs, rhs), rtol=tolerance,
                               atol=tolerance)
    assert not g.reverse_built


@pytest.mark.parametrize("case, vector", [
    (("copy_lhs", (8,), None, (8,)), 4),
    (("mul", (6,), (1,), (6,)), 2),  # a spread operand is read one value at a time
    (("mul", (2, 5), (2, 1), (2, 5)), 1),  # a vector of 4 or 2 would straddle two heads
    (("mul", (4,), (4,), (4,)), 4),
])
def test_float_rows_go_four_or_two_features_at_a_time(case, vector):
    op, lhs_shape, rhs_shape, out_shape = case
    g = _block(3)
    lhs, rhs = _operands(g, lhs_shape, rhs_shape, torch.float32, 1)
    with cuda_path_on_cpu() as loader:
        block_scatter.scatter(g, op, lhs, rhs, out_shape)
        if lhs_shape == (8,):  # rows one element off the vectors' alignment
            shifted = torch.empty(lhs.numel() + 1)[1:].view_as(lhs).copy_(lhs)
            block_scatter.scatter(g, op, shifted, rhs, out_shape)
    want = [f"block_scatter_{op}_f32_i32_v{vector}"] + (["block_scatter_copy_lhs_f32_i32_v1"]
                                                        if lhs_shape == (8,) else [])
    assert loader.order == want


@gpu
@pytest.mark.parametrize("dtype", block_scatter.DTYPES)
@pytest.mark.parametrize("case", [c for c in CASES if c[0] == "copy_lhs"], ids=lambda c: f"{c[1]}")
def test_the_kernel_divides_a_means_gradient_by_the_degrees(case, dtype):
    op, lhs_shape, rhs_shape, out_shape = case
    g = _block(7, num_src=300, num_dst=200, edges=3000, device="cuda", dst_sorted=False)
    lhs, rhs = _operands(g, lhs_shape, rhs_shape, dtype, 4)
    got = block_scatter.scatter(g, op, lhs, rhs, out_shape, lhs_over_degree=True)
    degrees = (g.rowptr[1:] - g.rowptr[:-1]).clamp(min=1).to(dtype)
    want = _reference(g, op, lhs / degrees.view(-1, *([1] * (lhs.dim() - 1))), rhs)
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got.double().cpu(), want, rtol=tolerance, atol=tolerance)


@gpu
@pytest.mark.parametrize("case", CASES[:1] + CASES[4:5], ids=["copy_lhs", "mul"])
def test_rows_off_the_vectors_alignment_are_read_one_element_at_a_time(case):
    op, lhs_shape, rhs_shape, out_shape = case
    g = _block(6, num_src=300, num_dst=200, edges=3000, device="cuda")
    lhs, rhs = _operands(g, lhs_shape, rhs_shape, torch.float32, 3)
    shifted = torch.empty(lhs.numel() + 1, device="cuda")[1:].view_as(lhs).copy_(lhs)
    got = block_scatter.scatter(g, op, shifted, rhs, out_shape)
    torch.testing.assert_close(got.double().cpu(), _reference(g, op, lhs, rhs), rtol=1e-5, atol=1e-5)


@gpu
def test_a_captured_backward_takes_the_path_of_its_eager_warm_up():
    """A step captured after an eager warm-up (torch.compile's reduce-overhead, CapturedStep)
    finds the kernels the warm-up loaded: each block size takes the same path both times."""
    layer = gnn.SAGEConv(64, 64).cuda()
    for num_src in (40, 2_000_000):  # a gradient of 10 KB, then of 512 MB (over 2 L2 caches)
        x = torch.randn(num_src, 64, device="cuda", requires_grad=True)

        def step(g: Graph) -> None:
            layer((x, x[:15]), g).sum().backward()

        warm_up = _block(0, num_src=num_src, device="cuda")
        step(warm_up)
        g = _block(1, num_src=num_src, device="cuda")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step(g)
        graph.replay()
        assert g.reverse_built == warm_up.reverse_built == (num_src > 40)


@gpu
def test_a_block_without_edges_scatters_zeros():
    g = Graph.from_block(torch.empty(2, 0, dtype=torch.int64, device="cuda"), num_src=7, num_dst=3)
    got = block_scatter.scatter(g, "copy_lhs", torch.randn(3, 5, device="cuda"), None, (5,))
    assert got.shape == (7, 5) and not got.any()


@gpu
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_layers_gradients_on_a_gpu_block_match_the_reverse_graphs(name):
    make, bipartite, _ = LAYERS[name]
    torch.manual_seed(0)
    layer = make().cuda()
    num_dst = 150 if bipartite else 400
    grads = []
    for reverse_first in (False, True):
        g = _block(4, num_src=400, num_dst=num_dst, edges=4000, device="cuda", dst_sorted=False)
        if reverse_first:  # the backward then walks the reverse graph
            g.reverse()
        x = torch.randn(400, 8, device="cuda", generator=torch.Generator("cuda").manual_seed(1),
                        requires_grad=True)
        out = layer((x, x[:num_dst]), g) if bipartite else layer(x, g)
        params = list(layer.parameters())
        grads.append(torch.autograd.grad((out * out).sum(), [x, *params]))
        assert g.reverse_built == reverse_first
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
