"""Time the output-tiled g-SpMM skeleton and its variants against cuSPARSE, in one process.

    PYTHONPATH=src python3 scripts/spmm_output_tiled_probe.py [--workloads products-like,...]
        [--features 1,2] [--variants base,groups2,groups4,groups2+nostage] [--budget-ms 60]

copy_lhs + sum, fp32, on the synthetic presets built on the GPU. For each cell: cuSPARSE
(``torch.sparse.mm`` on the same CSR), the default schedule, and the output-tiled schedule
at 16 and 32 warps per block in each variant, its parts joined by ``+``: ``groupsN``, N
column groups; ``roundN``, N edge words per lane per round; and ablations, which cut a part
of the kernel out to time the rest (their outputs are wrong, so not checked): ``nostage``
(no tile copies), ``nowalk`` (edges not folded), ``nowords`` (no edges at all), ``noscan``
(no carry scan). Every other output is checked against a float64 cuSPARSE product before
its time is kept. Also reports the time to build the edge layout (once per graph and
tiling). Medians of CUDA-event times after a warm-up (gsparse.bench.timing).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

import gsparse
from gsparse import datasets
from gsparse.bench.timing import time_calls
from gsparse.kernels import spmm as spmm_kernels
from gsparse.kernels import spmm_output_tiled as output_tiled
from gsparse.kernels.common import Layout
from gsparse.kernels.spmm import default_schedule
from gsparse.kernels.spmm_codegen import SpmmAlgorithm

_BASE_GENERATE = output_tiled.generate.__wrapped__
# Ablations: a part of the kernel cut out, to time the rest (their outputs are wrong).
_ABLATIONS = {
    "nostage": [("const long long bytes = aligned ? count * (long long)sizeof(T) / 16 * 16 : 0;",
                 "const long long bytes = 0; count = 0;")],
    "nowalk": [("row[j] = k0 + j < mine ?", "row[j] = false ?"),
               ("const A message = k0 + j < mine ?", "const A message = false ?")],
    "nowords": [("mine = lane < n - 32 * (steps - 1) ? steps : steps - 1;", "mine = steps = 0;")],
    "noscan": [("for (int d = 1; d < 32; d *= 2) {", "for (int d = 32; d < 32; d *= 2) {")],
}


def _variant(name: str):
    """A generate() for variant ``name``."""

    def generate(algorithm, schedule, num_features):
        saved = output_tiled._ROUND
        for part in name.split("+"):
            if part.startswith("round"):
                output_tiled._ROUND = int(part.removeprefix("round"))
        try:
            source = _BASE_GENERATE(algorithm, schedule, num_features)
        finally:
            output_tiled._ROUND = saved
        patches = [patch for part in name.split("+") for patch in _ABLATIONS.get(part, [])]
        for before, after in patches:
            assert before in source, (name, before)
            source = source.replace(before, after)
        return source

    return generate


def _launch(g, algorithm, schedule, variant: str):
    output_tiled.generate = _variant(variant)
    spmm_kernels._output_tiled_kernels.cache_clear()
    try:
        plan = spmm_kernels._output_tiled_plan(g, algorithm, schedule,
                                               output_tiled.features_covered(schedule),
                                               torch.cuda.current_device())
    finally:
        output_tiled.generate = _BASE_GENERATE
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="products-like,reddit-like,proteins-like")
    parser.add_argument("--features", default="1,2")
    parser.add_argument("--variants", default="base,groups2,groups4")
    parser.add_argument("--budget-ms", type=float, default=60)
    args = parser.parse_args()
    device = torch.device("cuda")
    budget = args.budget_ms / 1e3
    rows = []
    for name in args.workloads.split(","):
        start = time.perf_counter()
        g = datasets.preset(name, device=device)
        print(f"{name}: {g.num_dst} rows, {g.num_edges} edges, built in "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        for features in (int(f) for f in args.features.split(",")):
            x = torch.randn(g.num_src, features, device=device)
            values = torch.ones(g.num_edges, device=device)
            csr = torch.sparse_csr_tensor(g.rowptr.long(), g.col.long(), values,
                                          (g.num_dst, g.num_src))
            csr64 = torch.sparse_csr_tensor(g.rowptr.long(), g.col.long(), values.double(),
                                            (g.num_dst, g.num_src))
            expected = torch.sparse.mm(csr64, x.double())
            scale = float(expected.abs().max())

            def check(out, what):
                error = float((out.double() - expected).abs().max()) / max(scale, 1.0)
                assert error < 1e-5, f"{name} F={features} {what}: error {error:.3g}"

            cusparse = time_calls(lambda: torch.sparse.mm(csr, x), [()], device, budget_s=budget).median_ms
            default = default_schedule(g, features, torch.float32, 4, lhs_len=features,
                                       lhs_only=True)
            check(gsparse.gspmm(g, "copy_lhs", "sum", x), "default")
            ours = time_calls(lambda: gsparse.gspmm(g, "copy_lhs", "sum", x), [()], device,
                              budget_s=budget).median_ms
            rows.append((name, features, "default " + str(default), ours, cusparse))
            algorithm = SpmmAlgorithm("copy_lhs", "sum", Layout.FULL, None, torch.float32,
                                      g.index_dtype, has_eid=False)
            for warps in output_tiled.warps_for(torch.float32):
                schedule = output_tiled.schedule_for(features, torch.float32, warps, 1)
                torch.cuda.synchronize()
                start = time.perf_counter()
                spmm_kernels._output_tiles(g, features, torch.float32, warps)
                torch.cuda.synchronize()
                build = time.perf_counter() - start
                tiling, _ = spmm_kernels._output_tiles(g, features, torch.float32, warps)
                print(f"  F={features} warps={warps}: layout {build * 1e3:.0f} ms (blocks "
                      f"{tiling.blocks}, tiles {tiling.tiles} x {tiling.tile_cols}, rows "
                      f"{tiling.row_capacity}, shared {tiling.shared_bytes})", flush=True)
                for variant in args.variants.split(","):
                    groups = next((int(part.removeprefix("groups")) for part in variant.split("+")
                                   if part.startswith("groups")), 1)
                    schedule = dataclasses.replace(schedule, column_groups=groups)
                    plan = _launch(g, algorithm, schedule, variant)
                    out = torch.full((g.num_dst, features), float("nan"), device=device)
                    plan(x, None, out, None, None)
                    if not any(part in _ABLATIONS for part in variant.split("+")):
                        check(out, f"{variant} {schedule}")
                    ms = time_calls(lambda: plan(x, None, out, None, None), [()], device,
                                    budget_s=budget).median_ms
                    rows.append((name, features, f"{variant} {schedule}", ms, cusparse))
    print("\n| workload | F | kernel | ms | cuSPARSE ms | x cuSPARSE |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for name, features, what, ms, cusparse in rows:
        print(f"| {name} | {features} | `{what}` | {ms:.4g} | {cusparse:.4g} | {cusparse / ms:.2f}x |")


if __name__ == "__main__":
    main()
