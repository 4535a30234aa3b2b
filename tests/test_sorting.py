"""Stable sorts of any length (:mod:`gsparse._sorting`): past ``torch.sort``'s 2**31 - 1
elements they go in pieces, which a small piece exercises on the CPU."""

from __future__ import annotations

import pytest
import torch

from gsparse import Graph, _sorting


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("length, num_keys", [(0, 4), (1, 1), (50, 3), (1_000, 7), (999, 5_000)])
def test_pieces_sort_as_one_stable_sort(monkeypatch, dtype, length, num_keys):
    keys = torch.randint(0, num_keys, (length,), dtype=dtype, generator=torch.Generator().manual_seed(length))
    want = torch.sort(keys, stable=True)
    for piece in (1, 7, 64):
        monkeypatch.setattr(_sorting, "_PIECE", piece)
        got_keys, got_order = _sorting.stable_sort(keys, num_keys)
        assert torch.equal(got_keys, want.values) and torch.equal(got_order, want.indices)
        assert got_order.dtype == torch.int64


def test_graphs_built_with_sorts_in_pieces_are_the_same(monkeypatch):
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 40, (2, 600), generator=gen)
    weights = torch.rand(600, generator=gen)

    def built():
        g = Graph.from_edge_index(edge_index, num_src=40, num_dst=40)
        merged, merged_weights = g.coalesce(weights, "sum")
        return g, g.reverse(), merged, merged_weights

    whole = built()
    monkeypatch.setattr(_sorting, "_PIECE", 16)
    pieces = built()
    for a, b in zip(whole[:3], pieces[:3]):
        assert torch.equal(a.rowptr, b.rowptr) and torch.equal(a.col, b.col)
        assert (a.eid is None) == (b.eid is None) and (a.eid is None or torch.equal(a.eid, b.eid))
    assert torch.equal(whole[3], pieces[3])
