"""Force a g-SpMM schedule and inspect it: its CUDA source, NVRTC's resource report, the tuner's view.

On CUDA tensors every g-SpMM runs a *schedule*, a frozen dataclass that shapes the
generated kernel (rows per block, lanes per row, vector width, ...). A call normally gets
the one the tuner's "model" policy picks; ``schedule=`` forces another. This example takes
GCN's aggregation, ``u_mul_e_sum`` (a weighted sum of neighbour features), on Cora and

1. describes the call's *task* (what the generated code is specialised on);
2. lists the schedule space the tuner ranks, pruned by LO-SpMM's constraints on this graph
   (``gsparse.kernels.spmm.pruned_space``), the hand rule's pick and the shipped cost
   model's pick (``gsparse.tune.select.model_choice``: what a call without ``schedule=``
   runs unless the tuning database holds a record for it, ``select.record_of``);
3. prints the CUDA source generated for the forced schedule
   (``gsparse.kernels.spmm.codegen.program``) and compiles it, and the other two picks,
   with NVRTC (``gsparse.runtime.compile_cuda``; no GPU needed, only the ``cuda`` extra)
   for ptxas's report: registers, shared memory, spills;
4. runs ``gsparse.gspmm(..., schedule=...)``: on a GPU the forced kernel, timed next to
   the two picks and checked against the CPU; on the CPU the PyTorch-ops backend, which
   accepts the argument and has no use for it.

Without a GPU the target is a fixed description of one (``--target``, an H100 by default).

    python examples/schedule.py                          # a few seconds on the CPU
    python examples/schedule.py --no-source --features 128 --target a100
    python examples/schedule.py --device cuda --schedule \\
        '{"skeleton": "spmm.one_pass", "rows_per_block": 4, "feature_lanes": 32, "edge_lanes": 1,
          "vector_width": 2, "outputs_per_thread": 1, "nnz_tile": 2, "index_tile": false,
          "degree_sorted": true}'
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch

import gsparse
from gsparse import kernels, runtime, target
from gsparse.kernels.spmm.plan import check_schedule
from gsparse.tune import select

TARGETS = {"h100": target.H100, "h200": target.H200, "a100": target.A100}
# Forced unless --schedule names another: in the space, and neither the hand rule's pick
# nor the model's on Cora with 64 features.
FORCED = gsparse.SpmmOnePass(rows_per_block=8, feature_lanes=16, edge_lanes=2, vector_width=4)


def resources_line(name: str, schedule: gsparse.SpmmSchedule, task, arch: str) -> str:
    """ptxas's report of every kernel of ``schedule``'s program for ``task``, built for ``arch``."""
    program = kernels.spmm.codegen.program(task.algorithm, schedule, task.num_features)
    binary = runtime.compile_cuda(program.source, arch=arch, context=program.context)
    kernels_ = "; ".join(f"{kernel}: {r.registers} registers, {r.shared_bytes} B static shared memory, "
                         f"{r.spill_stores} B spill stores, {r.spill_loads} B spill loads"
                         for kernel, r in binary.resources.items())
    return f"  {name:<10} {schedule!s:<28} {kernels_}"


def time_call(fn, repeats: int) -> float:
    """Median milliseconds of ``fn()`` on the GPU (each call waited for)."""
    fn()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=64, help="features per node (default 64)")
    parser.add_argument("--schedule", default=None,
                        help=f"the schedule to force, as JSON (schedule.to_json()); default {FORCED.to_json()}")
    parser.add_argument("--target", choices=sorted(TARGETS), default="h100",
                        help="the GPU to generate for without one (default h100); --device cuda uses its own")
    parser.add_argument("--no-source", action="store_true", help="do not print the generated source")
    parser.add_argument("--repeats", type=int, default=50, help="timed calls of each schedule on a GPU (default 50)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA device is visible to PyTorch")
    try:
        forced = FORCED if args.schedule is None else gsparse.schedule_from_json(args.schedule)
    except ValueError as error:
        parser.error(f"--schedule: {error}")
    if not isinstance(forced, gsparse.SpmmSchedule):
        parser.error(f"--schedule must be a g-SpMM schedule, got a {type(forced).__name__}")
    gpu = TARGETS[args.target] if device.type == "cpu" else gsparse.Target.of(device)

    data = gsparse.datasets.cora()
    graph = gsparse.Graph.from_edge_index(data.edge_index, num_nodes=data.num_nodes).to(device)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(graph.num_src, args.features, generator=generator).to(device)
    w = torch.rand(graph.num_edges, generator=generator).to(device)  # one weight per edge

    # 1. The task: the front end hands the backend operands of the output's rank, so the
    # edge weights [E] become [E, 1].
    task = kernels.spmm.task_for(graph, "mul", "sum", x, w[:, None], (args.features,))
    print(f"call     gsparse.u_mul_e_sum(g, x, w) on Cora: {graph.num_dst} rows, {graph.num_edges} edges, "
          f"{args.features} features")
    print(f"task     {task}")
    print(f"target   {gpu.name} ({gpu.arch}, {gpu.sms} SMs)")
    try:
        check_schedule(task, forced)
    except ValueError as error:
        parser.error(f"--schedule cannot run this call: {error}")

    # 2. The space and the two picks.
    pruning = kernels.spmm.pruned_space(task, graph.stats, gpu)
    hand_rule = kernels.spmm.default_schedule(task, graph.stats, gpu)
    model_pick = select.model_choice("spmm", graph, task, gpu)
    removed = {name: n for name, n in pruning.alone().items() if n}
    print(f"\nschedule space: {len(pruning.candidates)} candidates, {len(pruning.kept)} kept by the pruning"
          + (f" (removed alone by each constraint: {removed})" if removed else ""))
    names = [str(s) for s in pruning.kept]
    for i in range(0, len(names), 4):
        print("  " + "  ".join(f"{name:<28}" for name in names[i:i + 4]).rstrip())
    record = select.record_of("spmm", graph, task, gpu)
    print(f"hand rule's pick    {hand_rule}")
    print(f"model's pick        {model_pick}"
          + ("   (what the call runs without schedule=)" if record is None else ""))
    if record is not None:
        print(f"tuning record       {gsparse.schedule_from_json(record.schedule_json)}   (wins over the model: "
              f"what the call runs without schedule=)")
    print(f"forced              {forced}   ({'in' if forced in pruning.kept else 'not in'} the pruned space)")
    print(f"                    {forced.to_json()}")

    # 3. The generated source and NVRTC's report.
    program = kernels.spmm.codegen.program(task.algorithm, forced, task.num_features)
    if not args.no_source:
        print(f"\n--- generated CUDA for {forced} (kernels: {', '.join(program.kernels)}) ---")
        print(program.source.rstrip())
        print("--- end of source ---")
    if runtime.nvrtc_version() is None:
        print("\nNVRTC not found: install gsparse[cuda] for the resource report")
    else:
        print(f"\nptxas's report, built for {gpu.arch} with NVRTC {'.'.join(map(str, runtime.nvrtc_version()))}:")
        for name, schedule in (("forced", forced), ("hand rule", hand_rule), ("model", model_pick)):
            print(resources_line(name, schedule, task, gpu.arch))

    # 4. The call with the forced schedule.
    reference = gsparse.u_mul_e_sum(graph.to("cpu"), x.cpu(), w.cpu())
    out = gsparse.gspmm(graph, "mul", "sum", x, w, schedule=forced).cpu()
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-4)
    error = (out - reference).abs().max().item()
    if device.type == "cpu":
        print(f"\ngspmm(..., schedule={forced}) on the CPU: PyTorch ops (the schedule is for CUDA kernels); "
              f"max |diff| from the default call {error:.1e}")
        return 0
    print(f"\ngspmm(..., schedule=...) on {gpu.name}: max |diff| from the CPU {error:.1e}; median of {args.repeats}")
    for name, schedule in (("forced", forced), ("hand rule", hand_rule), ("model", model_pick)):
        ms = time_call(functools.partial(gsparse.gspmm, graph, "mul", "sum", x, w, schedule=schedule), args.repeats)
        print(f"  {name:<10} {schedule!s:<28} {1e3 * ms:.1f} us")
    ms = time_call(lambda: gsparse.u_mul_e_sum(graph, x, w), args.repeats)
    print(f"  {'(none)':<10} {'u_mul_e_sum(g, x, w)':<28} {1e3 * ms:.1f} us (the model's pick, by the usual path)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
