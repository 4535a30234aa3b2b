"""The cost models' features: every column as the plain per-schedule formulas give it."""

from __future__ import annotations

import numpy as np
import pytest

from gsparse.kernels import sddmm, spmm
from gsparse.target import H100
from gsparse.tune.features import SpaceFeatures, feature_names, featurize

from graphs import named_graph

from .reference_decision import (
    TARGETS,
    random_graph,
    random_sddmm_task,
    random_spmm_task,
    reference_featurize,
)

_OPERATORS = {"spmm": (spmm, random_spmm_task), "sddmm": (sddmm, random_sddmm_task)}


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_features_are_the_per_schedule_formulas_bit_for_bit(operator):
    ops, random_task = _OPERATORS[operator]
    rng = np.random.default_rng(18)
    g = named_graph("random")
    for _ in range(150):
        stats, structure = random_graph(rng)
        task, target = random_task(rng, g), TARGETS[rng.integers(len(TARGETS))]
        candidates = ops.schedule_space(task, stats, target).candidates()
        found = featurize(task, structure, target, candidates)
        expected = reference_featurize(task, structure, target, candidates)
        assert found.shape == (len(candidates), len(feature_names(operator)))
        assert np.array_equal(found, expected), (task, stats, target, np.argwhere(found != expected)[:5])


def test_the_features_of_a_space_serve_every_graph():
    g = named_graph("random")
    rng = np.random.default_rng(3)
    task = random_spmm_task(rng, g)
    candidates = spmm.schedule_space(task, g.stats, H100).candidates()
    table = spmm.space.candidate_table(task, g.stats, H100)
    assert table.tolist() == [list(spmm.space.knob_row(s)) for s in candidates]
    space = SpaceFeatures(task, H100, table)
    assert len(space) == len(candidates)
    for _ in range(5):
        _, structure = random_graph(rng)
        assert np.array_equal(space(structure), featurize(task, structure, H100, candidates))


def test_featurize_takes_no_schedules_and_refuses_another_operators():
    g = named_graph("random")
    rng = np.random.default_rng(4)
    task = random_sddmm_task(rng, g)
    _, structure = random_graph(rng)
    assert featurize(task, structure, H100, []).shape == (0, len(feature_names("sddmm")))
    with pytest.raises(TypeError, match="schedules must be Edge, Row, RowTransposed, EdgeTransposed "
                                        "schedules, got a OnePass"):
        featurize(task, structure, H100, [spmm.OnePass()])
