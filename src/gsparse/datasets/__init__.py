"""Graphs to run on: seeded synthetic generators, named presets and real-graph loaders.

* :func:`synthetic` builds a square graph from a row-length distribution
  (:class:`LogNormal`, :class:`PowerLaw`) and a column locality (:class:`Clustered`).
* :data:`PRESETS` / :func:`preset`: stand-ins with the statistics of published graphs
  (``"reddit-like"``, ``"products-like"``, ...), at any scale.
* :func:`cora`, :func:`citeseer`, :func:`pubmed`: the Planetoid citation graphs, shipped
  with the package (they load offline), as a :class:`Dataset` with features, labels and
  the standard split.
* :func:`real_graph`, :func:`load_npz`, :func:`load_graph`: real graphs from ``.npz``,
  Matrix Market (``.mtx``) and edge-list files, found in :func:`data_dirs`
  (``$GSPARSE_DATA_DIR``).
* :func:`workload` resolves any of those names (or a file path) to a graph.
* Graph families for training and judging the tuner: degree laws (:func:`random_graph`
  with :class:`LogNormal`, :class:`PowerLaw`, :class:`Regular`; bipartite with
  ``num_src``), :func:`community_graph`, :func:`block_model_graph`, :func:`hub_graph`,
  :func:`rmat_graph`, :func:`lattice_graph`, :func:`road_graph`, :func:`sample_blocks`,
  :func:`knn_graph` of a :func:`point_cloud`, :func:`small_graph_batch` (molecule
  batches), :func:`small_world_graph`;
  node orderings (:func:`reorder`, :func:`node_order`, :func:`relabel`).
* :data:`FAMILIES` and :func:`corpus`: the families with randomised parameters, as a
  seeded stream of graphs; :func:`describe_structure`: cheap statistics of any graph.

The benchmark suite and the tuner both draw their graphs from here.
"""

from .batched import small_graph_batch
from .corpus import FAMILIES, Choice, Family, Range, corpus
from .families import (DegreeLaw, Regular, banded_graph, block_model_graph, citation_graph, clique_graph,
                       community_graph, hub_graph, popular_graph, random_graph)
from .geometric import EXACT_POINTS, knn_graph, point_cloud
from .lattices import STENCILS, lattice_edge_count, lattice_graph, road_graph, small_world_graph
from .orderings import ORDERINGS, node_order, relabel, reorder
from .presets import PRESETS, SUITES, Preset, preset, scale_for_edges
from .real import (DATA_DIR_ENV, REAL_GRAPHS, Dataset, citeseer, cora, data_dirs, load_graph, load_npz, pubmed,
                   real_graph)
from .synthetic import Clustered, LogNormal, PowerLaw, synthetic
from .rmat import rmat_graph
from .sampling import SampledBlock, sample_blocks
from .structure import GraphStructure, describe_structure
from .workloads import Workload, describe, workload

__all__ = [
    "cora",
    "citeseer",
    "pubmed",
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
    "Regular",
    "DegreeLaw",
    "random_graph",
    "community_graph",
    "block_model_graph",
    "hub_graph",
    "banded_graph",
    "popular_graph",
    "citation_graph",
    "clique_graph",
    "rmat_graph",
    "STENCILS",
    "lattice_graph",
    "lattice_edge_count",
    "road_graph",
    "small_world_graph",
    "point_cloud",
    "knn_graph",
    "EXACT_POINTS",
    "small_graph_batch",
    "SampledBlock",
    "sample_blocks",
    "ORDERINGS",
    "node_order",
    "relabel",
    "reorder",
    "GraphStructure",
    "describe_structure",
    "Range",
    "Choice",
    "Family",
    "FAMILIES",
    "corpus",
]
