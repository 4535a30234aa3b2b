"""GAT's attention fused (``gsparse.gat_attention``) against the operations it replaces in
``GATConv`` (g-SDDMM of the scores, LeakyReLU, edge softmax), on the same graphs and values.

    PYTHONPATH=src python3 scripts/gat_attention_probe.py [--graphs reddit-like,products-like,...]
        [--heads 1,8] [--dtypes float32,bfloat16] [--schedules [--out FILE.jsonl]]

For each graph (a benchmark preset; ``name@scale`` scales its node count, as the training
benchmark's workloads do), head count and dtype: the forward alone, and forward
plus backward (gradients of both scores, the upstream gradient fixed), each as device time,
the median of repeats after a warm-up (:func:`gsparse.tune.measure.time_calls`), outputs
and gradients compared first. Prints one line per cell with both times and unfused over
fused, then the geometric mean and range of that ratio per pass. ``--schedules`` adds, per
cell, the fused kernels alone (forward; backward without the sources' g-SpMM) under the hand
rule's schedule and under each of :data:`SWEEP` (the forward's with its logits kept in the
output and without), and the edge softmax's kernels over the same logits under its hand
rule: whether a loss is the rule's or the kernel's. ``--out`` appends every time of each
cell as a JSON line (what ``scripts/gat_rule_report.py`` reads).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace

import torch
import torch.nn.functional as F

import gsparse
from gsparse.datasets import preset
from gsparse.kernels.softmax import SoftmaxTask, WarpPerRow, build_plan, default_schedule
from gsparse.target import Target
from gsparse.tune.measure import time_calls

SWEEP = [WarpPerRow(lanes_per_row=r, edges_in_flight=f) for r in (2, 4, 8, 16, 32) for f in (1, 2, 4, 8)]


def unfused(g, score_src, score_dst):
    logits = gsparse.gsddmm(g, "add", score_src, score_dst, "u", "v")
    return gsparse.edge_softmax(g, F.leaky_relu(logits, 0.2))


def fused(g, score_src, score_dst):
    return gsparse.gat_attention(g, score_src, score_dst, 0.2)


def kernel_times(g, src, dst, dy, y, record: dict) -> str:
    """The fused kernels alone under the hand rule and the best of :data:`SWEEP`, and the edge
    softmax's over the same logits (as the unfused path computes them), as one line; every
    time goes into ``record`` too."""
    device, heads = src.device, src.shape[1]
    target = Target.of(device)
    logits = F.leaky_relu(gsparse.gsddmm(g, "add", src.detach(), dst.detach(), "u", "v"), 0.2)
    out = torch.empty_like(y)
    dz, d_dst = torch.empty_like(y), torch.empty_like(dst)
    scores = {"score_src": src.detach(), "score_dst": dst.detach(), "edge_scores": None,
              "masked": None, "negative_slope": 0.2}
    operands = {
        ("gat", "forward"): {**scores, "y": out},
        ("gat", "backward"): {**scores, "y": y, "dy": dy, "dz": dz, "d_dst": d_dst},
        ("given", "forward"): {"x": logits, "y": out},
        ("given", "backward"): {"y": y, "dy": dy, "dz": dz},
    }
    line = ""
    for (logit_kind, direction), values in operands.items():
        task = SoftmaxTask(direction, y.dtype, g.index_dtype, g.eid is not None, heads, logit_kind)
        rule = default_schedule(task, g.stats, target)
        sweep = []
        if logit_kind == "gat":
            kept = (False, True) if direction == "forward" else (False,)
            sweep = [replace(s, logits_in_output=k) for s in SWEEP for k in kept]
        times = {}
        for schedule in dict.fromkeys([rule, *sweep]):
            plan = build_plan(g, task, schedule)
            plan(**values)  # compiled and loaded before its timed calls, which follow at once
            times[schedule] = time_calls(lambda plan=plan: plan(**values), [()], device,
                                         warmup=0, min_repeats=7).median_ms
        record[f"{logit_kind} {direction}"] = {"rule": str(rule), "times": {str(k): v for k, v in times.items()}}
        line += f" {logit_kind} {direction}: rule {rule} {times[rule]:.4f} ms"
        for k in sorted({s.logits_in_output for s in sweep}):
            best = min((s for s in times if s.logits_in_output == k), key=times.get)
            line += f", best {best} {times[best]:.4f} ms ({times[rule] / times[best]:.2f}x)"
        line += ";"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="reddit-like,products-like,citation-like,arxiv-like,reddit-like@0.1")
    parser.add_argument("--heads", default="1,8")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--schedules", action="store_true", help="time the fused kernels under a sweep too")
    parser.add_argument("--out", help="with --schedules: a JSON line per cell with every time, appended here")
    args = parser.parse_args()
    device = torch.device("cuda")
    gen = torch.Generator(device=device).manual_seed(0)
    ratios: dict[str, list[float]] = {"forward": [], "forward+backward": []}
    for spec in args.graphs.split(","):
        name, _, scale = spec.partition("@")
        g = preset(name, scale=float(scale or 1), device=device)
        for heads in map(int, args.heads.split(",")):
            for dtype in (getattr(torch, d) for d in args.dtypes.split(",")):
                src = torch.randn(g.num_src, heads, generator=gen, device=device).to(dtype).requires_grad_()
                dst = torch.randn(g.num_dst, heads, generator=gen, device=device).to(dtype).requires_grad_()
                dy = torch.randn(g.num_edges, heads, generator=gen, device=device).to(dtype)
                for run in (unfused, fused):  # compare the outputs and gradients first
                    out = run(g, src, dst)
                    grads = torch.autograd.grad(out, (src, dst), dy)
                    if run is unfused:
                        reference = (out.detach(), grads)
                tolerance = {"rtol": 2e-2, "atol": 2e-3} if dtype != torch.float32 else {"rtol": 1e-4, "atol": 1e-5}
                torch.testing.assert_close(out.detach(), reference[0], **tolerance)
                for a, b in zip(grads, reference[1]):
                    torch.testing.assert_close(a, b, **tolerance)
                cells = {}
                for label, run in (("unfused", unfused), ("fused", fused)):
                    def forward(run=run):
                        with torch.no_grad():
                            run(g, src, dst)

                    def both(run=run):
                        torch.autograd.grad(run(g, src, dst), (src, dst), dy)

                    cells[label] = [time_calls(f, [()], device, budget_s=0.3, min_repeats=10).median_ms
                                    for f in (forward, both)]
                line = f"{spec} {heads} heads {str(dtype)[6:]}, {g.num_edges:,} edges:"
                for i, name_ in enumerate(ratios):
                    ratio = cells["unfused"][i] / cells["fused"][i]
                    ratios[name_].append(ratio)
                    line += (f" {name_} unfused {cells['unfused'][i]:.4f} ms, fused {cells['fused'][i]:.4f} ms"
                             f" ({ratio:.2f}x);")
                print(line, flush=True)
                if args.schedules:
                    y = fused(g, src, dst).detach()
                    record = {"graph": spec, "heads": heads, "dtype": str(dtype)[6:], "edges": g.num_edges,
                              "rows": g.num_dst, "mean": g.stats.rows.mean}
                    print(f"  kernels:{kernel_times(g, src, dst, dy, y, record)}", flush=True)
                    if args.out:
                        with open(args.out, "a") as out:
                            out.write(json.dumps(record) + "\n")
    for name_, values in ratios.items():
        print(f"{name_}: unfused / fused over {len(values)} cells, geometric mean "
              f"{math.exp(sum(map(math.log, values)) / len(values)):.3f}, range {min(values):.3f}-{max(values):.3f}")


if __name__ == "__main__":
    main()
