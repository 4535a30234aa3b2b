"""How operands map onto a kernel's features: layouts, broadcast offsets, vector widths."""

from __future__ import annotations

import torch

from gsparse.kernels.operands import (
    Layout,
    broadcast_offsets,
    indexed_offsets,
    misalignment,
    operand_layout,
    pow2_at_least,
    vector_limit,
    widest_vector,
)


def test_layouts() -> None:
    assert operand_layout((3, 8), (3, 8)) is Layout.FULL
    assert operand_layout((1, 1), (3, 8)) is Layout.SCALAR
    assert operand_layout((1, 8), (3, 8)) is Layout.INDEXED
    assert operand_layout((3, 1), (3, 8)) is Layout.INDEXED


def test_broadcast_offsets_index_each_output_feature_into_the_operand_row() -> None:
    assert broadcast_offsets((1, 4), (2, 4)).tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert broadcast_offsets((2, 1), (2, 4)).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    offsets = indexed_offsets((2, 1), (2, 4), torch.device("cpu"))
    assert offsets.dtype == torch.int32 and offsets is indexed_offsets((2, 1), (2, 4), torch.device("cpu"))
    assert indexed_offsets((2, 4), (2, 4), torch.device("cpu")) is None  # full: offset f is f
    assert indexed_offsets(None, (2, 4), torch.device("cpu")) is None


def test_vector_widths() -> None:
    assert [pow2_at_least(n) for n in (0, 1, 3, 4, 100)] == [1, 1, 4, 4, 128]
    assert widest_vector(12, 8) == 4 and widest_vector(6, 8) == 2 and widest_vector(8, 2) == 2
    assert widest_vector(7, 8) == 1
    x = torch.zeros(64)
    assert vector_limit(16, [misalignment(x)], torch.float32) == 4  # 16 bytes
    assert vector_limit(16, [misalignment(x.half())], torch.float16) == 8
    assert vector_limit(6, [misalignment(x)], torch.float32) == 2  # never straddles two rows
    assert vector_limit(16, [misalignment(x[1:])], torch.float32) == 1  # 4 bytes off alignment
    assert vector_limit(16, [misalignment(x[2:])], torch.float32) == 2
