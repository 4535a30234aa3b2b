"""The output-tiled g-SpMM skeleton: tiling, edge layout, the kernel's walk emulated on the
CPU, code generation (NVRTC, no GPU), launch plans, and GPU results."""

from __future__ import annotations

import math
import random

import pytest
import torch

import gsparse
from gsparse.algebra import REDUCERS
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels import spmm_output_tiled as output_tiled
from gsparse.kernels.common import Layout
from gsparse.kernels.spmm import SpmmSchedule, schedule_space
from gsparse.kernels.spmm_codegen import SpmmAlgorithm
from gsparse.runtime import compile_cuda, nvrtc_version
from gsparse.testing.reference import gspmm_ref

from graphs import named_graph, random_features
from recording import RecordingKernel

needs_nvrtc = pytest.mark.skipif(nvrtc_version() is None, reason="needs NVRTC")


def _schedule(warps: int = 32, vector: int = 1, outputs: int = 1, groups: int = 1) -> SpmmSchedule:
    return SpmmSchedule(rows_per_block=warps, feature_lanes=1, edge_lanes=32,
                        vector_width=vector, outputs_per_thread=outputs, output_tile=True,
                        column_groups=groups)


def _graphs() -> dict[str, gsparse.Graph]:
    gen = torch.Generator().manual_seed(11)
    hub_dst = torch.cat([torch.full((5_000,), 7), torch.randint(0, 300, (4_000,), generator=gen)])
    return {
        "random": named_graph("random"),  # 150 x 230, empty rows, a longer row, edge ids
        "int64": named_graph("int64"),
        "empty": named_graph("empty"),
        # 3,000 sources (several tiles under a small shared memory), a 5,000-edge row
        "hub": gsparse.Graph.from_edge_index(torch.stack([
            torch.randint(0, 3_000, (hub_dst.numel(),), generator=gen), hub_dst]), 3_000, 300),
        # most rows empty: row ranges are cut by edges, then capped by rows
        "sparse_rows": gsparse.Graph.from_edge_index(torch.stack([
            torch.randint(0, 40, (200,), generator=gen),
            torch.randint(0, 20, (200,), generator=gen) * 500]), 40, 10_000),
    }


def _identity(reduce: str) -> float:
    return REDUCERS[reduce].identity


def _fold(reduce: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if reduce in ("sum", "mean"):
        return a + b
    return torch.maximum(a, b) if reduce == "max" else torch.minimum(a, b)


def emulate(g: gsparse.Graph, tiling: output_tiled.Tiling, layout: output_tiled.EdgeLayout,
            warps: int, lhs: torch.Tensor, reduce: str) -> torch.Tensor:
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


# --- tiling and layout (CPU) ---------------------------------------------------------------


def test_tiling_cuts_rows_by_edges_and_fills_shared_memory() -> None:
    g = _graphs()["hub"]
    tiling = output_tiled.tiling_for(g, 1, torch.float32, sms=8, shared_limit=16 * 1024)
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
    g = _graphs()["sparse_rows"]  # 9,981 empty rows among 10,000
    tiling = output_tiled.tiling_for(g, 4, torch.float32, sms=4, shared_limit=16 * 1024)
    rows = tiling.block_rows[1:] - tiling.block_rows[:-1]
    assert int(rows.max()) * 16 <= 0.75 * 16 * 1024 and tiling.blocks > 4
    assert int(rows.sum()) == g.num_dst


def test_column_groups_keep_a_block_per_sm_with_wider_row_ranges() -> None:
    g = _graphs()["hub"]
    one, two = (output_tiled.tiling_for(g, 1, torch.float32, sms=8, shared_limit=48 * 1024,
                                        column_groups=groups) for groups in (1, 2))
    assert (one.row_ranges, one.blocks, two.row_ranges, two.blocks) == (8, 8, 4, 8)
    assert two.row_capacity > one.row_capacity
    assert two.group_tiles == -(-two.tiles // 2)
    assert two.shared_bytes <= 48 * 1024


def test_tiling_refuses_rows_that_cannot_fit() -> None:
    with pytest.raises(ValueError, match="cannot hold a row of 600"):
        output_tiled.tiling_for(named_graph("random"), 600, torch.float64, sms=4,
                                shared_limit=16 * 1024)


@pytest.mark.parametrize("name", list(_graphs()))
@pytest.mark.parametrize("warps", [8, 32])
def test_layout_holds_every_edge_once(name: str, warps: int) -> None:
    g = _graphs()[name]
    tiling = output_tiled.tiling_for(g, 2, torch.float32, sms=6, shared_limit=12 * 1024)
    layout = output_tiled.build_layout(g, tiling, warps)
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


def test_layout_is_built_once_per_graph_and_tiling() -> None:
    g = named_graph("random")
    first = spmm_kernels._output_tiles(g, 2, torch.float32, 32)
    assert spmm_kernels._output_tiles(g, 2, torch.float32, 32) is first
    assert spmm_kernels._output_tiles(g, 2, torch.float32, 16) is not first


@pytest.mark.parametrize("name", list(_graphs()))
@pytest.mark.parametrize("reduce", list(REDUCERS))
def test_emulated_walk_matches_reference(name: str, reduce: str) -> None:
    g = _graphs()[name]
    features = 3 if reduce == "mean" else 1
    tiling = output_tiled.tiling_for(g, features, torch.float32, sms=5, shared_limit=12 * 1024)
    layout = output_tiled.build_layout(g, tiling, 8)
    lhs = random_features((g.num_src, features), torch.float64, seed=1)
    expected = gspmm_ref(g, "copy_lhs", reduce, lhs, None)
    torch.testing.assert_close(emulate(g, tiling, layout, 8, lhs, reduce), expected)


def test_warp_chunks_cut_at_row_boundaries_near_equal_edges() -> None:
    # 64 rows of 20 edges in one block and tile, 4 warps: 320 edges each
    rowptr = torch.arange(65) * 20
    col = torch.randint(0, 50, (1_280,), generator=torch.Generator().manual_seed(0))
    g = gsparse.Graph.from_csr(rowptr, col, num_src=50)
    tiling = output_tiled.tiling_for(g, 1, torch.float32, sms=1, shared_limit=48 * 1024)
    assert (tiling.blocks, tiling.tiles) == (1, 1)
    layout = output_tiled.build_layout(g, tiling, 4)
    assert layout.chunk_ptr.tolist() == [0, 320, 640, 960, 1_280]


# --- schedules and code generation ----------------------------------------------------------


@pytest.mark.parametrize(("knobs", "reason"), [
    ({"feature_lanes": 2, "edge_lanes": 16}, "needs feature_lanes 1 and edge_lanes 32"),
    ({"rows_per_block": 4}, r"takes \(8, 16, 32\) warps per block"),
    ({"degree_sorted": True}, "degree_sorted off"),
    ({"row_split": 64}, "set no column_tile or row_split"),
    ({"column_groups": 3}, "column_groups must be 1, 2 or 4"),
    ({"column_groups": 2, "output_tile": False}, "needs output_tile"),
])
def test_invalid_output_tiled_schedules_say_why(knobs: dict, reason: str) -> None:
    schedule = SpmmSchedule(**{"rows_per_block": 32, "feature_lanes": 1, "edge_lanes": 32,
                               "output_tile": True, **knobs})
    with pytest.raises(ValueError, match=reason):
        schedule.validate()


def test_schedule_name_and_json() -> None:
    schedule = _schedule(16, vector=2)
    assert str(schedule) == "r16.f1.e32.v2.o1.n1+ot"
    assert str(_schedule(groups=2)) == "r32.f1.e32.v1.o1.n1+otx2"
    for schedule in (_schedule(16, vector=2), _schedule(groups=4)):
        assert SpmmSchedule.from_json(schedule.to_json()) == schedule


def test_space_holds_output_tiled_schedules_up_to_four_features() -> None:
    g = named_graph("random")
    for features, vector, outputs in ((1, 1, 1), (2, 2, 1), (3, 1, 4), (4, 4, 1)):
        tiled = [s for s in schedule_space(g, features) if s.output_tile]
        assert {(s.vector_width, s.outputs_per_thread) for s in tiled} == {(vector, outputs)}
        assert {(s.rows_per_block, s.column_groups) for s in tiled} == {
            (warps, groups) for warps in (16, 32) for groups in (1, 2, 4)}
    assert not any(s.output_tile for s in schedule_space(g, 8))
    wide = [s for s in schedule_space(g, 4, torch.float64) if s.output_tile]
    assert {s.vector_width for s in wide} == {2} and {s.rows_per_block for s in wide} == {8, 16}


def _algorithms(seed: int, k: int) -> list[SpmmAlgorithm]:
    every = [SpmmAlgorithm("copy_lhs", reduce, Layout.FULL, None, dtype, index, has_eid=False)
             for reduce in REDUCERS
             for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
             for index in (torch.int32, torch.int64)]
    return random.Random(seed).sample(every, k)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("algorithm", _algorithms(seed=3, k=12), ids=str)
def test_output_tiled_skeleton_compiles_without_spills(arch: str, algorithm: SpmmAlgorithm) -> None:
    # the warps per block the space offers for the dtype (float64: 8 and 16)
    wide, vector = (16, 2) if algorithm.dtype == torch.float64 else (32, 4)
    for schedule in (_schedule(wide), _schedule(wide // 2, vector=vector, outputs=2, groups=2)):
        features = output_tiled.features_covered(schedule) - 1 or 1  # a partial last vector too
        binary = compile_cuda(output_tiled.generate(algorithm, schedule, features), arch=arch,
                              cache=None)
        resources = binary.resources[output_tiled.KERNEL_NAME]
        assert resources.spill_stores == resources.spill_loads == resources.stack_bytes == 0, binary.log
        assert resources.registers * schedule.threads <= 65536
    assert binary.resources[output_tiled.MERGE_KERNEL_NAME].spill_stores == 0


def test_generated_source_names_its_schedule_and_copies_asynchronously() -> None:
    algorithm = SpmmAlgorithm("copy_lhs", "mean", Layout.FULL, None, torch.float32, torch.int32,
                              has_eid=False)
    source = output_tiled.generate(algorithm, _schedule(16, vector=2), 2)
    assert source.startswith("// gsparse g-SpMM, output-tiled: copy_lhs.mean lhs:full float32 int32")
    assert _schedule(16, vector=2).to_json() in source
    assert "cp.async.cg.shared.global" in source and "__launch_bounds__(512, 1)" in source
    assert "acc / A(degree)" in source
    assert "cp.async.bulk.shared::cluster.global" in source  # sm_90: the bulk-copy engine
    assert "cp.async.cg.shared.global" in source  # sm_80: 16-byte asynchronous copies
    assert "constexpr int GROUPS = 1;" in source and output_tiled.MERGE_KERNEL_NAME not in source
    grouped = output_tiled.generate(algorithm, _schedule(groups=2), 1)
    assert "constexpr int GROUPS = 2;" in grouped and output_tiled.MERGE_KERNEL_NAME in grouped


def test_generate_refuses_what_the_skeleton_does_not_run() -> None:
    mul = SpmmAlgorithm("mul", "sum", Layout.FULL, Layout.FULL, torch.float32, torch.int32, True)
    with pytest.raises(ValueError, match="runs copy_lhs of full-shape features"):
        output_tiled.generate(mul, _schedule(), 1)
    plain = SpmmAlgorithm("copy_lhs", "sum", Layout.FULL, None, torch.float32, torch.int32, False)
    with pytest.raises(ValueError, match="is not output-tiled"):
        output_tiled.generate(plain, SpmmSchedule(), 1)
    with pytest.raises(ValueError, match="carries 2 features per edge"):
        output_tiled.generate(plain, _schedule(vector=2), 3)


# --- launch plans (CPU: a recording kernel stands in for the GPU) -----------------------------


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict:
    seen = {"output_tiled": RecordingKernel(), "merge": RecordingKernel(),
            "one_pass": RecordingKernel()}
    monkeypatch.setattr(spmm_kernels, "_output_tiled_kernels", lambda a, s, f, d: (
        seen["output_tiled"], seen["merge"] if s.column_groups > 1 else None, "context"))
    seen["one_pass_schedules"] = []

    def one_pass(algorithm, schedule, device):
        seen["one_pass_schedules"].append(schedule)
        return seen["one_pass"], "context"

    monkeypatch.setattr(spmm_kernels, "_kernel", one_pass)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return seen


def test_plan_launches_a_block_per_row_range(recorded) -> None:
    g = named_graph("random")
    x = torch.randn(g.num_src, 2)
    out = spmm_kernels.run_spmm(g, "copy_lhs", "sum", x, None, (2,), _schedule(16, vector=2))
    (grid, block, args), = recorded["output_tiled"].launches
    tiling, layout = spmm_kernels._output_tiles(g, 2, torch.float32, 16)
    assert grid == (tiling.blocks,) and block == 512
    assert args[0] is layout.words and args[3] is g.rowptr and args[4] is x and args[5] is out
    assert args[6] is None  # one column group: no partial rows
    assert [a.value for a in args[7:]] == [g.num_dst, g.num_src, tiling.tiles, tiling.group_tiles,
                                           tiling.tile_cols, tiling.rows_bytes]
    assert not recorded["merge"].launches


def test_column_groups_leave_partial_rows_to_a_merge(recorded) -> None:
    g = named_graph("random")
    x = torch.randn(g.num_src, 2)
    out = spmm_kernels.run_spmm(g, "copy_lhs", "mean", x, None, (2,), _schedule(vector=2, groups=2))
    (grid, _, args), = recorded["output_tiled"].launches
    (merge_grid, _, merge_args), = recorded["merge"].launches
    tiling, _ = spmm_kernels._output_tiles(g, 2, torch.float32, 32, 2)
    assert grid == (tiling.row_ranges * 2,)
    partial = args[6]
    assert partial.shape == (2 * g.num_dst * 2,) and partial.dtype == torch.float32
    # The column-tiled skeleton's merge, one partial result per group.
    assert merge_args[0] is g.rowptr and merge_args[3] is partial and merge_args[5] is out
    assert [a.value for a in merge_args[8:]] == [g.num_dst, 2, 2]
    assert merge_grid == (-(-g.num_dst * 2 // 256),)


def test_other_operators_run_the_one_pass_skeleton(recorded) -> None:
    g = named_graph("random")
    x, w = torch.randn(g.num_src, 2), torch.randn(g.num_edges, 2)
    spmm_kernels.run_spmm(g, "mul", "sum", x, w, (2,), _schedule(vector=2))
    spmm_kernels.run_spmm(g, "copy_lhs", "max", x, None, (2,), _schedule(vector=2, groups=4),
                          with_arg=True)
    assert len(recorded["one_pass"].launches) == 2 and not recorded["output_tiled"].launches
    # the schedule's other knobs, as a valid one-pass schedule (column groups dropped too)
    for schedule in recorded["one_pass_schedules"]:
        assert not schedule.output_tile and schedule.column_groups == 1 and not schedule.problems()


def test_forced_schedule_must_carry_every_feature(recorded) -> None:
    g = named_graph("random")
    with pytest.raises(ValueError, match="carries 2 features per edge"):
        spmm_kernels.run_spmm(g, "copy_lhs", "sum", torch.randn(g.num_src, 4), None, (4,),
                              _schedule(vector=2))


# --- GPU: results against the float64 reference -------------------------------------------------

gpu = pytest.mark.gpu


@pytest.fixture
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    def allocate(shape, dtype, device):
        return torch.full(shape, float("nan"), dtype=dtype, device=device)

    monkeypatch.setattr(spmm_kernels, "_allocate", allocate)


_TOLERANCE = {
    torch.float16: {"rtol": 2e-3, "atol": 2e-3},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2},
    torch.float32: {"rtol": 1e-5, "atol": 1e-4},
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
}


def _vector(features: int, dtype: torch.dtype) -> tuple[int, int]:
    widest = 2 if dtype == torch.float64 else 4
    vector = max(v for v in (1, 2, 4) if v <= widest and features % v == 0)
    return vector, 1 << max(0, math.ceil(math.log2(math.ceil(features / vector))))


@gpu
@pytest.mark.parametrize("name", ["random", "int64", "empty", "hub", "sparse_rows", "long_row"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_output_tiled_matches_reference(poisoned, name: str, dtype: torch.dtype) -> None:
    g = named_graph("long_row") if name == "long_row" else _graphs()[name]
    cuda = g.to("cuda")
    for i, reduce in enumerate(REDUCERS):
        features = (1, 2, 3, 4)[i]
        vector, outputs = _vector(features, dtype)
        lhs = random_features((g.num_src, features), dtype, seed=i)
        expected = gspmm_ref(g, "copy_lhs", reduce, lhs, None)
        for warps, groups in ((8, 1), (32, 1), (16, 2), (8, 4)):
            out = gsparse.gspmm(cuda, "copy_lhs", reduce, lhs.cuda(),
                                schedule=_schedule(warps, vector, outputs, groups))
            tolerance = dict(_TOLERANCE[dtype])
            if name == "long_row" and dtype == torch.float32:
                tolerance["atol"] = 1e-2  # 100,000 terms of magnitude ~1
            torch.testing.assert_close(out.cpu().double(), expected.to(dtype).double(), **tolerance,
                                       msg=lambda m: f"{name} {reduce} {dtype} {warps} warps "
                                                     f"{groups} groups: {m}")


@gpu
def test_output_tiled_over_several_tiles_and_waves(poisoned, monkeypatch) -> None:
    """Little shared memory: many tiles, row ranges capped."""
    monkeypatch.setattr(spmm_kernels, "_shared_bytes_limit", lambda device: 24 * 1024)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for name, groups in (("hub", 1), ("sparse_rows", 1), ("hub", 2), ("sparse_rows", 4)):
        g = _graphs()[name]
        tiling = output_tiled.tiling_for(g, 4, torch.float32, sms, 24 * 1024, groups)
        assert tiling.tiles > groups or name != "hub"
        lhs = random_features((g.num_src, 4), torch.float32, seed=5)
        out = gsparse.gspmm(g.to("cuda"), "copy_lhs", "sum", lhs.cuda(),
                            schedule=_schedule(16, 4, groups=groups))
        torch.testing.assert_close(out.cpu().double(), gspmm_ref(g, "copy_lhs", "sum", lhs, None),
                                   **_TOLERANCE[torch.float32])


@gpu
@pytest.mark.parametrize(("skip", "groups"), [(1, 1), (2, 2), (3, 4)])
def test_output_tiled_stages_unaligned_lhs(poisoned, skip: int, groups: int) -> None:
    g = _graphs()["hub"]
    storage = random_features((g.num_src + skip,), torch.float32, seed=skip)
    on_gpu = storage.cuda()[skip:].view(g.num_src, 1)
    assert on_gpu.data_ptr() % 16
    out = gsparse.gspmm(g.to("cuda"), "copy_lhs", "sum", on_gpu,
                        schedule=_schedule(groups=groups))
    expected = gspmm_ref(g, "copy_lhs", "sum", storage[skip:].view(g.num_src, 1), None)
    torch.testing.assert_close(out.cpu().double(), expected, **_TOLERANCE[torch.float32])


@gpu
def test_output_tiled_is_deterministic() -> None:
    g = _graphs()["hub"].to("cuda")
    lhs = torch.randn(g.num_src, 2, device="cuda")
    for groups in (1, 2):
        schedule = _schedule(vector=2, groups=groups)
        first = gsparse.gspmm(g, "copy_lhs", "sum", lhs, schedule=schedule)
        for _ in range(5):
            assert torch.equal(gsparse.gspmm(g, "copy_lhs", "sum", lhs, schedule=schedule), first)


# --- the default rule (CPU: graph statistics only) ---------------------------------------------


def _uniform_graph(num_src: int, rows: int, degree: int) -> gsparse.Graph:
    """``rows`` rows of ``degree`` uniformly random sources each (CSR built directly)."""
    gen = torch.Generator().manual_seed(rows)
    col = torch.randint(0, num_src, (rows * degree,), generator=gen)
    return gsparse.Graph.from_csr(torch.arange(rows + 1) * degree, col, num_src=num_src)


@pytest.fixture
def h100_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spmm_kernels, "_shared_bytes_limit", lambda device: 232_448)


def test_default_takes_the_output_tiled_skeleton_for_copy_lhs(h100_shared) -> None:
    # short rows over many sources (products-like proportions): 16 warps, 4 column groups
    short = _uniform_graph(300_000, 200_000, 60)
    for features in (1, 2):
        chosen = spmm_kernels.default_schedule(short, features, lhs_len=features, lhs_only=True)
        assert chosen == _schedule(16, vector=features, groups=4)
    # long rows (reddit-like proportions): 32 warps; lhs of 1.5 tiles: one group
    long = _uniform_graph(10_000, 1_000, 2_000)
    assert spmm_kernels.default_schedule(long, 1, lhs_len=1, lhs_only=True) == _schedule(32, groups=1)
    assert spmm_kernels.default_schedule(long, 1, torch.float64, lhs_len=1, lhs_only=True) == \
        _schedule(16, groups=1)
    assert spmm_kernels.default_schedule(long, 3, lhs_len=3, lhs_only=True) == \
        _schedule(32, vector=1, outputs=4, groups=1)
    # not for weighted messages (nor arg indices), nor beyond 4 features
    assert not spmm_kernels.default_schedule(short, 1, lhs_len=1).output_tile
    assert not spmm_kernels.default_schedule(long, 8, lhs_len=8, lhs_only=True).output_tile
    # 4 features of 300,000 sources: staging would pass 8 bytes per edge
    assert not spmm_kernels.default_schedule(short, 4, lhs_len=4, lhs_only=True).output_tile


def test_default_leaves_graphs_with_few_edges_per_source_to_the_gathers(h100_shared) -> None:
    sparse = _uniform_graph(1_000_000, 100_000, 4)  # 132 blocks would stage 132 x 4 MB
    chosen = spmm_kernels.default_schedule(sparse, 1, lhs_len=1, lhs_only=True)
    assert not chosen.output_tile and not chosen.problems()
