"""Where a one-off kernel launch's host time goes, on a GPU.

Run from the repository root on a GPU machine::

    PYTHONPATH=src python3 scripts/launch_host_time.py

A sampled block's build launches the block kernels (``gsparse._block_checks``) through
launches prepared once with every parameter a slot; a one-off launch binds its arguments
by name, converts them, prepares the launch and calls it. Each step is timed alone here,
in host microseconds per call (the median over calls; the queue is drained every 20
calls, outside the timed spans), on a block small enough that the device never holds the
host back, next to what the CUDA driver call costs alone (through cuda-bindings and
through ctypes) and a few PyTorch operations for scale. Output lines are ``name: value``.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from pathlib import Path

import torch

from gsparse import _block_checks as block_checks
from gsparse import runtime
from gsparse.runtime import _bindings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from block_build_profile import host_us as _host_us  # noqa: E402  the same timer

# The median of many calls: a first call's costs (the kernels' loading) drown in it.
host_us = functools.partial(_host_us, calls=2_000)


def main() -> None:
    num_dst, fanout, num_src = 200, 10, 5_000
    dst = torch.arange(num_dst, device="cuda").repeat_interleave(fanout)
    src = torch.randint(0, num_src, (dst.numel(),), device="cuda")
    edge_index = torch.stack([src, dst])
    num_edges = edge_index.shape[1]
    index = torch.int32
    row_stride, stride = edge_index.stride()

    rows: dict[str, float] = {}
    rows["sorted_edges (the whole one-off path)"] = host_us(
        lambda: block_checks.sorted_edges(edge_index, num_src, num_dst, fanout, index))

    signature = block_checks._sorted_signature(edge_index.dtype, index)
    buffer = torch.empty(2 * num_edges + num_dst + 1, dtype=index, device="cuda")
    col, rows_out, rowptr = buffer[:num_edges], buffer[num_edges:2 * num_edges], buffer[2 * num_edges:]
    values = dict(edges=edge_index, row_stride=row_stride, stride=stride, rowptr=rowptr, col=col,
                  rows=rows_out, num_edges=num_edges, num_src=num_src, num_dst=num_dst,
                  max_degree=fanout)
    blocks = -(-num_edges // block_checks.BLOCK)
    rows["torch.empty of the outputs"] = host_us(
        lambda: torch.empty(2 * num_edges + num_dst + 1, dtype=index, device="cuda"))
    rows["its views (split_with_sizes)"] = host_us(
        lambda: buffer.split_with_sizes((num_edges, num_edges, num_dst + 1)))
    block_launch = block_checks.KERNELS(signature, 0)
    rows["block launch: slots filled, grid given"] = host_us(
        lambda: block_launch(*signature.ordered(values), grid=blocks))
    rows["signature.arguments (bind by name, convert)"] = host_us(lambda: signature.arguments(values))
    args = signature.arguments(values)
    kernel = runtime.get_kernel(block_checks.source(), signature.name, device=0)
    rows["kernel.prepare (convert, check geometry)"] = host_us(
        lambda: kernel.prepare(blocks, block_checks.BLOCK, args))
    prepared = kernel.prepare(blocks, block_checks.BLOCK, args)
    rows["prepared launch, called"] = host_us(prepared)
    rows["kernel.launch (one-off: prepare and call)"] = host_us(
        lambda: kernel.launch(blocks, block_checks.BLOCK, args))

    driver = _bindings.driver()
    stream = torch.cuda.current_stream().cuda_stream
    function = kernel._function
    params = prepared._params_address
    geometry = (blocks, 1, 1, block_checks.BLOCK, 1, 1, 0)
    rows["cuCtxGetCurrent (cuda-bindings)"] = host_us(driver.cuCtxGetCurrent)
    rows["cuLaunchKernel (cuda-bindings)"] = host_us(
        lambda: driver.cuLaunchKernel(function, *geometry, stream, params, 0))
    # What the bindings convert per call: the stream or the function given in another form.
    stream_object = driver.CUstream(stream)
    rows["cuLaunchKernel (cuda-bindings, a CUstream object)"] = host_us(
        lambda: driver.cuLaunchKernel(function, *geometry, stream_object, params, 0))
    function_int = int(function)
    rows["cuLaunchKernel (cuda-bindings, the function as an int)"] = host_us(
        lambda: driver.cuLaunchKernel(function_int, *geometry, stream, params, 0))

    libcuda = ctypes.CDLL("libcuda.so.1")
    launch = libcuda.cuLaunchKernel
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    handle = int(function)
    rows["cuLaunchKernel (ctypes)"] = host_us(lambda: launch(handle, *geometry, stream, params, None))
    get_current = libcuda.cuCtxGetCurrent
    get_current.argtypes = [ctypes.c_void_p]
    current = ctypes.c_void_p()
    current_address = ctypes.addressof(current)
    rows["cuCtxGetCurrent (ctypes)"] = host_us(lambda: get_current(current_address))

    small = torch.zeros(num_dst + 1, dtype=index, device="cuda")
    rows["torch: cumsum_ of a small tensor"] = host_us(lambda: small.cumsum_(0))
    rows["torch: zero_ of a small tensor"] = host_us(small.zero_)
    rows["torch: empty on the GPU"] = host_us(lambda: torch.empty(1000, device="cuda"))
    for name, value in rows.items():
        print(f"{name}: {value:.2f}")


if __name__ == "__main__":
    main()
