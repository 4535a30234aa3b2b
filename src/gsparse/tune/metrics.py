"""How well a cost model's predictions order measured times.

Every function takes ``predicted [n]`` (a cost: lower is faster, used as given),
``times_ms [n]`` (measured, finite, > 0) and ``groups [n]`` (which measurement set a row
belongs to: one graph, operator and feature shape). Only rows of one group are ever
compared with each other, except by :func:`pearson` without ``groups``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.stats import rankdata

from .interfaces import group_rows


def _check(predicted: np.ndarray, times_ms: np.ndarray, groups: np.ndarray | None = None):
    p = np.asarray(predicted, dtype=np.float64)
    t = np.asarray(times_ms, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"predicted must be a non-empty 1-D array, got shape {p.shape}")
    if t.shape != p.shape:
        raise ValueError(f"times_ms must have the shape of predicted {p.shape}, got {t.shape}")
    if not np.all(np.isfinite(t) & (t > 0)):
        raise ValueError("times_ms must be finite and > 0 (leave failed samples out)")
    if not np.all(np.isfinite(p)):
        raise ValueError("predicted must be finite")
    if groups is None:
        return p, t, None
    g = np.asarray(groups)
    if g.shape != p.shape:
        raise ValueError(f"groups must have the shape of predicted {p.shape}, got {g.shape}")
    return p, t, g


def _standardised(x: np.ndarray, groups: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    for rows in group_rows(groups):
        std = x[rows].std()
        if std > 0:
            out[rows] = (x[rows] - x[rows].mean()) / std
    return out


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    norm = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / norm) if norm > 0 else 0.0


def pearson(predicted: np.ndarray, times_ms: np.ndarray, groups: np.ndarray | None = None, *,
            log: bool = True) -> float:
    """Pearson correlation of ``predicted`` with ``log(times_ms)`` (``log=True``) or ``times_ms``.

    With ``groups``, both sides are first standardised within each group (zero mean, unit
    deviation; a group of constant values becomes zeros), so the number says how well the
    model orders and spaces the schedules of each graph, not whether it knows that one
    graph is slower than another: a model fitted on per-group normalised times (like the
    DNN here) predicts no group's scale. Without ``groups``, the raw correlation over all
    rows. 0 when either side is constant.
    """
    p, t, g = _check(predicted, times_ms, groups)
    y = np.log(t) if log else t
    if g is not None:
        p, y = _standardised(p, g), _standardised(y, g)
    return _correlation(p, y)


def spearman(predicted: np.ndarray, times_ms: np.ndarray, groups: np.ndarray) -> float:
    """Mean over groups of the Spearman rank correlation of ``predicted`` and ``times_ms``.

    Ties take their average rank. Groups of one row are left out; a group where either side
    is constant counts 0 (the model tells nothing there). NaN when no group has two rows.
    """
    p, t, g = _check(predicted, times_ms, groups)
    values = [_correlation(rankdata(p[rows]), rankdata(t[rows])) for rows in group_rows(g) if len(rows) > 1]
    return float(np.mean(values)) if values else float("nan")


def top_k_regret(predicted: np.ndarray, times_ms: np.ndarray, groups: np.ndarray, k: int = 1) -> np.ndarray:
    """Per group (in sorted group order): ``min(time of the model's top k) / min(time) - 1``.

    The model's top ``k`` are the ``k`` rows of lowest predicted cost (ties: the earlier
    row first); 0 means the model's shortlist holds the group's fastest schedule.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    p, t, g = _check(predicted, times_ms, groups)
    out = []
    for rows in group_rows(g):
        top = rows[np.argsort(p[rows], kind="stable")[:k]]
        out.append(t[top].min() / t[rows].min() - 1.0)
    return np.array(out)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """All metrics of one set of predictions (see each function for its definition).

    ``pearson_log`` and ``pearson_linear`` are within-group standardised (:func:`pearson`
    with groups) against log and linear times; regrets are means and maxima over groups.
    """

    groups: int
    pearson_log: float
    pearson_linear: float
    spearman: float
    top1_regret_mean: float
    top1_regret_max: float
    top5_regret_mean: float
    top5_regret_max: float


def evaluate(predicted: np.ndarray, times_ms: np.ndarray, groups: np.ndarray) -> Evaluation:
    """Every metric of this module for ``predicted`` against ``times_ms`` in ``groups``."""
    top1 = top_k_regret(predicted, times_ms, groups, 1)
    top5 = top_k_regret(predicted, times_ms, groups, 5)
    return Evaluation(
        groups=len(top1),
        pearson_log=pearson(predicted, times_ms, groups, log=True),
        pearson_linear=pearson(predicted, times_ms, groups, log=False),
        spearman=spearman(predicted, times_ms, groups),
        top1_regret_mean=float(top1.mean()),
        top1_regret_max=float(top1.max()),
        top5_regret_mean=float(top5.mean()),
        top5_regret_max=float(top5.max()),
    )
