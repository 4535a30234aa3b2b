"""What the collector records about a graph beyond its structure statistics."""

from __future__ import annotations

import math

import torch

from gsparse import Graph
from gsparse.tune.collect import row_length_profile


def test_row_length_profile_counts_length_classes_and_lane_padding():
    gen = torch.Generator().manual_seed(3)
    lengths = torch.tensor([0, 1, 2, 3, 4, 7, 8, 31, 33, 300, 0, 5])
    dst = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    src = torch.randint(0, 50, (int(lengths.sum()),), generator=gen)
    g = Graph.from_edge_index(torch.stack([src, dst]), num_nodes=50)
    profile = row_length_profile(g)

    real = [0, 1, 2, 3, 4, 7, 8, 31, 33, 300, 0, 5] + [0] * 38
    expected_rows = [0] * 34
    for n in real:
        expected_rows[0 if n == 0 else int(math.log2(n)) + 1] += 1
    assert profile["rows"] == expected_rows
    edges = sum(real)
    for i, padding in enumerate(profile["padding"]):
        group = 1 << i
        assert padding == sum(-(-n // group) * group for n in real) / edges
    assert profile["padding"][0] == 1.0
