"""SpTRSV code generation: every code variant's source compiles with NVRTC for sm_80 and
sm_90 with no spills and no stack (a sample here, the reduced space's variants crossed with
every algorithm in the slow sweep), code variants shared across schemes, readable source."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

from gsparse.kernels.sptrsv.codegen import KERNEL, SENTINEL, CodeVariant, generate, program
from gsparse.kernels.sptrsv.schedule import POWERS_OF_TWO, SptrsvSchedule
from gsparse.kernels.sptrsv.space import reduced_space
from gsparse.kernels.sptrsv.task import SptrsvAlgorithm
from gsparse.runtime import compile_cuda, nvrtc_version

try:
    nvrtc_version()
except RuntimeError:
    pytest.skip("NVRTC is not installed", allow_module_level=True)

ARCHS = ("sm_80", "sm_90")
REGISTERS_PER_SM = 65536


def _variants() -> list[CodeVariant]:
    """Every code variant: warps, subwarps, row paths and the five flags (staging only
    without reordering, as CodeVariant.of makes it)."""
    out = []
    paths = ((True, False), (False, True), (True, True))
    for nw, ng, (shared, per_thread), stage, eliminate, early, by_value, reorder in itertools.product(
            POWERS_OF_TWO, POWERS_OF_TWO, paths, (False, True), (False, True), (False, True), (False, True),
            (False, True)):
        if not (stage and reorder):
            out.append(CodeVariant(nw, ng, shared, per_thread, stage, eliminate, early, by_value, reorder))
    return out


def _algorithms() -> list[SptrsvAlgorithm]:
    return [SptrsvAlgorithm(dtype, index, lower, unit, k)
            for dtype, index, lower, unit, k in itertools.product(
                (torch.float32, torch.float64), (torch.int32, torch.int64), (True, False), (False, True),
                (1, 2, 3, 16, 40))]


def _check_resources(algorithm: SptrsvAlgorithm, variant: CodeVariant, arch: str) -> None:
    binary = compile_cuda(generate(algorithm, variant).source, arch=arch, cache=None)
    resources = binary.resources[KERNEL]
    assert resources.spill_stores == 0 and resources.spill_loads == 0, binary.log
    assert resources.stack_bytes == 0, binary.log
    # __launch_bounds__(threads, 1): one block of the kernel fits an SM's register file.
    assert resources.registers * variant.threads <= REGISTERS_PER_SM


def _sample(count: int, seed: int) -> list[tuple[SptrsvAlgorithm, CodeVariant]]:
    """Sampled pairs, always including the widest block (the register cap is tightest there)
    with the heaviest algorithm (float64, int64, many right-hand sides)."""
    rng = random.Random(seed)
    variants, algorithms = _variants(), _algorithms()
    heavy = SptrsvAlgorithm(torch.float64, torch.int64, False, False, 40)
    pairs = [(heavy, CodeVariant(32, ng, True, True, ng != 32, True, True, by_value, False))
             for ng in (1, 4, 32) for by_value in (False, True)]
    pairs += [(rng.choice(algorithms), rng.choice(variants)) for _ in range(count)]
    return pairs


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("algorithm, variant", _sample(14, seed=0), ids=str)
def test_sampled_variants_compile_without_spills(arch, algorithm, variant):
    _check_resources(algorithm, variant, arch)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("variant", sorted({CodeVariant.of(s) for s in reduced_space()}, key=str), ids=str)
def test_every_variant_of_the_reduced_space_compiles_without_spills_for_every_algorithm(arch, variant):
    for algorithm in _algorithms():
        _check_resources(algorithm, variant, arch)


def test_schemes_share_programs_by_code_variant():
    space = reduced_space()
    variants = {CodeVariant.of(s) for s in space}
    assert len(variants) == 12  # (nw, ng, sw_rnnz) x reorder; the rest is the plan's
    algorithm = SptrsvAlgorithm(torch.float64, torch.int32, True, False, 1)
    a = SptrsvSchedule(merge="merge_fixed", merge_rows=4, warp_schedule="ws_balance", grouping="rg_balance")
    b = SptrsvSchedule(merge="merge_avg", merge_rows=32, merge_thresh=8, alpha_level=0)
    assert program(algorithm, a) is program(algorithm, b)
    assert program(algorithm, a) is not program(algorithm, SptrsvSchedule(reorder=True))


@pytest.mark.parametrize("sw_rnnz, shared, per_thread", [(0, True, False), (2, True, True), (math.inf, False, True)])
def test_sw_rnnz_decides_which_row_paths_exist(sw_rnnz, shared, per_thread):
    variant = CodeVariant.of(SptrsvSchedule(subwarps=4, sw_rnnz=sw_rnnz))
    assert (variant.shared_rows, variant.per_thread_rows) == (shared, per_thread)


def test_reordering_switches_the_collaborative_read_off():
    assert CodeVariant.of(SptrsvSchedule()).stage
    assert not CodeVariant.of(SptrsvSchedule(reorder=True)).stage


@pytest.mark.parametrize("k, dtype, width, lanes, shared_columns, thread_columns, long_row, long_lanes, long_columns", [
    (1, torch.float64, 32, 1, 1, 1, 0, 1, 1),
    (2, torch.float64, 32, 2, 1, 2, 64, 1, 2),
    (16, torch.float32, 32, 16, 1, 8, 64, 2, 8),
    (16, torch.float64, 32, 16, 1, 4, 64, 4, 4),
    (16, torch.float64, 8, 8, 2, 4, 16, 4, 4),
    (40, torch.float32, 32, 32, 2, 8, 64, 8, 5),
    (40, torch.float64, 1, 1, 2, 4, 0, 1, 4),
])
def test_right_hand_sides_map_onto_column_lanes(k, dtype, width, lanes, shared_columns, thread_columns, long_row,
                                                 long_lanes, long_columns):
    """Short shared rows: CL column lanes on consecutive right-hand sides. Rows of two
    subwarp widths of entries or more: fewer column lanes (LCL), each with as many columns
    as a row per thread keeps, so more lanes walk the entries; none where that is no fewer."""
    algorithm = SptrsvAlgorithm(dtype, torch.int32, True, False, k)
    source = generate(algorithm, CodeVariant(4, 32 // width, True, True, True, True, True, False, False)).source
    assert f"constexpr int W = {width};" in source
    assert f"constexpr int CL = {lanes};" in source
    assert f"constexpr int CPL = {shared_columns};" in source
    assert f"constexpr int KC = {thread_columns};" in source
    assert f"constexpr int LONG_ROW = {long_row};" in source
    assert f"constexpr int LCL = {long_lanes};" in source
    assert f"constexpr int LCPL = {long_columns};" in source


def test_generated_source_reads_well():
    algorithm = SptrsvAlgorithm(torch.float32, torch.int64, False, True, 16)
    variant = CodeVariant.of(SptrsvSchedule(warps_per_block=8, subwarps=4, sw_rnnz=2))
    source = generate(algorithm, variant).source
    assert source.startswith("// gsparse SpTRSV (AG-SpTRSV): upper unit float32 int64 k=16\n")
    assert "constexpr bool LOWER = false;" in source and "constexpr bool UNIT = true;" in source
    assert "using I = long long;" in source and "using T = float;" in source
    assert '__launch_bounds__(256, 1)' in source
    assert "long long n," in source and "int stage_capacity)" in source
    assert "\t" not in source and "{{" not in source
    assert f"constexpr unsigned SENTINEL = {SENTINEL[torch.float32]:#x}u;" in source
    assert "constexpr bool READY_BY_VALUE = false;" in source
