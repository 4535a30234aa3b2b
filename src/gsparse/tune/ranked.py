"""What the "model" policy keeps between decisions, so that a new graph pays little.

A decision prunes the task's space for the graph (LO-SpMM's constraints read the graph's
statistics), featurises the candidates left and ranks them with the cost model's trees.
Most of that work reads the candidate alone: its knobs' features, and the trees' masks over
those features (made in the pass of the trees that first ranks the candidate,
:meth:`~gsparse.tune.models.TreeEnsemble.masks_apart`). So it is kept per task
(:class:`TaskSpace`), for every candidate any graph's pruned space held, and a graph's space
(:class:`RankedSpace`) is a list of positions in it: a new graph of a known task computes
only its pruning, the features that read the graph, and the trees over those.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import kernels
from ..graph import GraphStats
from ..target import Target
from .features import SpaceFeatures
from .models import RankModel

__all__ = ["RankedSpace", "SpaceCache", "TaskSpace"]

# The pruned tables whose positions a task keeps.
_TABLES = 64


class TaskSpace:
    """Every candidate (knob row) of one task on one target that a pruned space held, with
    the features that do not read the graph and, per model, the trees' masks over them.

    Thread-safe: rows are added under a lock, and a position, once given, never changes.
    """

    def __init__(self, task: Any, target: Target) -> None:
        self.task, self.target = task, target
        self.features: SpaceFeatures | None = None
        self._position: dict[bytes, int] = {}  # a kept row's bytes -> its position (from the second table on)
        # Graphs of a kind prune to the same candidates: their positions, by the whole table.
        self._tables: dict[bytes, np.ndarray] = {}
        # per model: (the model, [rows, trees] masks, [rows] bool: made)
        self._masks: dict[int, tuple[RankModel, np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    def positions(self, table: np.ndarray) -> np.ndarray:
        """``[len(table)]`` positions of ``table``'s rows among the kept candidates, the
        new ones added."""
        whole = np.ascontiguousarray(table).tobytes()
        found = self._tables.get(whole)
        if found is not None:
            return found
        with self._lock:
            if self.features is None:
                # The task's first table: kept as it is. Its rows' keys are made when a
                # second table needs them (the first graph of a task pays for no lookup).
                self.features = SpaceFeatures(self.task, self.target, table)
                found = np.arange(len(table))
            else:
                position = self._position
                if not position:
                    position.update(zip(_row_keys(self.features.table), range(len(self.features))))
                keys = _row_keys(table)
                # key -> a row of table holding it (of equal rows, any: they are the same row)
                new = dict(zip(keys, range(len(keys))))
                for key in new.keys() & position.keys():
                    del new[key]
                if new:
                    known = self.features.table
                    self.features = SpaceFeatures(self.task, self.target,
                                                  np.concatenate([known, table[list(new.values())]]))
                    position.update(zip(new, range(len(known), len(known) + len(new))))
                found = np.array(list(map(position.__getitem__, keys)), dtype=np.int64)
            self._tables[whole] = found
            found.flags.writeable = False
            _evict(self._tables, _TABLES)
            return found

    def masks(self, model: RankModel, positions: np.ndarray) -> np.ndarray | None:
        """``[len(positions), trees]``: ``model``'s masks over the features that do not read
        the graph of the candidates at ``positions``; None where one lacks them (no graph
        ranked it yet)."""
        with self._lock:
            kept, masks, made = self._masks.get(id(model), (None, None, None))
            if kept is not model or len(made) <= positions.max(initial=-1) or not made[positions].all():
                return None
            return masks[positions]

    def keep_masks(self, model: RankModel, positions: np.ndarray, masks: np.ndarray) -> None:
        """Keep ``masks`` (:meth:`masks`) of the candidates at ``positions``."""
        with self._lock:
            kept, known, made = self._masks.get(id(model), (None, None, None))
            if kept is not model or len(made) < len(self.features):
                # room for every candidate kept (more may have come since the last masks)
                grown = np.empty((len(self.features), masks.shape[1]), dtype=masks.dtype)
                grown_made = np.zeros(len(self.features), dtype=bool)
                if kept is model:
                    grown[:len(made)], grown_made[:len(made)] = known, made
                known, made = grown, grown_made
            known[positions] = masks
            made[positions] = True
            self._masks[id(model)] = (model, known, made)


def _row_keys(table: np.ndarray) -> list[bytes]:
    """Each knob row's bytes: a dictionary key per candidate."""
    rows = np.ascontiguousarray(table)
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel().tolist()


@dataclass(frozen=True)
class RankedSpace:
    """One graph's pruned space of a task: its candidates' positions in the task's
    :class:`TaskSpace`, and their features' part that does not read the graph."""

    task_space: TaskSpace
    positions: np.ndarray
    features: SpaceFeatures

    @property
    def table(self) -> np.ndarray:
        """The candidates' knob rows, in the pruned space's order."""
        return self.features.table

    def costs(self, model: RankModel, structure) -> np.ndarray:
        """``[candidates]`` costs of ``model`` (lower is faster) on a graph of ``structure``:
        what ``model.predict(self.features(structure))`` gives, with the trees' masks over
        the candidates' own features taken from the task's (made in the same pass, and
        kept, where a candidate lacks them)."""
        features, columns = self.features(structure), self.features.static_columns
        fixed = self.task_space.masks(model, self.positions)
        if fixed is not None:
            return model.predict(features, fixed=(columns, fixed))
        costs, fixed = model.predict_apart(features, columns)
        self.task_space.keep_masks(model, self.positions, fixed)
        return costs


class SpaceCache:
    """The spaces the "model" policy ranked: the last ``size`` graphs' pruned spaces
    (``pruned_rows``: the hand rule's pick, protected, among them) by what each is built
    from, and the last ``size`` tasks' :class:`TaskSpace`; the oldest goes first.

    A pruned space reads the graph's statistics, so a new graph prunes its own; a graph
    moved to another device, or deciding again after a new record, finds it.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._spaces: dict[Hashable, RankedSpace] = {}
        self._tasks: dict[Hashable, TaskSpace] = {}

    def get(self, operator: str, task: Any, stats: GraphStats, target: Target) -> RankedSpace:
        key = (operator, task, target, stats)
        found = self._spaces.get(key)
        if found is None:
            task_space = self._tasks.get(key[:3])
            if task_space is None:
                task_space = self._tasks[key[:3]] = TaskSpace(task, target)
                _evict(self._tasks, self._size)
            table = kernels.OPERATORS[operator].space.pruned_rows(task, stats, target)
            positions = task_space.positions(table)
            found = self._spaces[key] = RankedSpace(task_space, positions, task_space.features.subset(positions))
            _evict(self._spaces, self._size)
        return found

    def clear(self, tasks: bool = True) -> None:
        """Forget the graphs' spaces, and (``tasks``) the tasks' too."""
        self._spaces.clear()
        if tasks:
            self._tasks.clear()


def _evict(entries: dict, size: int) -> None:
    if len(entries) > size:  # pop, not del: another thread may have evicted it
        entries.pop(next(iter(entries)), None)
