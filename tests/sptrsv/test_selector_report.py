"""The selector judged on a sweep (gsparse.bench.sptrsv_selector and its report script) on
synthetic sweep records: the table, the held-out split, the shares within 10% and 25%, the
leave-one-family-out pass and the shipped set."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gsparse.bench import sptrsv_selector as report
from gsparse.kernels.sptrsv.features import FEATURE_NAMES
from gsparse.kernels.sptrsv.selector import load_selectors
from gsparse.kernels.sptrsv.space import selection_space

from .scripts import load_script

SPACE = selection_space()
CHAINED, INDEPENDENT = SPACE[2], SPACE[40]  # the two schemes that win in the synthetic sweep
FAMILIES = ("mesh", "band", "web", "graph", "grid", "star")


def _records(seed: int = 0, per_family: int = 6, ks=(1, 16)) -> list[dict]:
    """A sweep of synthetic factors: the families differ in size and row length; CHAINED is
    the best where dep_dist > 0.5 (half the families), INDEPENDENT elsewhere, the hand rule
    (the other one) 1.5x off, every other scheme 3x, the last ten pruned."""
    rng = np.random.default_rng(seed)
    records = []
    for f, family in enumerate(FAMILIES):
        for i in range(per_family):
            chained = f % 2 == 0
            m = float(10 ** rng.uniform(4, 5.5))
            rnnz = 2.0 + f + rng.random()
            depth = float(m / 100 if chained else 30)
            values = dict(m=m, nnz=m * rnnz, rnnz=rnnz, rnnz_max=rnnz * 3, rnnz_cov=0.1 * f, lnnz=m * rnnz / depth,
                          lnnz_max=2 * m * rnnz / depth, lnnz_cov=0.5, layer_num=depth,
                          dep_dist=rng.uniform(0.7, 1.0) if chained else rng.uniform(0.0, 0.3))
            winner, loser = (CHAINED, INDEPENDENT) if chained else (INDEPENDENT, CHAINED)
            for k in ks:
                entries = []
                for s in SPACE:
                    key = s.to_json()
                    if s in SPACE[-10:] and s not in (winner, loser):
                        entries.append({"schedule": key, "status": "pruned", "error": "far off"})
                        continue
                    t = 1.0 if s == winner else 1.5 if s == loser else 3.0
                    entries.append({"schedule": key, "status": "ok", "median_ms": t * k})
                records.append({"matrix": f"{family}:{int(m)}:{i}", "family": family, "seed": i, "gpu": "H100",
                                "sms": 132, "n": int(m), "k": k, "features": values, "default": loser.to_json(),
                                "schemes": entries, "truncated": False})
    return records


@pytest.fixture(autouse=True)
def _rule_is_the_loser(monkeypatch):
    """The synthetic sweep's hand rule: the scheme that is 1.5x off (dep_dist is the last
    feature), in place of gsparse's rule, whose schemes the synthetic sweep does not favour."""
    monkeypatch.setattr(report, "hand_rule", lambda features, k, sms: INDEPENDENT if features[-1] > 0.5 else CHAINED)


def test_the_table_has_times_inf_for_what_failed_or_was_pruned_and_nan_for_what_was_never_reached():
    records = _records(per_family=1, ks=(1,))
    records[0]["schemes"][3] = {"schedule": SPACE[3].to_json(), "status": "wrong", "error": "x"}
    del records[0]["schemes"][4]
    records[1]["truncated"] = True
    table = report.scheme_table(records, 1)
    assert table.schemes == tuple(SPACE) and len(table.names) == len(FAMILIES) - 1
    assert table.names[0] == records[0]["matrix"] and records[1]["matrix"] not in table.names
    assert np.isinf(table.times[0, 3]) and np.isnan(table.times[0, 4]) and np.isinf(table.times[0, -1])
    assert table.features.shape == (5, len(FEATURE_NAMES)) and table.best[0] == 1.0 and table.default[0] == 1.5
    assert len(report.scheme_table(records, 1, include_truncated=True).names) == len(FAMILIES)
    assert len(report.scheme_table(records, 16).names) == 0


def test_held_out_families_are_never_trained_on_and_the_selector_generalises(monkeypatch):
    trained_on = []
    fit = report.fit

    def spy(table, **kwargs):
        trained_on.append(set(table.families))
        return fit(table, **kwargs)

    monkeypatch.setattr(report, "fit", spy)
    judged = report.held_out(_records(), ["grid", "star"])
    assert trained_on == [{"mesh", "band", "web", "graph"}] * 2  # one selector per k
    assert {j.family for j in judged} == {"grid", "star"} and {j.k for j in judged} == {1, 16}
    assert len(judged) == 2 * 2 * 6 and all(j.ratio == 1.0 and j.default_ratio == 1.5 for j in judged)
    summary = report.summarize(judged)
    assert summary["mlp_within_10"] == 1.0 and summary["rule_within_10"] == 0.0 and summary["rule_within_25"] == 0.0
    assert summary["rule_worst"] == 1.5


def test_a_pick_the_selector_does_not_trust_is_judged_as_the_hand_rules_scheme():
    records = _records()
    table = report.scheme_table(records, 1)
    selector = report.fit(table.of_families(["grid", "star"], inside=False))
    selector.worst.fill_(math.inf)  # nothing trusted: every choice is the hand rule's
    judged = report.judge(selector, table.of_families(["grid", "star"]))
    assert judged and all(not j.trusted and j.ratio == j.default_ratio == 1.5 for j in judged)
    assert all(j.pick in (CHAINED, INDEPENDENT) and j.pick != j.best for j in judged)


def test_shares_worst_and_geomean_of_hand_made_judgements():
    def judged(ratio, rule):
        return report.Judgement(0, "f:1:0", "f", 1, SPACE[0], SPACE[0], ratio, rule)

    s = report.summarize([judged(1.0, 1.0), judged(1.09, 1.3), judged(1.2, math.nan), judged(2.0, 1.1)])
    assert (s["factors"], s["mlp_within_10"], s["mlp_within_25"], s["mlp_worst"]) == (4, 0.5, 0.75, 2.0)
    assert s["mlp_geomean"] == pytest.approx((1.09 * 1.2 * 2.0) ** 0.25)
    assert (s["rule_factors"], s["rule_within_10"], s["rule_worst"]) == (3, pytest.approx(2 / 3), 1.3)
    missed = report.summarize([judged(math.inf, 1.0), judged(1.0, 1.0)])
    assert missed["mlp_within_10"] == 0.5 and missed["mlp_worst"] == math.inf and missed["mlp_geomean"] == math.inf


def test_a_pick_that_was_pruned_or_never_measured_is_a_miss():
    records = _records(per_family=2, ks=(1,))
    table = report.scheme_table(records, 1)
    selector = report.fit(table, epochs=200)
    for r in records:  # the selector's favourite pruned everywhere afterwards
        for e in r["schemes"]:
            if e["schedule"] in (CHAINED.to_json(), INDEPENDENT.to_json()):
                e.update(status="pruned", median_ms=None)
    judged = report.judge(selector, report.scheme_table(records, 1))
    assert all(j.ratio == math.inf for j in judged)


def test_leave_one_family_out_judges_every_factor_once():
    records = _records(per_family=3)
    judged = report.leave_one_family_out(records, epochs=200)
    assert sorted(judged) == list(range(len(records)))
    assert all(judged[i].family == records[i]["family"] and judged[i].k == records[i]["k"] for i in judged)
    assert report.leave_one_family_out([r for r in records if r["family"] == "mesh"]) == {}


def test_the_shipped_set_has_a_selector_per_k_for_the_measured_gpu(tmp_path):
    records = _records(per_family=3)
    chosen = report.train_set(records, epochs=200)
    assert list(chosen.selectors) == [1, 16] and chosen.sms == 132 and chosen.device == "H100"
    assert chosen.selectors[16].num_rhs == 16 and chosen.selectors[1].rows[0] >= 1e4
    records[0]["sms"] = 108
    with pytest.raises(ValueError, match=r"GPUs of different SM counts \[108, 132\]"):
        report.train_set(records, epochs=1)


def _script():
    return load_script("sptrsv_selector_report")


def test_the_report_script_prints_the_bar_the_tables_and_ships_the_set(tmp_path, capsys):
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text("".join(json.dumps(r) + "\n" for r in _records(per_family=4)))
    shipped = tmp_path / "selector-h100.pt"
    assert _script().main([str(sweep), "--held-out", "grid,star", "--epochs", "200", "--no-timing",
                           "--ship", str(shipped), "--out", str(tmp_path / "report.md")]) == 0
    text = (tmp_path / "report.md").read_text()
    assert "## Held out: grid, star (trained on band, graph, mesh, web)" in text
    assert "**Bar** (within 10% of the best on >= 85% of held-out factors): the MLP 100% of 16" in text
    assert "the hand rule 0% of 16: met." in text and "## Leave one family out" in text
    assert "| all | 24 | 100% |" in text  # leave one family out, per k
    assert list(load_selectors(shipped).selectors) == [1, 16] and capsys.readouterr().out == text
    with pytest.raises(SystemExit):
        _script().main([str(sweep), "--held-out", "nowhere", "--no-timing"])


def test_the_script_times_features_and_selection_on_a_factor_made_again_from_its_name():
    from gsparse.datasets import triangular
    from gsparse.kernels.sptrsv import analysis
    from gsparse.kernels.sptrsv.features import matrix_features

    chosen = report.train_set(_records(per_family=2), epochs=50)
    matrix = triangular.generate("road", 2000, 3)
    rows = analysis.dependency_graph(matrix.indptr, matrix.indices, True)
    recorded = dict(zip(FEATURE_NAMES, matrix_features(rows, analysis.levels(rows.ptr, rows.deps)), strict=True))
    features_ms, total_ms, drift = _script()._selection_ms(chosen, "road", 2000, 3, 16, 3, recorded)
    assert 0 < features_ms <= total_ms < 1000 and drift == 0.0
