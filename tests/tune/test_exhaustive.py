"""Exhaustive search: every candidate screened, the fastest few measured again, failures
kept as records."""

from __future__ import annotations

from gsparse.tune.search import FINALISTS, exhaustive_search


def _fake(times: dict[str, float], failing: set[str]):
    """screen/measure calls that record what they were asked, with times from ``times``
    (a measurement is a tenth of the screen's) and a failure for ``failing``."""
    calls = {"screen": [], "measure": []}

    def screen(s):
        calls["screen"].append(s)
        if s in failing:
            return {"status": "error", "message": f"{s} does not compile"}
        return {"status": "ok", "median_ms": times[s]}

    def measure(s):
        calls["measure"].append(s)
        return {"status": "ok", "median_ms": times[s] / 10, "spread": 0.01}

    return screen, measure, calls


def test_every_candidate_is_screened_and_the_finalists_are_measured_again() -> None:
    names = [f"s{i}" for i in range(10)]
    times = {name: float(t) for name, t in zip(names, [5, 3, 9, 1, 7, 2, 8, 6, 4, 10])}
    screen, measure, calls = _fake(times, failing=set())
    records = exhaustive_search(names, screen, measure)
    assert calls["screen"] == names  # in order, each once
    assert FINALISTS == 6
    fastest = sorted(names, key=times.get)[:FINALISTS]
    assert sorted(calls["measure"]) == sorted(fastest)
    for name, record in zip(names, records):  # one record per candidate, in order
        assert record["screen_ms"] == times[name]
        if name in fastest:
            assert record["median_ms"] == times[name] / 10 and record["spread"] == 0.01
        else:
            assert "median_ms" not in record


def test_failures_are_kept_as_records_and_never_measured() -> None:
    names = ["a", "b", "c", "d"]
    screen, measure, calls = _fake({"a": 2.0, "b": 1.0, "c": 3.0, "d": 0.5}, failing={"b", "d"})
    records = exhaustive_search(names, screen, measure, finalists=1)
    assert records[1] == {"status": "error", "message": "b does not compile"}
    assert records[3]["status"] == "error" and "screen_ms" not in records[3]
    assert calls["measure"] == ["a"]  # the fastest that ran
    assert records[0]["median_ms"] == 0.2 and "median_ms" not in records[2]


def test_a_failed_measurement_replaces_the_finalists_status() -> None:
    def measure(s):
        return {"status": "wrong", "message": "over the tolerance"}

    records = exhaustive_search(["x"], lambda s: {"status": "ok", "median_ms": 1.0}, measure)
    assert records == [{"status": "wrong", "message": "over the tolerance", "screen_ms": 1.0}]


def test_an_empty_space_gives_no_records() -> None:
    assert exhaustive_search([], lambda s: {}, lambda s: {}) == []
