"""DerivedCache: what one owner derives from a graph, built on first use and kept with it;
the graph's plan cache is keyed by (task, schedule)."""

from __future__ import annotations

import pytest
import torch

from gsparse.derived import DerivedCache
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels.spmm import OnePass, build_plan
from gsparse.target import H100

from graphs import named_graph
from recording import RecordingLoader


def test_an_entry_is_built_once_on_first_use() -> None:
    cache: DerivedCache = DerivedCache("test structures")
    builds = []
    first = cache.get("a", lambda: builds.append("a") or [1])
    assert cache.get("a", lambda: builds.append("again") or [2]) is first
    assert builds == ["a"] and len(cache) == 1 and "a" in cache and "b" not in cache
    assert repr(cache) == "DerivedCache('test structures', 1 entries)"
    cache.clear()
    assert len(cache) == 0 and cache.get("a", lambda: [3]) == [3]


def test_a_failed_build_keeps_nothing() -> None:
    cache: DerivedCache = DerivedCache("test structures")
    with pytest.raises(ZeroDivisionError):
        cache.get("a", lambda: 1 / 0)
    assert "a" not in cache and cache.get("a", lambda: 2) == 2


def test_a_missing_entry_cannot_be_built_under_torch_compile(monkeypatch) -> None:
    cache: DerivedCache = DerivedCache("launch plans")
    cache.get("built", lambda: 1)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert cache.get("built", lambda: 2) == 1  # an existing entry is read
    with pytest.raises(RuntimeError, match=r"'missing' \(launch plans\) of this graph is not built "
                                           r"yet and cannot be built inside a torch.compile graph"):
        cache.get("missing", lambda: 3)


def test_each_owner_has_its_own_cache_and_a_new_graph_starts_empty() -> None:
    g = named_graph("random")
    caches = [g.plans, g.schedules, g.layouts, g.cpu, g.layers]
    assert len({id(c) for c in caches}) == 5 and all(isinstance(c, DerivedCache) for c in caches)
    g.plans.get("key", lambda: 1)
    assert "key" not in g.schedules
    for other in (g.with_index_dtype(torch.int64), named_graph("random")):
        assert len(other.plans) == 0


def test_a_new_schedule_for_the_same_task_gets_a_new_plan() -> None:
    # Plans are keyed by (task, schedule): a different choice of schedule takes effect on
    # the next call, and nothing built for the old choice is reused for it.
    g, loader = named_graph("random"), RecordingLoader()
    task = spmm_kernels.task_for(g, "copy_lhs", "sum", torch.randn(g.num_src, 8), None, (8,))

    def plan(schedule):
        return g.plans.get((task, schedule), lambda: build_plan(g, task, schedule, H100, loader=loader))

    first, other = OnePass(feature_lanes=8), OnePass(feature_lanes=8, edge_lanes=4)
    a = plan(first)
    b = plan(other)
    assert a is not b and plan(first) is a and plan(other) is b
    assert len(g.plans) == 2 and len(loader.loaded) == 2  # each built once
    for p in (a, b):
        p(lhs=torch.randn(g.num_src, 8), rhs=None, out=torch.empty(g.num_dst, 8), arg_u=None, arg_e=None)
    blocks = [launch.block for launch in loader.launches["gspmm"]]
    assert blocks == [first.threads, other.threads] == [64, 256]


def test_replacing_or_clearing_entries_moves_the_generation() -> None:
    cache: DerivedCache = DerivedCache("schedules")
    cache.get("a", lambda: 1)
    assert cache.generation == 0  # building a missing entry changes nothing given out
    cache.replace("a", 2)
    assert cache.get("a", lambda: 3) == 2 and cache.generation == 1
    cache.clear()
    assert cache.generation == 2 and "a" not in cache


def test_an_eager_lookup_never_prints_its_key() -> None:
    # The attribute a compiled graph reads is named by the key's repr, which costs more than
    # the lookup (a plan's key holds a task and a schedule): only derive under torch.compile
    # sets it, and replace and clear keep it current where it exists.
    class Key(tuple):
        def __repr__(self) -> str:
            raise AssertionError("the key was printed")

    cache: DerivedCache = DerivedCache("test")
    key = Key((1, 2))
    assert cache.get(key, lambda: "built") == "built" and cache.get(key, lambda: "other") == "built"
    assert not [name for name in vars(cache) if name.startswith("entry ")]
    cache.__dict__["entry (3, 4)"] = "old"
    cache.get((3, 4), lambda: "old")
    cache.replace((3, 4), "new")
    assert cache.__dict__["entry (3, 4)"] == "new"
    cache.clear()
    assert "entry (3, 4)" not in vars(cache) and len(cache) == 0
