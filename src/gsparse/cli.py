"""The gsparse command: gsparse info, example, bench, tune, db and precompile.

User errors (an unknown workload, a missing data file, a bad dtype or number list) print
one line to stderr and exit with status 2; a benchmark whose gsparse result is wrong exits
with status 1.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

import torch

from ._usage import Parser, UsageError, one_line
from .tune import commands as tune_commands


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def info() -> dict[str, str]:
    """What gsparse can use on this machine: device, CUDA, NVRTC, cache, versions."""
    from . import __version__, runtime

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        device = f"{torch.cuda.get_device_name()} (sm_{major}{minor})"
    else:
        device = "cpu (no CUDA device visible to PyTorch)"
    nvrtc = runtime.nvrtc_version()
    return {
        "gsparse": __version__,
        "device": device,
        "torch": f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})",
        "nvrtc": "unavailable (pip install 'gsparse[cuda]')" if nvrtc is None
        else f"{nvrtc[0]}.{nvrtc[1]}, targets {', '.join(runtime.supported_archs())}",
        "cuda-bindings": _version("cuda-bindings"),
        "cache directory": str(runtime.default_cache_dir()),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
    }


def example(device: str) -> int:
    """A worked example: weighted neighbour sum on a random graph, checked against float64."""
    import gsparse
    from gsparse.testing import gspmm_ref

    device = _device("gsparse example", device)

    gen = torch.Generator().manual_seed(0)
    num_nodes, num_edges, features = 2_000, 20_000, 64
    edge_index = torch.randint(num_nodes, (2, num_edges), generator=gen)
    g = gsparse.Graph.from_edge_index(edge_index, num_nodes=num_nodes).to(device)
    x = torch.randn(num_nodes, features, generator=gen).to(device)
    w = torch.rand(num_edges, generator=gen).to(device)
    print(g)
    print(f"row lengths: {g.row_stats}")
    gsparse.u_mul_e_sum(g, x, w)  # the first call loads (on a GPU: compiles) what it runs
    if x.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = gsparse.u_mul_e_sum(g, x, w)
    if out.is_cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    ref = gspmm_ref(g.to("cpu"), "mul", "sum", x.cpu(), w.cpu())
    err = float((out.cpu().double() - ref).norm() / ref.norm())
    print(f"u_mul_e_sum: output {tuple(out.shape)} in {elapsed * 1e3:.3f} ms (a warm call), "
          f"relative error vs float64 reference {err:.2e}")
    return 0 if err < 1e-5 else 1


# Defaults of ``gsparse bench`` by (device type, quick): workloads, feature lengths, heads,
# preset size cap (None: full size), seconds of timed repeats per implementation.
_BENCH_DEFAULTS = {
    ("cuda", False): ("reddit-like,proteins-like,products-like,cora,citeseer,pubmed_cites",
                      "1,2,4,8,16,32,64,128,256,512", "1,8", None, 0.1),
    ("cuda", True): ("reddit-like,products-like,cora", "4,32,128", "8", None, 0.05),
    ("cpu", False): ("reddit-like,proteins-like,products-like,cora,citeseer,pubmed_cites",
                     "1,4,16,64,256", "1,8", 2_000_000, 0.1),
    ("cpu", True): ("products-like,cora", "4,32", "8", 200_000, 0.03),
}


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _positive_ints(flag: str, text: str) -> tuple[int, ...]:
    values = []
    for part in _names(text):
        try:
            value = int(part)
        except ValueError:
            raise UsageError(f"gsparse bench: {flag} takes comma-separated positive integers, "
                             f"got {part!r}") from None
        if value < 1:
            raise UsageError(f"gsparse bench: {flag} takes positive integers, got {value}")
        values.append(value)
    if not values:
        raise UsageError(f"gsparse bench: {flag} needs at least one positive integer, got {text!r}")
    return tuple(values)


def _device(command: str, name: str) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UsageError(f"{command}: --device must be cpu, cuda or cuda:N, got {name!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"{command}: --device must be cpu, cuda or cuda:N, got {name!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"{command}: --device {name} asked for, but PyTorch sees no CUDA device")
    return device


def _check_workload(name: str, data_dir: str | None) -> None:
    """A workload name the suite can build: a preset, a real graph (in ``data_dir`` when
    given), or an existing graph file of a known kind."""
    from . import datasets
    from .datasets.real import _SUFFIXES

    if name in datasets.PRESETS:
        return
    if name in datasets.REAL_GRAPHS:
        if data_dir is not None and not (Path(data_dir) / f"{name}.npz").is_file():
            raise UsageError(f"gsparse bench: {name}.npz is not in --data-dir {data_dir}")
        return
    path = Path(name)
    if path.suffix.lower() in _SUFFIXES:
        if not path.is_file():
            raise UsageError(f"gsparse bench: no such graph file: {name}")
        return
    raise UsageError(f"gsparse bench: unknown workload {name!r}: expected a preset "
                     f"({', '.join(sorted(datasets.PRESETS))}), a suite ({', '.join(datasets.SUITES)}), "
                     f"a real graph ({', '.join(datasets.REAL_GRAPHS)}) or a graph file "
                     f"({', '.join(_SUFFIXES)})")


def bench(args: argparse.Namespace) -> int:
    """Run the benchmark suite, print one line per cell, write JSON, Markdown and PNGs.

    Exits 1 when a gsparse result (default path or a swept schedule) failed its check or
    raised; a baseline's failure (out of memory, unsupported dtype) is only reported.
    """
    from . import datasets
    from ._progress import Progress
    from .bench import report, runner

    device = _device("gsparse bench", args.device)
    if args.data_dir is not None and not Path(args.data_dir).is_dir():
        raise UsageError(f"gsparse bench: --data-dir {args.data_dir} is not a folder")
    workloads, features, heads, max_edges, budget = _BENCH_DEFAULTS[(device.type, args.quick)]
    names = tuple(w for name in _names(args.workloads if args.workloads is not None else workloads)
                  for w in datasets.SUITES.get(name, (name,)))
    if args.workloads is None and args.data_dir is not None:
        # The default set names real graphs; a --data-dir without some of them runs
        # without those and says so.
        missing = [w for w in names if w in datasets.REAL_GRAPHS
                   and not (Path(args.data_dir) / f"{w}.npz").is_file()]
        if missing:
            print(f"real graphs {missing} not found in {args.data_dir}; running without them")
            names = tuple(w for w in names if w not in missing)
    if not names:
        raise UsageError("gsparse bench: --workloads names no workload")
    for name in names:
        _check_workload(name, args.data_dir)
    for flag, value in (("--scale", args.scale), ("--budget-ms", args.budget_ms)):
        if value is not None and not value > 0:
            raise UsageError(f"gsparse bench: {flag} must be positive, got {value}")
    if args.max_edges is not None and args.max_edges < 1:
        raise UsageError(f"gsparse bench: --max-edges must be a positive integer, got {args.max_edges}")
    ops, dtypes = _names(args.ops), _names(args.dtypes)
    for flag, values, allowed in (("--ops", ops, tuple(runner.CASES)), ("--dtypes", dtypes, tuple(runner.DTYPES))):
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            raise UsageError(f"gsparse bench: {flag} takes comma-separated names among "
                             f"{', '.join(allowed)}, got {', '.join(map(repr, bad)) or 'none'}")
    try:
        config = runner.Config(
            ops=ops,
            workloads=names,
            feature_lens=_positive_ints("--features", args.features if args.features is not None else features),
            heads=_positive_ints("--heads", args.heads if args.heads is not None else heads),
            dtypes=dtypes,
            device=str(device),
            scale=args.scale,
            max_edges=args.max_edges if args.max_edges is not None else max_edges,
            sweep=args.sweep or args.sweep_all,
            sweep_all=args.sweep_all,
            budget_s=budget if args.budget_ms is None else args.budget_ms / 1e3,
            seed=args.seed,
            data_dir=args.data_dir,
        )
    except ValueError as e:
        raise UsageError(f"gsparse bench: {e}") from None
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"gsparse bench: cannot write to --out {args.out}: {e.strerror}") from None

    def checkpoint(partial: dict) -> None:
        (out / "results.json").write_text(json.dumps(partial, indent=1))

    with Progress(runner.cell_count(config), "gsparse bench", "cell") as bar:
        try:
            doc = runner.run_suite(config, progress=bar.write, checkpoint=checkpoint, on_cell=bar.update)
        except runner.WorkloadError as e:
            raise UsageError(f"gsparse bench: {e}") from None
    paths = report.write_report(doc, out)
    print(f"wrote {paths['json']}, {paths['markdown']} and {len(paths['plots'])} plots in {args.out} "
          f"({doc['wall_s']:.0f} s)")
    if "plots_skipped" in paths:
        print(f"no plots: {paths['plots_skipped']}")
    bad = [f"{c['op']}/{c['case']} {c['workload']} F={c['feature_len']} {c['dtype']}"
           for c in doc["cells"]
           if c["results"]["gsparse"]["status"] in ("wrong", "error")
           or any(s["status"] in ("wrong", "error") for s in (c.get("sweep") or {}).get("schedules", []))]
    for cell in bad:
        print(f"FAILED: gsparse gave a wrong result or an error in {cell}", file=sys.stderr)
    return 1 if bad else 0


def _bench_parser(sub: argparse._SubParsersAction) -> None:
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    b = sub.add_parser(
        "bench",
        help="benchmark gsparse against torch.sparse, PyG and the memory floor; write JSON, Markdown, PNGs",
        description="Run the benchmark suite: every op x workload x feature length x dtype, with "
                    "same-run baselines (torch.sparse, which runs cuSPARSE on a GPU; PyTorch "
                    "Geometric's scatter path; plain PyTorch ops), each output checked against a "
                    "float64 reference. Defaults depend on the device (smaller CPU workloads) and "
                    "on --quick.",
        epilog="Workloads. The presets are synthetic graphs with the row-length statistics of "
               "published datasets. reddit-like, proteins-like and products-like are the three "
               "graphs of the G-Sparse paper (a compiler of GNN sparse kernels whose schedules "
               "and tuner gsparse follows): suite 'gsparse'. The presets arxiv-like, collab-like, "
               "citation-like, ddi-like, ppa-like, youtube-like, amazon-like, yelp-like, "
               "wikikg2-like and am-like, with those three, are the 13 graphs of the SpMM "
               "optimisation report this project started from: suite 'spmm-report'. cora, "
               "citeseer and pubmed_cites are real graphs shipped with gsparse (or read from "
               "--data-dir).",
    )
    b.add_argument("--ops", default="spmm,sddmm,softmax",
                   help="comma-separated operator families: spmm, sddmm, softmax (default: all)")
    b.add_argument("--workloads",
                   help="comma-separated presets (reddit-like, products-like, ...; see below), suites "
                        "of presets (gsparse, spmm-report), real graphs (cora, citeseer, "
                        "pubmed_cites) or graph files (.npz, .mtx, .txt/.csv/.edges)")
    b.add_argument("--data-dir", help="folder to read the real graphs from (default: $GSPARSE_DATA_DIR, "
                                      "else the copies shipped with gsparse)")
    b.add_argument("--features", help="comma-separated feature lengths of spmm and sddmm")
    b.add_argument("--heads", help="comma-separated head counts of softmax (logits [E, heads])")
    b.add_argument("--dtypes", default="float32", help="comma-separated: float32, float64, float16, bfloat16")
    b.add_argument("--sweep", action="store_true",
                   help="also time every schedule of the pruned space (CUDA only): default vs best, "
                        "for the cases compared with torch.sparse (cuSPARSE)")
    b.add_argument("--sweep-all", action="store_true",
                   help="--sweep for every case with schedules (the other g-SpMM reducers and "
                        "weights, the multi-head g-SDDMM cases): 3-4x the device time")
    b.add_argument("--quick", action="store_true",
                   help="a small set of workloads and feature lengths: under 2 minutes")
    b.add_argument("--scale", type=float, help="node-count scale of the presets (default: full size on "
                                               "a GPU, about 2M edges on the CPU)")
    b.add_argument("--max-edges", type=int, help="shrink presets to about this many edges (unless --scale)")
    b.add_argument("--device", default=default_device, help=f"where to run (default: {default_device})")
    b.add_argument("--budget-ms", type=float, help="milliseconds of timed repeats per implementation")
    b.add_argument("--seed", type=int, default=0, help="seed of the synthetic graphs and inputs")
    b.add_argument("--out", default="bench-out", help="output folder (default: bench-out)")


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="gsparse", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    sub.add_parser("info", help="show device, CUDA/NVRTC availability, cache directory, versions")
    ex = sub.add_parser("example", help="run a small worked example and check it against float64")
    ex.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    _bench_parser(sub)
    tune_commands.add_parsers(sub)
    sub.add_parser("precompile", add_help=False,
                   help="fill the kernel cache ahead of time (gsparse precompile --help)")
    try:
        args, rest = parser.parse_known_args(argv)
        if args.command == "precompile":
            from .precompile import main as precompile_main

            return precompile_main(rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if args.command == "bench":
            return bench(args)
        if args.command in ("tune", "db"):
            return tune_commands.run(args)
        if args.command == "info":
            rows = info()
            width = max(map(len, rows))
            for key, value in rows.items():
                print(f"{key:<{width}}  {value}")
            return 0
        return example(args.device)
    except UsageError as e:
        print(one_line(e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
