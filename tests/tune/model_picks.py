"""The "model" policy's first choices on many problems, recorded before its decision was
made faster, so that a faster decision is checked to choose exactly as before.

:func:`cases` yields the problems: random tasks on random graph statistics and targets
(:mod:`.reference_decision`), and the tasks of the benchmark on small graphs of few long
rows, built with the dataset generators, where the g-SpMM space splits rows into short
chunks and holds the most candidates. ``model_picks.json`` holds, per case, a digest of
its inputs and the label of the pick; rewrite it (only when a change of the choices is
meant) from the ``tests`` directory with ``PYTHONPATH=../src python -m tune.model_picks``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from graphs import named_graph

from gsparse import datasets
from gsparse.kernels import sddmm, spmm
from gsparse.target import A100, H100
from gsparse.tune import select

from .reference_decision import (
    TARGETS,
    random_graph,
    random_sddmm_task,
    random_spmm_task,
)

RECORDED = Path(__file__).with_name("model_picks.json")
_RANDOM_CASES = {"spmm": 300, "sddmm": 200}
# Few long rows: the statistics of the probe graphs of docs/performance.md ("short row splits").
_LONG_ROW_GRAPHS = {
    "community": lambda: datasets.community_graph(426, datasets.LogNormal(251.0, 0.6), 107, 0.8, seed=3),
    "power-law": lambda: datasets.random_graph(1_336, datasets.PowerLaw(84.2, 2.1), seed=3),
    "bipartite": lambda: datasets.random_graph(3_608, datasets.LogNormal(34.3, 3.5), num_src=113_168, seed=3),
    "hubs": lambda: datasets.hub_graph(38_605, datasets.LogNormal(5.7, 1.0), hub_row_degree=3_600, seed=3),
}
_FEATURES = (1, 4, 32, 100, 256, 602)
_DTYPES = (torch.float32, torch.bfloat16)


def _benchmark_task(g, operator: str, op: str, feature_len: int, dtype: torch.dtype):
    """The task of ``scripts/decision_time.py``: operands of one row."""
    lhs = torch.empty(1, feature_len, dtype=dtype)
    if operator == "spmm":
        rhs = torch.empty(1, 1, dtype=dtype) if op == "mul" else None
        return spmm.task_for(g, op, "sum", lhs, rhs, (feature_len,))
    rhs = torch.empty(1, feature_len, dtype=dtype)
    return sddmm.task_for(g, op, lhs, rhs, "u", "v", (1,) if op == "dot" else (feature_len,))


def cases() -> Iterator[tuple[str, object, object, object, object]]:
    """``(operator, task, stats, structure, target)`` of every recorded case, in order."""
    rng = np.random.default_rng(1018)
    g = named_graph("random")
    for operator, count in _RANDOM_CASES.items():
        random_task = random_spmm_task if operator == "spmm" else random_sddmm_task
        for _ in range(count):
            stats, structure = random_graph(rng)
            yield operator, random_task(rng, g), stats, structure, TARGETS[rng.integers(len(TARGETS))]
    for build in _LONG_ROW_GRAPHS.values():
        g = build()
        structure = datasets.describe_structure(g)
        for operator, ops in (("spmm", ("copy_lhs", "mul")), ("sddmm", ("dot", "mul"))):
            for op in ops:
                for feature_len in _FEATURES:
                    for dtype in _DTYPES:
                        for target in (H100, A100):
                            task = _benchmark_task(g, operator, op, feature_len, dtype)
                            yield operator, task, g.stats, structure, target


def digest(task, stats, structure, target) -> str:
    """A short digest of a case's inputs, so that a recorded pick is compared on the same
    problem; its numbers to 6 digits (a graph's statistics, reduced by several threads,
    may differ in the last bits)."""
    text = re.sub(r"\d+\.\d+(e[-+]\d+)?", lambda m: f"{float(m.group()):.6g}", repr((task, stats, structure, target)))
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def label(schedule) -> str:
    return f"{type(schedule).__name__} {schedule}"


def choose(operator: str, task, stats, structure, target):
    """The "model" policy's first choice of ``task`` on a graph of ``stats`` and ``structure``."""
    return select._first_choice(operator, select._model(operator), select._SPACES.get(operator, task, stats, target),
                                structure)


def record() -> None:
    picks = [[digest(*case[1:]), label(choose(*case))] for case in cases()]
    RECORDED.write_text("[\n" + ",\n".join(json.dumps(p) for p in picks) + "\n]\n")


if __name__ == "__main__":
    record()
