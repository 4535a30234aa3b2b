"""Choosing the schedule of a call that forces none: records, policies, the shipped models."""

from __future__ import annotations

import json
import statistics
import time

import numpy as np
import pytest
import torch

from gsparse import datasets
from gsparse.kernels import sddmm, spmm
from gsparse.target import H100
from gsparse.tune import select
from gsparse.tune.database import TuningDatabase
from gsparse.tune.interfaces import BuildResult

from graphs import named_graph

from . import model_picks
from .reference_decision import TARGETS, random_graph, random_sddmm_task, random_spmm_task, reference_choice


@pytest.fixture(autouse=True)
def _fresh_database(tmp_path, monkeypatch):
    """Each test starts with no tuning database and the default policy."""
    monkeypatch.setenv("GSPARSE_TUNING_DB", str(tmp_path / "tuning.sqlite"))
    select._database.cache_clear()
    yield
    select.set_policy("model")
    select._database.cache_clear()


def _spmm_task(g, feature_len=32):
    x = torch.randn(g.num_src, feature_len)
    return spmm.task_for(g, "copy_lhs", "sum", x, None, (feature_len,))


def _never_called(schedule):
    raise AssertionError("a policy without measurement ran the operator")


def test_policies_are_checked_and_restored():
    with pytest.raises(ValueError, match=r"policy must be one of \('model', 'tune', 'default'\), got 'fast'"):
        select.set_policy("fast")
    before = select._State.generation
    with select.policy("default"):
        assert select.get_policy() == "default"
    assert select.get_policy() == "model" and select._State.generation == before + 2


def test_the_graph_signature_is_cheap_stable_and_tells_graphs_apart():
    g = named_graph("random")
    assert select.graph_signature(g) == select.graph_signature(named_graph("random"))
    assert select.graph_signature(g.with_index_dtype(torch.int64)) == select.graph_signature(g)
    assert select.graph_signature(named_graph("random", seed=1)) != select.graph_signature(g)
    assert select.graph_signature(g) == g.tuning.get("signature", lambda: "rebuilt")  # kept


def test_the_default_policy_runs_the_hand_rule():
    g = named_graph("random")
    task = _spmm_task(g)
    with select.policy("default"):
        chosen = select.choose("spmm", g, task, _never_called, H100)
    assert chosen == spmm.default_schedule(task, g.stats, H100)


@pytest.mark.parametrize("policy", ["model", "tune"])
def test_a_sync_free_graph_takes_the_hand_rule_without_signature_features_or_database(monkeypatch, policy):
    from gsparse import Graph

    def refused(*args, **kwargs):
        raise AssertionError("a sync-free graph's choice read the graph or the tuner's state")

    for name in ("graph_signature", "_structure", "featurize", "database_path", "tuning_key", "model_choice"):
        monkeypatch.setattr(select, name, refused)
    block = Graph.from_block(torch.randint(0, 50, (2, 400)), num_src=50, num_dst=50, max_degree=400)
    task = _spmm_task(block)
    with select.policy(policy):
        chosen = select.choose("spmm", block, task, _never_called, H100)
    assert chosen == spmm.default_schedule(task, block.stats, H100)


def test_without_a_tuning_database_the_model_policy_reads_no_signature(monkeypatch):
    """The signature only keys a lookup or a tuning run: a first call after a fresh
    install (kernels precompiled, no tuning database) pays for the statistics alone."""
    def refused(*args, **kwargs):
        raise AssertionError("the model policy computed a tuning key with no database to look in")

    monkeypatch.setattr(select, "graph_signature", refused)
    monkeypatch.setattr(select, "tuning_key", refused)
    g = named_graph("random")
    task = _spmm_task(g)
    assert select._database() is None
    chosen = select.choose("spmm", g, task, _never_called, H100)
    assert chosen == select.model_choice("spmm", g, task, H100)


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_the_model_policy_picks_from_the_space_in_about_a_millisecond(operator):
    g = named_graph("long_row")
    x = torch.randn(g.num_src, 64)
    if operator == "spmm":
        task = spmm.task_for(g, "copy_lhs", "sum", x, None, (64,))
        space = spmm.schedule_space(task, g.stats, H100)
    else:
        task = sddmm.task_for(g, "dot", x, torch.randn(g.num_dst, 64), "u", "v", (1,))
        space = sddmm.schedule_space(task, g.stats, H100)
    chosen = select.choose(operator, g, task, _never_called, H100)
    assert chosen in space
    # Decided once per graph, task and generation; a new graph of the same kind decides
    # again from its statistics, which the first decision has already paid for.
    assert select.choose(operator, g, task, _never_called, H100) is chosen

    def median_ms(decide) -> float:
        for _ in range(10):
            assert decide() == chosen
        rounds = []
        for _ in range(3):  # the least disturbed round: a busy machine slows even CPU time
            times = []
            for _ in range(100):
                start = time.thread_time()  # this thread's CPU time: a busy machine's waits do not count
                decide()
                times.append(time.thread_time() - start)
            rounds.append(statistics.median(times))
        return min(rounds) * 1e3

    def new_graph():  # what every new graph of a task seen before pays: its pruned space
        select._SPACES.clear(tasks=False)
        return select.model_choice(operator, g, task, H100)

    def first_of_its_task():  # the task's candidates and their features too
        select._SPACES.clear()
        sddmm.space._space.cache_clear()
        sddmm.space._candidates_of.cache_clear()
        spmm.space._grid_table.cache_clear()
        spmm.space._candidates_of.cache_clear()
        return select.model_choice(operator, g, task, H100)

    def space_kept():  # the same graph deciding again (moved to another device, a new record)
        return select.model_choice(operator, g, task, H100)

    # Here 34 (g-SpMM) and 91 (g-SDDMM) candidates are ranked. On the shared 2-core VM
    # (2026-11-29) a new graph of a known task pays 0.16 and 0.16 ms, the first graph of a
    # task 0.44 and 0.48 ms, and 0.11 and 0.10 ms with the space kept; twice that when the
    # machine is busy. The bounds catch per-candidate Python returning to what repeats (a
    # new graph: every mini-batch block), and a measurement, a compilation or a device read
    # sneaking into any decision.
    assert median_ms(new_graph) < 2.0
    assert median_ms(first_of_its_task) < 2.5
    assert median_ms(space_kept) < 1.0


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_the_model_policy_chooses_what_the_plain_computation_chooses(operator):
    """The space's features computed over all candidates at once, its static part kept
    per space, and the trees evaluated with shared columns folded: the same first choice as
    per-schedule features and the trees evaluated split by split, on random tasks and graphs."""
    random_task = random_spmm_task if operator == "spmm" else random_sddmm_task
    model = select._model(operator)
    rng = np.random.default_rng(18)
    g = named_graph("random")
    for _ in range(100):
        stats, structure = random_graph(rng)
        task, target = random_task(rng, g), TARGETS[rng.integers(len(TARGETS))]
        chosen = select._first_choice(operator, model, select._SPACES.get(operator, task, stats, target), structure)
        assert chosen == reference_choice(model, operator, task, stats, structure, target), (task, stats)
    for kind in ("random", "long_row", "int64"):
        g = named_graph(kind)
        task = random_task(rng, g)
        assert select.model_choice(operator, g, task, H100) == reference_choice(
            model, operator, task, g.stats, select._structure(g), H100)


def test_a_tuning_record_wins_over_the_policy():
    g = named_graph("random")
    task = _spmm_task(g)
    recorded = spmm.OnePass(rows_per_block=2, feature_lanes=8, edge_lanes=4, vector_width=4, nnz_tile=2)
    with TuningDatabase() as database:
        database.commit_sample(select.tuning_key("spmm", g, task, H100), recorded, times_ms=(0.5,))
    select._database.cache_clear()
    for name in ("model", "tune"):
        with select.policy(name):
            assert select.choose("spmm", g, task, _never_called, H100) == recorded
    with select.policy("default"):  # the hand rule on request, records or not
        assert select.choose("spmm", g, task, _never_called, H100) == spmm.default_schedule(task, g.stats, H100)


def test_the_key_names_the_target_the_operator_the_graph_and_the_codegen_version():
    g = named_graph("random")
    key = select.tuning_key("spmm", g, _spmm_task(g), H100)
    assert key.target == f"{H100.name}|sm_90|132" and key.codegen == select.CODEGEN_VERSION
    assert key.operator.startswith("spmm:copy_lhs.sum lhs:full float32 int32") and key.feature_shape == "[32]"
    assert key.graph == select.graph_signature(g) and key.dtype == "float32"


def test_a_record_this_version_cannot_read_is_decided_afresh():
    g = named_graph("random")
    task = _spmm_task(g)
    invalid = spmm.OnePass(rows_per_block=2, feature_lanes=8, edge_lanes=8)  # a 64-thread group
    with TuningDatabase() as database:
        database.commit_sample(select.tuning_key("spmm", g, task, H100), invalid, times_ms=(0.5,))
    select._database.cache_clear()
    chosen = select.choose("spmm", g, task, _never_called, H100)
    assert chosen != invalid and chosen in spmm.schedule_space(task, g.stats, H100)


@pytest.mark.parametrize("size", [1, 2, 4096, 123_718_280, 2**40 + 3])
def test_signature_samples_stay_in_bounds_on_huge_arrays(size):
    # float32 positions rounded 123,718,279 up to 123,718,280: one past the end of the
    # column array of a 124M-edge graph (a device-side assert on the H100).
    where = select.spread_positions(size, 4096, torch.device("cpu"))
    assert where.dtype == torch.int64
    assert len(where) == min(size, 4096)
    assert where[0] == 0 and where[-1] == size - 1
    assert bool((where[1:] >= where[:-1]).all())


def test_tune_measures_the_hand_rule_first_and_never_returns_anything_slower(monkeypatch):
    # On the CPU the "kernels" are stand-ins: building is a no-op and a call sleeps, the
    # hand rule's pick for 0.2 ms and every other schedule for 2 ms. 5,000 rows: enough
    # blocks that the pruned space holds more candidates than the budget.
    g = datasets.random_graph(5_000, datasets.Regular(10.0), seed=1)
    x = torch.randn(g.num_src, 32)
    task = spmm.task_for(g, "copy_lhs", "sum", x, None, (32,))
    default = spmm.default_schedule(task, g.stats, H100)
    out = torch.zeros(g.num_dst, 32).index_add_(0, g.csr_dst.long(), x[g.col.long()])
    measured = []

    def call(schedule):
        measured.append(schedule)
        time.sleep(0.0002 if schedule == default else 0.002)
        return out

    monkeypatch.setattr(select, "ParallelBuilder", lambda build: _NoBuild())
    with select.policy("tune"):
        chosen = select.choose("spmm", g, task, call, H100)
    assert chosen == default
    assert measured[1] == default  # after the reference call, the hand rule is timed first
    assert len(spmm.pruned_space(task, g.stats, H100).kept) > select.TUNE_BUDGET + 1
    assert len(set(measured)) == select.TUNE_BUDGET + 1  # the hand rule, then the budget
    assert set(measured) <= set(spmm.pruned_space(task, g.stats, H100).kept)
    with TuningDatabase() as database:
        samples = database.samples(select.tuning_key("spmm", g, task, H100))
    assert len(samples) == select.TUNE_BUDGET + 1


class _NoBuild:
    def build(self, schedules):
        return [BuildResult(s) for s in schedules]


def test_the_model_policy_ranks_the_pruned_space_and_compiles_nothing(monkeypatch):
    from gsparse.runtime import _nvrtc

    def compile_to_cubin(*args, **kwargs):
        raise AssertionError("the model policy compiled a kernel")

    monkeypatch.setattr(_nvrtc, "compile_to_cubin", compile_to_cubin)
    g = named_graph("long_row")  # rows of COV 6: the row balance constraint removes some
    task = spmm.task_for(g, "copy_lhs", "sum", torch.randn(g.num_src, 64), None, (64,))
    pruned = spmm.pruned_space(task, g.stats, H100)
    assert len(pruned.kept) < len(pruned.candidates)
    assert select.model_choice("spmm", g, task, H100) in (*pruned.kept, spmm.default_schedule(task, g.stats, H100))


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_the_model_policy_ranks_the_hand_rules_pick_too(operator):
    """The hand rule's pick is a candidate, once, even where the space lacks it (on graphs
    of very short rows it has beaten the whole space): the pruning protects it."""
    ops = spmm if operator == "spmm" else sddmm
    rng = np.random.default_rng(5)
    random_task = random_spmm_task if operator == "spmm" else random_sddmm_task
    g = named_graph("random")
    for _ in range(20):
        stats, _ = random_graph(rng)
        task = random_task(rng, g)
        default = ops.space.knob_row(ops.default_schedule(task, stats, H100))
        assert (ops.space.pruned_rows(task, stats, H100) == default).all(axis=1).sum() == 1
    task = sddmm.task_for(g, "dot", torch.empty(1, 602), torch.empty(1, 602), "u", "v", (1,))
    default = sddmm.default_schedule(task, g.stats, H100)
    assert default not in sddmm.schedule_space(task, g.stats, H100)  # 602 features in slices of 32
    assert (sddmm.space.pruned_rows(task, g.stats, H100) == sddmm.space.knob_row(default)).all(axis=1).any()


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_every_candidate_the_model_policy_ranks_is_a_valid_schedule_once(operator):
    """The spaces are built as knob rows, never validated one schedule at a time: each row
    makes a valid schedule, which reads back as that row, and no row repeats."""
    ops = spmm if operator == "spmm" else sddmm
    random_task = random_spmm_task if operator == "spmm" else random_sddmm_task
    rng = np.random.default_rng(7)
    g = named_graph("random")
    for _ in range(150):
        stats, _ = random_graph(rng)
        task, target = random_task(rng, g), TARGETS[rng.integers(len(TARGETS))]
        rows = ops.space.candidate_table(task, stats, target).tolist()
        assert len({tuple(row) for row in rows}) == len(rows)
        for row in rows:
            schedule = ops.space.schedule_from_row(row)
            assert not schedule.problems(), (task, schedule)
            assert list(ops.space.knob_row(schedule)) == row


def test_the_model_policy_chooses_as_recorded_before_its_decision_was_made_faster():
    """884 problems (random tasks, graphs and targets; the benchmark's tasks on small graphs
    of few long rows): the same first choice as the implementation of before (its picks
    recorded in model_picks.json)."""
    recorded = json.loads(model_picks.RECORDED.read_text())
    found = [[model_picks.digest(*case[1:]), model_picks.label(model_picks.choose(*case))]
             for case in model_picks.cases()]
    assert len(found) == len(recorded)
    changed = [(i, was, now) for i, (was, now) in enumerate(zip(recorded, found)) if was != now]
    assert not changed, f"{len(changed)} cases choose otherwise, e.g. {changed[:3]}"
