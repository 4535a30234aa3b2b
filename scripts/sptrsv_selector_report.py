"""The MLP scheme selector judged on a scheme sweep (issue 20's bar), as Markdown.

    PYTHONPATH=src python scripts/sptrsv_selector_report.py SWEEP.jsonl[.gz] \\
        [--held-out road,rmat,stencil] [--time-rows 500000] [--ship PATH] [--out REPORT.md]

SWEEP is the ``sweep.jsonl`` of ``python -m gsparse.bench.sptrsv_sweep --schemes selection``
(:mod:`gsparse.bench.sptrsv_selector` reads it). Per number of right-hand sides ``k``, a
selector (seeded, deterministic) is trained on the factors of the families not held out and
picks a scheme for each factor of the held-out families: the share of those factors whose
pick is within 10% and 25% of the best measured, the worst and geometric-mean ratio, with
the hand rule's figures on the same factors. Then every family is held out in turn (leave
one family out). The bar: within 10% of the best on at least 85% of the held-out factors.

Selection time: each held-out factor is generated again from its name, analysed (levels:
not timed, the plan needs them anyway) and its features computed and a scheme selected
(:func:`~gsparse.kernels.sptrsv.features.matrix_features` then
:meth:`~gsparse.kernels.sptrsv.selector.SelectorSet.select`), wall clock, the median of
``--repeats`` per factor; the features must equal those the sweep recorded. ``--time-rows
N`` times the same on one factor of each family at N rows. ``--no-timing`` skips both.

``--ship PATH`` trains one selector per ``k`` on every factor and saves the set there; the
analysed default reads ``src/gsparse/kernels/sptrsv/selector-h100.pt`` (``SHIPPED``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import torch

from gsparse.bench.sptrsv_selector import (
    EPOCHS,
    SEED,
    held_out,
    leave_one_family_out,
    markdown_table,
    scheme_table,
    summarize,
    train_set,
)
from gsparse.bench.sptrsv_sweep import read_records
from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.features import matrix_features
from gsparse.kernels.sptrsv.natural import DeviceSystem
from gsparse.kernels.sptrsv.plan import analyse
from gsparse.kernels.sptrsv.selector import SelectorSet


def _by_family(judged) -> dict[str, list]:
    groups = defaultdict(list)
    for j in judged:
        groups[j.family].append(j)
    return dict(sorted(groups.items()))


def _selection_ms(selectors: SelectorSet, family: str, rows: int, seed: int, k: int, repeats: int,
                  recorded: dict | None = None) -> tuple[float, float, float]:
    """``(features ms, features + selection ms, features' largest relative difference from
    the recorded ones)``, medians of ``repeats``."""
    matrix = triangular.generate(family, rows, seed)
    # The system the solver analyses: its long rows split (the sweep's features are of it).
    split = DeviceSystem(*(torch.from_numpy(a.astype(np.int64)) for a in (matrix.indptr, matrix.indices)), True, False)
    system = analyse(split.crow.numpy(), split.col.numpy(), True, False)
    features_ms, total_ms = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        f = matrix_features(system.rows, system.row_level)
        middle = time.perf_counter()
        selectors.for_rhs(k).select(f)  # the forward pass even where the set would decline the factor
        end = time.perf_counter()
        features_ms.append((middle - start) * 1e3)
        total_ms.append((end - start) * 1e3)
    drift = 0.0
    if recorded is not None:
        want = np.array(list(recorded.values()))
        drift = float(np.max(np.abs(f - want) / np.maximum(np.abs(want), 1e-300)))
    return statistics.median(features_ms), statistics.median(total_ms), drift


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", help="sweep.jsonl[.gz] of gsparse.bench.sptrsv_sweep --schemes selection")
    parser.add_argument("--held-out", default="road,rmat,stencil", help="comma-separated families left out of training")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--repeats", type=int, default=5, help="timed selections per factor")
    parser.add_argument("--include-truncated", action="store_true",
                        help="keep the records whose time ran out (their unmeasured schemes count as misses)")
    parser.add_argument("--no-timing", action="store_true", help="skip the selection times")
    parser.add_argument("--time-rows", type=int, help="also time the selection on each family at this many rows")
    parser.add_argument("--ship", help="train one selector per k on every factor and save the set here")
    parser.add_argument("--out", help="write the report here too")
    args = parser.parse_args(argv)
    records = read_records(args.sweep)
    held = [f for f in args.held_out.split(",") if f]
    ks = sorted({r["k"] for r in records})
    lines = [f"# SpTRSV scheme selector on {args.sweep}", ""]
    keep = {"include_truncated": args.include_truncated}
    tables = {k: scheme_table(records, k, **keep) for k in ks}
    families = sorted({f for t in tables.values() for f in t.families})
    if unknown := set(held) - set(families):
        parser.error(f"--held-out: no factors of {sorted(unknown)} in the sweep (it has {families})")
    statuses = Counter(e["status"] + (" (same plan)" if "same_plan_as" in e else "")
                       for r in records for e in r["schemes"])
    truncated = sum(bool(r.get("truncated")) for r in records)
    lines += [f"{len(records)} records ({truncated} truncated, {'kept' if args.include_truncated else 'left out'}); "
              f"per k, factors by family: " + "; ".join(
                  f"k={k}: " + ", ".join(f"{f} {c}" for f, c in sorted(Counter(t.families).items()))
                  for k, t in tables.items()),
              f"scheme entries: {dict(sorted(statuses.items()))}; {len(tables[ks[0]].schemes)} schemes per factor",
              f"training: selector.train, {args.epochs} epochs, seed {args.seed}", ""]

    judged = held_out(records, held, ks, epochs=args.epochs, seed=args.seed, **keep)
    total = summarize(judged)
    lines += [f"## Held out: {', '.join(held)} (trained on {', '.join(f for f in families if f not in held)})", ""]
    for k in ks:
        lines += [f"k = {k}:", "", markdown_table(_by_family([j for j in judged if j.k == k]))]
    lines += [f"**Bar** (within 10% of the best on >= 85% of held-out factors): the MLP "
              f"{total['mlp_within_10']:.0%} of {total['factors']} (k = {', '.join(map(str, ks))} pooled), "
              f"the hand rule {total['rule_within_10']:.0%} of {total['rule_factors']}: "
              f"{'met' if total['mlp_within_10'] >= 0.85 else 'not met'}.", "",
              "| factor | k | best scheme | MLP's pick | MLP / best | hand rule / best |",
              "|---|---:|---|---|---:|---:|"]
    for j in sorted(judged, key=lambda j: (j.family, j.name, j.k)):
        lines.append(f"| {j.name} | {j.k} | {j.best} | {j.pick} | {j.ratio:.2f} | {j.default_ratio:.2f} |")

    lofo = list(leave_one_family_out(records, ks, epochs=args.epochs, seed=args.seed, **keep).values())
    lines += ["", "## Leave one family out", ""]
    for k in ks:
        lines += [f"k = {k}:", "", markdown_table(_by_family([j for j in lofo if j.k == k]))]

    everything = (train_set(records, ks, epochs=args.epochs, seed=args.seed, **keep)
                  if args.ship or not args.no_timing else None)
    if not args.no_timing:
        selectors = everything
        features_ms, total_ms, drift, sizes = [], [], 0.0, []
        for j in judged:
            record = records[j.record]
            family, rows, seed = record["matrix"].split(":")
            f_ms, t_ms, d = _selection_ms(selectors, family, int(rows), int(seed), j.k, args.repeats,
                                          record["features"])
            features_ms.append(f_ms)
            total_ms.append(t_ms)
            sizes.append(record["n"])
            drift = max(drift, d)
        lines += ["", "## Selection time (CPU, wall clock)", "",
                  f"Held-out factors ({min(sizes):,} to {max(sizes):,} rows), median of {args.repeats} per factor: "
                  f"features + MLP median {statistics.median(total_ms):.2f} ms, worst {max(total_ms):.2f} ms "
                  f"(features alone: median {statistics.median(features_ms):.2f} ms, worst {max(features_ms):.2f} ms); "
                  f"features as recorded by the sweep to a relative {drift:.1e}."]
        if args.time_rows:
            lines += ["", f"At {args.time_rows:,} rows (seed 0, k = {ks[-1]}):", "",
                      "| family | rows | features ms | features + MLP ms |", "|---|---:|---:|---:|"]
            for family in triangular.FAMILIES:
                f_ms, t_ms, _ = _selection_ms(selectors, family, args.time_rows, 0, ks[-1], args.repeats)
                lines.append(f"| {family} | {args.time_rows:,} | {f_ms:.2f} | {t_ms:.2f} |")

    if args.ship:
        shipped = everything
        shipped.save(args.ship)
        lines += ["", f"Shipped: {args.ship}, one selector per k ({', '.join(map(str, shipped.selectors))}) "
                  f"trained on all {sum(len(t.names) for t in tables.values())} records, for GPUs of "
                  f"{shipped.sms} SMs ({shipped.device})."]
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
