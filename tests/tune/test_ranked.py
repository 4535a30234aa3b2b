"""What the "model" policy keeps per task between graphs (gsparse.tune.ranked)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gsparse.kernels import sddmm, spmm
from gsparse.target import H100
from gsparse.tune import ranked, select
from gsparse.tune.features import SpaceFeatures

from graphs import named_graph

from .reference_decision import random_graph, random_sddmm_task, random_spmm_task

_OPERATORS = {"spmm": (spmm, random_spmm_task), "sddmm": (sddmm, random_sddmm_task)}


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_a_graphs_costs_with_the_tasks_masks_are_the_plain_costs(operator):
    """Many graphs of one task through one cache: every graph's costs equal the model's
    plain prediction over its pruned space's features, bit for bit, while the task's kept
    candidates grow."""
    ops, random_task = _OPERATORS[operator]
    model = select._model(operator)
    rng = np.random.default_rng(3)
    task = random_task(rng, named_graph("random"))
    cache = ranked.SpaceCache(64)
    for _ in range(12):
        stats, structure = random_graph(rng)
        space = cache.get(operator, task, stats, H100)
        plain = SpaceFeatures(task, H100, ops.space.pruned_rows(task, stats, H100))
        assert np.array_equal(space.table, plain.table)
        assert np.array_equal(space.costs(model, structure), model.predict(plain(structure)))


def test_a_new_graph_of_a_known_task_computes_only_what_reads_the_graph(monkeypatch):
    model = select._model("spmm")
    rng = np.random.default_rng(5)
    task = random_spmm_task(rng, named_graph("random"))
    stats, structure = random_graph(rng)
    cache = ranked.SpaceCache(64)
    first = cache.get("spmm", task, stats, H100)
    first.costs(model, structure)
    made, masked = [], []
    monkeypatch.setattr(ranked, "SpaceFeatures", lambda *args: made.append(args) or SpaceFeatures(*args))
    predict_apart = type(model).predict_apart
    monkeypatch.setattr(type(model), "predict_apart",
                        lambda self, x, c: masked.append(len(x)) or predict_apart(self, x, c))
    cache.clear(tasks=False)  # a new graph of the same statistics: no candidate is new
    again = cache.get("spmm", task, stats, H100)
    assert np.array_equal(again.costs(model, structure), first.costs(model, structure))
    assert made == [] and masked == []
    assert again.task_space is first.task_space
    cache.clear()  # the task forgotten: its candidates' features are made again
    cache.get("spmm", task, stats, H100).costs(model, structure)
    assert len(made) == 1 and masked == [len(first.table)]


def test_positions_stay_as_candidates_are_added():
    task = random_spmm_task(np.random.default_rng(1), named_graph("random"))
    kept = ranked.TaskSpace(task, H100)
    table = spmm.space.candidate_table(task, named_graph("random").stats, H100)
    first = kept.positions(table[::2])
    assert first.tolist() == list(range(len(table[::2])))
    both = kept.positions(table)
    assert np.array_equal(both[::2], first)  # the earlier rows kept their places
    assert sorted(both.tolist()) == list(range(len(table)))
    assert np.array_equal(kept.features.table[both], table)


def test_threads_adding_candidates_at_once_agree():
    task = random_spmm_task(np.random.default_rng(2), named_graph("random"))
    kept = ranked.TaskSpace(task, H100)
    table = spmm.space.candidate_table(task, named_graph("random").stats, H100)
    found = {}

    def add(i: int) -> None:
        rows = table[np.random.default_rng(i).permutation(len(table))[: len(table) // 2]]
        found[i] = (rows, kept.positions(rows))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for rows, positions in found.values():
        assert np.array_equal(kept.features.table[positions], rows)


def test_a_task_keeps_the_masks_each_ranking_made_and_finds_them_again():
    """A graph's ranking makes the masks over the candidates' own features where one lacks
    them (in its pass of the trees) and keeps them; a later table's new candidates lack
    theirs until a graph ranks them, and the first ones keep theirs."""
    model = select._model("spmm")
    rng = np.random.default_rng(7)
    task = random_spmm_task(rng, named_graph("random"))
    stats, structure = random_graph(rng)
    table = spmm.space.candidate_table(task, stats, H100)
    kept = ranked.TaskSpace(task, H100)
    first = kept.positions(table[::2])
    assert kept.masks(model, first) is None
    ranked.RankedSpace(kept, first, kept.features.subset(first)).costs(model, structure)
    made = kept.masks(model, first)
    both = kept.positions(table)
    assert kept.masks(model, both) is None
    plain = SpaceFeatures(task, H100, table)(structure)
    space = ranked.RankedSpace(kept, both, kept.features.subset(both))
    assert np.array_equal(space.costs(model, structure), model.predict(plain))
    assert np.array_equal(kept.masks(model, first), made)
    assert np.array_equal(kept.masks(model, both), model.ensemble.masks(plain, kept.features.static_columns))
