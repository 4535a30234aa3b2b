"""The schedule of a call that forces none: a tuning record, else the policy's choice.

A record of the tuning database for the call's key always wins. Without one, the policy
decides (set for the process with :func:`set_policy`, or for a block with :func:`policy`):

- ``"model"`` (the default): the cost model shipped with gsparse ranks the task's space,
  pruned by LO-SpMM's arithmetic constraints (``gsparse.kernels.spmm.pruned_space``;
  nothing is compiled, with the hand rule's pick added where the pruning removed it or
  the space lacks it), and its first choice runs. No measurement; the only device work is
  the graph's signature and structure statistics, computed once per graph. The space is
  built, pruned and featurised as a table of knobs (``pruned_rows`` of the operator's
  space module): only the pick is made a schedule. What does not read the graph (the
  candidates' own features and the trees over them) is kept per task across graphs
  (:mod:`gsparse.tune.ranked`).
- ``"tune"``: search now on the call's real inputs (the hand rule's pick, then genetic
  search over the pruned space seeded by the model, a budget of :data:`TUNE_BUDGET` more
  measurements, every one checked against the hand rule's output; then the fastest few,
  within 10% of each other, measured again side by side), record every sample in the
  database and run the best. The register constraint is checked lazily, on each
  candidate the search proposes, from the build that compiles it anyway: one that spills
  is recorded as a failed build and never run.
- ``"default"``: the hand rule.

A graph built without reading the device (:meth:`gsparse.Graph.from_block`, a sampled block rebuilt
every step) gets the hand rule under every policy: a signature would read it back.

A choice is made once per graph and task; a new record or policy takes effect on the next
call (the choices are keyed by a generation that both bump).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from .. import kernels
from ..datasets.structure import describe_structure
from ..graph import Graph
from ..kernels.pruning import THRESHOLDS, RegisterBudgetError
from ..kernels.source import refuse_capture
from ..kernels.space import Space
from ..target import Target
from .builder import ParallelBuilder
from .database import BestRecord, TuningDatabase, TuningKey, default_database_path
from .features import featurize
from .interfaces import BuildResult
from .models import RankModel
from .ranked import RankedSpace, SpaceCache
from .runner import CallRunner
from .search import GeneticSearch, RandomSampling, model_scorer

__all__ = ["CODEGEN_VERSION", "POLICIES", "TUNE_BUDGET", "choose", "current_database", "database_path", "get_policy",
           "model_choice", "open_database", "policy", "record_of", "set_policy", "tuning_key", "use_database"]

POLICIES = ("model", "tune", "default")
"""The policies :func:`set_policy` takes (see the module docstring)."""
CODEGEN_VERSION = "2026-11-25"
"""The generated kernels' version, part of every tuning key: a record made by another
version never matches."""
TUNE_BUDGET = 16
"""Measurements a ``"tune"`` call makes at most (the model's first choices, then its search)."""
# Operators with a shipped model: gsparse/tune/models/<operator>-rank.json.
_MODELLED = ("spmm", "sddmm")


class _State:
    """The process's policy and the generation that invalidates earlier choices."""

    policy = "model"
    generation = 0
    database: str | None = None  # a file named by use_database


def set_policy(name: str) -> None:
    """Set the policy of calls that force no schedule (see the module docstring)."""
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {name!r}")
    _State.policy = name
    _State.generation += 1


def get_policy() -> str:
    """The process's policy, one of :data:`POLICIES`."""
    return _State.policy


@contextlib.contextmanager
def policy(name: str) -> Iterator[None]:
    """Use policy ``name`` within the block."""
    previous = get_policy()
    set_policy(name)
    try:
        yield
    finally:
        set_policy(previous)


def graph_signature(g: Graph) -> str:
    """A digest of ``g``'s sizes and of 4,096 entries of each of its CSR arrays spread over
    them: cheap (one transfer), the same on every device and index type."""

    def compute() -> str:
        picks = []
        for array in (g.rowptr, g.col, g.eid):
            if array is not None and array.numel():
                picks.append(array[spread_positions(array.numel(), 4096, array.device)].long())
        sample = torch.cat(picks).cpu().numpy().tobytes() if picks else b""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"{g.num_src}:{g.num_dst}:{g.num_edges}:{g.eid is not None}".encode())
        digest.update(sample)
        return digest.hexdigest()

    return g.tuning.get("signature", compute)


def spread_positions(size: int, count: int, device: torch.device) -> torch.Tensor:
    """``min(size, count)`` positions spread evenly over ``range(size)``, first and last
    included. Integer arithmetic: positions computed in float32 round past the end once
    ``size`` exceeds 2**24 (a 124M-edge graph read out of bounds)."""
    count = min(size, count)
    if count == 1:
        return torch.zeros(1, dtype=torch.int64, device=device)
    return torch.arange(count, dtype=torch.int64, device=device) * (size - 1) // (count - 1)


def _structure(g: Graph):
    return g.tuning.get("structure", lambda: describe_structure(g))


def tuning_key(operator: str, g: Graph, task: Any, target: Target) -> TuningKey:
    """The database key of ``task`` on ``g`` and ``target``."""
    shape = task.out_shape if operator == "spmm" else (task.num_heads, task.head_len)
    return TuningKey(
        target=f"{target.name}|{target.arch}|{target.sms}",
        operator=f"{operator}:{task.algorithm}|v{task.vector_ok}",
        graph=graph_signature(g), feature_shape=json.dumps(list(shape)),
        dtype=str(task.dtype).removeprefix("torch."), codegen=CODEGEN_VERSION)


@functools.lru_cache(maxsize=None)
def _model(operator: str) -> RankModel | None:
    """The shipped rank model of ``operator`` (None where none ships)."""
    if operator not in _MODELLED:
        return None
    path = resources.files(__package__).joinpath("models", f"{operator}-rank.json")
    return RankModel().load(path) if path.is_file() else None


def database_path() -> Path:
    """The tuning database's file: the one :func:`use_database` named, else
    ``$GSPARSE_TUNING_DB``, else ``tuning.sqlite`` in the cache directory."""
    return Path(_State.database) if _State.database is not None else default_database_path()


def use_database(path: str | os.PathLike[str] | None) -> None:
    """Read and write tuning records in ``path`` from now on (None: the default place)."""
    _State.database = None if path is None else os.fspath(path)
    _database.cache_clear()
    _State.generation += 1


def record_of(operator: str, g: Graph, task: Any, target: Target | None = None) -> BestRecord | None:
    """The tuning database's best record of ``task`` on ``g``, or None."""
    database = _database()
    target = target or Target.of(g.device)
    return None if database is None else database.get_best(tuning_key(operator, g, task, target))


@functools.lru_cache(maxsize=1)
def _database() -> TuningDatabase | None:
    """The tuning database, where one exists (a "tune" call creates it)."""
    path = database_path()
    return TuningDatabase(path) if path.is_file() else None


def current_database() -> TuningDatabase | None:
    """The tuning database of :func:`database_path`, where the file exists (a tuning call
    creates it); opened once per process and :func:`use_database` setting."""
    return _database()


def open_database() -> TuningDatabase:
    """The tuning database of :func:`database_path`, created if missing, for a tuning call
    to write (:func:`current_database` finds it from now on)."""
    database = TuningDatabase(database_path())
    _database.cache_clear()
    return database


def choose(operator: str, g: Graph, task: Any, call: Callable[[Any], torch.Tensor],
           target: Target | None = None) -> Any:
    """The schedule of ``task`` of ``operator`` (``"spmm"``, ``"sddmm"`` or ``"softmax"``) on
    ``g`` for ``target`` (the graph's GPU by default), decided once per graph, task and
    generation (a sampled block's, the hand rule's, at each call it resolves).
    ``call(schedule)`` runs the operator with that schedule on the real inputs and returns its
    output (``[num_dst, *shape]`` for g-SpMM, ``[num_edges, *shape]`` for the others): the
    "tune" policy measures candidates with it."""
    if g.sync_free:
        # A graph built without reading the device (a sampled block, rebuilt every step)
        # gets the hand rule under every policy: a signature or a structure would read it
        # back. From its statistics, which the host holds: nothing to keep with the graph.
        return kernels.OPERATORS[operator].default_schedule(task, g.stats, target or Target.of(g.device))
    key = (task, _State.policy, _State.generation)

    def decide() -> Any:
        refuse_capture(g, task)
        return _decide(operator, g, task, call, target or Target.of(g.device))

    return g.schedules.get(key, decide)


def _decide(operator: str, g: Graph, task: Any, call: Callable[[Any], torch.Tensor], target: Target) -> Any:
    ops = kernels.OPERATORS[operator]
    if _State.policy == "default" or operator not in _MODELLED:
        return ops.default_schedule(task, g.stats, target)
    # Only a lookup or a tuning run needs the key, whose graph signature reads the graph
    # back: a "model" call in a process without a tuning database skips it.
    database = _database()
    if database is not None and (record := database.get_best(tuning_key(operator, g, task, target))) is not None:
        from ..kernels.schedule import schedule_from_json

        try:
            return schedule_from_json(record.schedule_json)
        except ValueError:  # a record this version cannot read: decide afresh
            pass
    if _State.policy == "model":
        return model_choice(operator, g, task, target)
    space = Space(ops.pruned_space(task, g.stats, target).kept)
    return _tune_now(operator, g, task, call, target, tuning_key(operator, g, task, target), space,
                     _model(operator), _structure(g))


def model_choice(operator: str, g: Graph, task: Any, target: Target) -> Any:
    """The shipped model's first choice of ``task``'s pruned space on ``g`` for ``target``
    (LO-SpMM's arithmetic constraints at their default thresholds) and
    the hand rule's pick (some graphs' best, e.g. very short rows, lie outside the space): what
    the "model" policy runs where no tuning record exists (the hand rule's pick where no
    model ships for ``operator``). Measures and compiles nothing; ``g`` may live on any
    device."""
    model = _model(operator)
    if model is None:
        return kernels.OPERATORS[operator].default_schedule(task, g.stats, target)
    return _first_choice(operator, model, _SPACES.get(operator, task, g.stats, target), _structure(g))


def _first_choice(operator: str, model: RankModel, space: RankedSpace, structure) -> Any:
    """The schedule of ``space`` that ``model`` ranks first on a graph of ``structure``
    (the earliest of equal costs); the only one made a schedule object."""
    pick = space.table[int(space.costs(model, structure).argmin())]
    return kernels.OPERATORS[operator].space.schedule_from_row(pick)


_SPACES = SpaceCache(64)


def _build_fn(operator: str, task: Any, target: Target, device_index: int) -> Callable[[Any], None]:
    """What the tuner's builder does with a candidate: the register constraint's check
    (a compile for ``target.arch``, which the load's compile then finds in the kernel
    cache), then its kernels compiled and loaded. A candidate the constraint removes raises
    :class:`~gsparse.kernels.pruning.RegisterBudgetError`: a failed build, never run."""
    ops = kernels.OPERATORS[operator]

    def build(schedule: Any) -> None:
        spills = ops.register_spills(task, schedule, target)
        if spills > THRESHOLDS.max_spill_bytes:
            raise RegisterBudgetError(schedule, spills, THRESHOLDS.max_spill_bytes)
        ops.load_kernels(task, schedule, device_index)

    return build


def _tune_now(operator, g, task, call, target, key, space, model, structure) -> Any:
    from .loop import CONFIRM_FINALISTS, tune

    ops = kernels.OPERATORS[operator]
    default = ops.default_schedule(task, g.stats, target)
    reference = call(default).clone()
    device = g.device

    def features(schedules):
        return featurize(task, structure, target, schedules)

    strategy = (GeneticSearch(space, scorer=model_scorer(model, features)) if model is not None
                else RandomSampling(space))
    builder = ParallelBuilder(_build_fn(operator, task, target, device.index))
    working_set = structure.num_edges * 8 + structure.num_src * task.dtype.itemsize * 64
    runner = CallRunner(call, reference, device, flush_l2=working_set < 2 * target.l2_bytes)
    database = open_database()
    # The hand rule's pick is measured first and recorded, so the search starts from it (a
    # measured sample joins the first generation) and never returns anything slower.
    [measured] = runner.run([BuildResult(default)])
    database.commit_sample(key, default, times_ms=measured.times_ms, error=measured.error,
                           features=features([default])[0])
    result = tune(space, strategy, builder, runner, database, key, TUNE_BUDGET, featurize=features,
                  confirm=CONFIRM_FINALISTS)
    _State.generation += 1  # other graphs' choices may now find this record
    return result.best if result.best is not None else default
