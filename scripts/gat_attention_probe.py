"""GAT's attention fused (``gsparse.gat_attention``) against the operations it replaces in
``GATConv`` (g-SDDMM of the scores, LeakyReLU, edge softmax), on the same graphs and values.

    PYTHONPATH=src python3 scripts/gat_attention_probe.py [--graphs reddit-like,products-like,...]
        [--heads 1,8] [--dtypes float32,bfloat16]

For each graph (a benchmark preset; ``name@scale`` scales its node count, as the training
benchmark's workloads do), head count and dtype: the forward alone, and forward
plus backward (gradients of both scores, the upstream gradient fixed), each as device time,
the median of repeats after a warm-up (:func:`gsparse.tune.measure.time_calls`), outputs
and gradients compared first. Prints one line per cell with both times and unfused over
fused, then the geometric mean and range of that ratio per pass.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

import gsparse
from gsparse.datasets import preset
from gsparse.tune.measure import time_calls


def unfused(g, score_src, score_dst):
    logits = gsparse.gsddmm(g, "add", score_src, score_dst, "u", "v")
    return gsparse.edge_softmax(g, F.leaky_relu(logits, 0.2))


def fused(g, score_src, score_dst):
    return gsparse.gat_attention(g, score_src, score_dst, 0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="reddit-like,products-like,citation-like,arxiv-like,reddit-like@0.1")
    parser.add_argument("--heads", default="1,8")
    parser.add_argument("--dtypes", default="float32,bfloat16")
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
    for name_, values in ratios.items():
        print(f"{name_}: unfused / fused over {len(values)} cells, geometric mean "
              f"{math.exp(sum(map(math.log, values)) / len(values)):.3f}, range {min(values):.3f}-{max(values):.3f}")


if __name__ == "__main__":
    main()
