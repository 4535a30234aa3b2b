"""Backends compute the operators after the front end has validated and shaped the inputs.

A backend receives contiguous operands of one dtype whose feature dimensions are already
padded to the same count (DGL's broadcasting), edge operands in the user's edge order,
and returns results in the user's edge order. Results are new tensors, never views of an
operand (the custom ops of :mod:`gsparse._ops` promise torch.library no aliasing). The
CPU backend (PyTorch ops) runs on any device; the CUDA backend (generated kernels)
registers itself for CUDA tensors.
"""

from __future__ import annotations

from typing import Protocol

import torch

from ..graph import Graph
from . import cpu, cuda


class Backend(Protocol):
    def spmm(
        self,
        g: Graph,
        op: str,
        reduce: str,
        lhs: torch.Tensor | None,
        rhs: torch.Tensor | None,
        out_shape: tuple[int, ...],
        schedule: object | None = None,
        with_arg: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``out`` ``[num_dst, *out_shape]``; with ``with_arg`` (max/min only, else
        ValueError) ``(out, arg_u, arg_e)``: int64 tensors of ``out``'s shape holding the
        source node and the user edge id of the winning edge of each output element, -1 in
        rows with no edges. Ties go to the first edge of the row in CSR order."""
        ...

    def sddmm(
        self,
        g: Graph,
        op: str,
        lhs: torch.Tensor | None,
        rhs: torch.Tensor | None,
        lhs_target: str,
        rhs_target: str,
        out_shape: tuple[int, ...],
        schedule: object | None = None,
    ) -> torch.Tensor: ...

    def edge_softmax(self, g: Graph, logits: torch.Tensor, norm_by: str) -> torch.Tensor: ...

    def edge_softmax_grad(self, g: Graph, y: torch.Tensor, grad: torch.Tensor, norm_by: str) -> torch.Tensor:
        """The gradient of an edge softmax's logits, ``y ⊙ (grad - Σ grad ⊙ y)`` with the sum
        over the edges of each edge's destination (``norm_by="dst"``) or source, from its
        output ``y`` and the gradient ``grad`` of ``y`` (both ``[num_edges, *shape]``)."""
        ...

    def gat_attention(self, g: Graph, score_src: torch.Tensor, score_dst: torch.Tensor,
                      edge_scores: torch.Tensor | None, masked: torch.Tensor | None,
                      negative_slope: float) -> torch.Tensor:
        """GAT's attention ``[num_edges, *shape]``: the edge softmax over each destination's
        edges of ``leaky_relu(score_src[u] + score_dst[v] (+ edge_scores[e]))``, each step
        rounded to the scores' dtype, with the edges ``masked`` marks (``[num_edges]`` bool)
        at ``-inf``."""
        ...

    def gat_attention_grad(self, g: Graph, y: torch.Tensor, grad: torch.Tensor,
                           score_src: torch.Tensor, score_dst: torch.Tensor,
                           edge_scores: torch.Tensor | None, masked: torch.Tensor | None,
                           negative_slope: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``(dz, d_dst)``: the gradient of :meth:`gat_attention`'s logits before the
        LeakyReLU (0 where masked) and its sum over each destination's edges, from its output
        ``y`` and the gradient ``grad`` of ``y``."""
        ...


_BY_DEVICE_TYPE: dict[str, Backend] = {}

LAYOUT_DEPENDENT: set[str] = set()
"""The device types whose backend resolves a call differently for operands of another
contiguity or address alignment (the generated kernels read aligned vectors): the front
ends' resolved calls (:func:`gsparse._calls.facts`) tell such operands apart. A backend
declares the opposite with a true ``layout_independent`` attribute (the PyTorch-ops
backend, which makes its operands contiguous itself and reads them at any address)."""


def register(device_type: str, backend: Backend) -> None:
    """Route tensors of ``device_type`` (e.g. ``"cuda"``) to ``backend``."""
    _BY_DEVICE_TYPE[device_type] = backend
    if getattr(backend, "layout_independent", False):
        LAYOUT_DEPENDENT.discard(device_type)
    else:
        LAYOUT_DEPENDENT.add(device_type)


def for_device(device: torch.device) -> Backend:
    """The backend registered for ``device``'s type, else the PyTorch-ops backend."""
    return _BY_DEVICE_TYPE.get(device.type, cpu.BACKEND)


register("cuda", cuda.BACKEND)
