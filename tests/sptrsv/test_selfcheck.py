"""The memcheck self-check's cases (scripts/sptrsv_selfcheck.py, run in shards under
compute-sanitizer by scripts/sanitize_sptrsv.sh): shards of one seed split one list, and
the list reaches every code variant, the fast start's schemes and the edge-case factors."""

from __future__ import annotations

import argparse

import pytest

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.codegen import CodeVariant
from gsparse.kernels.sptrsv.default import NATURAL_SCHEMES
from gsparse.kernels.sptrsv.schedule import NaturalOrderSchedule
from gsparse.kernels.sptrsv.space import reduced_space

from .scripts import load_script


@pytest.fixture(scope="module")
def selfcheck():
    return load_script("sptrsv_selfcheck")


def _key(case):
    name, _, lower, unit, transpose, k, dtype, index_dtype, schedule = case
    return (name, lower, unit, transpose, k, str(dtype), str(index_dtype), str(schedule))


def test_the_shards_split_one_list(selfcheck):
    everything = [_key(case) for case in selfcheck.cases(3)]
    assert everything == [_key(case) for case in selfcheck.cases(3)]  # the same draw in every process
    shards = [everything[part::5] for part in range(5)]
    assert sorted(key for shard in shards for key in shard) == sorted(everything)
    assert len(set(everything)) > len(everything) * 0.9


def test_the_cases_reach_every_variant_and_the_fast_start(selfcheck):
    cases = selfcheck.cases(0)
    schedules = {str(case[-1]): case[-1] for case in cases}
    variants = {CodeVariant.of(s) for s in schedules.values() if not isinstance(s, NaturalOrderSchedule)}
    assert variants >= {CodeVariant.of(s) for s in reduced_space()}
    assert {str(s) for s in NATURAL_SCHEMES} <= set(schedules)
    names = {case[0] for case in cases}
    assert set(dict(triangular.edge_cases())) | set(triangular.FAMILIES) == names


@pytest.mark.parametrize("text", ["3/2", "a/2", "1", "-1/2", "0/0"])
def test_a_bad_shard_is_refused(selfcheck, text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected I/N"):
        selfcheck._shard(text)
