"""Model metrics on hand-made predictions whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from gsparse.tune import evaluate, pearson, spearman, top_k_regret

TIMES = np.array([1.0, 2.0, 4.0, 8.0, 10.0, 30.0, 20.0, 40.0])
GROUPS = np.array([0, 0, 0, 0, 1, 1, 1, 1])


def test_pearson_is_computed_on_log_times_by_default():
    predicted = np.log(TIMES) * 3 + 1
    assert pearson(predicted, TIMES) == pytest.approx(1.0)
    assert pearson(predicted, TIMES, log=False) == pytest.approx(pearsonr(predicted, TIMES)[0])
    assert pearson(predicted, TIMES, log=False) < 0.99


def test_pearson_with_groups_ignores_each_groups_scale():
    # Right within each group, but blind to group 1 being ten times slower.
    predicted = np.log(TIMES / np.where(GROUPS == 1, 10.0, 1.0))
    assert pearson(predicted, TIMES, GROUPS) == pytest.approx(1.0)
    assert pearson(predicted, TIMES) < 0.9


def test_spearman_is_the_mean_of_within_group_rank_correlations():
    rng = np.random.default_rng(0)
    times = rng.uniform(1, 10, 60)
    groups = np.repeat([0, 1, 2], 20)
    predicted = times + rng.normal(0, 3, 60)
    expected = np.mean([spearmanr(predicted[groups == k], times[groups == k])[0] for k in range(3)])
    assert spearman(predicted, times, groups) == pytest.approx(expected)
    assert spearman(times, times, groups) == pytest.approx(1.0)
    assert spearman(-times, times, groups) == pytest.approx(-1.0)


def test_a_constant_prediction_tells_nothing_and_single_rows_are_left_out():
    groups = np.array([0, 0, 0, 1])
    times = np.array([1.0, 2.0, 3.0, 5.0])
    assert spearman(np.array([7.0, 7.0, 7.0, 0.0]), times, groups) == 0.0
    assert spearman(np.array([1.0, 2.0, 3.0, 99.0]), times, groups) == pytest.approx(1.0)


def test_top_k_regret_compares_the_models_shortlist_with_the_groups_best():
    # group 0: the model ranks the 2 ms schedule first, then the 1 ms one;
    # group 1: the model ranks the 40 ms schedule first, the best (10 ms) last.
    predicted = np.array([1.0, 0.0, 2.0, 3.0, 9.0, 2.0, 5.0, 0.0])
    assert top_k_regret(predicted, TIMES, GROUPS, 1).tolist() == [1.0, 3.0]
    assert top_k_regret(predicted, TIMES, GROUPS, 2).tolist() == [0.0, 2.0]  # 40 and 30 ms
    assert top_k_regret(predicted, TIMES, GROUPS, 5).tolist() == [0.0, 0.0]


def test_ties_in_the_prediction_go_to_the_earlier_row():
    times = np.array([3.0, 1.0])
    assert top_k_regret(np.zeros(2), times, np.zeros(2), 1).tolist() == [2.0]


def test_evaluate_gathers_every_metric():
    predicted = np.array([1.0, 0.0, 2.0, 3.0, 9.0, 2.0, 5.0, 0.0])
    result = evaluate(predicted, TIMES, GROUPS)
    assert result.groups == 2
    assert (result.top1_regret_mean, result.top1_regret_max) == (2.0, 3.0)
    assert (result.top5_regret_mean, result.top5_regret_max) == (0.0, 0.0)
    assert result.spearman == pytest.approx(spearman(predicted, TIMES, GROUPS))
    assert result.pearson_log == pytest.approx(pearson(predicted, TIMES, GROUPS))
    assert result.pearson_linear == pytest.approx(pearson(predicted, TIMES, GROUPS, log=False))


def test_metrics_name_what_is_wrong_with_their_inputs():
    with pytest.raises(ValueError, match=r"times_ms must have the shape of predicted \(8,\), got \(3,\)"):
        pearson(np.zeros(8), np.ones(3))
    with pytest.raises(ValueError, match="times_ms must be finite and > 0"):
        spearman(np.zeros(2), np.array([1.0, 0.0]), np.zeros(2))
    with pytest.raises(ValueError, match="groups must have the shape"):
        top_k_regret(np.zeros(2), np.ones(2), np.zeros(3))
    with pytest.raises(ValueError, match="k must be >= 1"):
        top_k_regret(np.zeros(2), np.ones(2), np.zeros(2), 0)
