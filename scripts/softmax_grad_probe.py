"""The fused edge softmax on many graphs: its schedules, and its gradient against the four
operations full graphs run.

    PYTHONPATH=src python3 scripts/softmax_grad_probe.py [--workloads reddit-like,...]
        [--heads 1,8] [--scale 1.0] [--out FILE.jsonl] [--device cuda]

Sampled blocks take the fused gradient (``gsparse.kernels.softmax.run_edge_softmax_backward``:
a row's lanes read ``y`` and ``dy`` twice), other graphs four operations (``dy * y``, a
g-SpMM of the row sums, a g-SDDMM spreading them back, a difference): the fused pass moves
about half the bytes, but a warp a row with one edge's loads in flight a lane was slow on
long rows and wasted lanes on short ones (docs/performance.md). On each workload (a preset,
or ``block:PRESET`` for the two blocks of a mini-batch sampled from it: 1024 seeds, fanouts
25 and 10), in CSR order and with its edges shuffled (edge ids, as ``from_edge_index`` of an
unsorted list gives), and each head count, this times in one process, on the same values,
the forward and the fused gradient under each schedule of :data:`SCHEDULES` and the four
operations: device time, the median of repeats after a warm-up
(:func:`gsparse.tune.measure.time_calls`), every output checked first (the same schedule's
flights bit for bit; the fused gradient against the four operations). Prints the best
schedules of each cell and the four operations over the best fused; ``--out`` writes one
JSON line per cell with every time. ``--device cpu`` checks the script on the CPU backend
(the fused gradient against the four operations only).
"""

from __future__ import annotations

import argparse
import json

import torch

import gsparse
from gsparse.backends import for_device
from gsparse.datasets import preset, sample_blocks
from gsparse.kernels import memory
from gsparse.kernels.softmax import SoftmaxTask, WarpPerRow, build_plan
from gsparse.tune.measure import time_calls

SCHEDULES = [WarpPerRow(lanes_per_row=r, edges_in_flight=f) for r in (4, 8, 16, 32) for f in (1, 2, 4, 8)]


def four_operations(g: gsparse.Graph, y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """What full graphs run: ``gy - y * Σ_row gy`` with ``gy = dy * y``."""
    gy = dy * y
    row_sum = gsparse.gspmm(g, "copy_rhs", "sum", None, gy)
    return gy - gsparse.gsddmm(g, "mul", y, row_sum, "e", "v")


def shuffled(g: gsparse.Graph, gen: torch.Generator) -> gsparse.Graph:
    """``g`` built from its edge list in a random order: the same rows, edge ids apart."""
    src, dst = g.edges()
    order = torch.randperm(g.num_edges, generator=gen, device=g.device)
    return gsparse.Graph.from_edge_index(torch.stack([src[order], dst[order]]),
                                         num_src=g.num_src, num_dst=g.num_dst)


def graphs(workload: str, scale: float, device: torch.device) -> list[tuple[str, gsparse.Graph]]:
    if workload.startswith("block:"):
        base = preset(workload.removeprefix("block:"), scale=scale, device=device)
        blocks = sample_blocks(base, 1024, [25, 10], seed=0)
        return [(f"{workload} hop {i}", b.graph) for i, b in enumerate(blocks)]
    return [(workload, preset(workload, scale=scale, device=device))]


def time_ms(fn, device: torch.device) -> float:
    return time_calls(fn, [()], device, budget_s=0.2, min_repeats=10).median_ms


def time_schedules(g, direction, values, out, device) -> dict[str, float]:
    """Each schedule's time for one direction, its output checked against the same lanes'
    first schedule's (the flights fold in the same order)."""
    task = SoftmaxTask(direction, out.dtype, g.index_dtype, g.eid is not None,
                       out.numel() // g.num_edges)
    first, times = {}, {}
    for schedule in SCHEDULES:
        plan = build_plan(g, task, schedule)
        run = lambda: plan(**values, **{"y" if direction == "forward" else "dz": out})  # noqa: E731
        run()
        if schedule.lanes_per_row not in first:
            first[schedule.lanes_per_row] = out.clone()
        elif not torch.equal(out, first[schedule.lanes_per_row]):
            raise AssertionError(f"{direction} {schedule}: not its lanes' first schedule's output")
        times[str(schedule)] = time_ms(run, device)
    return times


def best(times: dict[str, float], n: int = 3) -> str:
    top = sorted(times.items(), key=lambda kv: kv[1])[:n]
    default = times[str(WarpPerRow())]
    return ", ".join(f"{name} {ms:.3f}" for name, ms in top) + f" (w8 warp a row {default:.3f} ms)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="reddit-like,products-like,citation-like,youtube-like,"
                                                "arxiv-like,block:reddit-like")
    parser.add_argument("--heads", default="1,8")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out", default=None)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    gen = torch.Generator(device=device).manual_seed(0)
    sink = open(args.out, "w") if args.out else None
    for workload in args.workloads.split(","):
        for name, base in graphs(workload, args.scale, device):
            for order, g in (("csr order", base), ("shuffled", shuffled(base, gen))):
                for heads in (int(h) for h in args.heads.split(",")):
                    shape = (g.num_edges, heads)
                    logits = torch.randn(shape, generator=gen, device=device)
                    y = gsparse.edge_softmax(g, logits)
                    dy = torch.randn(shape, generator=gen, device=device)
                    fused = for_device(device).edge_softmax_grad(g, y, dy, "dst")
                    torch.testing.assert_close(fused, four_operations(g, y, dy), rtol=1e-4, atol=1e-6)
                    cell = f"{name} ({g.num_dst:,} rows, {g.num_edges:,} edges, {order}) heads={heads}"
                    if device.type != "cuda":
                        print(f"{cell}: fused gradient matches the four operations", flush=True)
                        continue
                    out = memory.allocate(shape, y.dtype, device)
                    forward = time_schedules(g, "forward", {"x": logits}, out, device)
                    backward = time_schedules(g, "backward", {"y": y, "dy": dy}, out, device)
                    four_ms = time_ms(lambda: four_operations(g, y, dy), device)
                    print(f"{cell}\n  forward:  {best(forward)}\n  gradient: {best(backward)}"
                          f"\n  four ops {four_ms:.3f} ms, over the best fused "
                          f"{four_ms / min(backward.values()):.2f}", flush=True)
                    if sink:
                        sink.write(json.dumps({
                            "graph": name, "order": order, "heads": heads, "rows": g.num_dst,
                            "edges": g.num_edges, "forward": forward, "gradient": backward,
                            "four_ops": four_ms}) + "\n")
                        sink.flush()


if __name__ == "__main__":
    main()
