"""The checks of sampled blocks on a GPU: one launch of a kernel that compiles for every
index type, catches each kind of bad block, and lets every good one through."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch.overrides import TorchFunctionMode

import gsparse._block_checks as block_checks
from gsparse import Graph
from gsparse.kernels.source import TYPE_SUFFIXES
from gsparse.runtime import compile_cuda

from kernels.support import needs_nvrtc

_KERNELS = [f"{kernel}_{k}_{s}" for kernel in ("check_edges", "sorted_edges", "count_edges", "order_rows")
            for k in ("i32", "i64") for s in ("i32", "i64")] + ["check_csr_i32", "check_csr_i64"]


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_check_kernels_compile_for_every_index_type_without_spills(arch):
    binary = compile_cuda(block_checks.source(), arch=arch, cache=None)
    assert sorted(binary.resources) == sorted(_KERNELS)
    for name in _KERNELS:  # printf's arguments take a little stack; nothing spills
        assert binary.resources[name].spill_stores == 0 and binary.resources[name].spill_loads == 0


class _Recorder:
    """Stands in for the block kernels' prepared launches: records (kernel, grid, block,
    arguments in parameter order) per launch."""

    def __init__(self):
        self.launches = []

    def __call__(self, signature, device_index):
        def launch(*args, grid):
            self.launches.append((signature.name, grid, block_checks.BLOCK, list(args)))

        return launch


class _TensorOps(TorchFunctionMode):
    """The torch calls that make a tensor (each a launch or at least a dispatch on a GPU)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if isinstance(result, torch.Tensor) or (
                isinstance(result, tuple) and any(isinstance(r, torch.Tensor) for r in result)):
            self.ops.append(getattr(func, "__name__", str(func)))
        return result


@pytest.fixture
def gpu_path(monkeypatch):
    """The GPU's checks on CPU tensors: the launches are recorded, not run."""
    recorder = _Recorder()
    monkeypatch.setattr(block_checks, "on_gpu", lambda tensor: True)
    monkeypatch.setattr(block_checks, "KERNELS", recorder)
    return recorder


def _ops(build) -> list[str]:
    with _TensorOps() as mode:
        build()
    return mode.ops


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_a_sorted_gpu_block_is_read_off_and_checked_in_one_launch_and_no_other_operation(gpu_path, dtype):
    """The CSR's arrays are one allocation, filled by the launch, which reads the edge list
    in place; unchecked too (the checks come free with the launch)."""
    ei = torch.tensor([[0, 4, 2, 1, 3], [0, 0, 1, 2, 2]], dtype=dtype).t().contiguous().t()
    build = lambda check: Graph.from_block(ei, num_src=5, num_dst=3, dst_sorted=True,  # noqa: E731
                                           max_degree=2, check=check)
    made = [op for op in _ops(lambda: build(True)) if op not in ("__getitem__", "split_with_sizes")]
    assert made == ["empty"]
    gpu_path.launches.clear()
    g = build(True)
    [(name, grid, block, args)] = gpu_path.launches
    assert name == f"sorted_edges_{TYPE_SUFFIXES[dtype]}_i32" and (grid, block) == (1, 256)
    assert args[0] is ei and args[3] is g.rowptr and args[4] is g.col and args[5] is g.csr_dst
    assert args[1:3] + args[6:] == [1, 2, 5, 5, 3, 2]
    assert g.eid is None and g.rowptr.shape == (4,) and g.col.shape == g.csr_dst.shape == (5,)
    assert g.col.untyped_storage().data_ptr() == g.rowptr.untyped_storage().data_ptr()
    gpu_path.launches.clear()
    build(False)
    assert [launch[0] for launch in gpu_path.launches] == [name]


def test_a_gpu_block_sorted_by_the_block_is_checked_in_one_launch(gpu_path):
    """Shuffled, under a bound too loose to bucket its edges: sorted, then checked against
    its sorted destinations."""
    ei = torch.tensor([[0, 4, 2, 1, 3], [2, 0, 1, 0, 2]])
    bound = block_checks.BUCKET_MAX_DEGREE + 1
    Graph.from_block(ei, num_src=5, num_dst=3, max_degree=bound)
    [(name, grid, block, args)] = gpu_path.launches
    assert name == "check_edges_i64_i32" and (grid, block) == (1, 256)
    assert args[0] is ei and args[3].dtype == torch.int32
    assert args[1:3] + args[4:] == [ei.stride(0), ei.stride(1), 5, 5, 3, bound]
    assert torch.equal(args[3].long(), torch.tensor([0, 0, 1, 2, 2]))  # the rows, sorted


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_a_shuffled_gpu_block_of_bounded_rows_is_bucketed_in_two_launches(gpu_path, dtype):
    """Counted and filed (checks included, whatever ``check`` says), then ordered by row:
    no sort, and the edge list is read in place, transposed or not."""
    ei = torch.tensor([[0, 4, 2, 1, 3], [2, 0, 1, 0, 2]], dtype=dtype).t().contiguous().t()
    build = lambda check: Graph.from_block(ei, num_src=5, num_dst=3, max_degree=2, check=check)  # noqa: E731
    ops = _ops(lambda: build(True))
    assert ops == _ops(lambda: build(False)) and "sort" not in ops
    gpu_path.launches.clear()
    g = build(True)
    (count, count_grid, _, count_args), (order, order_grid, _, order_args) = gpu_path.launches
    suffix = TYPE_SUFFIXES[dtype]
    assert (count, order) == (f"count_edges_{suffix}_i32", f"order_rows_{suffix}_i32")
    assert (count_grid, order_grid) == (1, 1)  # 5 edges; 3 rows of a warp each
    assert count_args[0] is ei and order_args[0] is ei
    assert count_args[1:3] + count_args[5:] == [1, 2, 5, 5, 3, 2]
    counts, table = count_args[3], count_args[4]
    assert counts.data_ptr() == g.rowptr[1:].data_ptr() and table.shape == (6,)  # summed in place
    assert order_args[2] is table and order_args[3] is g.rowptr
    assert order_args[4] is g.col and order_args[5] is g.eid and order_args[6] is g.csr_dst
    assert (order_args[1], order_args[7], order_args[8]) == (2, 3, 2)
    assert g.col.dtype == g.eid.dtype == g.rowptr.dtype == torch.int32 and g.rowptr.shape == (4,)
    # one allocation, each array at a multiple of 256 bytes from its start (as aligned as
    # an allocation of its own on a GPU)
    assert g.col.storage_offset() == 0 and g.col.untyped_storage().data_ptr() == g.eid.untyped_storage().data_ptr()
    assert (g.eid.data_ptr() - g.col.data_ptr()) % 256 == (g.csr_dst.data_ptr() - g.col.data_ptr()) % 256 == 0


def test_only_bounded_blocks_of_rows_not_too_sparse_are_bucketed():
    assert block_checks.buckets(1_000, 100, 10) and block_checks.buckets(30_000, 100, block_checks.BUCKET_MAX_DEGREE)
    assert not block_checks.buckets(1_000, 100, None)  # no bound: sorted
    assert not block_checks.buckets(1_000, 100, block_checks.BUCKET_MAX_DEGREE + 1)  # long rows: sorted
    assert not block_checks.buckets(0, 100, 10)
    many_rows = 10**6  # a loose bound on sparse rows: a table of 1000 slots per edge
    assert not block_checks.buckets(10_000, many_rows, 10) and block_checks.buckets(10**6, many_rows, 4)


def test_a_gpu_blocks_checks_read_a_transposed_edge_list_in_place(gpu_path):
    ei = torch.tensor([[0, 0], [2, 1], [1, 0]]).t()
    Graph.from_block(ei, num_src=3, num_dst=2)
    [(name, _, _, args)] = gpu_path.launches
    assert name == "check_edges_i64_i64" and args[0] is ei and args[3] is None  # no max_degree
    assert (args[1], args[2], args[7]) == (1, 2, -1)


def test_a_gpu_blocks_csr_is_checked_in_one_launch(gpu_path):
    rowptr, col, eid = torch.tensor([0, 1, 3]), torch.tensor([2, 0, 1], dtype=torch.int32), torch.tensor([2, 0, 1])
    build = lambda check: Graph.from_block_csr(rowptr, col, num_src=3, eid=eid, max_degree=2,  # noqa: E731
                                               check=check)
    checked, unchecked = _ops(lambda: build(True)), _ops(lambda: build(False))
    # the launch itself reads the indices as one dtype: mixed ones are widened first
    assert checked[:len(checked) - len(unchecked)] == ["to", "contiguous"] * 3
    gpu_path.launches.clear()
    build(True)
    [(name, grid, block, args)] = gpu_path.launches
    assert name == "check_csr_i64" and (grid, block) == (1, 256)
    assert args[3:] == [2, 3, 3, 2]
    assert torch.equal(args[1], col.long())


def test_the_grid_covers_every_position_with_at_most_max_blocks(gpu_path):
    for edges, blocks in ((256, 1), (257, 2), (10**6, block_checks.MAX_BLOCKS)):
        ei = torch.zeros(2, edges, dtype=torch.int64)
        Graph.from_block(ei, num_src=1, num_dst=1)
        assert gpu_path.launches[-1][1] == blocks


# ---------------------------------------------------------------------- on a GPU

_CASES = {  # name: (construction, what the kernel prints)
    "source out of range": ("Graph.from_block(torch.tensor([[0, 5], [0, 1]]), num_src=3, num_dst=2)",
                            "edge_index[0, 1] = 5 is out of range"),
    "negative source": ("Graph.from_block(torch.tensor([[0, -1], [0, 1]], dtype=torch.int32), "
                        "num_src=3, num_dst=2, dst_sorted=True)", "edge_index[0, 1] = -1"),
    "int64 index that int32 would wrap": ("Graph.from_block(torch.tensor([[2**32 + 1], [0]]), "
                                          "num_src=3, num_dst=2)", "is out of range"),
    "destination out of range": ("Graph.from_block(torch.tensor([[0, 1], [0, 4]]), num_src=3, "
                                 "num_dst=2)", "edge_index[1, 1] = 4"),
    "destinations out of order": ("Graph.from_block(torch.tensor([[0, 1], [1, 0]]), num_src=3, "
                                  "num_dst=2, dst_sorted=True)", "out of order"),
    "sorted row over max_degree": ("Graph.from_block(torch.tensor([[0, 1, 2], [1, 1, 1]]), num_src=3, "
                                   "num_dst=2, dst_sorted=True, max_degree=2)", "more than max_degree = 2"),
    "unsorted row over max_degree": ("Graph.from_block(torch.tensor([[0, 1, 2], [1, 0, 1]]), num_src=3, "
                                     "num_dst=2, max_degree=1)", "destination 1 has more than"),
    "bucketed: source out of range": ("Graph.from_block(torch.tensor([[0, 5], [1, 0]]), num_src=3, "
                                      "num_dst=2, max_degree=2)", "edge_index[0, 1] = 5 is out of range"),
    "bucketed: destination out of range, unchecked": (
        "Graph.from_block(torch.tensor([[0, 1], [1, 4]], dtype=torch.int32), num_src=3, num_dst=2, "
        "max_degree=2, check=False)", "edge_index[1, 1] = 4"),  # the counting checks anyway
    "sorted: destination out of range, unchecked": (
        "Graph.from_block(torch.tensor([[0, 1], [0, 4]]), num_src=3, num_dst=2, dst_sorted=True, "
        "check=False)", "edge_index[1, 1] = 4"),  # so does the read-off
    "rowptr not from 0": ("Graph.from_block_csr(torch.tensor([1, 2]), torch.tensor([0, 1]), num_src=3)",
                          "rowptr must run from 0"),
    "rowptr decreasing": ("Graph.from_block_csr(torch.tensor([0, 2, 1, 3]), torch.tensor([0, 1, 0]), "
                          "num_src=3)", "rowptr decreases"),
    "csr row over max_degree": ("Graph.from_block_csr(torch.tensor([0, 3]), torch.tensor([0, 1, 0]), "
                                "num_src=3, max_degree=2)", "more than max_degree = 2"),
    "col out of range": ("Graph.from_block_csr(torch.tensor([0, 1, 2]), torch.tensor([0, 7]), num_src=3)",
                         "col[1] = 7"),
    "eid out of range": ("Graph.from_block_csr(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), num_src=3, "
                         "eid=torch.tensor([0, 2], dtype=torch.int32))", "eid[1] = 2"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(_CASES))
def test_a_bad_block_on_a_gpu_is_a_device_side_assertion(case):
    # A device-side assertion leaves the CUDA context unusable: each case runs in its own process.
    construction, printed = _CASES[case]
    construction = construction.replace("torch.tensor(", "cuda(")
    script = textwrap.dedent(f"""
        import torch
        from gsparse import Graph
        cuda = lambda *a, **k: torch.tensor(*a, **k).cuda()
        g = {construction}
        torch.cuda.synchronize()
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0, run.stdout + run.stderr
    assert printed in run.stdout and "device-side assert" in run.stderr, run.stdout + run.stderr


def _same_block(got: Graph, want: Graph) -> None:
    assert got.index_dtype == want.index_dtype
    assert torch.equal(got.rowptr.cpu(), want.rowptr) and torch.equal(got.col.cpu(), want.col)
    assert torch.equal(got.csr_dst.cpu(), want.csr_dst)
    identity = torch.arange(want.num_edges, dtype=want.index_dtype)
    got_eid = identity if got.eid is None else got.eid.cpu()
    assert torch.equal(got_eid, identity if want.eid is None else want.eid)


@pytest.mark.gpu
def test_good_blocks_on_a_gpu_pass_their_checks_and_equal_the_cpus():
    """Sorted, shuffled (bucketed under a tight or loose bound, sorted under none) and
    transposed edge lists, with empty rows and rows of exactly the bound."""
    gen = torch.Generator().manual_seed(0)
    for seed in range(20):
        num_src, num_dst, edges = 1 + 37 * seed, 1 + 11 * seed, 1_000 * seed
        ei = torch.stack([torch.randint(0, num_src, (edges,), generator=gen),
                          torch.randint(0, num_dst, (edges,), generator=gen)])
        degree = int(torch.bincount(ei[1], minlength=num_dst).max()) if edges else 0
        by_dst = ei[:, torch.argsort(ei[1], stable=True)]
        cases = [(ei, False, degree), (ei, False, degree + 3), (ei, False, None),
                 (ei.t().contiguous().t(), False, degree), (by_dst, True, degree),
                 (by_dst.t().contiguous().t(), True, degree)]
        for edge_index, dst_sorted, bound in cases:
            for dtype in (torch.int32, torch.int64):
                e = edge_index.to(dtype)
                if bound == 0:
                    bound = None
                want = Graph.from_block(e, num_src=num_src, num_dst=num_dst, dst_sorted=dst_sorted,
                                        max_degree=bound)
                for check in (True, False):
                    got = Graph.from_block(e.cuda(), num_src=num_src, num_dst=num_dst,
                                           dst_sorted=dst_sorted, max_degree=bound, check=check)
                    _same_block(got, want)
        csr = Graph.from_edge_index(ei, num_src=num_src, num_dst=num_dst)
        eid = None if csr.eid is None else csr.eid.cuda()
        Graph.from_block_csr(csr.rowptr.cuda(), csr.col.long().cuda(), num_src=num_src, eid=eid,
                             max_degree=degree)
    torch.cuda.synchronize()  # no assertion fired


@pytest.mark.gpu
def test_blocks_of_int64_indices_equal_the_cpus():
    """More than 2**31 sources make a block's indices int64: the int64 kernels of a bucketed
    block and of a sorted one read off."""
    gen = torch.Generator().manual_seed(3)
    num_src, num_dst = 2**31 + 5, 300
    ei = torch.stack([torch.randint(0, num_src, (5_000,), generator=gen),
                      torch.randint(0, num_dst, (5_000,), generator=gen)])
    ei[0, -1] = num_src - 1
    degree = int(torch.bincount(ei[1], minlength=num_dst).max())
    by_dst = ei[:, torch.argsort(ei[1], stable=True)]
    for edge_index, dst_sorted in ((ei, False), (by_dst, True)):
        want = Graph.from_block(edge_index, num_src=num_src, num_dst=num_dst, dst_sorted=dst_sorted,
                                max_degree=degree)
        got = Graph.from_block(edge_index.cuda(), num_src=num_src, num_dst=num_dst, dst_sorted=dst_sorted,
                               max_degree=degree)
        assert got.index_dtype == torch.int64
        _same_block(got, want)
