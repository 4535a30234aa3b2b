"""The output-tiled g-SpMM skeleton on the CPU: its tiling and edge layout, the kernel's walk
emulated lane by lane, and its recorded launches."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import gsparse
from gsparse.algebra import REDUCERS
from gsparse.kernels.spmm import OutputTiled, build_plan
from gsparse import _edge_passes
from gsparse.kernels.spmm.codegen import output_tiled
from gsparse.kernels.spmm.output_tiling import EdgeLayout, Tiling, build_layout, tiling_for
from gsparse.kernels.spmm.structures import output_tiles
from gsparse.target import H100
from gsparse.testing.reference import gspmm_ref

from graphs import named_graph, random_features
from kernels.spmm.support import output_tiled_graphs, task
from recording import RecordingLoader


def _target(sms: int, shared_bytes: int):
    """An H100 with ``sms`` SMs and ``shared_bytes`` of shared memory per block."""
    return dataclasses.replace(H100, sms=sms, shared_bytes_per_block=shared_bytes)


def _tiled(warps: int = 32, vector: int = 1, outputs: int = 1, groups: int = 1) -> OutputTiled:
    return OutputTiled(warps_per_block=warps, vector_width=vector, outputs_per_thread=outputs,
                       column_groups=groups)


def _identity(reduce: str) -> float:
    return REDUCERS[reduce].identity


def _fold(reduce: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if reduce in ("sum", "mean"):
        return a + b
    return torch.maximum(a, b) if reduce == "max" else torch.minimum(a, b)


def emulate(g: gsparse.Graph, tiling: Tiling, layout: EdgeLayout, warps: int, lhs: torch.Tensor,
            reduce: str) -> torch.Tensor:
    """The kernel's walk, lane by lane, in float64: runs, carries and their fold."""
    words = layout.words.long() % 2 ** 32
    chunk_ptr = layout.chunk_ptr.long().tolist()
    bounds = tiling.block_rows.tolist()
    num_features = lhs.shape[1]
    out = torch.zeros(g.num_dst, num_features, dtype=torch.float64)
    for b in range(tiling.blocks):
        rows = bounds[b + 1] - bounds[b]
        assert rows <= tiling.row_capacity
        sums = torch.full((rows, num_features), _identity(reduce), dtype=torch.float64)
        for t in range(tiling.tiles):
            x = lhs[t * tiling.tile_cols:(t + 1) * tiling.tile_cols].double()
            owner = {}
            for w in range(warps):
                c = (b * tiling.tiles + t) * warps + w
                base, n = chunk_ptr[c], chunk_ptr[c + 1] - chunk_ptr[c]
                steps = -(-n // 32)
                full = n - 32 * (steps - 1)
                carries = []  # (row, value) of each lane, None for a lane without edges
                for lane in range(32):
                    mine = steps if lane < full else steps - 1
                    run_row, run, carry = -1, None, None
                    for k in range(mine):
                        word = int(words[base + k * 32 + lane])
                        row, column = word >> 16, word & 0xFFFF
                        assert row < rows and column < x.shape[0]
                        assert owner.setdefault(row, w) == w, "a row in two warps of one tile"
                        if row != run_row:
                            assert row > run_row, "a lane's rows must not decrease"
                            if run_row >= 0:
                                if carry is None:
                                    carry = (run_row, run)
                                else:
                                    sums[run_row] = _fold(reduce, sums[run_row], run)
                            run_row, run = row, x[column].clone()
                        else:
                            run = _fold(reduce, run, x[column])
                    if run_row >= 0:
                        if carry is None:
                            carry = (run_row, run)
                        else:
                            sums[run_row] = _fold(reduce, sums[run_row], run)
                    carries.append(carry)
                present = [c for c in carries if c is not None]
                assert carries[:len(present)] == present, "lanes with edges come first"
                assert [r for r, _ in present] == sorted(r for r, _ in present)
                i = 0
                while i < len(present):
                    row, total = present[i]
                    i += 1
                    while i < len(present) and present[i][0] == row:
                        total = _fold(reduce, total, present[i][1])
                        i += 1
                    sums[row] = _fold(reduce, sums[row], total)
        degree = (g.rowptr[bounds[b] + 1:bounds[b + 1] + 1] - g.rowptr[bounds[b]:bounds[b + 1]]).double()
        if reduce == "mean":
            sums = sums / degree.clamp(min=1)[:, None]
        sums[degree == 0] = 0
        out[bounds[b]:bounds[b + 1]] = sums
    return out


# --- tiling and layout ------------------------------------------------------------------------


def test_tiling_cuts_rows_by_edges_and_fills_shared_memory() -> None:
    g = output_tiled_graphs()["hub"]
    tiling = tiling_for(g, 1, torch.float32, _target(8, 16 * 1024))
    bounds = tiling.block_rows
    assert tiling.blocks == 8 and int(bounds[0]) == 0 and int(bounds[-1]) == g.num_dst
    assert tiling.row_capacity == int((bounds[1:] - bounds[:-1]).max())
    assert tiling.tile_cols % 256 == 0 and tiling.tiles == math.ceil(3_000 / tiling.tile_cols) > 1
    assert tiling.shared_bytes <= 16 * 1024
    assert tiling.rows_bytes % 16 == 0 and tiling.rows_bytes >= tiling.row_capacity * 4
    # the hub row's block holds few rows; the others about equal edges
    edges = g.rowptr.long()[bounds[1:]] - g.rowptr.long()[bounds[:-1]]
    assert int(edges.max()) <= 5_000 + g.num_edges // 8


def test_tiling_caps_rows_per_block() -> None:
    g = output_tiled_graphs()["sparse_rows"]  # 9,981 empty rows among 10,000
    tiling = tiling_for(g, 4, torch.float32, _target(4, 16 * 1024))
    rows = tiling.block_rows[1:] - tiling.block_rows[:-1]
    assert int(rows.max()) * 16 <= 0.75 * 16 * 1024 and tiling.blocks > 4
    assert int(rows.sum()) == g.num_dst


def test_column_groups_keep_a_block_per_sm_with_wider_row_ranges() -> None:
    g = output_tiled_graphs()["hub"]
    one, two = (tiling_for(g, 1, torch.float32, _target(8, 48 * 1024), column_groups=groups)
                for groups in (1, 2))
    assert (one.row_ranges, one.blocks, two.row_ranges, two.blocks) == (8, 8, 4, 8)
    assert two.row_capacity > one.row_capacity
    assert two.group_tiles == -(-two.tiles // 2)
    assert two.shared_bytes <= 48 * 1024


def test_tiling_refuses_rows_that_cannot_fit() -> None:
    with pytest.raises(ValueError, match="cannot hold a row of 600"):
        tiling_for(named_graph("random"), 600, torch.float64, _target(4, 16 * 1024))


@pytest.mark.parametrize("name", list(output_tiled_graphs()))
@pytest.mark.parametrize("warps", [8, 32])
def test_layout_holds_every_edge_once(name: str, warps: int) -> None:
    g = output_tiled_graphs()[name]
    tiling = tiling_for(g, 2, torch.float32, _target(6, 12 * 1024))
    layout = build_layout(g, tiling, warps)
    assert layout.words.dtype == torch.int32 and layout.words.numel() == g.num_edges
    assert layout.chunk_ptr.dtype == layout.block_rows.dtype == g.index_dtype
    chunk_ptr = layout.chunk_ptr.long()
    assert chunk_ptr.numel() == tiling.blocks * tiling.tiles * warps + 1
    assert int(chunk_ptr[0]) == 0 and int(chunk_ptr[-1]) == g.num_edges
    assert (chunk_ptr[1:] >= chunk_ptr[:-1]).all()
    # decode every word back to its (row, column) and compare with the graph's edges
    sizes = chunk_ptr[1:] - chunk_ptr[:-1]
    chunk = torch.repeat_interleave(torch.arange(sizes.numel()), sizes)
    block, tile = chunk // (tiling.tiles * warps), chunk // warps % tiling.tiles
    word = layout.words.long() % 2 ** 32
    row = tiling.block_rows[block] + (word >> 16)
    col = tile * tiling.tile_cols + (word & 0xFFFF)
    decoded = torch.sort(row * g.num_src + col).values
    expected = torch.sort(g.csr_dst.long() * g.num_src + g.col.long()).values
    assert torch.equal(decoded, expected)


@pytest.mark.parametrize("name", list(output_tiled_graphs()))
def test_layout_is_the_same_built_in_passes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large graphs build the layout in passes of sorted positions (bounded memory): passes
    of a few edges, whose bounds fall inside runs of one row, give the one-pass layout."""
    g = output_tiled_graphs()[name]
    tiling = tiling_for(g, 2, torch.float32, _target(6, 12 * 1024), column_groups=2)
    whole = build_layout(g, tiling, 8)
    for edges in (1, 7, 100):
        monkeypatch.setattr(_edge_passes, "PASS_EDGES", edges)
        passes = build_layout(g, tiling, 8)
        assert torch.equal(passes.words, whole.words) and torch.equal(passes.chunk_ptr, whole.chunk_ptr)


def test_layout_is_built_once_per_graph_tiling_and_target() -> None:
    g = named_graph("random")
    first = output_tiles(g, 2, torch.float32, 32, 1, H100)
    assert output_tiles(g, 2, torch.float32, 32, 1, H100) is first
    assert output_tiles(g, 2, torch.float32, 16, 1, H100) is not first
    assert output_tiles(g, 2, torch.float32, 32, 2, H100) is not first
    assert output_tiles(g, 2, torch.float32, 32, 1, _target(8, 16 * 1024)) is not first


@pytest.mark.parametrize("name", list(output_tiled_graphs()))
@pytest.mark.parametrize("reduce", list(REDUCERS))
def test_emulated_walk_matches_reference(name: str, reduce: str) -> None:
    g = output_tiled_graphs()[name]
    features = 3 if reduce == "mean" else 1
    tiling = tiling_for(g, features, torch.float32, _target(5, 12 * 1024))
    layout = build_layout(g, tiling, 8)
    lhs = random_features((g.num_src, features), torch.float64, seed=1)
    expected = gspmm_ref(g, "copy_lhs", reduce, lhs, None)
    torch.testing.assert_close(emulate(g, tiling, layout, 8, lhs, reduce), expected)


def test_warp_chunks_cut_at_row_boundaries_near_equal_edges() -> None:
    # 64 rows of 20 edges in one block and tile, 4 warps: 320 edges each
    rowptr = torch.arange(65) * 20
    col = torch.randint(0, 50, (1_280,), generator=torch.Generator().manual_seed(0))
    g = gsparse.Graph.from_csr(rowptr, col, num_src=50)
    tiling = tiling_for(g, 1, torch.float32, _target(1, 48 * 1024))
    assert (tiling.blocks, tiling.tiles) == (1, 1)
    layout = build_layout(g, tiling, 4)
    assert layout.chunk_ptr.tolist() == [0, 320, 640, 960, 1_280]


# --- launch plans (a recording loader stands in for the GPU) --------------------------------------


def test_plan_launches_a_block_per_row_range() -> None:
    g, loader = named_graph("random"), RecordingLoader()
    x, out = torch.randn(g.num_src, 2), torch.empty(g.num_dst, 2)
    plan = build_plan(g, task("copy_lhs", "sum", 2), _tiled(16, vector=2), H100, loader=loader)
    plan(lhs=x, rhs=None, out=out, arg_u=None, arg_e=None)
    launch = loader.only(output_tiled.KERNEL)
    tiling, layout = output_tiles(g, 2, torch.float32, 16, 1, H100)
    assert launch.grid == (tiling.blocks,) and launch.block == 512
    assert launch.shared_bytes == tiling.shared_bytes
    assert launch.args["words"] is layout.words and launch.args["chunk_ptr"] is layout.chunk_ptr
    assert launch.args["rowptr"] is g.rowptr and launch.args["lhs"] is x and launch.args["out"] is out
    assert launch.args["partial"] is None  # one column group: no partial rows
    assert [launch.args[k] for k in ("num_rows", "num_src", "num_tiles", "group_tiles", "tile_cols",
                                     "rows_bytes")] == [g.num_dst, g.num_src, tiling.tiles,
                                                        tiling.group_tiles, tiling.tile_cols,
                                                        tiling.rows_bytes]
    assert loader.order == [output_tiled.KERNEL]


def test_column_groups_leave_partial_rows_to_a_merge() -> None:
    g, loader = named_graph("random"), RecordingLoader()
    x, out = torch.randn(g.num_src, 2), torch.empty(g.num_dst, 2)
    plan = build_plan(g, task("copy_lhs", "mean", 2), _tiled(vector=2, groups=2), H100, loader=loader)
    plan(lhs=x, rhs=None, out=out, arg_u=None, arg_e=None)
    assert loader.order == [output_tiled.KERNEL, output_tiled.MERGE]
    first, merge = loader.only(output_tiled.KERNEL), loader.only(output_tiled.MERGE)
    tiling, _ = output_tiles(g, 2, torch.float32, 32, 2, H100)
    assert first.grid == (tiling.row_ranges * 2,)
    partial = first.args["partial"]
    assert partial.shape == (2 * g.num_dst * 2,) and partial.dtype == torch.float32
    # The column-tiled skeleton's merge, one partial result per group.
    assert merge.args["rowptr"] is g.rowptr and merge.args["partial"] is partial
    assert merge.args["out"] is out and merge.args["partial_arg"] is None
    assert [merge.args[k] for k in ("num_rows", "num_features", "num_tiles")] == [g.num_dst, 2, 2]
    assert merge.grid == (-(-g.num_dst * 2 // 256),)


def test_float64_partial_rows_keep_double_precision() -> None:
    g, loader = named_graph("random"), RecordingLoader()
    plan = build_plan(g, task("copy_lhs", "sum", 2, torch.float64), _tiled(16, vector=2, groups=4),
                      H100, loader=loader)
    plan(lhs=torch.randn(g.num_src, 2).double(), rhs=None, out=torch.empty(g.num_dst, 2).double(),
         arg_u=None, arg_e=None)
    assert loader.only(output_tiled.KERNEL).args["partial"].dtype == torch.float64
