"""The float64 oracle: each operator written as plainly as possible, one row or edge at a time.

Deliberately independent of the backends (NumPy loops, no scatter kernels), so that a
shared mistake cannot hide. Slow: for tests on small graphs only.
"""

from __future__ import annotations

import numpy as np
import torch

from ..algebra import BINARY_OPS
from ..graph import Graph

_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "dot": lambda a, b: np.sum(a * b, axis=-1, keepdims=True),
    "copy_lhs": lambda a, b: a,
    "copy_rhs": lambda a, b: b,
}


def _f64(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().to("cpu", torch.float64).numpy()


def _edge_list(g: Graph) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` in edge order, derived from the CSR without the graph's own caches."""
    rowptr = g.rowptr.cpu().numpy().astype(np.int64)
    col = g.col.cpu().numpy().astype(np.int64)
    eid = np.arange(len(col)) if g.eid is None else g.eid.cpu().numpy().astype(np.int64)
    src = np.empty(len(col), np.int64)
    dst = np.empty(len(col), np.int64)
    for v in range(g.num_dst):
        for p in range(rowptr[v], rowptr[v + 1]):
            src[eid[p]] = col[p]
            dst[eid[p]] = v
    return src, dst


def _feature_shape(x: np.ndarray | None, y: np.ndarray | None) -> tuple[int, ...]:
    shapes = [a.shape[1:] for a in (x, y) if a is not None]
    return np.broadcast_shapes(*shapes)


def gspmm_ref(g: Graph, op: str, reduce: str, lhs=None, rhs=None) -> torch.Tensor:
    """float64 g-SpMM on the CPU (DGL semantics); returns a float64 tensor."""
    x = _f64(lhs) if BINARY_OPS[op].uses_lhs else None
    y = _f64(rhs) if BINARY_OPS[op].uses_rhs else None
    shape = _feature_shape(x, y)
    src, dst = _edge_list(g)
    out = np.zeros((g.num_dst, *shape))
    incoming: list[list[int]] = [[] for _ in range(g.num_dst)]
    for e in range(g.num_edges):
        incoming[dst[e]].append(e)
    for v, edges in enumerate(incoming):
        if not edges:
            continue
        msgs = []
        for e in edges:
            a = None if x is None else x[src[e]]
            b = None if y is None else y[e]
            msgs.append(np.broadcast_to(_BINARY[op](a, b), shape))
        stacked = np.stack(msgs)
        out[v] = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[reduce](stacked, axis=0)
    return torch.from_numpy(out)


def gsddmm_ref(g: Graph, op: str, lhs, rhs, lhs_target: str = "u", rhs_target: str = "v") -> torch.Tensor:
    """float64 g-SDDMM on the CPU (DGL semantics, 1-D operands as ``[rows, 1]``)."""
    x = _f64(lhs) if BINARY_OPS[op].uses_lhs else None
    y = _f64(rhs) if BINARY_OPS[op].uses_rhs else None
    flat = all(a is None or a.ndim == 1 for a in (x, y))
    dot = BINARY_OPS[op].reduces_last_dim
    if dot:
        x, y = (a[:, None] if a.ndim == 1 else a for a in (x, y))
    src, dst = _edge_list(g)
    rows = []
    for e in range(g.num_edges):
        pick = {"u": src[e], "v": dst[e], "e": e}
        a = None if x is None else x[pick[lhs_target]]
        b = None if y is None else y[pick[rhs_target]]
        rows.append(np.asarray(_BINARY[op](a, b)))
    if dot:
        shape = (*np.broadcast_shapes(x.shape[1:-1], y.shape[1:-1]), 1)
    else:
        shape = _feature_shape(x, y)
    out = np.zeros((g.num_edges, *shape))
    for e, r in enumerate(rows):
        out[e] = np.broadcast_to(r, shape)
    if dot and flat:
        out = out[:, 0]
    return torch.from_numpy(out)


def edge_softmax_ref(g: Graph, logits, norm_by: str = "dst") -> torch.Tensor:
    """float64 edge softmax on the CPU."""
    z = _f64(logits)
    src, dst = _edge_list(g)
    group = dst if norm_by == "dst" else src
    out = np.zeros_like(z)
    for node in np.unique(group):
        edges = np.nonzero(group == node)[0]
        shifted = np.exp(z[edges] - z[edges].max(axis=0))
        out[edges] = shifted / shifted.sum(axis=0)
    return torch.from_numpy(out)


def gat_attention_ref(g: Graph, score_src, score_dst, negative_slope: float = 0.2, edge_scores=None,
                      masked=None) -> torch.Tensor:
    """float64 GAT attention on the CPU: the edge softmax over each destination's edges of
    ``leaky_relu(score_src[u] + score_dst[v] (+ edge_scores[e]))``, masked edges ``-inf``."""
    src, dst = _edge_list(g)
    z = _f64(score_src)[src] + _f64(score_dst)[dst]
    if edge_scores is not None:
        z = z + _f64(edge_scores)
    z = np.where(z > 0, z, z * negative_slope)
    if masked is not None:
        z[masked.cpu().numpy()] = -np.inf
    return edge_softmax_ref(g, torch.from_numpy(z))
