"""What the "model" policy costs to decide a schedule on a new graph, on the CPU.

Run from the repository root: ``OMP_NUM_THREADS=1 PYTHONPATH=src python3 scripts/decision_time.py``
(``--repeats 300`` by default; ``--quick`` for one graph).

*Decision time* is what a call pays on a graph whose signature and structure statistics it
already holds: building the task's schedule space, featurising its candidates and ranking
them with the shipped model (:func:`gsparse.tune.select.model_choice`). The signature and
the structure are one-time work per graph, printed apart on the first graph (1.2M edges).

For each graph, operator, feature length and dtype, prints the median over ``--repeats``
calls (after warm-up), in microseconds of the calling thread's CPU time
(``time.thread_time``: other processes on a shared machine delay a call but do not add to
it), of each component: ``space`` (the space's candidates built as knob rows and pruned,
``pruned_rows``), ``static`` (the features that do not read the graph), ``graph`` (the rest
of the features), ``predict`` (the model, every feature read), and of the whole decision:
``cold`` with nothing cached (the first graph of its task in the process), ``new`` with the
task's candidates kept (a new graph of a task decided before, whose pruned space holds no
candidate the task's earlier graphs did not: it prunes its space and computes the features
and trees that read the graph, :mod:`gsparse.tune.ranked`), and ``warm`` with the graph's
pruned space kept too (a graph of the same statistics, or the same graph deciding again).
``n`` counts the candidates of the space before pruning (``schedule_space``). Then the
median and the worst of each column over all cases.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from gsparse import datasets, kernels
from gsparse.datasets import describe_structure, preset, scale_for_edges
from gsparse.kernels import sddmm, spmm
from gsparse.target import H100
from gsparse.tune import select
from gsparse.tune.features import SpaceFeatures

# ~1M-edge stand-ins: short rows (arxiv), skewed short rows (products), long rows (reddit);
# then small graphs of few long rows, where the g-SpMM space splits rows into short chunks
# and holds the most candidates (the statistics of the probe graphs of docs/performance.md,
# "short row splits": 426 rows of 251 edges on average, 1,336 rows with one of 1,336, 3,608
# rows of 113,168 sources with one of 5,549, 38,605 short rows with four hubs).
GRAPHS: dict[str, Callable[[], object]] = {
    **{name: lambda name=name: preset(name, scale=scale_for_edges(name, 1_000_000))
       for name in ("arxiv-like", "products-like", "reddit-like")},
    "community": lambda: datasets.community_graph(426, datasets.LogNormal(251.0, 0.6), 107, 0.8, seed=3),
    "power-law": lambda: datasets.random_graph(1_336, datasets.PowerLaw(84.2, 2.1), seed=3),
    "bipartite": lambda: datasets.random_graph(3_608, datasets.LogNormal(34.3, 3.5), num_src=113_168, seed=3),
    "hubs": lambda: datasets.hub_graph(38_605, datasets.LogNormal(5.7, 1.0), hub_row_degree=3_600, seed=3),
}
FEATURES = (4, 32, 100, 602)
DTYPES = (torch.float32, torch.bfloat16)
# (operator, binary op): for g-SpMM, copy_u and u_mul_e with a scalar per edge; for
# g-SDDMM, u_dot_v and u_mul_v
OPERATIONS = (("spmm", "copy_lhs"), ("spmm", "mul"), ("sddmm", "dot"), ("sddmm", "mul"))


def median_us(fn: Callable[[], object], repeats: int) -> float:
    for _ in range(max(10, repeats // 10)):
        fn()
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
    return statistics.median(times) * 1e6


def task_of(g, operation: str, op: str, feature_len: int, dtype: torch.dtype):
    """The task of ``op`` at ``feature_len`` features: only the operands' row shapes,
    dtypes and alignment matter, so the operands have one row."""
    lhs = torch.empty(1, feature_len, dtype=dtype)
    if operation == "spmm":
        rhs = torch.empty(1, 1, dtype=dtype) if op == "mul" else None
        return spmm.task_for(g, op, "sum", lhs, rhs, (feature_len,))
    rhs = torch.empty(1, feature_len, dtype=dtype)
    return sddmm.task_for(g, op, lhs, rhs, "u", "v", (1,) if op == "dot" else (feature_len,))


def components(operation: str, g, task) -> dict[str, Callable[[], object]]:
    """The parts of :func:`select.model_choice`, each callable alone, and the whole."""
    ops, model, structure = kernels.OPERATORS[operation], select._model(operation), select._structure(g)
    table = ops.space.pruned_rows(task, g.stats, H100)
    space = SpaceFeatures(task, H100, table)
    features = space(structure)

    def uncached(decide: Callable[[], object]) -> Callable[[], object]:
        def first_of_its_task():
            select._SPACES.clear()
            sddmm.space._space.cache_clear()
            sddmm.space._candidates_of.cache_clear()
            spmm.space._grid_table.cache_clear()
            spmm.space._candidates_of.cache_clear()
            return decide()
        return first_of_its_task

    def new_graph():
        select._SPACES.clear(tasks=False)
        return select.model_choice(operation, g, task, H100)

    return {
        "space": uncached(lambda: ops.space.pruned_rows(task, g.stats, H100)),
        "static": lambda: SpaceFeatures(task, H100, table),
        "graph": lambda: space(structure),
        "predict": lambda: model.predict(features),
        "cold": uncached(lambda: select.model_choice(operation, g, task, H100)),
        "new": new_graph,
        "warm": lambda: select.model_choice(operation, g, task, H100),
    }


def one_time_ms(g, repeats: int) -> tuple[float, float]:
    """Median milliseconds of the graph's signature and structure statistics (uncached)."""
    def signature():
        g.tuning.clear()
        select.graph_signature(g)

    structure = median_us(lambda: describe_structure(g), repeats) / 1e3
    return median_us(signature, repeats) / 1e3, structure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="the first graph only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    columns = ("space", "static", "graph", "predict", "cold", "new", "warm")
    print(f"{'graph':15} {'case':26} {'n':>4} " + " ".join(f"{c + ' us':>10}" for c in columns))
    rows: dict[str, list[dict[str, float]]] = {"spmm": [], "sddmm": []}
    for name in list(GRAPHS)[:1] if args.quick else GRAPHS:
        g = GRAPHS[name]()
        select._structure(g)  # the graph's statistics, paid once
        for operation, op in OPERATIONS:
            for feature_len in FEATURES:
                for dtype in DTYPES:
                    task = task_of(g, operation, op, feature_len, dtype)
                    parts = components(operation, g, task)
                    n = len(kernels.OPERATORS[operation].schedule_space(task, g.stats, H100))
                    row = {c: median_us(parts[c], args.repeats) for c in columns}
                    rows[operation].append(row)
                    case = f"{operation} {op} F={feature_len} {str(dtype)[6:]}"
                    print(f"{name:15} {case:26} {n:4} " + " ".join(f"{row[c]:10.0f}" for c in columns))
    for operation, found in rows.items():
        for label, pick in (("median", statistics.median), ("worst", max)):
            print(f"{operation + ' ' + label:42} " + " ".join(f"{pick(r[c] for r in found):10.0f}" for c in columns))
    first = next(iter(GRAPHS))
    g = preset(first)
    signature_ms, structure_ms = one_time_ms(g, repeats=9)
    print(f"once per graph ({first}, {g.num_edges:,} edges, CPU): signature {signature_ms:.2f} ms, "
          f"structure {structure_ms:.1f} ms")


if __name__ == "__main__":
    main()
