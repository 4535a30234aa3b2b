"""The 10 matrix features and the MLP scheme selector."""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv import analysis, selector
from gsparse.kernels.sptrsv.features import FEATURE_NAMES, matrix_features
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.kernels.sptrsv.space import reduced_space

from .factors import hand_factor


def _features(matrix: sp.sparray, lower: bool = True) -> dict[str, float]:
    rows = analysis.dependency_graph(matrix.indptr, matrix.indices, lower)
    return dict(zip(FEATURE_NAMES, matrix_features(rows, analysis.levels(rows.ptr, rows.deps)), strict=True))


def test_features_of_a_small_factor():
    f = _features(hand_factor())  # row entries [1, 2, 1, 4, 3], levels [0, 1, 0, 2, 3]
    per_row, per_level = np.array([1, 2, 1, 4, 3]), np.array([2, 2, 4, 3])
    assert (f["m"], f["nnz"], f["layer_num"]) == (5, 11, 4)
    assert (f["rnnz"], f["rnnz_max"], f["rnnz_cov"]) == pytest.approx((2.2, 4, per_row.std() / 2.2))
    assert (f["lnnz"], f["lnnz_max"], f["lnnz_cov"]) == pytest.approx((2.75, 4, per_level.std() / 2.75))
    # Rows 1, 3 and 4 depend on the row just before them; rows 0 and 2 on none.
    assert f["dep_dist"] == pytest.approx(3 / 5)


def test_dep_dist_measures_the_nearest_dependency_in_solve_order():
    far = sp.csr_array(np.eye(4) + np.diag([1.0, 1.0], -2))  # rows 2, 3 depend two rows back
    assert _features(far)["dep_dist"] == pytest.approx((0.5 + 0.5) / 4)
    # The same factor stored upper and solved bottom up has the same features.
    mirrored = sp.csr_array(far.toarray()[::-1, ::-1])
    assert _features(mirrored, lower=False) == pytest.approx(_features(far))


@pytest.mark.parametrize("family", ["road", "power_law", "shuffled"])
@pytest.mark.parametrize("upper", [False, True])
def test_dep_dist_and_row_spread_match_their_definitions_row_by_row(family, upper):
    matrix = triangular.generate(family, 400, 3, upper=upper)
    rows = analysis.dependency_graph(matrix.indptr, matrix.indices, not upper)
    f = dict(zip(FEATURE_NAMES, matrix_features(rows, analysis.levels(rows.ptr, rows.deps)), strict=True))
    nearest = [max(rows.deps[rows.ptr[k]:rows.ptr[k + 1]], default=None) for k in range(rows.n)]
    want = sum(1 / (k - j) for k, j in enumerate(nearest) if j is not None) / rows.n
    assert f["dep_dist"] == pytest.approx(want, rel=1e-12)
    per_row = np.diff(matrix.indptr)
    assert f["rnnz_cov"] == pytest.approx(per_row.std() / per_row.mean(), rel=1e-9)


def test_features_of_an_empty_factor():
    assert list(_features(sp.csr_array((0, 0))).values()) == [0.0] * 10


def test_expand_makes_every_monomial_of_degree_two():
    f = torch.arange(1.0, 11.0, dtype=torch.float64).reshape(1, 10)
    x = selector.expand(f)
    assert x.shape == (1, 66) and x[0, 0] == 1
    logged = f.clone()
    logged[0, [0, 1, 2, 3, 5, 6, 8]] = torch.log1p(logged[0, [0, 1, 2, 3, 5, 6, 8]])
    torch.testing.assert_close(x[0, 1:11], logged[0])
    assert x[0, 11] == logged[0, 0] ** 2 and x[0, 12] == logged[0, 0] * logged[0, 1]
    assert x[0, -1] == logged[0, 9] ** 2


def test_satisfactory_means_within_85_percent_of_the_best():
    times = torch.tensor([[1.0, 1.1, 1.2, float("inf"), float("nan")]])
    torch.testing.assert_close(selector.satisfactory(times), torch.tensor([[1.0, 1.0, 0.0, 0.0, 0.0]],
                                                                          dtype=torch.float64))


def _task(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features of random matrices and times of three schemes: scheme 0 wins on deep,
    row-after-row factors (dep_dist > 0.5), scheme 1 elsewhere, scheme 2 is always 1.5x off."""
    rng = np.random.default_rng(seed)
    f = np.zeros((count, 10))
    f[:, 0] = 10 ** rng.uniform(3, 7, count)
    f[:, 2] = rng.uniform(2, 10, count)
    f[:, 1] = f[:, 0] * f[:, 2]
    f[:, 3] = f[:, 2] * rng.uniform(1, 100, count)
    f[:, 4] = rng.uniform(0, 3, count)
    f[:, 8] = 10 ** rng.uniform(1, 5, count)
    f[:, 5] = f[:, 1] / f[:, 8]
    f[:, 6] = f[:, 5] * rng.uniform(1, 4, count)
    f[:, 7] = rng.uniform(0, 2, count)
    f[:, 9] = rng.random(count)
    deep = f[:, 9] > 0.5
    times = np.stack([np.where(deep, 1.0, 2.0), np.where(deep, 2.0, 1.0), np.full(count, 1.5)], axis=1)
    return f, times


SCHEMES = [SptrsvSchedule(), SptrsvSchedule(subwarps=32, sw_rnnz=float("inf")), SptrsvSchedule(warps_per_block=4)]


def test_the_selector_learns_and_generalises():
    model = selector.train(*_task(300, 0), SCHEMES, seed=1)
    held_out = _task(200, 1)
    assert selector.within_best(model, *held_out) >= 0.95
    assert model.select(held_out[0][0]) == SCHEMES[0 if held_out[0][0, 9] > 0.5 else 1]
    assert model.scores(held_out[0]).shape == (200, 3) and model.scores(held_out[0][0]).shape == (3,)


def test_training_is_deterministic_and_the_file_round_trips(tmp_path):
    features, times = _task(60, 2)
    first = selector.train(features, times, SCHEMES, epochs=20, seed=3)
    again = selector.train(features, times, SCHEMES, epochs=20, seed=3)
    torch.testing.assert_close(first.scores(features), again.scores(features))
    path = tmp_path / "selector.pt"
    first.save(path)
    loaded = selector.SchemeSelector.load(path)
    assert loaded.schemes == first.schemes
    torch.testing.assert_close(loaded.scores(features), first.scores(features))


def test_selector_errors(tmp_path):
    features, times = _task(10, 4)
    with pytest.raises(ValueError, match=r"features must be \[B, 10\], got \(10, 9\)"):
        selector.train(features[:, :9], times, SCHEMES)
    with pytest.raises(ValueError, match=r"times must be \[B, S\] = \[10, 3\] \(matrices x schemes\), got \(10, 2\)"):
        selector.train(features, times[:, :2], SCHEMES)
    with pytest.raises(ValueError, match="schemes must not be empty"):
        selector.SchemeSelector([], torch.zeros(66), torch.ones(66))
    model = selector.train(features, times, SCHEMES, epochs=1)
    with pytest.raises(ValueError, match=r"features must have 10 values per matrix .* got shape \(9,\)"):
        model.select(features[0, :9])
    other = tmp_path / "other.pt"
    torch.save({"format": "something/1"}, other)
    with pytest.raises(ValueError, match=r"other.pt is not a gsparse-sptrsv-selector/3 file \(found 'something/1'\)"):
        selector.SchemeSelector.load(other)


def test_selection_over_the_reduced_space_takes_under_5_ms():
    space = reduced_space()
    features, times = _task(40, 5)
    model = selector.train(features, np.tile(times, (1, len(space) // 3)), space, epochs=2)
    one = features[0]
    model.select(one)
    spent = []
    for _ in range(20):
        start = time.perf_counter()
        model.select(one)
        spent.append(time.perf_counter() - start)
    assert statistics.median(spent) < 5e-3


def _always(best: int, schemes, num_rhs: int = 1, rows=(1e3, 1e5)) -> selector.SchemeSelector:
    """A selector trained on a table where scheme ``best`` always wins, on factors of ``rows``."""
    features, _ = _task(60, 6)
    features[:, 0] = np.geomspace(*rows, len(features))
    times = np.full((len(features), len(schemes)), 2.0)
    times[:, best] = 1.0
    return selector.train(features, times, schemes, num_rhs=num_rhs, epochs=150, seed=0)


def test_a_selector_remembers_its_right_hand_sides_and_training_sizes():
    model = _always(1, SCHEMES, num_rhs=16, rows=(2e3, 5e4))
    assert model.num_rhs == 16 and model.rows == pytest.approx((2e3, 5e4))
    one = _task(1, 7)[0][0]
    # Within its training rows only: a selector does not extrapolate in size.
    for m, inside in ((2e3, True), (1.9e3, False), (5e4, True), (5.1e4, False)):
        one[0] = m
        assert model.covers(one) is inside
    assert model.select(one) == SCHEMES[1]


def test_a_set_picks_the_nearest_right_hand_sides_and_declines_other_gpus_and_sizes(tmp_path):
    one, sixteen = _always(0, SCHEMES, num_rhs=1), _always(2, SCHEMES, num_rhs=16)
    chosen = selector.SelectorSet([sixteen, one], sms=132, device="NVIDIA H100 80GB HBM3")
    assert [chosen.for_rhs(k).num_rhs for k in (1, 2, 3, 4, 5, 64)] == [1, 1, 1, 16, 16, 16]
    f = _task(1, 8)[0][0]
    f[0] = 1e4
    assert chosen.select(f, 1, 132) == SCHEMES[0] and chosen.select(f, 8, 132) == SCHEMES[2]
    assert chosen.select(f, 1, 108) is None and chosen.select(f, 1) == SCHEMES[0]
    f[0] = 1e6
    assert chosen.select(f, 1, 132) is None
    path = tmp_path / "set.pt"
    chosen.save(path)
    loaded = selector.load_selectors(path)
    assert (loaded.sms, loaded.device, list(loaded.selectors)) == (132, "NVIDIA H100 80GB HBM3", [1, 16])
    f[0] = 1e4
    torch.testing.assert_close(loaded.for_rhs(16).scores(f), sixteen.scores(f))
    single = tmp_path / "single.pt"
    one.save(single)
    alone = selector.load_selectors(single)
    assert alone.sms is None and alone.select(f, 16, 108) == SCHEMES[0]
    with pytest.raises(ValueError, match=r"selectors must be one or more, each for its own num_rhs, got num_rhs \[1, 1\]"):
        selector.SelectorSet([one, one])
    with pytest.raises(ValueError, match="is not a gsparse-sptrsv-selectors/2 file"):
        selector.SelectorSet.load(single)


def test_worst_ratios_are_each_schemes_greatest_time_over_its_factors_best():
    inf, nan = math.inf, math.nan
    times = np.array([[1.0, 2.0, inf, nan],
                      [4.0, 1.0, 1.0, nan],
                      [3.0, nan, 1.5, nan]])
    # Row bests 1, 1, 1.5; a failure (inf) is the worst there is; never measured (nan) does not count.
    assert selector.worst_ratios(times).tolist() == [4.0, 2.0, inf, inf]


def test_a_set_declines_a_pick_that_was_far_off_the_best_on_a_training_factor():
    """The selector's top score goes to a scheme that won on most training factors but was
    5x off on one: the set does not answer (the analysed default then runs the hand rule),
    while a scheme never worse than 3x is trusted."""
    features, _ = _task(60, 6)
    features[:, 0] = np.geomspace(1e3, 1e5, len(features))
    times = np.full((len(features), len(SCHEMES)), 2.0)
    times[:, 0] = 1.0
    times[-1, 0] = 5 * 2.0  # scheme 0 is 5x the best on the last factor
    model = selector.train(features, times, SCHEMES, epochs=150, seed=0)
    assert model.worst[0] == 5.0 and not model.trusts(SCHEMES[0]) and model.trusts(SCHEMES[1])
    f = features[10]
    assert model.select(f) == SCHEMES[0]
    assert selector.SelectorSet([model]).select(f, 1) is None
    times[-1, 0] = 2.0 * 2.9  # 2.9x: trusted
    trusted = selector.train(features, times, SCHEMES, epochs=150, seed=0)
    assert selector.SelectorSet([trusted]).select(f, 1) == SCHEMES[0]


def test_the_default_selectors_come_from_the_environment_else_the_shipped_file(tmp_path, monkeypatch):
    path = tmp_path / "mine.pt"
    selector.SelectorSet([_always(1, SCHEMES)]).save(path)
    monkeypatch.setattr(selector, "shipped_path", lambda: str(tmp_path / "absent.pt"))
    monkeypatch.delenv(selector.SELECTOR_ENV, raising=False)
    assert selector.default_selectors() is None
    monkeypatch.setattr(selector, "shipped_path", lambda: str(path))
    assert list(selector.default_selectors().selectors) == [1]
    monkeypatch.setenv(selector.SELECTOR_ENV, "off")
    assert selector.default_selectors() is None
    monkeypatch.setenv(selector.SELECTOR_ENV, str(path))
    assert selector.default_selectors() is selector.default_selectors()  # read once


def test_the_shipped_selector_never_answers_pubmed_with_a_rows_merging_scheme():
    """PubMed's lower triangle (19.7K rows, within the training rows, like no training
    family): the unguarded MLP picked merge_fixed(4) at 16 right-hand sides, 0.37x cuSPARSE
    on an H200. The shipped set answers there only with a trusted scheme, or not at all."""
    from gsparse.datasets.real import real_graph

    factor = triangular.graph_lower(real_graph("pubmed_cites").graph)
    features = np.array(list(_features(factor).values()))
    shipped = selector.default_selectors()
    assert shipped is not None
    for k in (1, 16):
        picked = shipped.select(features, k, 132)
        assert picked is None or (picked.merge_rows == 1 and shipped.for_rhs(k).trusts(picked)), (k, picked)
