"""A boosted tree ensemble evaluated with NumPy: LightGBM's trees without LightGBM.

Evaluation follows QuickScorer (Lucchese et al., SIGIR 2015), vectorised over candidates.
Number the ``L <= 64`` leaves of a tree from left to right and give every split node the
bit mask that clears the leaves of its left subtree. A row goes right at a node exactly
when ``x[feature] > threshold``; the leaf it reaches is the leftmost leaf left set after
clearing the masks of all nodes where it goes right, whatever their order. For one
feature, the nodes a row goes right at are those of threshold below its value: sorted by
threshold, a prefix. So the AND of their masks is a lookup in a per-feature table of
prefix ANDs (``[distinct thresholds of the feature + 1, trees]``)::

    bits[i, t] = AND over features j of table_j[#(distinct thresholds of j < x[i, j]), t]
    leaf[i, t] = index of the lowest set bit of bits[i, t]
    score[i]   = sum over t of value[t, leaf[i, t]]

The tuner ranks the candidates of one task on one graph: most features (the graph's, the
task's) are the same in every row. Their table rows are ANDed once, for all rows, from one
vectorised count over every threshold; only the features that vary take a gather of
``[rows, trees]`` each; those of few thresholds (a schedule's knobs and flags) one gather
per group of them, from a table of the AND of their rows for every combination of their
values' places among the thresholds. Masks are as narrow as the widest tree allows (32
bits for LightGBM's default 31 leaves): the gathers move half the bytes. A tree's rightmost
leaf is in no left subtree, so its bit is never cleared and the lowest set bit is always
one of its leaves.

That scores 100 candidates with a 200-tree ensemble in about 0.2 ms. Inputs must be
finite: LightGBM's missing-value routes are not modelled (the tuner's features never miss).
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import numpy as np

MAX_LEAVES = 64
# Features of at most this many thresholds are read in groups whose tables hold at most
# _GROUP_ROWS rows (see TreeEnsemble._group_tables).
_FEW_THRESHOLDS = 14
_GROUP_ROWS = 256


class TreeEnsemble:
    """A sum of binary decision trees ``x[feature] <= threshold ? left : right``.

    Split arrays (one entry per split node of every tree): ``tree`` (its tree), ``feature``,
    ``threshold``, and ``left_leaves`` ``[k, 2]``: the range ``[lo, hi)`` of leaves (numbered
    left to right within the tree) under its left child. ``values [trees, max leaves]``
    holds each tree's leaf outputs, zero-padded.
    """

    def __init__(self, num_features: int, tree: np.ndarray, feature: np.ndarray, threshold: np.ndarray,
                 left_leaves: np.ndarray, values: np.ndarray) -> None:
        self.num_features = int(num_features)
        self.tree = np.asarray(tree, dtype=np.int64).reshape(-1)
        self.feature = np.asarray(feature, dtype=np.int64).reshape(-1)
        self.threshold = np.asarray(threshold, dtype=np.float64).reshape(-1)
        self.left_leaves = np.asarray(left_leaves, dtype=np.int64).reshape(-1, 2)
        self.values = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        k = len(self.tree)
        if not (len(self.feature) == len(self.threshold) == len(self.left_leaves) == k):
            raise ValueError("tree, feature, threshold and left_leaves need one entry per split node")
        if self.values.shape[1] > MAX_LEAVES:
            raise ValueError(f"a tree has more than {MAX_LEAVES} leaves; train with leaves <= {MAX_LEAVES}")
        if k and (self.feature.min() < 0 or self.feature.max() >= self.num_features
                  or self.tree.max() >= len(self.values)):
            raise ValueError("a split names a feature or a tree that does not exist")
        self._tables()

    def _tables(self) -> None:
        trees, leaves = self.values.shape
        self._mask_type = np.uint32 if leaves <= 32 else np.uint64
        lo, hi = self.left_leaves[:, 0].astype(np.uint64), self.left_leaves[:, 1].astype(np.uint64)
        # A left subtree has at most 63 of a tree's 64 leaves, so the shift never overflows;
        # the masks keep the low bits, where every leaf is.
        masks = (~(((np.uint64(1) << (hi - lo)) - np.uint64(1)) << lo)).astype(self._mask_type)
        # A table per used feature, a row per distinct threshold (trees share many: a flag
        # splits at 0.5 wherever it splits) and one for none below, back to back. One sort
        # of the splits by feature, then threshold, finds them all: a load runs once per
        # process, on the first call that ranks schedules.
        order = np.lexsort((self.threshold, self.feature))
        feature, threshold = self.feature[order], self.threshold[order]
        first_of_feature = np.ones(len(order), dtype=bool)
        first_of_feature[1:] = feature[1:] != feature[:-1]
        distinct = first_of_feature.copy()
        distinct[1:] |= threshold[1:] != threshold[:-1]
        self._used = feature[first_of_feature]
        # Every distinct threshold of every feature, to count those below a row's values at once.
        self._all_thresholds = threshold[distinct]
        self._threshold_feature = feature[distinct]
        counts = np.diff(np.flatnonzero(np.append(first_of_feature[distinct], True)))
        sizes = counts + 1
        self._first_row = np.cumsum(sizes) - sizes
        self._first_threshold = self._first_row - np.arange(len(self._used))
        # A split's row: one past its threshold's place among all distinct thresholds,
        # plus one "none below" row for each feature up to its own.
        row = np.cumsum(distinct) + np.cumsum(first_of_feature) - 1
        table = np.full((int(sizes.sum()) if len(sizes) else 1, trees), ~self._mask_type(0))
        # at(): a tree may split on a feature at one threshold twice, in two branches
        np.bitwise_and.at(table, (row, self.tree[order]), masks[order])
        for first, size in zip(self._first_row, sizes):  # row k ANDs the masks of the k lowest
            table[first:first + size] = np.bitwise_and.accumulate(table[first:first + size], axis=0)
        self._table = table
        self._thresholds = [self._all_thresholds[first:first + count]
                            for first, count in zip(self._first_threshold, counts)]
        self._feature_tables = [self._table[first:first + size] for first, size in zip(self._first_row, sizes)]
        # A leaf's place in the flat values, less one, in the narrowest integers that hold
        # it (int16 for 200 trees of 31 leaves): the index arithmetic moves fewer bytes.
        self._value_rows_less_one = (np.arange(trees) * leaves - 1).astype(
            np.int16 if trees * leaves < 2**15 else np.intp)
        self._flat_values = self.values.ravel()
        self._group_tables()

    def _group_tables(self) -> None:
        """Tables of groups of the used features of few thresholds (a schedule's knobs and
        flags, the task's), at most :data:`_GROUP_ROWS` rows each: a feature's *states* are
        its table's rows and one more, all ones, for a call that does not read it; a
        group's table has a row per combination of its features' states, the AND of their
        rows, the last feature's state varying fastest. A call gathers one row per group
        where it would gather one per feature (:meth:`_and_group_rows`)."""
        trees = self.num_trees
        few = [n for n, thresholds in enumerate(self._thresholds) if len(thresholds) <= _FEW_THRESHOLDS]
        groups: list[list[int]] = []
        rows = _GROUP_ROWS
        for n in few:  # in order: a model's knob columns are neighbours
            states = len(self._thresholds[n]) + 2
            if rows * states > _GROUP_ROWS:
                groups.append([])
                rows = 1
            groups[-1].append(n)
            rows *= states
        ones = np.full((1, trees), ~self._mask_type(0))
        self._group_table, stride, absent = [], [], []
        for group in groups:
            table = ones
            for n in group:
                table = (table[:, None, :] & np.concatenate([self._feature_tables[n], ones])[None]).reshape(-1, trees)
            self._group_table.append(table)
            states = [len(self._thresholds[n]) + 2 for n in group]
            stride += [math.prod(states[i + 1:]) for i in range(len(group))]
            absent += [count - 1 for count in states]
        # A call's row of a group is the sum over its features of stride * state, the state
        # of a feature read the count of its thresholds below the value (stride for each),
        # of the others absent: weights of every threshold and of every feature's absence.
        counts = [len(self._thresholds[n]) for n in few]
        group_of = np.repeat(np.arange(len(groups)), [len(group) for group in groups])
        self._few = np.array(few, dtype=np.int64)
        self._is_few = np.isin(np.arange(len(self._used)), self._few)
        self._group_of_few = group_of
        self._few_of_threshold = np.repeat(np.arange(len(few)), counts)
        self._few_threshold_column = self._used[self._few[self._few_of_threshold]]
        self._few_thresholds = np.concatenate([self._thresholds[n] for n in few] or [np.zeros(0)])[:, None]
        self._threshold_weight = np.zeros((len(groups), sum(counts)))
        self._threshold_weight[group_of[self._few_of_threshold], np.arange(sum(counts))] = \
            np.array(stride)[self._few_of_threshold]
        self._absent_weight = np.zeros((len(groups), len(few)))
        self._absent_weight[group_of, np.arange(len(few))] = np.multiply(stride, absent)

    @property
    def num_trees(self) -> int:
        return len(self.values)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """``[n]`` sums of the trees' leaf values for finite ``features [n, num_features]``."""
        return self.scores(self.masks(features))

    def masks(self, features: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
        """``[n, trees]``: for each row, the AND of its table rows over the used features
        among ``columns`` (a ``[num_features]`` mask; None: all). The AND of the masks of
        disjoint column sets is the mask of their union, so a part that does not change
        between calls (a schedule's own features) can be computed once and kept:
        ``scores(masks(x, a) & masks(x, ~a)) == predict(x)``. Only the columns named are
        read (and must be finite)."""
        x, named = self._checked(features, columns)
        [bits] = self._and_rows(x, [named[self._used]])
        return bits

    def masks_apart(self, features: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(masks(features), masks(features, part))`` from one pass over ``features``
        (every column read): where the part is kept for later calls, its first call pays
        for the checks and the comparisons once."""
        x, _ = self._checked(features, None)
        part = np.asarray(part, dtype=bool)
        if part.shape != (self.num_features,):
            raise ValueError(f"part must have shape [{self.num_features}], got {part.shape}")
        kept = part[self._used]
        bits, part_bits = self._and_rows(x, [~kept, kept])
        return np.bitwise_and(bits, part_bits, out=bits), part_bits

    def _checked(self, features: np.ndarray, columns: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``features`` as float64 and ``columns`` as a ``[num_features]`` bool mask (None:
        all), checked: the shapes, and the columns named finite."""
        x = np.asarray(features, dtype=np.float64)
        named = np.ones(self.num_features, dtype=bool) if columns is None else np.asarray(columns, dtype=bool)
        if x.ndim != 2 or x.shape[1] != self.num_features or named.shape != (self.num_features,):
            raise ValueError(f"features must have shape [n, {self.num_features}] and columns "
                             f"[{self.num_features}], got {x.shape} and {named.shape}")
        if not np.isfinite(x if columns is None else x[:, named]).all():
            raise ValueError("features must be finite")
        return x, named

    def _and_rows(self, x: np.ndarray, reads: list[np.ndarray]) -> list[np.ndarray]:
        """``[n, trees]`` masks of ``x``'s rows over each of ``reads`` (masks over
        :attr:`_used`), sharing what the sets have in common: which features vary over the
        rows, and their comparison with the thresholds of few."""
        out = [np.empty((len(x), self.num_trees), dtype=self._mask_type) for _ in reads]
        if not len(x):
            return out
        varies = ~(x == x[:1]).all(axis=0)[self._used]
        gathered = np.empty_like(out[0])
        above = None
        for bits, read in zip(out, reads):
            # A group is gathered row by row where a feature of it read varies, and then with
            # all its features read (the same gather); what is the same in every row, ANDed once.
            vary = read & varies
            gathered_groups = np.bincount(self._group_of_few[vary[self._few]], minlength=len(self._group_table)) > 0
            read_few = read[self._few] & gathered_groups[self._group_of_few]
            shared = read & ~vary
            shared[self._few[read_few]] = False
            bits[:] = self._shared_bits(x[0], shared)
            if read_few.any():
                if above is None:
                    above = x.T[self._few_threshold_column] > self._few_thresholds  # [thresholds, rows]
                self._and_group_rows(above, read_few, bits, gathered)
            for n in (vary & ~self._is_few).nonzero()[0]:
                below = self._thresholds[n].searchsorted(x[:, self._used[n]], side="left")
                self._feature_tables[n].take(below, axis=0, out=gathered, mode="clip")  # in range: no checks
                np.bitwise_and(bits, gathered, out=bits)
        return out

    def _and_group_rows(self, above: np.ndarray, read: np.ndarray, bits: np.ndarray, gathered: np.ndarray) -> None:
        """AND into ``bits`` the rows of the features of few thresholds that ``read`` names
        (a mask over :attr:`_few`), one group table's row at a time, from ``above``, the rows'
        values compared with every threshold of few: their positions in all groups are one
        product (exact: small integers)."""
        weight = self._threshold_weight * read[self._few_of_threshold]
        rows = (weight @ above + (self._absent_weight @ ~read)[:, None]).astype(np.intp)  # [groups, rows]
        for g in np.bincount(self._group_of_few[read], minlength=len(rows)).nonzero()[0]:
            self._group_table[g].take(rows[g], axis=0, out=gathered, mode="clip")
            np.bitwise_and(bits, gathered, out=bits)

    def scores(self, bits: np.ndarray) -> np.ndarray:
        """``[n]`` sums of the trees' leaf values for rows whose :meth:`masks` over every
        used feature are ``bits``."""
        gathered = np.empty_like(bits)
        # The lowest set bit and the ones below it: one more than the leaf's index.
        np.subtract(bits, self._mask_type(1), out=gathered)
        np.bitwise_xor(bits, gathered, out=gathered)
        value_at = np.add(np.bitwise_count(gathered), self._value_rows_less_one, dtype=self._value_rows_less_one.dtype)
        return self._flat_values.take(value_at, mode="clip").sum(axis=1)

    def _shared_bits(self, row: np.ndarray, features: np.ndarray) -> np.ndarray:
        """``[trees]``: the AND of the table rows of ``row``'s values of the used
        ``features`` (a mask over :attr:`_used`), counting the thresholds below each value
        over all splits at once."""
        if not features.any():
            return np.full(self.num_trees, ~self._mask_type(0))
        below = np.add.reduceat(self._all_thresholds < row[self._threshold_feature], self._first_threshold,
                                dtype=np.int64)
        return np.bitwise_and.reduce(self._table[(self._first_row + below)[features]], axis=0)

    @classmethod
    def weighted_sum(cls, parts: list[tuple[TreeEnsemble, float]]) -> TreeEnsemble:
        """One ensemble that predicts ``sum(weight * part.predict(x))`` over ``(part, weight)``
        pairs of ensembles of the same features: their trees side by side, leaves scaled."""
        num_features = {part.num_features for part, _ in parts}
        if len(num_features) != 1:
            raise ValueError(f"the parts must read the same features, got {sorted(num_features)} features")
        width = max(part.values.shape[1] for part, _ in parts)
        values = np.concatenate([np.pad(weight * part.values, ((0, 0), (0, width - part.values.shape[1])))
                                 for part, weight in parts])
        first_tree = np.cumsum([0] + [part.num_trees for part, _ in parts])
        return cls(num_features.pop(), np.concatenate([part.tree + first for (part, _), first in zip(parts, first_tree)]),
                   np.concatenate([part.feature for part, _ in parts]),
                   np.concatenate([part.threshold for part, _ in parts]),
                   np.concatenate([part.left_leaves for part, _ in parts]), values)

    def last_trees(self, count: int) -> TreeEnsemble:
        """The ensemble of this one's last ``count`` trees (the last part of a
        :meth:`weighted_sum`, its leaves as scaled there)."""
        if not 1 <= count <= self.num_trees:
            raise ValueError(f"count must be in [1, {self.num_trees}], got {count}")
        first = self.num_trees - count
        keep = self.tree >= first
        return TreeEnsemble(self.num_features, self.tree[keep] - first, self.feature[keep], self.threshold[keep],
                            self.left_leaves[keep], self.values[first:])

    @classmethod
    def from_lightgbm(cls, dump: dict[str, Any]) -> TreeEnsemble:
        """The ensemble of ``lightgbm.Booster.dump_model()`` (numerical splits only)."""
        if dump.get("num_class", 1) != 1:
            raise ValueError(f"only single-output boosters convert; this one has {dump['num_class']} classes")
        splits: list[tuple[int, int, float, int, int]] = []
        leaves: list[list[float]] = []
        for t, info in enumerate(dump["tree_info"]):
            values: list[float] = []
            _walk(info["tree_structure"], t, splits, values)
            leaves.append(values)
        width = max((len(v) for v in leaves), default=1)
        values = np.zeros((len(leaves), width))
        for t, v in enumerate(leaves):
            values[t, : len(v)] = v
        s = np.array(splits, dtype=np.float64).reshape(-1, 5)
        return cls(dump["max_feature_idx"] + 1, s[:, 0], s[:, 1], s[:, 2], s[:, 3:5], values)

    def to_dict(self) -> dict[str, Any]:
        return {"num_features": self.num_features, "tree": self.tree.tolist(),
                "feature": self.feature.tolist(), "threshold": self.threshold.tolist(),
                "left_leaves": self.left_leaves.tolist(), "values": self.values.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TreeEnsemble:
        # A list of pairs converts to an array an order of magnitude faster flattened.
        pairs = data["left_leaves"]
        left_leaves = np.fromiter(itertools.chain.from_iterable(pairs), dtype=np.int64)
        return cls(data["num_features"], data["tree"], data["feature"], data["threshold"], left_leaves,
                   data["values"])

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def _walk(node: dict[str, Any], tree: int, splits: list, values: list[float]) -> None:
    """Append ``node``'s splits (tree, feature, threshold, lo, hi) and leaves left to right."""
    if "leaf_value" in node:
        values.append(float(node["leaf_value"]))
        return
    if node.get("decision_type", "<=") != "<=":
        raise ValueError(f"only numerical '<=' splits convert, got {node['decision_type']!r} "
                         "(train without categorical features)")
    if node.get("missing_type", "None") == "Zero":
        raise ValueError("splits that treat zero as missing do not convert (train without zero_as_missing)")
    lo = len(values)
    _walk(node["left_child"], tree, splits, values)
    splits.append((tree, int(node["split_feature"]), float(node["threshold"]), lo, len(values)))
    _walk(node["right_child"], tree, splits, values)
