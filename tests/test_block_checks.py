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
from gsparse.runtime import compile_cuda

from kernels.support import needs_nvrtc

_KERNELS = [f"check_edges_{k}_{s}" for k in ("i32", "i64") for s in ("i32", "i64")] + [
    "check_csr_i32", "check_csr_i64"]


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_check_kernels_compile_for_every_index_type_without_spills(arch):
    binary = compile_cuda(block_checks.source(), arch=arch, cache=None)
    assert sorted(binary.resources) == sorted(_KERNELS)
    for name in _KERNELS:  # printf's arguments take a little stack; nothing spills
        assert binary.resources[name].spill_stores == 0 and binary.resources[name].spill_loads == 0


class _Recorder:
    def __init__(self):
        self.launches = []

    def __call__(self, name, device_index):
        recorder = self

        class _Kernel:
            def launch(self, grid, block, args):
                recorder.launches.append((name, grid, block, args))

        return _Kernel()


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


def _value(argument) -> int:
    """A scalar launch argument's value (arguments are bound by name through a Signature)."""
    return argument.value


def _ops(build) -> list[str]:
    with _TensorOps() as mode:
        build()
    return mode.ops


@pytest.mark.parametrize("dst_sorted", [True, False])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_a_gpu_block_is_checked_in_one_launch_and_no_other_operation(gpu_path, dst_sorted, dtype):
    ei = torch.tensor([[0, 4, 2, 1, 3], [0, 0, 1, 2, 2]], dtype=dtype)
    build = lambda check: Graph.from_block(ei, num_src=5, num_dst=3, dst_sorted=dst_sorted,  # noqa: E731
                                           max_degree=2, check=check)
    assert _ops(lambda: build(True)) == _ops(lambda: build(False))
    gpu_path.launches.clear()
    build(True)
    [(name, grid, block, args)] = gpu_path.launches
    assert name == f"check_edges_{block_checks._SUFFIX[dtype]}_i32" and (grid, block) == (1, 256)
    assert args[0] is ei and args[3] is not None and args[3].dtype == torch.int32
    assert [_value(a) for a in args[1:3] + args[4:]] == [ei.stride(0), ei.stride(1), 5, 5, 3, 2,
                                                      int(dst_sorted)]
    assert torch.equal(args[3].long(), torch.tensor([0, 0, 1, 2, 2]))  # the rows, sorted


def test_a_gpu_blocks_checks_read_a_transposed_edge_list_in_place(gpu_path):
    ei = torch.tensor([[0, 0], [1, 0], [2, 1]]).t()
    Graph.from_block(ei, num_src=3, num_dst=2, dst_sorted=True)
    [(name, _, _, args)] = gpu_path.launches
    assert name == "check_edges_i64_i64" and args[0] is ei and args[3] is None  # no max_degree
    assert (_value(args[1]), _value(args[2]), _value(args[7])) == (1, 2, -1)


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
    assert [_value(a) for a in args[3:]] == [2, 3, 3, 2]
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


@pytest.mark.gpu
def test_good_blocks_on_a_gpu_pass_their_checks_and_equal_the_cpus():
    gen = torch.Generator().manual_seed(0)
    for seed in range(20):
        num_src, num_dst, edges = 1 + 37 * seed, 1 + 11 * seed, 1_000 * seed
        ei = torch.stack([torch.randint(0, num_src, (edges,), generator=gen),
                          torch.randint(0, num_dst, (edges,), generator=gen)])
        degree = int(torch.bincount(ei[1], minlength=num_dst).max()) if edges else 0
        by_dst = ei[:, torch.argsort(ei[1], stable=True)]
        for edge_index, dst_sorted in ((ei, False), (by_dst, True), (by_dst.t().contiguous().t(), True)):
            for dtype in (torch.int32, torch.int64):
                e = edge_index.to(dtype)
                want = Graph.from_block(e, num_src=num_src, num_dst=num_dst, dst_sorted=dst_sorted,
                                        max_degree=degree)
                got = Graph.from_block(e.cuda(), num_src=num_src, num_dst=num_dst,
                                       dst_sorted=dst_sorted, max_degree=degree)
                assert torch.equal(got.rowptr.cpu(), want.rowptr) and torch.equal(got.col.cpu(), want.col)
        csr = Graph.from_edge_index(ei, num_src=num_src, num_dst=num_dst)
        eid = None if csr.eid is None else csr.eid.cuda()
        Graph.from_block_csr(csr.rowptr.cuda(), csr.col.long().cuda(), num_src=num_src, eid=eid,
                             max_degree=degree)
    torch.cuda.synchronize()  # no assertion fired
