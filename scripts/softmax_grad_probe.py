"""The edge softmax's gradient on full graphs: the fused pass against the four operations.

    PYTHONPATH=src python3 scripts/softmax_grad_probe.py [--workloads reddit-like,products-like]
                                                        [--heads 1,4,8] [--scale 1.0] [--device cuda]

Sampled blocks take the fused pass (``gsparse.kernels.softmax.run_edge_softmax_backward``:
a warp a row, reading ``y`` and ``dy`` twice), other graphs four operations (``dy * y``, a
g-SpMM of the row sums, a g-SDDMM spreading them back, a difference): the fused pass moves
about half the bytes, but its row walk holds few loads in flight (``gsparse._ops._edge_softmax_grad``,
docs/performance.md, open problems). On each preset graph and head count this times both
on the same ``y`` (an edge softmax of random logits) and ``dy``, in one process: device time,
the median of repeats after a warm-up (:func:`gsparse.tune.measure.time_calls`), each result
checked against the other first. Prints the times, four-op over fused, and the fused
pass's bytes over its time (``y`` and ``dy`` read twice, ``dz`` written). ``--device cpu``
runs the same on the CPU backend (a check of the script, not a measurement).
"""

from __future__ import annotations

import argparse

import torch

import gsparse
from gsparse.backends import for_device
from gsparse.datasets import preset
from gsparse.tune.measure import time_calls


def four_operations(g: gsparse.Graph, y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """What full graphs run: ``gy - y * Σ_row gy`` with ``gy = dy * y``."""
    gy = dy * y
    row_sum = gsparse.gspmm(g, "copy_rhs", "sum", None, gy)
    return gy - gsparse.gsddmm(g, "mul", y, row_sum, "e", "v")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="reddit-like,products-like")
    parser.add_argument("--heads", default="1,4,8")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    for workload in args.workloads.split(","):
        g = preset(workload, scale=args.scale, device=device)
        gen = torch.Generator(device=device).manual_seed(0)
        for heads in (int(h) for h in args.heads.split(",")):
            shape = (g.num_edges, heads)
            y = gsparse.edge_softmax(g, torch.randn(shape, generator=gen, device=device))
            dy = torch.randn(shape, generator=gen, device=device)
            fused = lambda: for_device(device).edge_softmax_grad(g, y, dy, "dst")  # noqa: E731
            torch.testing.assert_close(fused(), four_operations(g, y, dy), rtol=1e-4, atol=1e-6)
            times = {name: time_calls(fn, [()], device, budget_s=0.3, min_repeats=10).median_ms
                     for name, fn in (("fused", fused), ("four ops", lambda: four_operations(g, y, dy)))}
            gigabytes = 5 * y.numel() * y.element_size() / 1e9  # y, dy twice; dz once
            print(f"{workload} ({g.num_edges:,} edges) heads={heads}: fused {times['fused']:.3f} ms "
                  f"({gigabytes / times['fused']:.2f} TB/s of its bytes), four ops {times['four ops']:.3f} ms, "
                  f"four ops / fused {times['four ops'] / times['fused']:.2f}", flush=True)


if __name__ == "__main__":
    main()
