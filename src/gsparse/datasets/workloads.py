"""Workloads: a name (preset, real graph or file) resolved to a graph, and its description."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..graph import Graph
from .presets import PRESETS, preset, scale_for_edges
from .real import _SUFFIXES, REAL_GRAPHS, load_graph, real_graph

__all__ = ["Workload", "workload", "describe"]


def describe(graph: Graph) -> dict[str, int | float]:
    """Size and row-length statistics of ``graph``, for reports (keys are stable)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a gsparse.Graph, got {type(graph).__name__}")
    stats = graph.row_stats
    return {
        "num_src": graph.num_src,
        "num_dst": graph.num_dst,
        "num_edges": graph.num_edges,
        "row_mean": stats.mean,
        "row_max": stats.max,
        "row_cov": stats.cov,
    }



@dataclass(frozen=True, eq=False)
class Workload:
    """A named graph to benchmark on, with a line saying where it came from."""

    name: str
    graph: Graph
    source: str


def workload(
    spec: str,
    *,
    scale: float | None = None,
    max_edges: int | None = None,
    seed: int = 0,
    device: torch.device | str = "cpu",
    data_dir: str | os.PathLike[str] | None = None,
) -> Workload:
    """Resolve a workload name: a preset, a real graph, or a path to a graph file.

    Args:
        spec: a key of :data:`PRESETS` (synthetic), one of :data:`REAL_GRAPHS` (read from
            :func:`data_dirs`), or a file :func:`load_graph` reads.
        scale: node-count scale of a preset; ``None`` picks :func:`scale_for_edges` with
            ``max_edges`` when that is given, else the full size. Ignored for real graphs
            and files.
        max_edges: see ``scale``.
        seed: seed of a synthetic graph.
        device: where the graph is built (synthetic) or moved to (loaded).
        data_dir: the folder a real graph is read from (see :func:`real_graph`).

    Raises:
        ValueError: ``spec`` names none of these, or a file cannot be read.
        FileNotFoundError: a graph file, or a real graph in ``data_dir``, is missing.
    """
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"spec must be a non-empty workload name or path, got {spec!r}")
    if spec in PRESETS:
        if scale is None:
            scale = 1.0 if max_edges is None else scale_for_edges(spec, max_edges)
        graph = preset(spec, scale=scale, seed=seed, device=device)
        return Workload(spec, graph, f"synthetic preset {spec}, scale {scale:.4g}, seed {seed}: "
                                     f"{PRESETS[spec].source}")
    if spec in REAL_GRAPHS:
        return Workload(spec, real_graph(spec, data_dir).graph.to(device), f"real graph {spec}.npz")
    path = Path(spec)
    if path.suffix.lower() in _SUFFIXES or path.exists():
        return Workload(path.stem, load_graph(path).to(device), f"file {path}")
    raise ValueError(f"workload {spec!r} is neither a preset {sorted(PRESETS)}, a real graph "
                     f"{list(REAL_GRAPHS)}, nor a graph file ({', '.join(_SUFFIXES)})")
