"""The checks of a factor on its GPU (gsparse.kernels.sptrsv.checks): one launch of a kernel
that compiles for both dtypes without spills and one read-back; the same verdicts and
messages as the checks in PyTorch operations, for every rule a factor can break.

Without a GPU, the CUDA path runs on CPU tensors with a model of the kernel (a loop per
row, as factor_checks.cu reads them) in place of the launch; on a GPU, the kernel itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.sparse import csr_array

from gsparse import TriangularSolver
from gsparse._triangular import read_factor
from gsparse.kernels.sptrsv import checks
from gsparse.kernels.sptrsv.stats import NEAR, PatternStats, near_rows, pattern_stats
from gsparse.runtime import compile_cuda
from gsparse.testing import device_waits

from cuda_path import HostReads, cuda_path_on_cpu
from kernels.support import assert_no_spills, needs_nvrtc

from .factors import hand_factor


@needs_nvrtc
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_check_kernel_compiles_for_each_dtype_without_spills(arch, dtype):
    binary = compile_cuda(checks.checks_program(dtype).source, arch=arch, cache=None)
    assert list(binary.resources) == [checks.kernel_name(dtype)]
    assert_no_spills(binary, checks.kernel_name(dtype), checks.BLOCK)


# ---------------------------------------------------------------------- the factors


def _hand(lower: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = hand_factor() if lower else hand_factor().T.tocsr()
    m.sort_indices()
    return m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data.copy()


def _reversed_rows(crow, col, values):
    """The same factor with each row's entries in reverse order."""
    order = np.concatenate([np.arange(crow[r + 1] - 1, crow[r] - 1, -1) for r in range(len(crow) - 1)])
    return crow, col[order], values[order]


def _with(arrays, i: int, value, part: int):
    parts = [a.copy() for a in arrays]
    parts[part][i] = value
    return tuple(parts)


_CROW, _COL, _VAL = 0, 1, 2
_HAND = _hand()
_DIAGONAL_3 = int(_HAND[0][4]) - 1  # row 3's diagonal: the last entry of its row


def _cases() -> dict[str, tuple]:
    """name: (crow, col, values, lower, unit_diagonal), numpy arrays."""
    hand, upper = _HAND, _hand(lower=False)
    n = 5
    missing = hand_factor().toarray()
    missing[2, 2] = 0.0
    no_diagonal = csr_array(missing)
    strictly = csr_array(np.tril(hand_factor().toarray(), -1))
    wrong = hand_factor().toarray()
    wrong[1, 3], wrong[4, 4], wrong[2, 4] = 7.0, 0.0, 1.0
    wrong = csr_array(wrong)

    def arrays(m):
        return m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data.copy()

    cases = {
        "valid lower": (*hand, True, False),
        "valid upper": (*upper, False, False),
        "valid, rows reversed": (*_reversed_rows(*hand), True, False),
        "valid, unit diagonal, none stored": (*arrays(strictly), True, True),
        "valid, bad diagonal under unit_diagonal": (*_with(hand, _DIAGONAL_3, math.nan, _VAL), True, True),
        "empty": (np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), True, False),
        "crow does not start at 0": (hand[0] + 1, hand[1], hand[2], True, False),
        "crow does not end at nnz": (np.array([0, 1, 3, 4, 8, 10]), hand[1], hand[2], True, False),
        "crow garbage at the ends": (np.array([-7, 1, 3, 4, 8, 2**40]), hand[1], hand[2], True, False),
        "crow decreasing": (np.array([0, 1, 3, 2, 8, 11]), hand[1], hand[2], True, False),
        "crow garbage inside": (np.array([0, 10**12, -5, 3, 8, 11]), hand[1], hand[2], True, False),
        "col out of range": _with(hand, 4, 7, _COL) + (True, False),
        "col negative": _with(hand, 2, -1, _COL) + (True, False),
        "col huge": _with(hand, 9, 2**40, _COL) + (True, False),
        "wrong side, lower": (*arrays(wrong), True, False),
        "wrong side, upper": (*hand, False, False),
        "wrong side in a reversed row": (*_reversed_rows(*arrays(wrong)), True, False),
        "duplicates, unsorted": (np.array([0, 1, 4]), np.array([0, 1, 0, 1]), np.ones(4), True, False),
        "duplicates, in order": (np.array([0, 1, 4]), np.array([0, 0, 0, 1]), np.ones(4), True, False),
        "duplicate before a wrong side": (np.array([0, 2, 4]), np.array([0, 1, 1, 1]), np.ones(4), True, False),
        "missing diagonal": (*arrays(no_diagonal), True, False),
        "zero diagonal": _with(hand, _DIAGONAL_3, 0.0, _VAL) + (True, False),
        "nan diagonal": _with(hand, _DIAGONAL_3, math.nan, _VAL) + (True, False),
        "inf diagonal": _with(hand, _DIAGONAL_3, math.inf, _VAL) + (True, False),
        "-inf diagonal, rows reversed": (*_reversed_rows(*_with(hand, _DIAGONAL_3, -math.inf, _VAL)), True, False),
        "zero diagonal, upper": _with(upper, 0, 0.0, _VAL) + (False, False),
    }
    assert all(len(c[0]) == n + 1 for name, c in cases.items() if name != "empty" and "duplicate" not in name)
    return cases


CASES = _cases()


def _verdict(case: str, device: str = "cpu", index=torch.int64, dtype=torch.float64):
    """What reading the case's factor gives: the error's type and message, else the pattern
    (crow, col, order)."""
    crow, col, values, lower, unit = CASES[case]
    n = len(crow) - 1
    A = (torch.from_numpy(np.asarray(crow)).to(device, index), torch.from_numpy(np.asarray(col)).to(device, index),
         torch.from_numpy(np.asarray(values, np.float64)).to(device, dtype), (n, n))
    try:
        pattern, _ = read_factor(A, lower, unit)
    except (ValueError, RuntimeError) as error:
        return type(error).__name__, str(error)
    order = None if pattern.order is None else pattern.order.tolist()
    return pattern.crow.tolist(), pattern.col.tolist(), order


# ---------------------------------------------------------------------- the CUDA path on the CPU


def _model(crow, col, val, n, nnz, lower, report):
    """factor_checks.cu's check_factor, row by row: each rule's slot its first violation,
    the statistics' slots folded into what the host set them to."""
    crow, col = crow.tolist(), col.tolist()
    val = None if val is None else val.tolist()
    slots = report.tolist()
    assert slots == [checks.NONE] * checks.RULES + [0, 0]  # as the host sets them
    longest, near = checks.RULES, checks.RULES + 1

    def record(slot, index):
        slots[slot] = min(slots[slot], index)

    if crow[0] != 0 or crow[n] != nnz:
        record(0, 0)
    for i in range(n):
        if crow[i + 1] < crow[i]:
            record(1, i)
    for e in range(nnz):
        if not 0 <= col[e] < n:
            record(2, e)
    for r in range(n):
        begin, end = crow[r], crow[r + 1]
        if begin < 0 or end < begin or end > nnz:
            continue
        slots[longest] = max(slots[longest], end - begin)
        diagonal = near_row = False
        for e in range(begin, end):
            c = col[e]
            if not 0 <= c < n:
                continue
            near_row = near_row or 0 < abs(c - r) <= NEAR
            if e + 1 < end and col[e + 1] <= c:
                record(3, r)
            if (c > r) if lower else (c < r):
                record(4, r * max(n, 1) + c)
            if c == r:
                diagonal = True
                if val is not None and (val[e] == 0 or not math.isfinite(val[e])):
                    record(6, r)
        if not diagonal:
            record(5, r)
        slots[near] += near_row
    report.copy_(torch.tensor(slots))


class _ModelLoader:
    """A kernel loader whose kernels run the model of the check kernel in place of each
    launch: ``lookups`` lists ``(program, name, device_index)``, ``launches`` each launch's
    ``(grid, block, shared_bytes, arguments by name)``."""

    def __init__(self) -> None:
        self.lookups: list[tuple] = []
        self.launches: list[tuple] = []

    def kernel(self, program, name, device_index):
        self.lookups.append((program, name, device_index))
        params = [pname for _, pname in program.kernels[name].params]
        launches = self.launches

        class _Kernel:
            def prepare(self, grid, block, args, *, shared_bytes=0, context=""):
                def launch(*operands, stream=None):
                    named = {p: getattr(a, "value", a) for p, a in zip(params, args)}
                    launches.append((grid, block, shared_bytes, named))
                    with torch._C.DisableTorchFunction():  # the device's work: no host read
                        _model(**named)

                return launch

        return _Kernel()


@pytest.fixture
def cuda_path(monkeypatch):
    """The GPU's checks on CPU tensors: launches of the model kernel, recorded."""
    monkeypatch.setattr(checks, "on_gpu", lambda tensor: True)
    with cuda_path_on_cpu(_ModelLoader()) as loader:
        yield loader


@pytest.mark.parametrize("index", [torch.int64, torch.int32])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_cuda_path_gives_the_verdict_and_message_of_the_torch_path(case, index, monkeypatch):
    want = _verdict(case, index=index)
    monkeypatch.setattr(checks, "on_gpu", lambda tensor: True)
    with cuda_path_on_cpu(_ModelLoader()) as loader:
        got = _verdict(case, index=index)
    assert got == want and len(loader.launches) == 1


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_canonical_factor_is_checked_in_one_launch_and_one_read_back(cuda_path, dtype):
    crow, col, values, _, _ = CASES["valid lower"]
    crow, col = torch.from_numpy(crow), torch.from_numpy(col).int()
    values = torch.from_numpy(values).to(dtype)
    with HostReads() as reads:
        solver = TriangularSolver((crow, col, values, (5, 5)))
    assert reads.reads == ["tolist"] and solver._pattern.order is None
    [(program, name, _)] = cuda_path.lookups
    assert name == checks.kernel_name(dtype) and program is checks.checks_program(dtype)
    [(grid, block, _, args)] = cuda_path.launches
    assert (grid, block) == (1, checks.BLOCK)  # 5 rows of a warp each: one block
    assert torch.equal(args["crow"], crow) and torch.equal(args["col"], col.long())
    assert args["val"].data_ptr() == values.data_ptr()
    assert (args["n"], args["nnz"], args["lower"]) == (5, 11, 1)


def test_unit_diagonal_passes_no_values_to_the_check(cuda_path):
    crow, col, values, _, _ = CASES["valid, unit diagonal, none stored"]
    TriangularSolver((torch.from_numpy(crow), torch.from_numpy(col), torch.from_numpy(values), (5, 5)),
                     unit_diagonal=True)
    [(_, _, _, args)] = cuda_path.launches
    assert args["val"] is None


def test_unsorted_rows_add_a_sort_and_one_read_back(cuda_path):
    crow, col, values, _, _ = CASES["valid, rows reversed"]
    with HostReads() as reads:
        solver = TriangularSolver((torch.from_numpy(crow), torch.from_numpy(col), torch.from_numpy(values), (5, 5)))
    assert reads.reads == ["tolist", "__bool__"] and solver._pattern.order is not None
    assert len(cuda_path.launches) == 1


def test_new_values_are_checked_in_one_launch_and_one_read_back(cuda_path):
    crow, col, values, _, _ = CASES["valid, rows reversed"]
    values = torch.from_numpy(values)
    solver = TriangularSolver((torch.from_numpy(crow), torch.from_numpy(col), values, (5, 5)))
    cuda_path.launches.clear()
    with HostReads() as reads:
        solver.update_values(values * 2)
    assert reads.reads == ["tolist"]
    [(_, _, _, args)] = cuda_path.launches
    assert args["crow"] is solver._pattern.crow and args["col"] is solver._pattern.col
    assert torch.equal(args["val"], solver._canonical)
    with pytest.raises(ValueError, match=r"A's diagonal entry in row 3 is zero"):
        solver.update_values(torch.from_numpy(_reversed_rows(*_with(_HAND, _DIAGONAL_3, 0.0, _VAL))[2]))


def test_the_grid_gives_each_row_a_warp_with_at_most_max_blocks(cuda_path):
    for n, blocks in ((8, 1), (9, 2), (10**5, checks.MAX_BLOCKS)):
        crow, col = torch.arange(n + 1), torch.arange(n)
        TriangularSolver((crow, col, torch.ones(n, dtype=torch.float64), (n, n)))
        assert cuda_path.launches[-1][0] == blocks


def _banded_and_random(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A lower factor whose rows hold a band of 0-40 entries left of the diagonal and a few
    random earlier columns: rows of every length, entries near and far."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n):
        band = set(range(max(r - int(rng.integers(0, 41)), 0), r))
        far = set(rng.integers(0, r, size=min(r, int(rng.integers(0, 4)))).tolist()) if r else set()
        rows.append(sorted(band | far | {r}))
    crow = np.r_[0, np.cumsum([len(c) for c in rows])].astype(np.int64)
    return crow, np.concatenate(rows).astype(np.int64)


@pytest.mark.parametrize("seed", range(3))
def test_the_check_kernels_statistics_are_the_patterns(cuda_path, seed):
    """The report's longest row and near rows (the model of the kernel's folds) equal
    pattern_stats' and a count by hand."""
    crow, col = _banded_and_random(300, seed)
    values = np.random.default_rng(seed).uniform(1, 2, col.size)
    pattern, _ = read_factor((torch.from_numpy(crow), torch.from_numpy(col), torch.from_numpy(values), (300, 300)),
                             lower=True)
    rows = np.repeat(np.arange(300), np.diff(crow))
    near = np.unique(rows[(np.abs(rows - col) > 0) & (np.abs(rows - col) <= NEAR)]).size
    want = PatternStats(300, col.size, int(np.diff(crow).max()), near)
    assert pattern.stats == want == pattern_stats(torch.from_numpy(crow), torch.from_numpy(col))
    assert 0 < want.near_row_share < 1 and want.longest_row > 40  # the factor has both kinds
    near_columns = np.unique(col[(np.abs(rows - col) > 0) & (np.abs(rows - col) <= NEAR)]).size
    assert int(near_rows(torch.from_numpy(crow), torch.from_numpy(col), transpose=True)) == near_columns
    transposed = PatternStats(300, col.size, int(np.bincount(col).max()), near_columns)
    assert pattern_stats(torch.from_numpy(crow), torch.from_numpy(col), transpose=True) == transposed


def test_the_statistics_of_empty_and_diagonal_patterns():
    empty = pattern_stats(torch.zeros(1, dtype=torch.int64), torch.zeros(0, dtype=torch.int64))
    assert empty == PatternStats(0, 0, 0, 0) and empty.mean_row == 0 and empty.near_row_share == 0
    diagonal = pattern_stats(torch.arange(6), torch.arange(5))
    assert diagonal == PatternStats(5, 5, 1, 0) and diagonal.near_row_share == 0


def test_a_factor_checked_off_the_gpu_carries_no_statistics():
    crow, col, values, _, _ = CASES["valid lower"]
    pattern, _ = read_factor((torch.from_numpy(crow), torch.from_numpy(col), torch.from_numpy(values), (5, 5)),
                             lower=True)
    assert pattern.stats is None  # the device plans measure them if a scheme needs them


# ---------------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("index", [torch.int64, torch.int32])
def test_on_a_gpu_every_case_has_the_cpus_verdict_and_message(index, dtype):
    for case in sorted(CASES):
        assert _verdict(case, "cuda", index, dtype) == _verdict(case, "cpu", index, dtype), case
    torch.cuda.synchronize()  # nothing read out of bounds (or the context would be lost)


def _corrupted(rng: np.random.Generator, n: int) -> tuple:
    """A random lower factor with a random fault (or none): crow, col, values, lower."""
    dense = np.tril(rng.random((n, n)) < 0.3, -1).astype(np.float64) + np.eye(n)
    crow = np.r_[0, np.cumsum((dense != 0).sum(1))].astype(np.int64)
    col = np.nonzero(dense)[1].astype(np.int64)
    values = rng.uniform(1, 2, col.size)
    fault = rng.integers(0, 8)
    e, r = rng.integers(0, col.size), rng.integers(0, n)
    if fault == 1:
        col[e] = rng.choice([-1, n, n + 5, r])
    elif fault == 2:
        crow[1 + rng.integers(0, n)] = rng.integers(-3, col.size + 3)
    elif fault == 3:
        values[rng.integers(0, col.size)] = rng.choice([0.0, math.nan, math.inf])
    elif fault == 4:  # shuffle the rows' entries
        order = np.concatenate([rng.permutation(np.arange(crow[i], crow[i + 1])) for i in range(n)])
        col, values = col[order], values[order]
    elif fault == 5:
        col[e] = col[e - 1] if e else col[e]
    return crow, col, values, bool(rng.integers(0, 4))


@pytest.mark.gpu
def test_on_a_gpu_random_faults_have_the_cpus_verdict_and_message():
    rng = np.random.default_rng(0)
    for trial in range(300):
        crow, col, values, lower = _corrupted(rng, int(rng.integers(1, 40)))
        CASES["random"] = (crow, col, values, lower, bool(rng.integers(0, 2)))
        try:
            assert _verdict("random", "cuda") == _verdict("random"), (trial, CASES["random"])
        finally:
            del CASES["random"]
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_on_a_gpu_a_solvers_construction_waits_for_the_device_once():
    crow, col, values, _, _ = CASES["valid lower"]
    A = (torch.from_numpy(crow).cuda(), torch.from_numpy(col).cuda(), torch.from_numpy(values).cuda(), (5, 5))
    TriangularSolver(A)  # the check kernel loaded
    syncs = device_waits(lambda: TriangularSolver(A))
    assert 1 <= len(syncs) <= 2, syncs


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(3))
def test_on_a_gpu_the_check_kernels_statistics_are_the_patterns(seed):
    crow, col = _banded_and_random(3000, seed)
    values = np.random.default_rng(seed).uniform(1, 2, col.size)
    pattern, _ = read_factor(tuple(torch.from_numpy(a).cuda() for a in (crow, col, values)) + ((3000, 3000),),
                             lower=True)
    assert pattern.stats == pattern_stats(torch.from_numpy(crow), torch.from_numpy(col))
