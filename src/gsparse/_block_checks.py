"""The checks of sampled blocks on a GPU: one launch each, no host wait.

``Graph.from_block`` and ``Graph.from_block_csr`` validate on the device so that a training
step never waits for a verdict. Done with PyTorch operations, that is about ten small
launches (reductions, comparisons, ``_assert_async``) whose host overhead costs more than
building the block; :file:`kernels/block_checks.cu` checks every rule in one pass and stops
with a device-side assertion (after printing the bad index) on a violation. The kernels are
compiled once per GPU architecture through the disk cache, like every generated kernel.
"""

from __future__ import annotations

import importlib.resources
from typing import Any

import numpy as np
import torch

from . import runtime

BLOCK = 256  # threads per block
MAX_BLOCKS = 1024  # a grid-stride loop covers the rest
_SUFFIX = {torch.int32: "i32", torch.int64: "i64"}
# NumPy scalars are typed kernel arguments too, and cost a tenth of runtime.i64's checks
# (the counts here are checked already: non-negative ints of at most 63 bits).
_i64 = np.int64


CONTEXT = "gsparse block checks"


def source() -> str:
    """The program of the check kernels (``gsparse precompile`` builds it too)."""
    return importlib.resources.files("gsparse.kernels").joinpath("block_checks.cu").read_text()


class CheckKernels:
    """The check kernels loaded so far, by (name, device index): the source is read and
    compiled (or fetched from the disk cache) on the first check on a device."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, int], Any] = {}

    def __call__(self, name: str, device_index: int) -> runtime.Kernel:
        kernel = self._loaded.get((name, device_index))
        if kernel is None:
            kernel = self._loaded[(name, device_index)] = runtime.get_kernel(
                source(), name, context=CONTEXT, device=device_index)
        return kernel


KERNELS = CheckKernels()


def on_gpu(tensor: torch.Tensor) -> bool:
    """Whether the checks of a block on ``tensor``'s device are this module's launch."""
    return tensor.is_cuda


def _launch(name: str, device: torch.device, positions: int, args: list[Any]) -> None:
    blocks = min(max(-(-positions // BLOCK), 1), MAX_BLOCKS)
    KERNELS(name, device.index).launch(blocks, BLOCK, args)


def check_edges(edge_index: torch.Tensor, sorted_dst: torch.Tensor | None, num_src: int,
                num_dst: int, dst_sorted: bool, max_degree: int | None) -> None:
    """Assert on the device that ``edge_index`` (``[2, E]``, as the user gave it) has
    sources in ``[0, num_src)``, destinations in ``[0, num_dst)``, destinations in order
    when ``dst_sorted``, and, when ``max_degree`` is given, that no destination appears
    more than ``max_degree`` times in ``sorted_dst`` (the destinations sorted)."""
    sorted_dst = None if max_degree is None else sorted_dst
    if sorted_dst is not None and not sorted_dst.is_contiguous():
        raise ValueError("the sorted destinations must be contiguous: the kernel reads them densely")
    index_type = _SUFFIX[edge_index.dtype if sorted_dst is None else sorted_dst.dtype]
    row_stride, stride = edge_index.stride()
    num_edges = edge_index.shape[1]
    _launch(f"check_edges_{_SUFFIX[edge_index.dtype]}_{index_type}", edge_index.device, num_edges,
            [edge_index, _i64(row_stride), _i64(stride), sorted_dst, _i64(num_edges), _i64(num_src),
             _i64(num_dst), _i64(-1 if max_degree is None else max_degree), np.int32(dst_sorted)])


def check_csr(rowptr: torch.Tensor, col: torch.Tensor, eid: torch.Tensor | None, num_src: int,
              max_degree: int | None) -> None:
    """Assert on the device that ``rowptr`` runs from 0 to ``len(col)`` without decreasing
    (in steps of at most ``max_degree`` when given), ``col`` is in ``[0, num_src)`` and
    ``eid`` (when given) in ``[0, len(col))``. The indices are read as given: of mixed
    dtypes, all are read as int64."""
    parts = (rowptr, col) if eid is None else (rowptr, col, eid)
    dtype = torch.int64 if any(t.dtype == torch.int64 for t in parts) else torch.int32
    rowptr, col = rowptr.to(dtype).contiguous(), col.to(dtype).contiguous()
    eid = None if eid is None else eid.to(dtype).contiguous()
    num_dst, num_edges = rowptr.shape[0] - 1, col.shape[0]
    _launch(f"check_csr_{_SUFFIX[dtype]}", rowptr.device, max(num_dst, num_edges, 1),
            [rowptr, col, eid, _i64(num_dst), _i64(num_edges), _i64(num_src),
             _i64(-1 if max_degree is None else max_degree)])
