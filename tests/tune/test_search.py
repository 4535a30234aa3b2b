"""Search logic against a toy space and a simulated runner: space operators, strategies, the loop."""

from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from .landscapes import TOY_OPTIMUM, Other, Toy, toy_candidates, toy_time

from gsparse.tune import (
    BuildResult,
    CandidateSpace,
    GeneticSearch,
    ParallelBuilder,
    RandomSampling,
    RunResult,
    SimulatedRunner,
    SpaceIndex,
    TuningDatabase,
    TuningKey,
    crossover,
    mutate,
    repair,
    sample,
    tune,
)

SPACE = CandidateSpace(toy_candidates())
INDEX = SpaceIndex(SPACE)
KEY = TuningKey("test-gpu", "toy", "graph-0", (64,), "float32", "1")


def measure(strategy, budget: int, runner: SimulatedRunner | None = None) -> SimulatedRunner:
    """Drive ``strategy`` by hand (no database) until ``budget`` or it stops."""
    runner = runner or SimulatedRunner(toy_time)
    count = 0
    while count < budget:
        batch = strategy.propose(min(16, budget - count))
        if not batch:
            break
        strategy.observe(runner.run([BuildResult(s) for s in batch]))
        count += len(batch)
    return runner


def reference_nearest(candidates, space, schedule):
    """Brute force: the same-class candidate of least normalised squared distance, earliest on ties."""
    best, best_distance = None, math.inf
    for c in candidates:
        if type(c) is not type(schedule):
            continue
        distance = 0.0
        for f in dataclasses.fields(c):
            domain = space.domain(type(c), f.name)
            scale = max(len(domain) - 1, 1)
            mine = getattr(schedule, f.name)
            if mine in domain:
                position = domain.index(mine) / scale
            else:
                position = (sum(v < mine for v in domain) - 0.5) / scale
            distance += (position - domain.index(getattr(c, f.name)) / scale) ** 2
        if distance < best_distance:
            best, best_distance = c, distance
    return best


# -- the space operators ------------------------------------------------------------------


def test_a_candidate_space_derives_sorted_domains_from_its_candidates():
    assert SPACE.domain(Toy, "a") == tuple(range(10))
    assert SPACE.domain(Toy, "c") == (False, True)
    assert SPACE.domain(Toy, "d") == (1, 2, 4, 8, 16)
    with pytest.raises(KeyError, match="no knob 'e' of Toy"):
        SPACE.domain(Toy, "e")


def test_a_candidate_space_rejects_duplicates_and_non_schedules():
    with pytest.raises(ValueError, match="appears more than once"):
        CandidateSpace([Toy(1), Toy(1)])
    with pytest.raises(TypeError, match="frozen dataclass"):
        CandidateSpace([(1, 2)])


def test_sample_draws_distinct_candidates_uniformly():
    rng = np.random.default_rng(0)
    small = CandidateSpace([Toy(a) for a in range(8)])
    counts = dict.fromkeys(small.candidates(), 0)
    for _ in range(2000):
        picks = sample(small, rng, 3)
        assert len(set(picks)) == 3
        for s in picks:
            counts[s] += 1
    assert all(abs(c - 750) < 100 for c in counts.values()), counts  # 2000 * 3 / 8 = 750 each
    assert sorted(sample(small, rng, 20), key=lambda s: s.a) == list(small.candidates())


def test_mutate_redraws_knobs_from_their_domains_at_the_given_rate():
    rng = np.random.default_rng(1)
    parent = Toy(4, 4, False, 4)
    assert all(mutate(SPACE, parent, rng, 0.0) == parent for _ in range(50))
    changed = np.zeros(4)
    for _ in range(2000):
        child = mutate(SPACE, parent, rng, 0.2)
        changed += [child.a != 4, child.b != 4, child.c, child.d != 4]
        assert child.d in SPACE.domain(Toy, "d")
    assert np.all(np.abs(changed / 2000 - 0.2) < 0.04), changed / 2000
    every_knob = [mutate(SPACE, parent, rng, 1.0) for _ in range(50)]
    assert all(c.a != 4 and c.b != 4 and c.c and c.d != 4 for c in every_knob)


def test_mutate_repairs_values_the_schedule_class_rejects():
    space = CandidateSpace([Other(a, lanes) for a in (0, 1) for lanes in (8, 16, 32)],
                           domains={(Other, "a"): (0, 1), (Other, "lanes"): (8, 16, 32, 64)})
    rng = np.random.default_rng(2)
    children = [mutate(space, Other(0, 32), rng, 1.0) for _ in range(100)]
    assert all(c in space.candidates() for c in children)
    assert Other(1, 32) in children  # lanes 64 cannot exist: the nearest valid point is lanes 32


def test_crossover_takes_each_knob_from_one_parent():
    rng = np.random.default_rng(3)
    a, b = Toy(0, 0, False, 1), Toy(9, 6, True, 16)
    children = {crossover(SPACE, a, b, rng) for _ in range(300)}
    for child in children:
        for f in ("a", "b", "c", "d"):
            assert getattr(child, f) in (getattr(a, f), getattr(b, f))
    assert len(children) == 16  # every mix of four knobs appears


def test_crossover_of_two_skeletons_copies_one_parent():
    rng = np.random.default_rng(4)
    a, b = Toy(1), Other(1)
    children = [crossover(SPACE, a, b, rng) for _ in range(100)]
    assert set(children) == {a, b}


def test_repair_returns_a_valid_schedule_unchanged():
    assert repair(SPACE, Toy(6, 3, True, 4)) is not None
    assert repair(INDEX, Toy(6, 3, True, 4)) == Toy(6, 3, True, 4)


@settings(max_examples=200, deadline=None)
@given(a=st.integers(-2, 14), b=st.integers(-2, 14), c=st.booleans(),
       d=st.sampled_from([1, 2, 3, 4, 8, 16, 40]))
def test_repair_returns_the_nearest_valid_candidate(a, b, c, d):
    schedule = Toy(a, b, c, d)
    repaired = repair(INDEX, schedule)
    assert repaired in INDEX
    assert repaired == reference_nearest(INDEX.candidates(), INDEX, schedule)


def test_repair_of_an_out_of_space_schedule_is_deterministic_on_ties():
    # a + b = 18 > 15: (9, 6) and (6, 9) are equally near (8, 7) and (7, 8) too; the
    # earliest candidate in the space's order wins.
    first = repair(SPACE, Toy(9, 9, True, 4))
    assert first == Toy(7, 8, True, 4)
    assert all(repair(SPACE, Toy(9, 9, True, 4)) == first for _ in range(5))


def test_repair_skips_excluded_candidates_and_gives_none_when_all_are():
    near = repair(SPACE, Toy(6, 3, True, 4), exclude={Toy(6, 3, True, 4)})
    assert near in INDEX and near != Toy(6, 3, True, 4)
    tiny = CandidateSpace([Toy(1), Toy(2)])
    assert repair(tiny, Toy(3), exclude=set(tiny.candidates())) is None


def test_repair_falls_back_to_another_skeleton_on_shared_knobs():
    space = CandidateSpace([Toy(a) for a in range(3)] + [Other(a) for a in range(5, 8)])
    assert repair(space, Other(9, 8)) == Other(7, 32)
    only_others = CandidateSpace([Other(a) for a in range(5, 8)])
    assert repair(only_others, Toy(6, 2, True, 4)) == Other(6, 32)


# -- strategies ---------------------------------------------------------------------------


def test_genetic_search_proposes_valid_new_schedules_and_stops_after_its_generations():
    search = GeneticSearch(SPACE, seed=5)
    runner = measure(search, budget=1000)
    assert len(runner.measured) == 16 + 3 * 10
    assert len(set(runner.measured)) == len(runner.measured)
    assert all(s in INDEX for s in runner.measured)
    assert search.propose(16) == []


def test_genetic_search_finds_the_optimum_far_more_often_than_random_sampling():
    seeds = range(200)
    ga = [measure(GeneticSearch(SPACE, seed=s), 46).measured for s in seeds]
    rs = [measure(RandomSampling(SPACE, seed=s), 46).measured for s in seeds]
    assert all(len(m) == 46 for m in ga + rs)
    ga_hits = sum(TOY_OPTIMUM in m for m in ga)
    rs_hits = sum(TOY_OPTIMUM in m for m in rs)
    # Random sampling finds it with probability 46 / 940 ~ 5%; the search climbs to it.
    assert ga_hits > 2 * rs_hits and ga_hits >= 20, (ga_hits, rs_hits)
    ga_regret = np.mean([min(map(toy_time, m)) for m in ga]) - 1
    rs_regret = np.mean([min(map(toy_time, m)) for m in rs]) - 1
    assert ga_regret < rs_regret


def test_selection_pressure_favours_the_fastest_parents():
    hits = {p: sum(TOY_OPTIMUM in measure(GeneticSearch(SPACE, seed=s, selection_pressure=p), 46).measured
                   for s in range(100)) for p in (1.0, 8.0)}
    assert hits[8.0] > 1.5 * hits[1.0], hits


def noisy_model(seed: int, sigma: float):
    rng = np.random.default_rng(seed)
    noise = {s: rng.normal() for s in SPACE.candidates()}
    return lambda schedules: np.array([math.log(toy_time(s)) + sigma * noise[s] for s in schedules])


def test_a_model_seeded_genetic_search_almost_always_finds_the_optimum():
    hits = sum(TOY_OPTIMUM in measure(GeneticSearch(SPACE, seed=s, scorer=noisy_model(s, 0.2)), 46).measured
               for s in range(50))
    assert hits >= 40, hits


def test_the_first_generation_is_the_models_best_predicted():
    scorer = noisy_model(0, 0.0)
    first = GeneticSearch(SPACE, scorer=scorer).propose(16)
    assert set(first) == set(sorted(SPACE.candidates(), key=toy_time)[:16])


def test_screening_children_with_the_model_keeps_the_best_predicted():
    def regret(screen):
        runs = [measure(GeneticSearch(SPACE, seed=s, scorer=noisy_model(s, 0.5), screen=screen), 46)
                for s in range(30)]
        return np.mean([min(map(toy_time, r.measured)) for r in runs]) - 1

    assert regret(4) < regret(1)


def test_random_sampling_covers_the_space_once_in_a_seeded_order():
    search = RandomSampling(SPACE, seed=6)
    runner = measure(search, budget=10_000)
    assert sorted(runner.measured, key=INDEX.position) == list(SPACE.candidates())
    again = measure(RandomSampling(SPACE, seed=6), budget=20)
    assert again.measured == runner.measured[:20]


def test_random_sampling_with_a_pool_samples_the_best_predicted_first():
    search = RandomSampling(SPACE, seed=7, scorer=noisy_model(0, 0.0), pool=20)
    runner = measure(search, budget=20)
    assert set(runner.measured) == set(sorted(SPACE.candidates(), key=toy_time)[:20])
    with pytest.raises(ValueError, match="pool must be None, or >= 1 with a scorer"):
        RandomSampling(SPACE, pool=5)


def test_strategies_never_propose_what_was_observed_before():
    earlier = [RunResult(s, times_ms=(toy_time(s),)) for s in SPACE.candidates()[:900]]
    for search in (GeneticSearch(SPACE, seed=8), RandomSampling(SPACE, seed=8)):
        search.observe(earlier)
        runner = measure(search, budget=1000)
        assert not set(runner.measured) & {r.schedule for r in earlier}
        assert len(runner.measured) == len(set(runner.measured)) <= 40


def test_genetic_search_breeds_around_failures():
    failing = {s for s in SPACE.candidates() if s.c}  # half the space fails to run
    runner = measure(GeneticSearch(SPACE, seed=9), 46, SimulatedRunner(toy_time, fail=failing))
    assert len(runner.measured) == 46 == len(set(runner.measured))


def test_strategy_knobs_are_checked():
    with pytest.raises(ValueError, match="elite must be in"):
        GeneticSearch(SPACE, population=4, elite=4)
    with pytest.raises(ValueError, match="mutation_rate must be in"):
        GeneticSearch(SPACE, mutation_rate=1.5)


# -- the tuning loop ----------------------------------------------------------------------


def build_toy(schedule: Toy) -> str:
    if schedule.d == 16:
        raise RuntimeError("too many registers")
    return f"kernel {schedule}"


def test_tune_records_every_sample_and_goes_on_when_candidates_fail(tmp_path):
    database = TuningDatabase(tmp_path / "t.sqlite")
    run_failures = {s for s in SPACE.candidates() if s.a == 0}
    runner = SimulatedRunner(toy_time, noise=0.01, fail=run_failures)
    result = tune(SPACE, RandomSampling(SPACE, seed=10), ParallelBuilder(build_toy, workers=2), runner,
                  database, KEY, budget=200, featurize=lambda ss: np.array([[s.a, s.b] for s in ss]))
    assert result.measured == 200 == len(database.samples(KEY))
    build_failed = [r for r in result.results if r.schedule.d == 16]
    assert build_failed
    assert all(r.error == "build failed: RuntimeError: too many registers" for r in build_failed)
    assert not set(runner.measured) & {r.schedule for r in build_failed}  # never run
    run_failed = [r for r in result.results if r.schedule.a == 0 and r.schedule.d != 16]
    assert run_failed and all(r.error == "injected failure" for r in run_failed)
    assert result.failed == len(build_failed) + len(run_failed)
    best = min((r for r in result.results if r.ok), key=lambda r: r.time_ms)
    assert (result.best, result.time_ms) == (best.schedule, best.time_ms)
    record = database.get_best(KEY)
    assert record.schedule([Toy]) == result.best and record.time_ms == result.time_ms
    stored = {s.schedule([Toy]): s for s in database.samples(KEY)}
    assert stored[best.schedule].features == (best.schedule.a, best.schedule.b)


def test_tune_reuses_earlier_samples_and_never_measures_twice(tmp_path):
    database = TuningDatabase(tmp_path / "t.sqlite")
    runner = SimulatedRunner(toy_time)
    builder = ParallelBuilder(lambda s: s)
    first = tune(SPACE, GeneticSearch(SPACE, seed=11), builder, runner, database, KEY, 30)
    second = tune(SPACE, GeneticSearch(SPACE, seed=11), builder, runner, database, KEY, 30)
    assert len(second.reused) == 30 and second.measured == 30
    assert len(runner.measured) == len(set(runner.measured)) == 60
    assert second.time_ms <= first.time_ms
    assert database.get_best(KEY).time_ms == second.time_ms


def test_tune_survives_a_space_where_everything_fails(tmp_path):
    def never(schedule):
        raise MemoryError("out of shared memory")

    result = tune(SPACE, RandomSampling(SPACE), ParallelBuilder(never), SimulatedRunner(toy_time),
                  TuningDatabase(tmp_path / "t.sqlite"), KEY, budget=20)
    assert (result.best, result.time_ms, result.failed) == (None, math.inf, 20)


def test_tune_stops_when_the_strategy_is_done(tmp_path):
    small = CandidateSpace(toy_candidates()[:5])
    result = tune(small, RandomSampling(small), ParallelBuilder(lambda s: s), SimulatedRunner(toy_time),
                  TuningDatabase(tmp_path / "t.sqlite"), KEY, budget=100)
    assert result.measured == 5


def test_the_progress_bar_shows_only_on_a_terminal_or_when_asked(tmp_path, capsys, monkeypatch):
    def run(progress, seed):
        tune(SPACE, RandomSampling(SPACE, seed=seed), ParallelBuilder(lambda s: s), SimulatedRunner(toy_time),
             TuningDatabase(tmp_path / "t.sqlite"), KEY, budget=8, progress=progress)
        return capsys.readouterr().err

    assert run(None, 0) == ""  # stderr is captured: not a terminal
    assert "tuning toy" in run(True, 1)
    monkeypatch.setitem(sys.modules, "tqdm", None)  # without tqdm: one rewritten line
    assert "\rtuning toy: 8/8 measured, best" in run(True, 2)


def test_tune_measures_afresh_samples_whose_schedule_no_longer_decodes(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Toy:  # an older Toy, with a knob the current one lacks
        removed: int = 1

        def to_json(self) -> str:
            return '{"removed": 1}'

        @classmethod
        def from_json(cls, text: str):
            return cls()

    database = TuningDatabase(tmp_path / "t.sqlite")
    database.commit_sample(KEY, Toy(), times_ms=[0.5])
    result = tune(SPACE, RandomSampling(SPACE), ParallelBuilder(lambda s: s), SimulatedRunner(toy_time),
                  database, KEY, budget=4)
    assert result.reused == () and result.measured == 4


class LuckyOnceRunner:
    """A noiseless runner that times ``lucky``'s first measurement ``factor`` times too fast."""

    def __init__(self, lucky: Toy, factor: float, fail_again: frozenset = frozenset()) -> None:
        self.inner = SimulatedRunner(toy_time, repeats=3)
        self.lucky, self.factor, self.fail_again = lucky, factor, fail_again
        self.measured: list[Toy] = []

    def run(self, builds):
        results = []
        for result in self.inner.run(builds):
            again = result.schedule in self.measured
            self.measured.append(result.schedule)
            if again and result.schedule in self.fail_again:
                result = RunResult(result.schedule, error="lost the device")
            elif not again and result.schedule == self.lucky:
                result = RunResult(result.schedule, tuple(t * self.factor for t in result.times_ms))
            results.append(result)
        return results


FASTEST = sorted(toy_candidates(), key=toy_time)
CLOSE_SPACE = CandidateSpace(FASTEST[:3] + FASTEST[-5:])  # times 1.0, 1.05, 1.05, then slow ones


def tune_close_space(tmp_path, confirm: int, runner: LuckyOnceRunner):
    database = TuningDatabase(tmp_path / "t.sqlite")
    result = tune(CLOSE_SPACE, RandomSampling(CLOSE_SPACE, seed=3), ParallelBuilder(lambda s: s), runner,
                  database, KEY, budget=8, confirm=confirm)
    return result, database


def test_without_confirmation_a_lucky_time_wins(tmp_path):
    runner = LuckyOnceRunner(FASTEST[1], 0.9)
    result, database = tune_close_space(tmp_path, 0, runner)
    assert result.best == FASTEST[1] and result.confirmed == ()
    assert len(runner.measured) == len(set(runner.measured)) == 8


def test_confirmation_measures_the_finalists_again_and_keeps_the_truly_fastest(tmp_path):
    runner = LuckyOnceRunner(FASTEST[1], 0.9)
    result, database = tune_close_space(tmp_path, 4, runner)
    # Finalists: the lucky 0.945 and the fastest 1.0; the other 1.05 is beyond 10% of 0.945.
    assert {r.schedule for r in result.confirmed} == {FASTEST[0], FASTEST[1]}
    assert result.best == FASTEST[0] and result.time_ms == pytest.approx(toy_time(FASTEST[0]))
    again = runner.measured[8:]
    assert sorted(again, key=toy_time) == [FASTEST[0]] * 3 + [FASTEST[1]] * 3
    assert again[0] != again[2]  # rounds rotate the order
    assert all(len(r.times_ms) == 3 * 3 for r in result.confirmed)
    # The database's best is the confirmed one, though the lucky sample's median is lower.
    record = database.get_best(KEY)
    assert record.schedule([Toy]) == FASTEST[0] and record.time_ms == pytest.approx(toy_time(FASTEST[0]))
    assert len(database.samples(KEY)) == 8 + 2


def test_a_finalist_that_fails_its_confirmation_is_dropped(tmp_path):
    runner = LuckyOnceRunner(FASTEST[1], 0.9, fail_again=frozenset({FASTEST[0]}))
    result, database = tune_close_space(tmp_path, 4, runner)
    failed = [r for r in result.confirmed if not r.ok]
    assert [r.schedule for r in failed] == [FASTEST[0]]
    assert failed[0].error == "confirmation failed: lost the device"
    assert result.best == FASTEST[1] and result.time_ms == pytest.approx(toy_time(FASTEST[1]))
    assert database.get_best(KEY).schedule([Toy]) == FASTEST[1]


def test_no_confirmation_when_one_schedule_stands_out(tmp_path):
    space = CandidateSpace([FASTEST[0], *FASTEST[-5:]])
    runner = LuckyOnceRunner(FASTEST[0], 1.0)
    result = tune(space, RandomSampling(space), ParallelBuilder(lambda s: s), runner,
                  TuningDatabase(tmp_path / "t.sqlite"), KEY, budget=6, confirm=4)
    assert result.confirmed == () and len(runner.measured) == 6


def test_confirm_is_checked(tmp_path):
    with pytest.raises(ValueError, match="confirm must be >= 0, got -1"):
        tune(SPACE, RandomSampling(SPACE), ParallelBuilder(lambda s: s), SimulatedRunner(toy_time),
             TuningDatabase(tmp_path / "t.sqlite"), KEY, budget=1, confirm=-1)
