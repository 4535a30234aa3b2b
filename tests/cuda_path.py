"""The CUDA backend's host path on CPU tensors, for tests without a GPU.

Inside :func:`cuda_path_on_cpu`, CPU tensors go to the CUDA backend: tasks, schedules
chosen on an H100's facts, launch plans, and launches that a
:class:`~recording.RecordingLoader` records instead of running (outputs stay as
allocated). :class:`NoHostReads` fails any call that would make a GPU wait: a tensor's
value read by the host, or an operation whose output size depends on the data;
:class:`HostReads` counts them.
:class:`TorchCalls` counts the torch functions the host path calls (most are a kernel
launch each on a GPU), the backward's with :func:`backward_counted`, and
:func:`autograd_nodes` the nodes a backward runs; :func:`block_checks_on_gpu` checks blocks
in one (recorded) launch, as on a GPU; :func:`step_blocks` makes a mini-batch step's pair
of sampled blocks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode

from gsparse import _block_checks, _block_loops, _block_scatter, backends, target
from gsparse import Graph
from gsparse._graph_build import Csr
from gsparse.bench.minibatch import Blocks
from gsparse.nn._graph import _loop_graph_in_torch
from gsparse.backends import cuda
from gsparse.kernels import source

from recording import RecordingLoader


@contextlib.contextmanager
def cuda_path_on_cpu(loader: RecordingLoader | None = None) -> Iterator[RecordingLoader]:
    loader = loader if loader is not None else RecordingLoader()
    cpu = torch.device("cpu")
    previous_backend = backends.for_device(cpu)
    previous_kernel = source._RuntimeLoader.kernel
    previous_of = target.Target.of
    previous_scatter = _block_scatter.PROGRAMS
    previous_loops = _block_loops.PROGRAMS
    backends.register("cpu", cuda.BACKEND)
    source._RuntimeLoader.kernel = lambda self, program, name, device_index: loader.kernel(
        program, name, device_index)
    target.Target.of = staticmethod(lambda device=None: target.H100)
    _block_scatter.PROGRAMS = dict.fromkeys(previous_scatter, _scatter_launches(loader))
    _block_loops.PROGRAMS = dict.fromkeys(previous_loops, _modelled_launches(loader, _loops_kernel_model))
    try:
        yield loader
    finally:
        backends.register("cpu", previous_backend)
        source._RuntimeLoader.kernel = previous_kernel
        target.Target.of = previous_of
        _block_scatter.PROGRAMS = previous_scatter
        _block_loops.PROGRAMS = previous_loops


def _modelled_launches(loader: RecordingLoader, model):
    """A fixed program (:class:`gsparse._prepared.PreparedLaunches`) whose launches are
    recorded by name in ``loader``'s ``order`` and computed by ``model(name, *args)``."""

    def prepared(signature, device_index: int):
        def launch(*args, grid) -> None:
            loader.order.append(signature.name)
            model(signature.name, *args)

        return launch

    return prepared


def _scatter_launches(loader: RecordingLoader):
    """:data:`gsparse._block_scatter.PROGRAMS`' launches, computed by :func:`_scatter_kernel_model`."""
    return _modelled_launches(loader, _scatter_kernel_model)


def _loops_kernel_model(name: str, *args) -> None:
    """What a kernel of :mod:`gsparse._block_loops` writes, with PyTorch operations (those of
    the layers' CPU path), unseen by the torch-function modes that count a step's calls."""
    with torch._C.DisableTorchFunction():
        if name.startswith("block_loops"):
            rowptr, col, num_rows, loop_edges, loop_rowptr, edges, masked = args
            block = Graph._made(Csr(rowptr, col, None, num_rows), sync_free=True)
            graph, want_edges, want_masked = _loop_graph_in_torch(block)
            loop_rowptr.copy_(graph.rowptr)
            edges.copy_(want_edges)
            masked.copy_(want_masked)
        elif name.startswith("loop_degrees"):
            loop_rowptr, masked, num_rows, improved, dinv, weight = args
            lengths = loop_rowptr[1:] - loop_rowptr[:-1]
            rows = torch.repeat_interleave(torch.arange(num_rows), lengths.long())
            loop_at = loop_rowptr[1:].long() - 1
            weight.copy_(torch.where(masked, 0.0, 1.0))
            own = torch.zeros(num_rows, dtype=torch.long).index_add_(0, rows, masked.long()) > 0
            if improved:
                weight[loop_at] = torch.where(own, 1.0, 2.0).to(weight.dtype)
            deg = torch.zeros(num_rows, dtype=weight.dtype).index_add_(0, rows, weight)
            dinv.copy_(deg.pow(-0.5))
        else:  # loop_weights
            edges, loop_edges, dinv, weight = args
            weight.mul_(dinv[edges.long()].prod(0))


def _scatter_kernel_model(name: str, col, dst, eid, lhs, rhs, rowptr, num_edges, heads, width, lhs_spread,
                          rhs_spread, out, lanes_log2) -> None:
    """What a kernel of :mod:`gsparse._block_scatter` adds to ``out``, with PyTorch
    operations, unseen by the torch-function modes that count a step's calls."""
    op = name.removeprefix("block_scatter_").rsplit("_", 3)[0]  # then dtype, index type, vector
    with torch._C.DisableTorchFunction():
        edge = torch.arange(num_edges) if eid is None else eid.long()

        def rows(t: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor | None:
            # [E, heads, 1 or width] (a spread operand's rows hold one value a head)
            return None if t is None else t.reshape(t.shape[0], heads, -1)[index.long()]

        if op == "copy_lhs_over_degree":  # a mean's gradient: each lhs row over its degree
            op = "copy_lhs"
            degrees = (rowptr[1:] - rowptr[:-1]).to(lhs.dtype).clamp(min=1)
            lhs = lhs / degrees.view(-1, *([1] * (lhs.dim() - 1)))
        lhs_rows, rhs_rows = rows(lhs, dst), rows(rhs, edge)
        message = {"copy_lhs": lambda: lhs_rows, "copy_rhs": lambda: rhs_rows,
                   "mul": lambda: lhs_rows * rhs_rows, "div": lambda: lhs_rows / rhs_rows}[op]()
        message = message.expand(num_edges, heads, width).reshape(num_edges, heads * width)
        out.view(out.shape[0], heads * width).index_add_(0, col.long(), message)


def _block_kernel_model(name: str, args: list) -> None:
    """What a block kernel of :mod:`gsparse._block_checks` writes (the checks aside), with
    PyTorch operations, unseen by the torch-function modes that count a step's calls."""
    with torch._C.DisableTorchFunction():
        edges = args[0]
        if name.startswith("sorted_edges"):
            rowptr, col, rows = args[3:6]
            col.copy_(edges[0])
            rows.copy_(edges[1])
            bounds = torch.arange(rowptr.numel(), dtype=edges.dtype)
            rowptr.copy_(torch.searchsorted(edges[1].contiguous(), bounds))
        elif name.startswith("count_edges"):
            counts = args[3]
            counts.add_(torch.bincount(edges[1], minlength=counts.numel()).to(counts.dtype))
        elif name.startswith("order_rows"):
            col, eid, rows = args[4:7]
            order = torch.argsort(edges[1], stable=True)
            eid.copy_(order)
            col.copy_(edges[0][order])
            rows.copy_(edges[1][order])


@contextlib.contextmanager
def block_checks_on_gpu() -> Iterator[list[str]]:
    """Blocks (``Graph.from_block``) built and checked as on a GPU, in one launch of a block
    kernel each (two for a bucketed one), whose name is appended to the list yielded; what
    the kernel writes is made on the CPU (:func:`_block_kernel_model`)."""
    launched: list[str] = []

    def prepared(signature, device_index: int):
        def launch(*args, grid) -> None:
            launched.append(signature.name)
            _block_kernel_model(signature.name, list(args))

        return launch

    previous = _block_checks.on_gpu, _block_checks.KERNELS
    _block_checks.on_gpu = lambda tensor: True
    _block_checks.KERNELS = prepared
    try:
        yield launched
    finally:
        _block_checks.on_gpu, _block_checks.KERNELS = previous


_READS = {torch.Tensor.__bool__, torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__int__,
          torch.Tensor.__float__, torch.Tensor.__index__, torch.Tensor.numpy}
_DATA_SIZED = {torch.nonzero, torch.Tensor.nonzero, torch.bincount, torch.Tensor.bincount,
               torch.unique, torch.Tensor.unique, torch.unique_consecutive, torch.masked_select,
               torch.Tensor.masked_select, torch.argwhere, torch.Tensor.argwhere}


def host_read(func, args, kwargs) -> str | None:
    """How the torch call ``func(*args, **kwargs)`` reads device data back to the host, or
    None if it does not."""
    if func in _READS or func in _DATA_SIZED:
        return f"{getattr(func, '__name__', func)} reads the device back"
    if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__):
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index):
            return "boolean-mask indexing reads the device back"
    if func in (torch.repeat_interleave, torch.Tensor.repeat_interleave):
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        if isinstance(repeats, torch.Tensor) and kwargs.get("output_size") is None:
            return "repeat_interleave by a tensor without output_size reads the device back"
    return None


class NoHostReads(TorchFunctionMode):
    """AssertionError on any torch call that reads device data back to the host: ``bool``,
    ``item``, ``int``, ``tolist``; ``nonzero``, ``bincount``, ``unique`` and the like;
    boolean-mask indexing; ``repeat_interleave`` by a tensor without ``output_size``."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (why := host_read(func, args, kwargs)) is not None:
            raise AssertionError(why)
        return func(*args, **kwargs)


class HostReads(TorchFunctionMode):
    """Records, in ``reads``, the name of each torch call that :class:`NoHostReads` would
    fail (on a GPU, each is a host wait)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if host_read(func, args, kwargs) is not None:
            self.reads.append(getattr(func, "__name__", str(func)))
        return func(*args, **kwargs)


# Torch functions that read a tensor's metadata: no kernel on any device. Attribute reads
# (.shape, .device, ...) come as their getter's __get__.
METADATA = {torch.Tensor.dim, torch.Tensor.numel, torch.Tensor.size, torch.Tensor.stride,
            torch.Tensor.data_ptr, torch.Tensor.get_device, torch.Tensor.is_contiguous,
            torch.Tensor.is_floating_point, torch.Tensor.element_size, torch.Tensor.__len__}


class TorchCalls(TorchFunctionMode):
    """Counts the torch functions called from Python: ``count`` in all, ``metadata`` of
    them reads of a tensor's metadata; ``launching`` the others. Of those, ``views``
    return what they were given or a view of it (a reshape, a slice, ``contiguous()`` of
    a contiguous tensor): no kernel either; ``kernels`` the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.metadata = 0
        self.views = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.count += 1
        if func in METADATA or getattr(func, "__name__", "") == "__get__":
            self.metadata += 1
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        self.views += _aliases(func, out, (*args, *kwargs.values()))
        return out

    @property
    def launching(self) -> int:
        return self.count - self.metadata

    @property
    def kernels(self) -> int:
        return self.count - self.metadata - self.views


def _storages(values) -> list[int]:
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value.untyped_storage().data_ptr())
        elif isinstance(value, (list, tuple)):
            found += _storages(value)
    return found


def _aliases(func, out, inputs) -> bool:
    """Whether a torch call neither writes nor makes new storage: its tensor outputs, if
    any, are inputs or views of them (``index_copy_`` returns its input, written in place;
    ``__setitem__`` returns nothing, having written)."""
    name = getattr(func, "__name__", "")
    if (name.endswith("_") and not name.endswith("__")) or func is torch.Tensor.__setitem__:
        return False
    outs = _storages((out,))
    given = set(_storages(inputs))
    return all(ptr and ptr in given for ptr in outs)


def backward_counted(loss: torch.Tensor) -> None:
    """``loss.backward()``, with the backward's torch calls seen by the modes around it:
    ``Tensor.backward`` runs without them (a mode is off while it handles a call), the
    autograd engine called directly runs inside them."""
    torch.autograd.Variable._execution_engine.run_backward(
        (loss,), (torch.ones_like(loss),), False, False, (), allow_unreachable=True,
        accumulate_grad=True)


def autograd_nodes(loss: torch.Tensor) -> int:
    """The nodes of the autograd graph behind ``loss``: what its backward runs."""
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


def step_blocks(seeds: int, fanouts: tuple[int, int], device: str | torch.device, gen: torch.Generator,
                nodes: int) -> Blocks:
    """A step's pair of blocks as the benchmark's sampler hands them over (sorted by
    destination): seeds ``[0, B)``, ``fanouts[0]`` edges into each seed from ``[0, N1)``,
    ``fanouts[1]`` into each other node of ``[0, N1)`` from ``[0, N0)``; ``n_id`` picks rows
    of a feature table of ``nodes`` rows."""
    n1 = seeds * (1 + fanouts[0])
    n0 = n1 * (1 + fanouts[1])
    inner_dst = torch.arange(seeds).repeat_interleave(fanouts[0])
    inner = torch.stack([torch.randint(0, n1, (inner_dst.numel(),), generator=gen), inner_dst])
    outer_dst = torch.arange(seeds, n1).repeat_interleave(fanouts[1])
    outer = torch.cat([inner, torch.stack([torch.randint(0, n0, (outer_dst.numel(),), generator=gen),
                                           outer_dst])], dim=1)
    n_id = torch.randperm(nodes, generator=gen)[:n0]
    return Blocks(n_id.to(device), (seeds, n1, n0), outer.to(device), inner.to(device), max(fanouts))
