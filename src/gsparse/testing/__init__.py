"""Helpers for testing gsparse and code built on it: the float64 reference operators, and a
count of the host's waits for the GPU."""

from .reference import edge_softmax_ref, gsddmm_ref, gspmm_ref
from .sync import device_waits

__all__ = ["gspmm_ref", "gsddmm_ref", "edge_softmax_ref", "device_waits"]
