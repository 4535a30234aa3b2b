"""Register spills of g-SpMM max / min kernels under other folds, with NVRTC (no GPU).

Run from the repository root::

    PYTHONPATH=src python3 scripts/fold_spill_probe.py {current,fmax,fmax-bounds1} {split,onepass} [--pairs 40]

Samples ``--pairs`` random (algorithm, schedule) pairs of max or min without an arg index
(feature lengths 1 to 256 and 100; split rows of 32, 256 or 4,096 edges for ``split``),
compiles each for sm_80 and sm_90 and prints the kernels that spill, then the count and
the registers. The fold is the code's (``current``), ``fmax`` / ``fmin`` in place of the
compare and select (``fmax``), or that with ``__launch_bounds__(threads, 1)`` on the
kernel (``fmax-bounds1``). See "g-SpMM max / min: the fold in one instruction" in
docs/performance.md's open problems.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from gsparse import algebra
from gsparse.kernels.source import Signature
from gsparse.kernels.spmm import SplitRows, codegen
from gsparse.kernels.spmm.codegen import one_pass, split_rows
from gsparse.kernels.spmm.space import one_pass_grid
from gsparse.runtime import compile_cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kernels.spmm.support import algorithms  # noqa: E402  the tests' sampler of algorithms

_PRELUDE_HELPERS = """
__device__ __forceinline__ float probe_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double probe_max(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ float probe_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double probe_min(double a, double b) { return fmin(a, b); }
"""


def _use_fmax(min_blocks: bool) -> None:
    """Patch the reducers' fold (and the kernels' launch bounds) for this process."""
    def fold(self, acc: str, value: str) -> str:
        return f"{acc} + {value}" if self.selects_by is None else f"probe_{self.name}({acc}, {value})"

    def accumulate(self, acc: str, value: str) -> str:
        return f"{acc} += {value};" if self.selects_by is None else f"{acc} = {fold(self, acc, value)};"

    algebra.Reducer.fold, algebra.Reducer.accumulate = fold, accumulate
    declaration = Signature.declaration

    def bounded(self: Signature, bounds: tuple[int, ...] | None = None) -> str:
        if min_blocks and bounds and len(bounds) == 1 and self.name in (split_rows.KERNEL, one_pass.KERNEL):
            bounds = (bounds[0], 1)
        head = declaration(self, bounds)
        return _PRELUDE_HELPERS + head if self.name in (split_rows.KERNEL, one_pass.KERNEL) else head

    Signature.declaration = bounded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fold", choices=("current", "fmax", "fmax-bounds1"))
    parser.add_argument("skeleton", choices=("split", "onepass"))
    parser.add_argument("--pairs", type=int, default=40)
    args = parser.parse_args()
    if args.fold != "current":
        _use_fmax(min_blocks=args.fold == "fmax-bounds1")
    rng = random.Random(7)
    selecting = [a for a in algorithms(seed=5, k=400) if a.reduce in ("max", "min") and not a.with_arg]
    spills, registers = 0, []
    for _ in range(args.pairs):
        feature_len = rng.choice((1, 4, 16, 32, 64, 100, 128, 256))
        schedule = rng.choice(one_pass_grid(feature_len, 4))
        if args.skeleton == "split":
            schedule = SplitRows(**schedule.knobs(), row_split=rng.choice((32, 256, 4096)))
        algorithm = rng.choice(selecting)
        source = codegen.program(algorithm, schedule, feature_len).source
        kernel = split_rows.KERNEL if args.skeleton == "split" else one_pass.KERNEL
        for arch in ("sm_80", "sm_90"):
            resources = compile_cuda(source, arch=arch, cache=None).resources[kernel]
            registers.append(resources.registers)
            if resources.spill_stores or resources.spill_loads:
                spills += 1
                print(f"spills {resources.spill_stores} bytes: {arch} {algorithm} {schedule}")
    print(f"{args.fold} {args.skeleton}: {spills} of {len(registers)} kernels spill; registers "
          f"mean {sum(registers) / len(registers):.1f}, most {max(registers)}")


if __name__ == "__main__":
    main()
