"""The host preprocessing's outputs, byte for byte, against digests recorded before it was
made faster (``prep_digests.json``): the analysis (row graph, levels, features) of every
benchmark family (``triangular.BENCHMARK_FAMILIES``: the corpus families have no
digests) at two sizes, lower and upper, plain and transposed, and the plans (transforms,
node groups, kernel partitions, warps, ready flags, launch tables) of schemes that cover
every merge, grouping, warp schedule and kernel partition.

The digests were written by this module's ``main`` on the implementation of commit e91e1d8
(``python tests/sptrsv/test_preprocessing_identity.py --write``); a change to the generators
of ``gsparse.datasets.triangular`` would change them too, and then they must be written
again from an implementation known to be right.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.plan import _schedule_arrays, analyse
from gsparse.kernels.sptrsv.schedule import SptrsvSchedule
from gsparse.target import H100

DIGESTS = Path(__file__).with_name("prep_digests.json")

# (rows, lower, transpose) of each family's factors: a small one and one deep or wide enough
# for the levels' wavefront to hand over to the in-order pass (banded) or to run long.
CASES = ((2_000, True, False), (2_000, False, True), (30_000, True, False), (30_000, False, False),
         (30_000, True, True))

SCHEMES = (
    SptrsvSchedule(),
    SptrsvSchedule(ready_by_value=True, warps_per_block=4, subwarps=32, sw_rnnz=math.inf, alpha_level=2),
    SptrsvSchedule(merge_rows=32, grouping="rg_balance", warp_schedule="ws_balance", alpha_level=2),
    SptrsvSchedule(subwarps=4, sw_rnnz=2, merge="merge_avg", merge_rows=32, merge_thresh=8, reorder=True,
                   warp_schedule="ws_locality", alpha_level=math.inf),
    SptrsvSchedule(warp_schedule="ws_locality", alpha_level=0),
    SptrsvSchedule(subwarps=8, sw_rnnz=4, merge="merge_thresh", merge_rows=32, merge_thresh=4,
                   grouping="rg_balance", warp_schedule="ws_locality", alpha_level=2),
    SptrsvSchedule(merge_rows=4, sync_elimination=False, warp_schedule="ws_balance", alpha_level=0),
    SptrsvSchedule(subwarps=2, sw_rnnz=2, merge_rows=4, reorder=True, alpha_level=2),
)


def _digest(arrays: list) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _case_digests(family: str, rows: int, lower: bool, transpose: bool) -> dict[str, str]:
    matrix = triangular.generate(family, rows, seed=0, upper=not lower)
    system = analyse(matrix.indptr, matrix.indices, lower, transpose)
    r = system.rows
    out = {"analysis": _digest([system.crow, system.col, system.value_index if transpose else np.zeros(0),
                                r.order, r.ptr, r.deps, r.row_nnz, system.row_level]),
           "features": _digest([system.features])}
    cache = system.transform_cache()
    for schedule in SCHEMES:
        solve = system.solve_plan(schedule, H100, cache)
        nodes = solve.nodes
        arrays = _schedule_arrays(solve)
        out[str(schedule)] = _digest([
            solve.rows.order, solve.rows.ptr, solve.rows.deps, solve.rows.row_nnz, solve.group_starts,
            solve.group_level, solve.group_per_thread, nodes.ptr, nodes.members, nodes.level, nodes.nnz,
            solve.node_warp, solve.kernel_ptr, solve.kernel_waits, solve.row_flag,
            *(arrays[k] for k in sorted(arrays))])
    return out


def _key(family: str, rows: int, lower: bool, transpose: bool) -> str:
    return f"{family} {rows} {'lower' if lower else 'upper'}{' transposed' if transpose else ''}"


@pytest.mark.parametrize("family", triangular.BENCHMARK_FAMILIES)
def test_analysis_and_plans_are_those_of_before(family):
    recorded = json.loads(DIGESTS.read_text())
    for case in CASES:
        key = _key(family, *case)
        assert _case_digests(family, *case) == recorded[key], key


def main() -> None:
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: test_preprocessing_identity.py --write")
    digests = {_key(f, *case): _case_digests(f, *case) for f in triangular.BENCHMARK_FAMILIES for case in CASES}
    DIGESTS.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
