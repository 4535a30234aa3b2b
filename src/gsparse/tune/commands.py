"""The ``gsparse tune`` and ``gsparse db`` commands.

``gsparse tune WORKLOAD --cases ... --features ...`` runs the "tune" policy of
:mod:`gsparse.tune.select` for each (case, feature length, dtype) on the workload's graph,
on random operands of the call's shapes, and records the result in the tuning database, so
that later calls on the same graph (same sizes and CSR arrays) find it. ``gsparse db``
shows, exports, imports and clears those records.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from .._usage import UsageError

__all__ = ["add_parsers", "run"]

_DEFAULT_CASES = "spmm:copy_lhs:sum,spmm:mul:sum,sddmm:u:dot:v"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``tune`` and ``db`` to the ``gsparse`` command's subparsers."""
    from .collect import CASES

    t = sub.add_parser(
        "tune", help="tune the schedules of operators on a graph and record them in the tuning database",
        description="Search each (case, feature length, dtype) on the graph with the tune policy (the "
                    "hand rule's pick, then genetic search seeded by the shipped model, every candidate "
                    "checked against the hand rule's output) and record the best in the tuning "
                    "database; later calls on the same graph run it. Needs a CUDA GPU.")
    t.add_argument("workload", help="a preset, a real graph (cora, citeseer, pubmed_cites) or a graph "
                                    "file (.npz, .mtx, .txt/.csv/.edges)")
    t.add_argument("--cases", default=_DEFAULT_CASES,
                   help=f"comma-separated calls, of: {', '.join(c.name for c in CASES)} "
                        f"(default: {_DEFAULT_CASES})")
    t.add_argument("--features", default="32", help="comma-separated feature lengths (default: 32)")
    t.add_argument("--dtypes", default="float32", help="comma-separated: float32, float16, bfloat16")
    t.add_argument("--scale", type=float, help="node-count scale of a preset (default: full size)")
    t.add_argument("--seed", type=int, default=0, help="seed of a synthetic graph and of the operands")
    t.add_argument("--db", help="the tuning database file (default: $GSPARSE_TUNING_DB, else the cache "
                                "directory)")

    d = sub.add_parser("db", help="show, export, import or clear tuning records",
                       description="Manage the tuning database that 'gsparse tune' and the tune policy write.")
    d.add_argument("action", choices=("show", "export", "import", "clear"))
    d.add_argument("file", nargs="?", help="the JSON file of export (written) and import (read)")
    d.add_argument("--operator", help="only records whose operator starts with this (show, clear)")
    d.add_argument("--db", help="the tuning database file (default: $GSPARSE_TUNING_DB, else the cache "
                                "directory)")


def run(args: argparse.Namespace) -> int:
    """Run a ``tune`` or ``db`` command; 2 for bad arguments, as argparse does."""
    try:
        return _tune(args) if args.command == "tune" else _db(args)
    except UsageError as error:
        print(f"gsparse {args.command}: {error}", file=sys.stderr)
        return 2


def _csv(flag: str, text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise UsageError(f"{flag} needs at least one value, got {text!r}")
    return names


def _tune(args: argparse.Namespace) -> int:
    from .. import datasets
    from ..target import Target
    from . import select
    from .collect import CASES, Case

    known = {c.name for c in CASES}
    cases = [Case(name) for name in _csv("--cases", args.cases)]
    if unknown := [c.name for c in cases if c.name not in known]:
        raise UsageError(f"--cases: unknown {unknown}; known: {sorted(known)}")
    try:
        lengths = [int(f) for f in _csv("--features", args.features)]
    except ValueError:
        raise UsageError(f"--features must be comma-separated positive integers, got {args.features!r}") from None
    if any(f < 1 for f in lengths):
        raise UsageError(f"--features must be positive, got {lengths}")
    dtypes = []
    for name in _csv("--dtypes", args.dtypes):
        if name not in ("float32", "float16", "bfloat16"):
            raise UsageError(f"--dtypes: {name!r} is not one of float32, float16, bfloat16")
        dtypes.append(getattr(torch, name))
    if not torch.cuda.is_available():
        print("gsparse tune: needs a CUDA GPU (the schedules are GPU kernels); PyTorch sees none",
              file=sys.stderr)
        return 2
    if args.db:
        select.use_database(args.db)
    device = torch.device("cuda")
    try:
        loaded = datasets.workload(args.workload, scale=args.scale, seed=args.seed, device=device)
    except (ValueError, OSError) as error:
        raise UsageError(str(error)) from None
    g = loaded.graph
    print(f"{loaded.name}: {g.num_src:,} sources, {g.num_dst:,} destinations, {g.num_edges:,} edges "
          f"({loaded.source}); database {select.database_path()}", flush=True)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    target = Target.of(device)
    with select.policy("tune"):
        for case in cases:
            for dtype in dtypes:
                for feature_len in lengths:
                    operands = case.operands(g, feature_len, dtype, gen)
                    task, call = case.call(g, operands, feature_len)
                    started = time.perf_counter()
                    chosen = select.choose(case.operator, g, task, call, target)
                    torch.cuda.synchronize()
                    seconds = time.perf_counter() - started
                    record = select.record_of(case.operator, g, task, target)
                    timing = f"{record.time_ms:.4g} ms" if record is not None else "no record (every candidate failed)"
                    print(f"{case.name} F={feature_len} {str(dtype).removeprefix('torch.')}: {chosen} "
                          f"{timing}, tuned in {seconds:.1f} s", flush=True)
    return 0


def _db(args: argparse.Namespace) -> int:
    from .database import TuningDatabase, default_database_path

    path = Path(args.db) if args.db else default_database_path()
    if args.action in ("export", "import") and not args.file:
        raise UsageError(f"db {args.action} needs a JSON file argument")
    if args.action in ("show", "export", "clear") and not path.is_file():
        print(f"no tuning database at {path}")
        return 0
    if args.action == "import" and not Path(args.file).is_file():
        raise UsageError(f"db import: no file {args.file}")
    with TuningDatabase(path) as database:
        if args.action == "show":
            records = [r for r in database.records() if r.key.operator.startswith(args.operator or "")]
            for r in records:
                print(f"{r.key.operator} {r.key.dtype} shape {r.key.feature_shape} graph {r.key.graph[:12]} "
                      f"on {r.key.target.split('|')[0]} (codegen {r.key.codegen}): {r.schedule_json} "
                      f"{r.time_ms:.4g} ms")
            print(f"{len(records)} records in {path}")
        elif args.action == "export":
            Path(args.file).write_text(database.export_json())
            print(f"wrote {len(database.records())} records and {len(database.samples())} samples to {args.file}")
        elif args.action == "import":
            try:
                changed, added = database.import_json(Path(args.file).read_text())
            except ValueError as error:
                raise UsageError(f"db import: {error}") from None
            print(f"imported {args.file}: {changed} best records changed, {added} samples added")
        else:
            matching = [r for r in database.records() if r.key.operator.startswith(args.operator or "")]
            best = samples = 0
            for r in matching:
                b, s = database.clear(r.key)
                best, samples = best + b, samples + s
            if args.operator is None:  # samples of keys without a best record (all failed)
                b, s = database.clear()
                best, samples = best + b, samples + s
            print(f"cleared {best} records and {samples} samples from {path}")
    return 0
