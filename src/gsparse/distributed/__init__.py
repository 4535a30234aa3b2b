"""Graphs larger than one GPU: partitioned g-SpMM, g-SDDMM and edge softmax over ``torch.distributed``.

The graph's destination rows are partitioned across the ranks of a process group
(:func:`partition`, :func:`range_partition`, ...); each rank builds its
:class:`DistGraph` (its rows, their incoming edges, and the *halo*: the remote source
nodes those edges read) and calls :func:`gspmm`, :func:`gsddmm`, :func:`edge_softmax` and
:func:`gat_attention` on its own rows' features. Halo features travel by ``all_to_all_single`` (NCCL on GPUs,
gloo on the CPU) while the edges that need no remote data are computed; gradients of
remote features flow back to their owners the same way. ``gsparse.nn`` layers take a
DistGraph where they take a Graph. See ``docs/distributed.md``.
"""

from .dist_graph import EXCHANGES, DistGraph, DistSelfLoops
from .exchange import CommStats
from .ops import edge_softmax, gat_attention, gsddmm, gspmm
from .partition import (
    METHODS,
    Partition,
    PartitionReport,
    in_degrees,
    locality_partition,
    metis_partition,
    partition,
    partition_report,
    range_partition,
)

__all__ = [
    "DistGraph",
    "DistSelfLoops",
    "EXCHANGES",
    "CommStats",
    "gspmm",
    "gsddmm",
    "edge_softmax",
    "gat_attention",
    "Partition",
    "PartitionReport",
    "METHODS",
    "in_degrees",
    "range_partition",
    "locality_partition",
    "metis_partition",
    "partition",
    "partition_report",
]
