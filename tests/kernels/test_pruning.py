"""LO-SpMM's pruning: each constraint's bar, the protected hand-rule pick, the fallback that
keeps a space from going empty, the two counts, and the register report read from NVRTC."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from gsparse.kernels import pruning
from gsparse.kernels.pruning import (CONSTRAINTS, Facts, FactTable, Thresholds, column_waste, kept_positions, prune,
                                     row_tile_cov)
from gsparse.kernels.source import Program
from gsparse.runtime import Resources, _nvrtc
from gsparse.target import H100

from kernels.support import needs_nvrtc

# H100: 132 SMs, so the default utilisation bar is 66 blocks.
_BALANCED = Facts(blocks=10_000, row_cov=0.0, column_waste=0.0)


def _facts(**changes) -> Facts:
    return dataclasses.replace(_BALANCED, **changes)


def test_each_constraint_removes_the_candidate_that_fails_its_bar() -> None:
    candidates = ["fine", "few blocks", "unbalanced", "padded"]
    facts = [_BALANCED, _facts(blocks=20), _facts(row_cov=0.9), _facts(column_waste=0.4)]
    result = prune(candidates, facts, H100)
    assert result.kept == ("fine",)
    assert result.failed == (frozenset(), {"utilisation"}, {"row_balance"}, {"column_waste"})
    assert result.alone() == {"utilisation": 1, "row_balance": 1, "column_waste": 1, "registers": None}
    assert result.in_order() == {"utilisation": 1, "row_balance": 1, "column_waste": 1, "registers": None}
    assert not result.fallback and result.registers == "off"


def test_thresholds_change_the_outcome() -> None:
    candidates = ["fine", "few blocks", "unbalanced", "padded"]
    facts = [_BALANCED, _facts(blocks=20), _facts(row_cov=0.9), _facts(column_waste=0.4)]
    lenient = Thresholds(min_blocks_per_sm=0.1, max_row_cov=1.0, max_column_waste=0.5)
    assert prune(candidates, facts, H100, lenient).kept == tuple(candidates)
    assert prune(candidates, facts, H100, Thresholds(min_blocks_per_sm=0.1)).kept == ("fine", "few blocks")
    assert prune(candidates, facts, H100, Thresholds(max_row_cov=0.95)).kept == ("fine", "unbalanced")
    with pytest.raises(ValueError, match="max_row_cov must be a number >= 0, got -1"):
        Thresholds(max_row_cov=-1)


def test_counts_alone_and_in_order_differ_where_constraints_overlap() -> None:
    candidates = ["a", "b", "c"]
    facts = [_facts(blocks=20, row_cov=0.9), _facts(row_cov=0.9), _BALANCED]
    result = prune(candidates, facts, H100)
    assert result.alone()["row_balance"] == 2 and result.in_order()["row_balance"] == 1
    assert result.alone()["utilisation"] == result.in_order()["utilisation"] == 1
    assert sum(n for n in result.in_order().values() if n) == len(candidates) - len(result.kept)


def test_a_bar_no_candidate_meets_becomes_the_best_the_space_reaches() -> None:
    # 100 features padded to 128 by every slice: no candidate escapes, none is removed ...
    assert prune(["a", "b"], [_facts(column_waste=0.22)] * 2, H100, Thresholds(max_column_waste=0.1)).kept \
        == ("a", "b")
    # ... but one padded more than the least padded is
    result = prune(["a", "b"], [_facts(column_waste=0.22), _facts(column_waste=0.5)], H100,
                   Thresholds(max_column_waste=0.1))
    assert result.kept == ("a",)
    # a tiny graph: no candidate fills half the SMs; those with the most blocks stay
    tiny = [_facts(blocks=25), _facts(blocks=7), _facts(blocks=1)]
    assert prune(["r8", "r32", "r256"], tiny, H100).kept == ("r8",)


def test_the_protected_pick_survives_every_constraint_and_is_never_counted() -> None:
    facts = [_facts(blocks=1, row_cov=9.0, column_waste=0.9), _BALANCED]
    result = prune(["hand rule", "other"], facts, H100, protected=["hand rule"])
    assert result.kept == ("hand rule", "other")
    assert result.failed[0] == {"utilisation", "row_balance", "column_waste"}
    assert result.alone() == {"utilisation": 0, "row_balance": 0, "column_waste": 0, "registers": None}


def test_a_space_is_never_pruned_to_nothing() -> None:
    # each constraint alone keeps a candidate (its best), but together they keep none:
    # the candidates failing fewest constraints stay
    candidates = ["many blocks", "balanced", "least padded", "worst"]
    facts = [_facts(blocks=30, row_cov=0.9, column_waste=0.5),
             _facts(blocks=10, row_cov=0.0, column_waste=0.5),
             _facts(blocks=10, row_cov=0.9, column_waste=0.3),
             _facts(blocks=10, row_cov=0.9, column_waste=0.5)]
    result = prune(candidates, facts, H100, Thresholds(max_column_waste=0.25))
    assert result.fallback and result.kept == ("many blocks", "balanced", "least padded")
    assert prune([], [], H100).kept == ()


def test_unknown_row_statistics_remove_nothing() -> None:
    facts = [_facts(row_cov=math.nan), _facts(row_cov=0.0)]
    assert prune(["a", "b"], facts, H100, Thresholds(max_row_cov=0.0)).kept == ("a", "b")


def test_the_register_constraint_is_measured_only_where_asked() -> None:
    measured = []

    def spills(schedule: str) -> float:
        measured.append(schedule)
        return {"spills": 8.0, "cannot launch": math.inf}.get(schedule, 0.0)

    candidates = ["fine", "spills", "cannot launch", "few blocks"]
    facts = [_BALANCED, _BALANCED, _BALANCED, _facts(blocks=1)]
    kept = prune(candidates, facts, H100, registers=spills)
    assert kept.kept == ("fine",) and sorted(measured) == ["cannot launch", "fine", "spills"]
    assert kept.in_order() == {"utilisation": 1, "row_balance": 0, "column_waste": 0, "registers": 2}
    assert kept.alone()["registers"] is None  # not measured on every candidate
    measured.clear()
    everywhere = prune(candidates, facts, H100, registers=spills, registers_on="all")
    assert sorted(measured) == sorted(candidates) and everywhere.alone()["registers"] == 2
    assert prune(candidates, facts, H100, Thresholds(max_spill_bytes=8), registers=spills).kept \
        == ("fine", "spills")


def test_the_counts_are_json_ready() -> None:
    result = prune(["a", "b"], [_BALANCED, _facts(blocks=1)], H100)
    assert result.to_json() == {
        "candidates": 2, "kept": 1, "registers": "off", "fallback": False,
        "alone": {"utilisation": 1, "row_balance": 0, "column_waste": 0, "registers": None},
        "in_order": {"utilisation": 1, "row_balance": 0, "column_waste": 0, "registers": None},
        "thresholds": {"min_blocks_per_sm": 0.5, "max_row_cov": 0.5, "max_column_waste": 0.25,
                       "max_spill_bytes": 0}}
    assert tuple(result.to_json()["in_order"]) == CONSTRAINTS


def test_row_tile_cov_and_column_waste() -> None:
    assert row_tile_cov(2.0, 16) == 0.5 and row_tile_cov(2.0, 16, ordered=True) == 0.0
    assert column_waste(100, 128) == pytest.approx(28 / 128)
    assert column_waste(100, 32) == pytest.approx(28 / 128)  # four slices of 32
    assert column_waste(100, 8, launch=32) == pytest.approx(4 / 104)  # 32 + 32 + 32 + 4 features
    assert column_waste(100, 32, launch=32) == pytest.approx(28 / 128)
    assert column_waste(602, 32) == pytest.approx(6 / 608) and column_waste(0, 32) == 0.0


# --- the register report, from NVRTC ------------------------------------------------------------

_SOURCE = """
extern "C" __global__ void __launch_bounds__(256, 2)
scale(const float* __restrict__ x, float* __restrict__ out, long long n)
{
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}

extern "C" __global__ void
copy(const float* __restrict__ x, float* __restrict__ out, long long n)
{
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < n) out[i] = x[i];
}
"""


def _program() -> Program:
    return Program(source=_SOURCE, kernels={"scale": None, "copy": None}, context="test")


@needs_nvrtc
def test_registers_are_read_from_a_real_compile_and_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GSPARSE_CACHE_DIR", str(tmp_path))
    pruning._resources.cache_clear()
    compiles = []
    real = _nvrtc.compile_to_cubin

    def counting(*args, **kwargs):
        compiles.append(kwargs.get("arch"))
        return real(*args, **kwargs)

    monkeypatch.setattr(_nvrtc, "compile_to_cubin", counting)
    assert pruning.program_spills(_program(), H100) == 0.0
    assert compiles == ["sm_90"]
    report = pruning._resources(_SOURCE, "sm_90")
    assert set(report) == {"scale", "copy"} and 0 < report["scale"].registers <= 64
    # the second call of the process compiles nothing ...
    assert pruning.program_spills(_program(), H100) == 0.0
    assert compiles == ["sm_90"]
    # ... nor does a new process: the disk kernel cache holds the build
    pruning._resources.cache_clear()
    assert pruning.program_spills(_program(), H100) == 0.0
    assert compiles == ["sm_90"] and len(list(tmp_path.glob("*.kernel"))) == 1
    pruning._resources.cache_clear()


def test_a_kernel_whose_registers_do_not_fit_its_launch_bounds_cannot_launch(monkeypatch) -> None:
    def report(registers: int, spills: int = 0) -> Resources:
        return Resources(registers=registers, shared_bytes=0, stack_bytes=spills, spill_stores=spills,
                         spill_loads=spills, constant_bytes=0, barriers=0)

    reports = {"fits": {"scale": report(128), "copy": report(64)},
               "spills": {"scale": report(128, spills=4), "copy": report(64)},
               # 130 registers are allocated as 136: x 256 threads x 2 blocks per SM > 65,536
               "too many": {"scale": report(130), "copy": report(64)},
               # no launch bounds: ptxas plans for 1,024 threads
               "unbounded": {"scale": report(64), "copy": report(72)}}
    for name, expected in (("fits", 0.0), ("spills", 8.0), ("too many", math.inf), ("unbounded", math.inf)):
        monkeypatch.setattr(pruning, "_resources", lambda source, arch, r=reports[name]: r)
        assert pruning.program_spills(_program(), H100) == expected, name


def test_register_budget_errors_say_why() -> None:
    assert "spill 8 bytes per thread, more than max_spill_bytes = 0" in str(
        pruning.RegisterBudgetError("s", 8.0, 0))
    assert "do not fit the SM's register file" in str(pruning.RegisterBudgetError("s", math.inf, 0))



def test_the_constraint_measures_take_arrays_as_they_take_numbers():
    """The spaces compute every candidate's facts at once: elementwise, the same numbers."""
    rows = np.array([1, 3, 8, 64, 1000])
    ordered = np.array([False, True, False, False, True])
    assert row_tile_cov(0.7, rows, ordered).tolist() == [row_tile_cov(0.7, int(r), bool(o))
                                                         for r, o in zip(rows, ordered)]
    assert np.isnan(row_tile_cov(float("nan"), rows)).all() and row_tile_cov(float("nan"), 4, True) == 0.0
    slices, launches = np.array([1, 8, 32, 100, 128, 7]), np.array([0, 0, 64, 600, 0, 13])
    for features in (0, 1, 100, 602):
        assert column_waste(features, slices, launches).tolist() == [
            column_waste(features, int(s), int(n)) for s, n in zip(slices, launches)]
    assert column_waste(100, 32) == 28 / 128
    table = FactTable(np.array([1, 500, 500]), np.array([0.1, float("nan"), 2.0]), np.zeros(3))
    assert table[0] == Facts(1, 0.1, 0.0) and [f.blocks for f in table] == [1, 500, 500]
    assert kept_positions(table, H100).tolist() == [1]  # too few blocks, unbalanced: out; NaN stays
    assert kept_positions(table, H100, protected=[2]).tolist() == [1, 2]
