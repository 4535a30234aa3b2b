"""Named presets: synthetic stand-ins with the statistics of the source papers' datasets."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..graph import Graph
from .synthetic import LogNormal, _check_int, _check_real, synthetic

__all__ = ["Preset", "PRESETS", "SUITES", "preset", "scale_for_edges"]

_DEFAULT_COV = 1.0  # for the SpMM report's graphs, whose row-length COV is not published
_REPORT = "SpMM optimisation report (seed 004)"
_REPORT_DATA = "nodes and nnz of the report's data file"


@dataclass(frozen=True)
class Preset:
    """The statistics of a published graph, for a synthetic stand-in with lognormal rows."""

    name: str
    num_nodes: int
    num_edges: int
    cov: float
    description: str
    source: str

    @property
    def mean(self) -> float:
        """Mean row length ``num_edges / num_nodes``."""
        return self.num_edges / self.num_nodes

    @property
    def degree(self) -> LogNormal:
        """The row-length law of the stand-in, ``LogNormal(mean, cov)``."""
        return LogNormal(self.mean, self.cov)


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("reddit-like", 232_965, 114_615_892, 1.63,
           "Reddit posts, linked when one user commented on both (Hamilton et al.; DGL Reddit)",
           "G-Sparse, Tables III and V (COV 1.63, mean 492); the report's 'reddit.dgl'"),
    Preset("proteins-like", 132_534, 79_122_504, 1.04,
           "ogbn-proteins: proteins linked by biologically meaningful associations",
           "G-Sparse, Tables III and V (COV 1.04, mean 597); the report's 'protein'"),
    Preset("products-like", 2_449_029, 123_718_280, 1.88,
           "ogbn-products: Amazon products linked when bought together",
           "G-Sparse, Tables III and V (COV 1.88, mean 51); the report's 'products'"),
    Preset("arxiv-like", 169_343, 1_166_243, _DEFAULT_COV,
           "ogbn-arxiv citations; COV not published, default 1.0 (the report notes 36.6% empty "
           "rows and 30 rows over 5000: the real graph is far more skewed)",
           f"{_REPORT} 'arxiv'; {_REPORT_DATA} = ogbn-arxiv (OGB)"),
    Preset("collab-like", 235_868, 2_358_104, _DEFAULT_COV,
           "ogbl-collab co-authorship; COV not published, default 1.0",
           f"{_REPORT} 'collab'; {_REPORT_DATA} = ogbl-collab (OGB), both directions"),
    Preset("citation-like", 2_927_963, 30_387_995, _DEFAULT_COV,
           "ogbl-citation2 citations; COV not published, default 1.0",
           f"{_REPORT} 'citation'; {_REPORT_DATA} = ogbl-citation2 (OGB) training edges"),
    Preset("ddi-like", 4_267, 2_135_822, _DEFAULT_COV,
           "ogbl-ddi drug interactions, dense (mean 500); COV not published, default 1.0",
           f"{_REPORT} 'ddi'; {_REPORT_DATA} = ogbl-ddi (OGB) training edges, both directions"),
    Preset("ppa-like", 576_289, 42_463_862, _DEFAULT_COV,
           "ogbl-ppa protein associations; COV not published, default 1.0",
           f"{_REPORT} 'ppa'; {_REPORT_DATA} = ogbl-ppa (OGB) training edges, both directions"),
    Preset("youtube-like", 1_138_499, 5_980_886, _DEFAULT_COV,
           "YouTube friendships (Tang and Liu); COV not published, default 1.0",
           f"{_REPORT} 'youtube'; {_REPORT_DATA}, both directions"),
    Preset("amazon-like", 1_569_960, 264_339_468, _DEFAULT_COV,
           "AmazonProducts co-purchases (GraphSAINT, via CogDL); COV not published, default 1.0",
           f"{_REPORT} 'amazon_cogdl'; {_REPORT_DATA} = GraphSAINT AmazonProducts"),
    Preset("yelp-like", 716_847, 13_954_819, _DEFAULT_COV,
           "Yelp friendships (GraphSAINT); COV not published, default 1.0",
           f"{_REPORT} 'yelp'; {_REPORT_DATA} = GraphSAINT Yelp"),
    Preset("wikikg2-like", 2_500_604, 16_109_182, _DEFAULT_COV,
           "ogbl-wikikg2 Wikidata triples; COV not published, default 1.0 (the report notes "
           "0.1% of rows over 30 and none over 1000: the real graph is less skewed)",
           f"{_REPORT} 'wikikg2'; {_REPORT_DATA} = ogbl-wikikg2 (OGB) training triples"),
    Preset("am-like", 881_680, 5_668_682, _DEFAULT_COV,
           "AM RDF graph of the Amsterdam Museum (DGL); COV not published, default 1.0",
           f"{_REPORT} 'am'; {_REPORT_DATA} = DGL AMDataset"),
)}
"""Every :class:`Preset` by name (``"reddit-like"``, ``"products-like"``, ...)."""

SUITES: dict[str, tuple[str, ...]] = {
    "gsparse": ("reddit-like", "proteins-like", "products-like"),
    "spmm-report": ("arxiv-like", "collab-like", "citation-like", "ddi-like", "proteins-like",
                    "ppa-like", "reddit-like", "products-like", "youtube-like", "amazon-like",
                    "yelp-like", "wikikg2-like", "am-like"),
}
"""Named workloads: the presets of each source document, in its order."""


def preset(name: str, *, scale: float = 1.0, seed: int = 0, device: torch.device | str = "cpu") -> Graph:
    """The synthetic stand-in for preset ``name`` (uniform columns, lognormal rows, sorted).

    ``scale`` multiplies the node count (``round(num_nodes * scale)`` nodes) and keeps the
    mean row length and its COV: ``scale=0.05`` gives a quick CPU-sized graph.
    """
    if name not in PRESETS:
        raise ValueError(f"name must be one of {sorted(PRESETS)}, got {name!r}")
    p = PRESETS[name]
    if _check_real("scale", scale) <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    num_nodes = round(p.num_nodes * scale)
    if num_nodes < p.mean:
        raise ValueError(f"scale = {scale} leaves {num_nodes} nodes for {name!r}, fewer than its mean row "
                         f"length {p.mean:.4g}; use scale >= {math.ceil(p.mean) / p.num_nodes:.3g}")
    return synthetic(num_nodes, p.degree, seed=seed, device=device)


def scale_for_edges(name: str, max_edges: int) -> float:
    """A scale for preset ``name`` with at most about ``max_edges`` edges (never above 1).

    Rows must stay a small part of the node count for the row-length distribution to keep
    its shape, so the scale never leaves fewer than 8 times the mean row length in nodes
    (which may exceed ``max_edges`` for the densest presets).
    """
    if name not in PRESETS:
        raise ValueError(f"name must be one of {sorted(PRESETS)}, got {name!r}")
    _check_int("max_edges", max_edges, 1)
    p = PRESETS[name]
    least = 8 * p.mean / p.num_nodes
    return min(1.0, max(max_edges / p.num_edges, least))


