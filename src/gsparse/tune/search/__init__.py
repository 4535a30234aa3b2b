"""Search strategies over a schedule space: exhaustive (the oracle)."""

from .exhaustive import FINALISTS, exhaustive_search

__all__ = ["FINALISTS", "exhaustive_search"]
