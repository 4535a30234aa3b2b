"""Helpers for testing gsparse and code built on it: the float64 reference operators."""

from .reference import edge_softmax_ref, gsddmm_ref, gspmm_ref

__all__ = ["gspmm_ref", "gsddmm_ref", "edge_softmax_ref"]
