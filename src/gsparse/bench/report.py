"""Reports of a benchmark run: the JSON document, a Markdown table of ratios, PNG plots.

Every ratio is derived from the raw times of the JSON document, so a report can be
rebuilt from a stored run (:func:`write_report` on :func:`load`'s result). Ratios read
"how many times faster gsparse is": ``baseline time / gsparse time``; the fraction of
the floor is ``floor time / gsparse time`` (1 would be the memory system's limit). Swept
cells also get a table of what each pruning constraint removed from their space.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..kernels.pruning import CONSTRAINTS
from .baselines import GSPARSE, PYG, PYTORCH, TORCH_SPARSE
from .runner import FORMAT

__all__ = ["ratios", "markdown", "write_plots", "write_report", "load"]

# Format 1 named the baselines differently; load() renames them.
_FORMAT_1 = "gsparse-bench/1"
_FORMAT_1_NAMES = {"cusparse": TORCH_SPARSE, "pyg": PYG, "torch": PYTORCH}


def _from_format_1(doc: dict[str, Any]) -> dict[str, Any]:
    def rename(name: str) -> str:
        return _FORMAT_1_NAMES.get(name, name)

    for cell in doc["cells"]:
        cell["baseline"] = rename(cell["baseline"])
        cell["results"] = {rename(k): v for k, v in cell["results"].items()}
        if "ratios" in cell:
            cell["ratios"] = {(f"vs_{rename(k[3:])}" if k.startswith("vs_") else k): v
                              for k, v in cell["ratios"].items()}
    doc["format"] = FORMAT
    return doc


def _time(cell: dict[str, Any], name: str) -> float | None:
    entry = cell["results"].get(name)
    return entry["median_ms"] if entry and entry["status"] == "ok" else None


def ratios(cell: dict[str, Any]) -> dict[str, float | None]:
    """Derived numbers of one cell; ``None`` where a time is missing.

    Keys: ``vs_<baseline>`` for every baseline measured (its time over ours),
    ``floor_fraction`` (floor over ours), ``default_over_best`` and ``best_vs_baseline``
    (with a sweep).
    """
    ours = _time(cell, GSPARSE)
    out: dict[str, float | None] = {}
    for name in cell["results"]:
        if name != GSPARSE:
            theirs = _time(cell, name)
            out[f"vs_{name}"] = theirs / ours if ours and theirs else None
    out["floor_fraction"] = cell["floor"]["floor_ms"] / ours if ours else None
    sweep = cell.get("sweep") or {}
    best = sweep.get("best_ms")
    if best:
        out["default_over_best"] = ours / best if ours else None
        base = _time(cell, cell["baseline"])
        out["best_vs_baseline"] = base / best if base else None
    return out


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A result document written by :func:`write_report` (an older format is converted);
    ValueError for anything else."""
    try:
        doc = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON: {e}") from None
    if isinstance(doc, dict) and doc.get("format") == _FORMAT_1:
        return _from_format_1(doc)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"{path} is not a gsparse benchmark result (format {FORMAT!r}), found {found!r}")
    return doc


def _groups(doc: dict[str, Any]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for cell in doc["cells"]:
        groups[(cell["op"], cell["case"], cell["dtype"])].append(cell)
    return groups


def _fmt_ms(cell: dict[str, Any], name: str) -> str:
    entry = cell["results"].get(name)
    if entry is None:
        return "—"
    return f"{entry['median_ms']:.4g}" if entry["status"] == "ok" else entry["status"]


def _fmt_spread(cell: dict[str, Any], name: str) -> str:
    entry = cell["results"].get(name)
    if entry is None or entry["status"] != "ok" or "spread" not in entry:
        return "—"
    return f"±{entry['spread'] / 2:.0%}"


def _fmt_ratio(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:.0%}" if percent else f"{value:.2f}x"


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _summary(cells: list[dict[str, Any]], key: str, label: str) -> str | None:
    values = [r[key] for r in map(ratios, cells) if r.get(key)]
    if not values:
        return None
    return f"{label}: geometric mean {_geomean(values):.2f}x, min {min(values):.2f}x, max {max(values):.2f}x " \
           f"over {len(values)} cells"


# Column names of the pruning constraints, in their order (LO-SpMM's names where it has them).
_CONSTRAINT_NAMES = {"utilisation": "utilisation", "row_balance": "COV_row", "column_waste": "WASTE_col",
                     "registers": "registers"}


def _pruning_table(cells: list[dict[str, Any]], length: str) -> list[str]:
    """The pruning of each swept cell's space: its candidates, what each constraint removed
    after those before it, and what was measured (empty when no cell recorded one)."""
    pruned = [c for c in cells if (c.get("sweep") or {}).get("pruning")]
    if not pruned:
        return []
    names = [_CONSTRAINT_NAMES[c] for c in CONSTRAINTS]
    lines = ["", "Pruning before the sweep: candidates of the space, those each constraint removed "
             "(in this order, each from what the ones before it left; the hand rule's pick is never "
             "removed) and those measured.", "",
             f"| workload | {length} | space | " + " | ".join(names) + " | measured |",
             "|" + "|".join(["---"] * (len(names) + 4)) + "|"]
    for cell in sorted(pruned, key=lambda c: (c["workload"], c["feature_len"])):
        pruning = cell["sweep"]["pruning"]
        counts = [pruning["in_order"].get(c) for c in CONSTRAINTS]
        lines.append(f"| {cell['workload']} | {cell['feature_len']} | {pruning['candidates']} | "
                     + " | ".join("—" if n is None else str(n) for n in counts)
                     + f" | {cell['sweep'].get('size', pruning['kept'])} |")
    return lines


def markdown(doc: dict[str, Any]) -> str:
    """The Markdown report: environment, one table of ratios per case and dtype, workloads."""
    env, bw = doc["environment"], doc["bandwidth"]
    device = env.get("gpu") or f"CPU ({env.get('platform')})"
    lines = [
        "# gsparse benchmark",
        "",
        f"{device} · torch {env['torch']} (CUDA {env.get('torch_cuda') or 'none'}) · gsparse {env['gsparse']} · "
        f"{doc['created']} · {doc.get('wall_s', 0):.0f} s",
        "",
        f"Measured at start: device copy {bw['copy_bytes_per_s'] / 1e9:.1f} GB/s, L2-resident gather "
        f"{bw['gather_bytes_per_s'] / 1e9:.1f} GB/s. Times are medians of the timed repeats, in "
        f"milliseconds (ms); `±` is half the spread of those repeats, (p90 − p10) / median / 2: "
        f"how far a typical repeat strays from the median (runs on a busy machine can differ "
        f"by more). Every output was checked against a float64 reference before its time was "
        f"kept. `x B` = B's time / gsparse time (above 1: gsparse is faster); `% floor` = memory "
        f"floor time / gsparse time (100%: the memory system's limit). Baselines: "
        f"{TORCH_SPARSE} (`torch.sparse.mm` / `sampled_addmm`: "
        f"{'cuSPARSE' if env.get('gpu') else 'PyTorch CPU sparse kernels'}), {PYG} "
        f"(message passing: {env['pyg_baseline']}), {PYTORCH} (scatter ops).",
    ]
    for (op, case, dtype), cells in _groups(doc).items():
        baselines = list(dict.fromkeys(n for c in cells for n in c["results"] if n != GSPARSE))
        swept = any((c.get("sweep") or {}).get("best_ms") for c in cells)
        length = "heads" if op == "softmax" else "F"
        header = ["workload", length, "gsparse ms", "±"]
        for name in baselines:
            header += [f"{name} ms", "±", f"x {name}"]
        header += ["floor ms", "% floor"]
        if swept:
            header += ["best ms", "default/best", "best schedule"]
        lines += ["", f"## {op}/{case} ({dtype})", "", "| " + " | ".join(header) + " |",
                  "|" + "|".join(["---"] * len(header)) + "|"]
        for cell in sorted(cells, key=lambda c: (c["workload"], c["feature_len"])):
            r = ratios(cell)
            row = [cell["workload"], str(cell["feature_len"]), _fmt_ms(cell, GSPARSE), _fmt_spread(cell, GSPARSE)]
            for name in baselines:
                row += [_fmt_ms(cell, name), _fmt_spread(cell, name), _fmt_ratio(r.get(f"vs_{name}"))]
            row += [f"{cell['floor']['floor_ms']:.4g}", _fmt_ratio(r["floor_fraction"], percent=True)]
            if swept:
                sweep = cell.get("sweep") or {}
                best = sweep.get("best_ms")
                row += [f"{best:.4g}" if best else sweep.get("status", "—"),
                        _fmt_ratio(r.get("default_over_best")), f"`{sweep['best']}`" if best else "—"]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        for name in baselines:
            if s := _summary(cells, f"vs_{name}", f"gsparse vs {name}"):
                lines.append(f"- {s}")
        if swept:
            base = cells[0]["baseline"]
            for key, label in (("best_vs_baseline", f"best schedule vs {base}"),
                               ("default_over_best", "default / best")):
                if s := _summary(cells, key, label):
                    lines.append(f"- {s}")
        lines += [f"- sweep {status}: {message}" for status, message in dict.fromkeys(
            (c["sweep"]["status"], c["sweep"].get("message", "")) for c in cells
            if c.get("sweep") and c["sweep"]["status"] != "ok")]
        failed = [f"{c['workload']} {length}={c['feature_len']} {name}: {e['status']} ({e.get('message', '')})"
                  for c in cells for name, e in c["results"].items() if e["status"] not in ("ok", "OOM")]
        lines += [f"- failed: {f}" for f in failed]
        lines += _pruning_table(cells, length)
    lines += ["", "## Workloads", "", "| workload | rows | edges | row mean | row max | row COV | source |",
              "|---|---|---|---|---|---|---|"]
    for name, w in doc["workloads"].items():
        lines.append(f"| {name} | {w['num_dst']:,} | {w['num_edges']:,} | {w['row_mean']:.1f} | "
                     f"{w['row_max']:,} | {w['row_cov']:.2f} | {w['source']} |")
    return "\n".join(lines) + "\n"


def _ratio_ticks(values: list[float]) -> list[float]:
    """Readable ticks for a log axis of ratios spanning ``values`` and 1: the densest of the
    1-2-3-5, 1-2-5 and powers-of-ten steps that has at most ten ticks, and at least three
    (over a narrow range, finer steps) so that the axis always reads."""
    finite = [v for v in values if v and math.isfinite(v) and v > 0] + [1.0]
    lo, hi = min(finite) / 1.15, max(finite) * 1.15
    steps = ((1, 1.1, 1.2, 1.3, 1.5, 1.7, 2, 2.5, 3, 4, 5, 6, 7, 8, 9), (1, 1.5, 2, 3, 5), (1, 2, 5), (1,))
    choices = [[m * 10.0 ** e for e in range(-4, 5) for m in mantissas if lo <= m * 10.0 ** e <= hi]
               for mantissas in steps]
    for ticks in choices[1:]:
        if 3 <= len(ticks) <= 10:
            return ticks
    fine = choices[0]
    if len(fine) <= 10:
        return fine if len(fine) >= 3 else sorted({lo, 1.0, hi} | set(fine))
    return choices[-1]


def _ratio_limits(values: list[float], ticks: list[float]) -> tuple[float, float]:
    """The log axis's span: every tick and every point, with room for the labels above.
    A point just below the lowest tick (0.9x under a tick at 1x) stays in view."""
    both = [*ticks, *values]
    return min(both) / 1.1, max(both) * 1.25


def _label_points(ax: Any, xs: list[float], ys: list[float], color: Any, fmt: str) -> None:
    """Write each point's value next to it (``fmt`` of the value), in the line's colour."""
    for x, y in zip(xs, ys):
        if y is not None and math.isfinite(y):
            ax.annotate(fmt.format(y), (x, y), textcoords="offset points", xytext=(0, 5), ha="center",
                        fontsize=7, color=color)


def _tick_label(value: float) -> str:
    return f"{value:.3g}x"


def write_plots(doc: dict[str, Any], out_dir: str | os.PathLike[str]) -> list[Path]:
    """One PNG per case and dtype: speedup over the case's baseline, and fraction of the floor.

    Left panel: baseline time / gsparse time against the feature length (log-log), one
    line per workload (dashed: the best schedule of a sweep), each point labelled with its
    value. Right panel: memory floor time / gsparse time, in percent. Returns the paths
    written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter, PercentFormatter

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for (op, case, dtype), cells in _groups(doc).items():
        baseline = cells[0]["baseline"]
        by_workload: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for cell in cells:
            by_workload[cell["workload"]].append(cell)
        fig, (speed, floor) = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
        colors = plt.get_cmap("tab10")
        lengths = sorted({c["feature_len"] for c in cells})
        for n, (workload, wcells) in enumerate(by_workload.items()):
            wcells.sort(key=lambda c: c["feature_len"])
            xs = [c["feature_len"] for c in wcells]
            rs = [ratios(c) for c in wcells]
            color = colors(n % 10)

            def series(key: str) -> list[float]:
                return [r.get(key) if r.get(key) else math.nan for r in rs]

            speedups = series(f"vs_{baseline}")
            speed.plot(xs, speedups, "o-", color=color, label=workload)
            _label_points(speed, xs, speedups, color, "{:.2g}x")
            if any(r.get("best_vs_baseline") for r in rs):
                speed.plot(xs, series("best_vs_baseline"), "s--", color=color, alpha=0.6,
                           label=f"{workload} (best schedule)")
            fractions = [100 * v for v in series("floor_fraction")]
            floor.plot(xs, fractions, "o-", color=color, label=workload)
            _label_points(floor, xs, fractions, color, "{:.0f}%")
        length = "heads" if op == "softmax" else "feature length F"
        for ax in (speed, floor):
            ax.set_xscale("log", base=2)
            ax.set_xticks(lengths, [str(f) for f in lengths])
            ax.set_xlabel(length)
            ax.grid(True, which="both", alpha=0.3)
        speed.axhline(1.0, color="black", linewidth=1)
        speed.set_yscale("log")
        plotted = [v for line in speed.get_lines() for v in line.get_ydata()
                   if v and math.isfinite(v) and v > 0]
        ticks = _ratio_ticks(plotted)
        speed.set_yticks(ticks)
        speed.set_ylim(*_ratio_limits(plotted, ticks))
        speed.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _tick_label(v)))
        speed.yaxis.set_minor_formatter(NullFormatter())
        speed.set_ylabel(f"speedup: {baseline} time / gsparse time")
        speed.set_title(f"{op}/{case} {dtype}: gsparse vs {baseline} (above 1: gsparse faster)", fontsize=10)
        speed.legend(fontsize=8)
        top = max((100 * (r.get("floor_fraction") or 0) for r in map(ratios, cells)), default=0)
        floor.set_ylim(0, max(105.0, top * 1.15))
        floor.axhline(100.0, color="black", linewidth=1)
        floor.yaxis.set_major_formatter(PercentFormatter())
        floor.set_ylabel("memory floor time / gsparse time (%)")
        floor.set_title(f"{op}/{case} {dtype}: fraction of the memory floor", fontsize=10)
        floor.legend(fontsize=8)
        device = doc["environment"].get("gpu") or "CPU"
        fig.suptitle(f"gsparse {doc['environment']['gsparse']} on {device}", fontsize=10)
        path = out_dir / f"{op}_{case}_{dtype}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def write_report(doc: dict[str, Any], out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Write ``results.json`` (with derived ratios), ``report.md`` and the PNGs into ``out_dir``.

    Returns the paths: ``{"json": Path, "markdown": Path, "plots": [Path, ...]}``; without
    matplotlib (``pip install 'gsparse[bench]'``) there are no plots and ``"plots_skipped"``
    says why, so a long run never loses its numbers to a missing plotting library.
    """
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"doc must be a result document of format {FORMAT!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for cell in doc["cells"]:
        cell["ratios"] = ratios(cell)
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps(doc, indent=1, sort_keys=False))
    md_path = out_dir / "report.md"
    md_path.write_text(markdown(doc))
    paths: dict[str, Any] = {"json": json_path, "markdown": md_path}
    if importlib.util.find_spec("matplotlib") is None:
        return {**paths, "plots": [], "plots_skipped": "matplotlib is not installed (pip install 'gsparse[bench]')"}
    return {**paths, "plots": write_plots(doc, out_dir)}
