"""Graphs to run on: seeded synthetic generators, named presets and real-graph loaders.

* :func:`synthetic` builds a square graph from a row-length distribution
  (:class:`LogNormal`, :class:`PowerLaw`) and a column locality (:class:`Clustered`).
* :data:`PRESETS` / :func:`preset`: stand-ins with the statistics of published graphs
  (``"reddit-like"``, ``"products-like"``, ...), at any scale.
* :func:`real_graph`, :func:`load_npz`, :func:`load_graph`: real graphs from ``.npz``,
  Matrix Market (``.mtx``) and edge-list files, found in :func:`data_dirs`
  (``$GSPARSE_DATA_DIR``).
* :func:`workload` resolves any of those names (or a file path) to a graph.

The benchmark suite and the tuner both draw their graphs from here.
"""

from .presets import PRESETS, SUITES, Preset, preset, scale_for_edges
from .real import DATA_DIR_ENV, REAL_GRAPHS, Dataset, data_dirs, load_graph, load_npz, real_graph
from .synthetic import Clustered, LogNormal, PowerLaw, synthetic
from .workloads import Workload, describe, workload

__all__ = [
    "LogNormal",
    "PowerLaw",
    "Clustered",
    "synthetic",
    "Preset",
    "PRESETS",
    "SUITES",
    "preset",
    "scale_for_edges",
    "Dataset",
    "load_npz",
    "load_graph",
    "REAL_GRAPHS",
    "DATA_DIR_ENV",
    "data_dirs",
    "real_graph",
    "Workload",
    "workload",
    "describe",
]
