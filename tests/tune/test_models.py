"""Cost models: the DNN and the rank model learn a synthetic landscape's order on held-out
graphs; their NumPy inference matches the libraries they were trained with."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch
from .landscapes import ranking_corpus

from gsparse.tune import DnnCostModel, RankModel, pearson, spearman, top_k_regret
from gsparse.tune.models import TreeEnsemble, relevance_grades
from gsparse.tune.models.rank import standardised_log_times
from gsparse.tune.models.dnn import signed_log


@pytest.fixture(scope="module")
def corpus():
    """Training graphs and held-out graphs (other seeds: graphs never seen in training)."""
    return ranking_corpus(120, 200, seed=1), ranking_corpus(30, 200, seed=2)


@pytest.fixture(scope="module")
def dnn(corpus):
    (x, t, g), _ = corpus
    model = DnnCostModel(seed=3)
    model.fit(x, t, g)
    return model


def test_the_dnn_orders_schedules_of_held_out_graphs(dnn, corpus):
    _, (x, t, g) = corpus
    predicted = dnn.predict(x)
    assert spearman(predicted, t, g) > 0.9
    assert np.median(top_k_regret(predicted, t, g, 5)) < 0.05


def test_dnn_training_is_deterministic_for_a_seed(dnn, corpus):
    (x, t, g), (xt, _, _) = corpus
    again = DnnCostModel(seed=3)
    again.fit(x, t, g)
    np.testing.assert_array_equal(again.predict(xt), dnn.predict(xt))
    other = DnnCostModel(seed=4)
    other.fit(x, t, g)
    assert not np.array_equal(other.predict(xt), dnn.predict(xt))


def test_the_dnns_numpy_inference_matches_pytorch(dnn, corpus):
    _, (x, _, _) = corpus
    with torch.no_grad():
        expected = dnn.to_torch()(torch.from_numpy(signed_log(x))).squeeze(1).numpy()
    np.testing.assert_allclose(dnn.predict(x), expected, rtol=1e-10, atol=1e-10)


def test_a_saved_dnn_predicts_the_same(dnn, corpus, tmp_path):
    _, (x, _, _) = corpus
    dnn.save(tmp_path / "dnn.json")
    loaded = DnnCostModel().load(tmp_path / "dnn.json")
    np.testing.assert_array_equal(loaded.predict(x), dnn.predict(x))
    assert loaded.params == dnn.params


def test_the_dnn_rejects_bad_inputs(dnn):
    with pytest.raises(RuntimeError, match="not trained"):
        DnnCostModel().predict(np.zeros((1, 7)))
    with pytest.raises(ValueError, match=r"shape \[n, 7\].*got \(3, 5\)"):
        dnn.predict(np.zeros((3, 5)))
    with pytest.raises(ValueError, match=r"times_ms must have shape \(4,\)"):
        DnnCostModel().fit(np.zeros((4, 2)), np.ones(3), np.zeros(4))
    with pytest.raises(ValueError, match="times_ms must be finite and > 0"):
        DnnCostModel().fit(np.zeros((2, 2)), np.array([1.0, -1.0]), np.zeros(2))


@pytest.mark.slow
def test_the_dnn_trains_on_100k_rows_in_seconds():
    x, t, g = ranking_corpus(500, 200, seed=5)
    model = DnnCostModel()
    start = time.process_time()  # CPU seconds of all threads: other processes' load does not count
    model.fit(x, t, g)
    assert time.process_time() - start < 60


# -- the rank model -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ranker(corpus):
    pytest.importorskip("lightgbm")
    (x, t, g), _ = corpus
    model = RankModel(seed=3)
    model.fit(x, t, g)
    return model


def test_the_rank_model_orders_schedules_of_held_out_graphs(ranker, corpus):
    _, (x, t, g) = corpus
    predicted = ranker.predict(x)
    assert spearman(predicted, t, g) > 0.8
    assert np.median(top_k_regret(predicted, t, g, 5)) < 0.05


def test_the_numpy_trees_match_lightgbm(ranker, corpus):
    _, (x, _, _) = corpus
    np.testing.assert_allclose(-ranker.predict(x), ranker.booster.predict(x), rtol=0, atol=1e-12)
    # on the split thresholds themselves, where <= and < differ
    at = x[:50].copy()
    splits = ranker.ensemble
    at[np.arange(len(splits.feature[:50])) % 50, splits.feature[:50]] = splits.threshold[:50]
    np.testing.assert_allclose(-ranker.predict(at), ranker.booster.predict(at), rtol=0, atol=1e-12)


def test_a_saved_rank_model_decides_in_under_a_millisecond_without_lightgbm(ranker, corpus, tmp_path):
    _, (x, _, _) = corpus
    path = tmp_path / "rank.json"
    ranker.save(path)
    np.save(tmp_path / "x.npy", x[:300])
    np.save(tmp_path / "expected.npy", ranker.predict(x[:300]))
    script = textwrap.dedent(f"""
        import sys, time
        import numpy as np
        sys.modules["lightgbm"] = None  # importing it now fails
        from gsparse.tune.models import RankModel
        model = RankModel().load({str(path)!r})
        x = np.load({str(tmp_path / "x.npy")!r})
        assert np.array_equal(model.predict(x), np.load({str(tmp_path / "expected.npy")!r}))
        times = []
        for _ in range(100):
            start = time.perf_counter()
            model.predict(x)
            times.append(time.perf_counter() - start)
        print(min(times) * 1e3, np.median(times) * 1e3)
    """)
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    fastest_ms, median_ms = map(float, done.stdout.split())
    assert fastest_ms < 1.0, (fastest_ms, median_ms)


def test_relevance_grades_follow_the_rank_within_each_group():
    times = np.array([3.0, 1.0, 2.0, 2.0, 5.0, 7.0, 9.0])
    groups = np.array([0, 0, 0, 0, 1, 1, 2])
    assert relevance_grades(times, groups, 4).tolist() == [0, 3, 2, 2, 3, 0, 3]


def test_standardised_log_times_have_zero_mean_and_unit_deviation_in_each_group():
    times = np.array([1.0, 2.0, 4.0, 3.0, 3.0, 5.0])
    groups = np.array([0, 0, 0, 1, 1, 2])
    y = standardised_log_times(times, groups)
    np.testing.assert_allclose(y[:3], [-np.sqrt(1.5), 0.0, np.sqrt(1.5)])
    assert y[3:].tolist() == [0.0, 0.0, 0.0]  # equal times, and a group of one


def test_pointwise_trees_make_the_rank_models_costs_follow_the_log_times(ranker, corpus):
    (x, t, g), (xt, tt, gt) = corpus
    both = RankModel(trees=100, pointwise_trees=100, seed=3)
    both.fit(x, t, g)
    assert both.ensemble.num_trees == 200
    assert pearson(both.predict(xt), tt, gt) > pearson(ranker.predict(xt), tt, gt)
    assert spearman(both.predict(xt), tt, gt) > 0.8
    # the ensemble is LambdaMART's score less the pointwise log times, each scaled
    pointwise = both.pointwise_booster.predict(xt)
    rank = both.booster.predict(xt)
    coefficients, *_ = np.linalg.lstsq(np.stack([-rank, pointwise], axis=1), both.predict(xt), rcond=None)
    assert (coefficients > 0).all()
    np.testing.assert_allclose(np.stack([-rank, pointwise], axis=1) @ coefficients, both.predict(xt), atol=1e-9)


def test_the_predicted_time_is_the_least_squares_part_alone(ranker, corpus, tmp_path):
    (x, t, g), (xt, tt, gt) = corpus
    both = RankModel(trees=60, pointwise_trees=40, seed=3)
    both.fit(x, t, g)
    assert both.time_trees == 40
    # the least-squares booster's standardised log times, up to a positive scale
    pointwise = both.pointwise_booster.predict(xt)
    scale = both.predict_time(xt) / np.where(pointwise == 0, 1.0, pointwise)
    assert (scale[pointwise != 0] > 0).all()
    np.testing.assert_allclose(both.predict_time(xt), scale[pointwise != 0][0] * pointwise, atol=1e-9)
    # as the time it predicts, it follows the log times at least as well as the blended costs
    assert pearson(both.predict_time(xt), tt, gt) >= pearson(both.predict(xt), tt, gt) - 0.02
    path = tmp_path / "blend.json"
    both.save(path)
    loaded = RankModel().load(path)
    np.testing.assert_allclose(loaded.predict_time(xt), both.predict_time(xt), atol=1e-12)
    # a file saved before "time_trees" was written: the least-squares rounds of its parameters
    data = json.loads(path.read_text())
    del data["time_trees"]
    path.write_text(json.dumps(data))
    assert RankModel().load(path).time_trees == 40
    with pytest.raises(ValueError, match="no least-squares part"):
        ranker.predict_time(xt)


def test_training_the_rank_model_without_lightgbm_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightgbm", None)
    with pytest.raises(ImportError, match=r"pip install 'gsparse\[tune\]'"):
        RankModel().fit(np.ones((4, 2)), np.ones(4), np.zeros(4))


def test_the_rank_model_checks_its_knobs_and_its_state():
    with pytest.raises(ValueError, match=r"leaves must be in \[2, 64\]"):
        RankModel(leaves=100)
    with pytest.raises(RuntimeError, match="not trained"):
        RankModel().predict(np.zeros((1, 3)))


# -- the NumPy tree evaluator, against a hand-made LightGBM dump --------------------------


def _split(feature, threshold, left, right):
    return {"split_feature": feature, "threshold": threshold, "decision_type": "<=", "default_left": True,
            "missing_type": "None", "left_child": left, "right_child": right}


def _leaf(value):
    return {"leaf_value": value}


DUMP = {
    "max_feature_idx": 2,
    "tree_info": [
        {"tree_structure": _split(0, 0.5, _split(1, 2.0, _leaf(1.0), _leaf(2.0)),
                                  _split(2, -1.0, _leaf(3.0), _split(0, 4.0, _leaf(4.0), _leaf(5.0))))},
        {"tree_structure": _leaf(0.25)},
        {"tree_structure": _split(2, 0.0, _leaf(-10.0), _leaf(10.0))},
    ],
}


def _walk(node, row):
    while "leaf_value" not in node:
        node = node["left_child"] if row[node["split_feature"]] <= node["threshold"] else node["right_child"]
    return node["leaf_value"]


def _wide_and_narrow() -> tuple[TreeEnsemble, TreeEnsemble]:
    """DUMP's three trees, and one tree on the same features."""
    narrow = TreeEnsemble.from_lightgbm({"max_feature_idx": 2, "tree_info": [
        {"tree_structure": _split(1, 0.5, _leaf(-1.0), _leaf(7.0))}]})
    return TreeEnsemble.from_lightgbm(DUMP), narrow


def test_a_weighted_sum_of_ensembles_predicts_the_weighted_sum_of_their_predictions():
    wide, narrow = _wide_and_narrow()
    x = np.random.default_rng(1).choice([-2.0, 0.0, 0.5, 1.0, 3.0, 5.0], size=(200, 3))
    summed = TreeEnsemble.weighted_sum([(wide, 0.5), (narrow, -2.0)])
    assert summed.num_trees == wide.num_trees + narrow.num_trees
    np.testing.assert_allclose(summed.predict(x), 0.5 * wide.predict(x) - 2.0 * narrow.predict(x), atol=1e-12)
    with pytest.raises(ValueError, match="the same features"):
        TreeEnsemble.weighted_sum([(wide, 1.0), (TreeEnsemble.from_lightgbm({**DUMP, "max_feature_idx": 5}), 1.0)])


def test_the_last_trees_of_a_weighted_sum_predict_its_last_part():
    wide, narrow = _wide_and_narrow()
    x = np.random.default_rng(2).choice([-2.0, 0.0, 0.5, 1.0, 3.0, 5.0], size=(100, 3))
    summed = TreeEnsemble.weighted_sum([(wide, 0.5), (narrow, -2.0)])
    np.testing.assert_allclose(summed.last_trees(1).predict(x), -2.0 * narrow.predict(x), atol=1e-12)
    np.testing.assert_allclose(summed.last_trees(summed.num_trees).predict(x), summed.predict(x), atol=1e-12)
    for count in (0, 5):
        with pytest.raises(ValueError, match=r"count must be in \[1, 4\]"):
            summed.last_trees(count)


def test_the_tree_evaluator_walks_every_path_as_lightgbm_does():
    ensemble = TreeEnsemble.from_lightgbm(DUMP)
    rng = np.random.default_rng(0)
    x = rng.choice([-2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0], size=(500, 3))
    expected = [sum(_walk(t["tree_structure"], row) for t in DUMP["tree_info"]) for row in x]
    np.testing.assert_array_equal(ensemble.predict(x), expected)
    again = TreeEnsemble.from_dict(ensemble.to_dict())
    np.testing.assert_array_equal(again.predict(x), expected)


def test_the_tree_evaluator_rejects_what_it_does_not_model():
    ensemble = TreeEnsemble.from_lightgbm(DUMP)
    with pytest.raises(ValueError, match="features must be finite"):
        ensemble.predict(np.array([[np.nan, 0.0, 0.0]]))
    with pytest.raises(ValueError, match=r"shape \[n, 3\]"):
        ensemble.predict(np.zeros((2, 4)))
    categorical = {"max_feature_idx": 0, "tree_info": [{"tree_structure": dict(
        _split(0, 1.0, _leaf(0.0), _leaf(1.0)), decision_type="==")}]}
    with pytest.raises(ValueError, match="only numerical '<=' splits"):
        TreeEnsemble.from_lightgbm(categorical)


def _random_tree(rng, leaves, features, thresholds):
    """A LightGBM dump node of ``leaves`` leaves: random splits, leaf values multiples of
    1/8 (so that sums are exact in any order)."""
    if leaves == 1:
        return _leaf(float(rng.integers(-80, 80)) / 8)
    left = int(rng.integers(1, leaves))
    return _split(int(rng.integers(features)), float(rng.choice(thresholds)),
                  _random_tree(rng, left, features, thresholds),
                  _random_tree(rng, leaves - left, features, thresholds))


@pytest.mark.parametrize("most_leaves", [32, 64])
def test_the_tree_evaluator_walks_random_trees(most_leaves):
    """Masks of 32 bits for trees of up to 32 leaves, 64 beyond; columns equal in every row
    (the graph's features, in the tuner's use) or not; values on the thresholds."""
    rng = np.random.default_rng(most_leaves)
    thresholds = [-1.5, 0.0, 0.5, 2.0, 3.25, 7.0]
    dump = {"max_feature_idx": 5, "tree_info": [
        {"tree_structure": _random_tree(rng, int(rng.integers(1, most_leaves + 1)), 6, thresholds)}
        for _ in range(40)]}
    ensemble = TreeEnsemble.from_lightgbm(dump)
    for constant in ([], [0, 3], [0, 1, 2, 3, 4, 5]):
        x = rng.choice([-2.0, *thresholds, 1.0, 9.0], size=(300, 6))
        x[:, constant] = x[0, constant]
        expected = [sum(_walk(t["tree_structure"], row) for t in dump["tree_info"]) for row in x]
        np.testing.assert_array_equal(ensemble.predict(x), expected)


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_the_shipped_models_score_spaces_as_the_plain_evaluation(operator):
    from gsparse.kernels import sddmm, spmm
    from gsparse.tune import select

    from graphs import named_graph

    from .reference_decision import (TARGETS, random_graph, random_sddmm_task, random_spmm_task,
                                     reference_featurize, reference_scores)

    ops, random_task = (spmm, random_spmm_task) if operator == "spmm" else (sddmm, random_sddmm_task)
    ensemble = select._model(operator).ensemble
    rng = np.random.default_rng(7)
    g = named_graph("random")
    for _ in range(40):
        stats, structure = random_graph(rng)
        task, target = random_task(rng, g), TARGETS[rng.integers(len(TARGETS))]
        x = reference_featurize(task, structure, target, ops.schedule_space(task, stats, target).candidates())
        assert np.array_equal(ensemble.predict(x), reference_scores(ensemble, x))


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_the_shipped_models_score_random_rows_as_the_plain_evaluation(operator):
    """Every feature varies, each value a threshold of its feature, one beside it or a
    random one: every row of every feature's table is read."""
    from gsparse.tune import select

    from .reference_decision import reference_scores

    ensemble = select._model(operator).ensemble
    rng = np.random.default_rng(19)
    x = rng.normal(size=(400, ensemble.num_features)) * 100
    for j in range(ensemble.num_features):
        thresholds = ensemble.threshold[ensemble.feature == j]
        if len(thresholds):
            picks = rng.choice(thresholds, size=len(x))
            x[:, j] = np.where(rng.random(len(x)) < 0.7, picks + rng.choice([-1e-9, 0.0, 1e-9], size=len(x)), x[:, j])
    assert np.array_equal(ensemble.predict(x), reference_scores(ensemble, x))


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_masks_apart_are_the_masks_of_all_columns_and_of_the_part(operator):
    """One pass for both (what the first graph of a task keeps): the masks over every column
    and over the part are those of two calls, whichever columns are equal in every row
    (a group of few thresholds then holds read features of both sets, some constant)."""
    from gsparse.tune import select

    model = select._model(operator)
    ensemble = model.ensemble
    rng = np.random.default_rng(23)
    d = ensemble.num_features
    for constant_share in (0.0, 0.5, 1.0):
        x = rng.normal(size=(150, d)) * 50
        for j in range(d):
            thresholds = ensemble.threshold[ensemble.feature == j]
            if len(thresholds):
                x[:, j] = rng.choice(np.append(thresholds, thresholds.max() + 1), size=len(x))
        constant = rng.random(d) < constant_share
        x[:, constant] = x[0, constant]
        part = rng.random(d) < 0.5
        everything, kept = ensemble.masks_apart(x, part)
        assert np.array_equal(everything, ensemble.masks(x))
        assert np.array_equal(kept, ensemble.masks(x, part))
        costs, masks = model.predict_apart(x, part)
        assert np.array_equal(costs, model.predict(x))
        assert np.array_equal(model.predict(x, fixed=(part, masks)), costs)


# -- weighted groups -----------------------------------------------------------------------


def _two_opposite_landscapes():
    """Twenty groups of the same ten rows: in the first ten the time grows with the feature,
    in the last ten it falls. Only the groups' weights can say whose order to learn."""
    x = np.tile(np.arange(10.0), 20)[:, None]
    g = np.repeat(np.arange(20), 10)
    t = np.where(g < 10, 1.0 + x[:, 0], 11.0 - x[:, 0])
    return x, t, g


@pytest.mark.parametrize("pointwise_trees", [0, 20])
def test_the_rank_model_learns_the_order_of_the_heavier_groups(pointwise_trees):
    pytest.importorskip("lightgbm")
    x, t, g = _two_opposite_landscapes()
    probe = np.arange(10.0)[:, None]
    for heavy_first, fastest in ((True, 0), (False, 9)):
        weights = np.where((g < 10) == heavy_first, 1.0, 0.1)
        model = RankModel(trees=20, min_rows_in_leaf=5, pointwise_trees=pointwise_trees)
        model.fit(x, t, g, weights=weights)
        # the first choice, and the cheaper half, are the heavier groups' fastest rows
        cost = model.predict(probe)
        assert int(np.argmin(cost)) == fastest
        assert (cost[:5].mean() < cost[5:].mean()) == heavy_first


def test_weights_of_one_give_the_unweighted_trees_and_bad_weights_are_refused():
    pytest.importorskip("lightgbm")
    x, t, g = _two_opposite_landscapes()
    x = np.hstack([x, np.sin(np.arange(len(x)))[:, None]])  # something to split on besides
    plain, ones = (RankModel(trees=10, min_rows_in_leaf=5, pointwise_trees=10) for _ in range(2))
    plain.fit(x, t, g)
    ones.fit(x, t, g, weights=np.ones(len(t)))
    np.testing.assert_array_equal(plain.predict(x), ones.predict(x))
    with pytest.raises(ValueError, match="weights must have shape"):
        RankModel().fit(x, t, g, weights=np.ones(3))
    with pytest.raises(ValueError, match="finite and > 0"):
        RankModel().fit(x, t, g, weights=np.zeros(len(t)))
    with pytest.raises(ValueError, match="equal over each group"):
        RankModel().fit(x, t, g, weights=np.arange(1.0, len(t) + 1))
