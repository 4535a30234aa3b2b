"""The g-SpMM hand rule's split rows up to 4 features, timed against the whole rows it
took before, on graphs of a fresh corpus seed and on the benchmark's presets.

    PYTHONPATH=src python3 scripts/few_feature_splits_probe.py [--seed 21] [--count 3]
        [--families hubs,bipartite,power_law,rmat,lognormal,community,cliques,knn]
        [--presets reddit-like,products-like,proteins-like,citation-like,amazon-like]

Up to 4 features, the rule now cuts rows into the shortest chunks of
:func:`~gsparse.kernels.spmm.default._row_split` (rows longest first) where the longest row
is a hub (``_walks_a_hub`` in ``kernels/spmm/default.py``); before, it walked whole rows (the
one-pass schedule with the same knobs, rows longest first only where the COV exceeds 0.5
and the mean row is 128 or more). For each graph, g-SpMM task (copy_rhs, mul and copy_lhs sums over fp32 features at
1, 2 and 4 features) where the two picks differ, both run on the same random inputs: device
time, the median of repeats after a warm-up (:func:`gsparse.tune.measure.time_calls`), each
output checked against the other first; each timed twice: ``call``, a call's wall rate
(where the host's work of a call outlasts its kernels, as on the smallest graphs, that
is what it times), and ``device``, the kernels alone (the host's enqueueing hidden, as the
collected cells time them). Prints the graph's statistics, both schedules, both times and
old over new; then the geometric mean and the range of old over new for each timing.
"""

from __future__ import annotations

import argparse
import dataclasses
import math

import torch

from gsparse.datasets import corpus, preset
from gsparse.kernels.spmm import OnePass, SplitRows, default_schedule, run_spmm, task_for
from gsparse.target import Target
from gsparse.tune.measure import time_calls

CASES = (("copy_rhs", None, "e"), ("mul", "u", "e"), ("copy_lhs", "u", None))


def whole_rows(pick: SplitRows, stats) -> OnePass:
    """The schedule the rule took before: the same knobs, whole rows."""
    knobs = {f.name: getattr(pick, f.name) for f in dataclasses.fields(OnePass)}
    knobs["degree_sorted"] = stats.rows.cov > 0.5 and stats.rows.mean >= 128
    return OnePass(**knobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--families", default="hubs,bipartite,power_law,rmat,lognormal,community,cliques,knn")
    parser.add_argument("--presets", default="reddit-like,products-like,proteins-like,citation-like,amazon-like")
    args = parser.parse_args()
    device = torch.device("cuda")
    target = Target.of(device)
    graphs = [(f"{name} {i}", g) for i, (name, _, g) in
              enumerate(corpus(args.families.split(","), args.count, seed=args.seed, device=device))]
    graphs += [(name, preset(name, device=device)) for name in args.presets.split(",") if name]
    ratios: dict[str, list[float]] = {"call": [], "device": []}
    gen = torch.Generator(device=device).manual_seed(0)
    for name, g in graphs:
        stats = g.stats
        for op, lhs_at, rhs_at in CASES:
            for features in (1, 2, 4):
                lhs = torch.randn(g.num_src, features, generator=gen, device=device) if lhs_at else None
                rhs = torch.rand(g.num_edges, 1 if op == "mul" else features, generator=gen, device=device) if rhs_at else None
                task = task_for(g, op, "sum", lhs, rhs, (features,))
                new = default_schedule(task, stats, target)
                if not isinstance(new, SplitRows):
                    continue
                old = whole_rows(new, stats)
                run = {s: (lambda s=s: run_spmm(g, op, "sum", lhs, rhs, (features,), schedule=s)) for s in (old, new)}
                # sums of up to 10^5 fp32 terms in another order
                torch.testing.assert_close(run[new](), run[old](), rtol=1e-3, atol=1e-3)
                line = (f"{name}: {g.num_dst:,} rows, {g.num_edges:,} edges, mean {stats.rows.mean:.1f}, "
                        f"max {stats.rows.max:,}; {op} F={features}: whole rows {old}, split {new}")
                for kind, hide_host in (("call", False), ("device", True)):
                    ms = {s: time_calls(fn, [()], device, budget_s=0.2, min_repeats=10, hide_host=hide_host).median_ms
                          for s, fn in run.items()}
                    ratios[kind].append(ms[old] / ms[new])
                    line += f"; {kind} {ms[old]:.4f} / {ms[new]:.4f} ms, old / new {ms[old] / ms[new]:.2f}"
                print(line, flush=True)
    for kind, values in ratios.items():
        if values:
            print(f"{len(values)} cells, {kind} time: old / new geometric mean "
                  f"{math.exp(sum(map(math.log, values)) / len(values)):.3f}, range {min(values):.3f}-{max(values):.3f}")


if __name__ == "__main__":
    main()
