"""The MLP scheme selector judged on a scheme sweep, and trained for shipping.

The records of :mod:`.sptrsv_sweep` (``--schemes selection``) are, per number of right-hand
sides ``k``, a factor x scheme table over the selector's space
(:func:`~gsparse.kernels.sptrsv.space.selection_space`): :func:`scheme_table`. A scheme
measured ``ok`` (or sharing a measured scheme's plan) has its median time; a wrong, failed,
skipped (too many launches) or pruned one has ``inf`` (the sweep prunes only schemes more
than ``--prune`` times the best); one a truncated record never reached has ``nan``, and
truncated records are left out unless asked for. The best of a factor is its least time.
The hand rule's time is that of the scheme the rule of this code
(:func:`~gsparse.kernels.sptrsv.default.default_schedule`) picks from the recorded
features, for the GPU's SM count.

:func:`judge` trains a selector (:func:`~gsparse.kernels.sptrsv.selector.train`, seeded,
deterministic) on the factors of some families and judges it on the factors of others: for
each, the time of its choice over the best (``inf`` where it was not measured ``ok``: a
miss), next to the hand rule's scheme over the best. The choice is what the analysed
default runs: the MLP's pick where the selector trusts it
(:meth:`~gsparse.kernels.sptrsv.selector.SchemeSelector.trusts`), else the hand rule's.
:func:`held_out` does that for one split of the families, :func:`leave_one_family_out` for
every family in turn, and :func:`train_set` fits one selector per ``k`` on everything, for
:meth:`~gsparse.kernels.sptrsv.selector.SelectorSet.save`.
``scripts/sptrsv_selector_report.py`` prints the tables and times the selection.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..kernels.sptrsv.default import default_schedule
from ..kernels.sptrsv.features import FEATURE_NAMES
from ..kernels.sptrsv.schedule import SptrsvSchedule
from ..kernels.sptrsv.selector import SchemeSelector, SelectorSet, train
from ..kernels.sptrsv.space import selection_space
from ..kernels.sptrsv.task import SptrsvTask
from ..target import H100

__all__ = ["SchemeTable", "Judgement", "scheme_table", "judge", "held_out", "leave_one_family_out", "train_set",
           "summarize", "markdown_table"]

# Training of every selector here: full-batch Adam as selector.train's defaults, seeded.
EPOCHS = 600
SEED = 0


@dataclass(frozen=True, eq=False)
class SchemeTable:
    """The records of one ``k`` as a factor x scheme table.

    Attributes:
        k: right-hand sides.
        schemes: ``S`` columns.
        records: ``B`` indices of the rows' records in the list they came from.
        names, families: ``B`` factor names (``family:rows:seed``) and families.
        features: ``[B, 10]``.
        times: ``[B, S]`` milliseconds; ``inf``: wrong, failed, skipped or pruned; ``nan``:
            never reached.
        default: ``[B]`` the hand rule's time (``nan`` where its scheme is not a column or was
            not measured).
        sms: ``B`` SM counts of the GPUs measured on.
    """

    k: int
    schemes: tuple[SptrsvSchedule, ...]
    records: tuple[int, ...]
    names: tuple[str, ...]
    families: tuple[str, ...]
    features: np.ndarray
    times: np.ndarray
    default: np.ndarray
    sms: tuple[int | None, ...]

    @property
    def best(self) -> np.ndarray:
        """``[B]`` the least time of each factor."""
        return np.nanmin(np.where(np.isnan(self.times), np.inf, self.times), axis=1)

    def rows(self, keep: np.ndarray) -> SchemeTable:
        """The table of the rows where ``keep`` (``[B]`` bool) holds."""
        index = np.flatnonzero(keep)
        return SchemeTable(self.k, self.schemes, tuple(self.records[i] for i in index),
                           tuple(self.names[i] for i in index), tuple(self.families[i] for i in index),
                           self.features[index], self.times[index], self.default[index],
                           tuple(self.sms[i] for i in index))

    def of_families(self, families: Iterable[str], inside: bool = True) -> SchemeTable:
        chosen = set(families)
        return self.rows(np.array([(f in chosen) == inside for f in self.families], dtype=bool))


def _family(record: dict[str, Any]) -> str:
    return record.get("family") or record["matrix"].split(":")[0]


def scheme_table(records: Sequence[dict[str, Any]], k: int, schemes: Sequence[SptrsvSchedule] | None = None,
                 include_truncated: bool = False) -> SchemeTable:
    """The records of ``k`` right-hand sides over ``schemes`` (default: the selector's space),
    truncated records left out unless ``include_truncated``; factors with no scheme measured
    ``ok`` are left out."""
    schemes = tuple(selection_space() if schemes is None else schemes)
    column = {s.to_json(): j for j, s in enumerate(schemes)}
    chosen, rows, defaults = [], [], []
    for i, record in enumerate(records):
        if record["k"] != k or (record.get("truncated") and not include_truncated):
            continue
        times = np.full(len(schemes), np.nan)
        for entry in record["schemes"]:
            j = column.get(entry["schedule"])
            if j is not None:
                times[j] = entry["median_ms"] if entry["status"] == "ok" else np.inf
        if not np.isfinite(times).any():
            continue
        chosen.append(i)
        rows.append(times)
        features = np.array([record["features"][f] for f in FEATURE_NAMES], dtype=np.float64)
        j = column.get(hand_rule(features, k, record.get("sms")).to_json())
        defaults.append(times[j] if j is not None else np.nan)
    return SchemeTable(
        k=k, schemes=schemes, records=tuple(chosen), names=tuple(records[i]["matrix"] for i in chosen),
        families=tuple(_family(records[i]) for i in chosen),
        features=np.array([[records[i]["features"][f] for f in FEATURE_NAMES] for i in chosen], dtype=np.float64)
        .reshape(len(chosen), len(FEATURE_NAMES)),
        times=np.array(rows, dtype=np.float64).reshape(len(chosen), len(schemes)),
        default=np.array(defaults, dtype=np.float64), sms=tuple(records[i].get("sms") for i in chosen))


def hand_rule(features: np.ndarray, k: int, sms: int | None) -> SptrsvSchedule:
    """The hand rule's scheme for a factor's features at ``k`` right-hand sides (float64) on
    an H100 of ``sms`` SMs (all of them: None)."""
    target = H100 if sms is None else dataclasses.replace(H100, sms=int(sms))
    return default_schedule(features, SptrsvTask(torch.float64, torch.int32, True, False, False, k), target)


@dataclass(frozen=True)
class Judgement:
    """One held-out factor: the choice's time over the best (``inf``: it was not measured
    ``ok``), the hand rule's (``nan``: its scheme was not measured); ``trusted``: whether
    the choice is the MLP's pick (else the selector did not trust its pick, and the choice
    is the hand rule's)."""

    record: int
    name: str
    family: str
    k: int
    pick: SptrsvSchedule
    best: SptrsvSchedule
    ratio: float
    default_ratio: float
    trusted: bool = True


def fit(table: SchemeTable, *, epochs: int = EPOCHS, seed: int = SEED) -> SchemeSelector:
    """A selector trained on every row of ``table``."""
    if not len(table.names):
        raise ValueError(f"no factors to train on at k = {table.k}")
    return train(table.features, table.times, table.schemes, num_rhs=table.k, epochs=epochs, seed=seed)


def judge(selector: SchemeSelector, table: SchemeTable) -> list[Judgement]:
    """The analysed default's choice on each row of ``table`` against the row's best: the
    selector's pick where it trusts it, else the hand rule's."""
    if tuple(selector.schemes) != table.schemes:
        raise ValueError("the selector chooses from another scheme space than the table's columns")
    out = []
    best = table.best
    scores = selector.scores(table.features).reshape(len(table.names), -1).numpy() if len(table.names) else []
    column = {s: j for j, s in enumerate(table.schemes)}
    for i in range(len(table.names)):
        pick = table.schemes[int(np.argmax(scores[i]))]
        trusted = selector.trusts(pick)
        if not trusted:
            pick = hand_rule(table.features[i], table.k, table.sms[i])
        j = column.get(pick)
        t = table.times[i, j] if j is not None else math.nan
        out.append(Judgement(record=table.records[i], name=table.names[i], family=table.families[i], k=table.k,
                             pick=pick, best=table.schemes[int(np.nanargmin(
                                 np.where(np.isnan(table.times[i]), np.inf, table.times[i])))],
                             ratio=float(t / best[i]) if np.isfinite(t) else math.inf,
                             default_ratio=float(table.default[i] / best[i]), trusted=trusted))
    return out


def held_out(records: Sequence[dict[str, Any]], families: Iterable[str], ks: Sequence[int] | None = None, *,
             epochs: int = EPOCHS, seed: int = SEED, include_truncated: bool = False) -> list[Judgement]:
    """Per ``k`` (default: every ``k`` of the records), a selector trained on the factors of
    the families not in ``families``, judged on those of ``families``."""
    families = set(families)
    out = []
    for k in ks or sorted({r["k"] for r in records}):
        table = scheme_table(records, k, include_truncated=include_truncated)
        test = table.of_families(families)
        if len(test.names):
            out += judge(fit(table.of_families(families, inside=False), epochs=epochs, seed=seed), test)
    return out


def leave_one_family_out(records: Sequence[dict[str, Any]], ks: Sequence[int] | None = None, *,
                         schemes: Sequence[SptrsvSchedule] | None = None, epochs: int = EPOCHS, seed: int = SEED,
                         include_truncated: bool = False) -> dict[int, Judgement]:
    """Every family held out in turn (per ``k``): the judgement of each of its factors, by
    the index of its record, over ``schemes`` (default: the selector's space). Empty with
    fewer than two families."""
    out = {}
    for k in ks or sorted({r["k"] for r in records}):
        table = scheme_table(records, k, schemes, include_truncated=include_truncated)
        families = sorted(set(table.families))
        if len(families) < 2:
            continue
        for family in families:
            for j in judge(fit(table.of_families([family], inside=False), epochs=epochs, seed=seed),
                           table.of_families([family])):
                out[j.record] = j
    return out


def train_set(records: Sequence[dict[str, Any]], ks: Sequence[int] | None = None, *, epochs: int = EPOCHS,
              seed: int = SEED, include_truncated: bool = False) -> SelectorSet:
    """One selector per ``k`` trained on every factor, as a set for the GPU model measured
    (every record's ``sms`` must agree)."""
    selectors, sms, gpus = [], set(), set()
    for k in ks or sorted({r["k"] for r in records}):
        table = scheme_table(records, k, include_truncated=include_truncated)
        selectors.append(fit(table, epochs=epochs, seed=seed))
        sms |= set(table.sms)
        gpus |= {records[i].get("gpu", "") for i in table.records}
    if len(sms) > 1:
        raise ValueError(f"the records come from GPUs of different SM counts {sorted(sms, key=str)}")
    return SelectorSet(selectors, sms=next(iter(sms)), device=", ".join(sorted(g for g in gpus if g)))


# ---------------------------------------------------------------------- tables


def summarize(judged: Sequence[Judgement]) -> dict[str, float]:
    """Shares within 10% and 25% of the best, the worst and geometric-mean ratio, for the
    MLP's picks and the hand rule's (over the factors where its scheme was measured)."""
    ratios = np.array([j.ratio for j in judged], dtype=np.float64)
    rule = np.array([j.default_ratio for j in judged], dtype=np.float64)
    rule = rule[~np.isnan(rule)]

    def stats(r: np.ndarray) -> tuple[float, float, float, float]:
        if not len(r):
            return (math.nan,) * 4
        finite = r[np.isfinite(r)]
        geo = float(np.exp(np.mean(np.log(finite)))) if len(finite) == len(r) else math.inf
        return float(np.mean(r <= 1.10)), float(np.mean(r <= 1.25)), float(r.max()), geo

    mlp10, mlp25, mlp_worst, mlp_geo = stats(ratios)
    rule10, rule25, rule_worst, rule_geo = stats(rule)
    return {"factors": len(ratios), "mlp_within_10": mlp10, "mlp_within_25": mlp25, "mlp_worst": mlp_worst,
            "mlp_geomean": mlp_geo, "rule_factors": len(rule), "rule_within_10": rule10, "rule_within_25": rule25,
            "rule_worst": rule_worst, "rule_geomean": rule_geo}


def markdown_table(groups: dict[str, Sequence[Judgement]]) -> str:
    """One row per group (and ``all``): factors, the MLP's and the hand rule's shares within
    10% and 25% of the best, worst and geometric-mean ratio."""
    lines = ["| group | factors | MLP within 10% | within 25% | worst | geomean | hand rule within 10% | "
             "within 25% | worst | geomean |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    every = [j for js in groups.values() for j in js]
    for name, js in [*groups.items(), ("all", every)]:
        if not js:
            continue
        s = summarize(js)
        lines.append(f"| {name} | {s['factors']} | {s['mlp_within_10']:.0%} | {s['mlp_within_25']:.0%} | "
                     f"{s['mlp_worst']:.2f} | {s['mlp_geomean']:.3f} | {s['rule_within_10']:.0%} | "
                     f"{s['rule_within_25']:.0%} | {s['rule_worst']:.2f} | {s['rule_geomean']:.3f} |")
    return "\n".join(lines) + "\n"
