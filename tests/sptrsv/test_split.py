"""Long rows split into partial rows (gsparse.kernels.sptrsv.split): the rewritten system
solves to the same x, stays triangular and canonical, and splits only the rows it should."""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

from gsparse.datasets import triangular
from gsparse.kernels.sptrsv.levelset import transposed_pattern
from gsparse.kernels.sptrsv.split import CONSTANTS, split_long_rows


def _hub_factor(n: int, hubs: dict[int, int], seed: int, upper: bool, diagonal: bool = True) -> sp.csr_array:
    """A sparse lower factor (a few entries per row) whose rows ``hubs`` have the given number
    of off-diagonal entries; with ``upper``, the same with the order of rows and columns
    reversed (an upper factor, row ``n - 1 - r`` long); without ``diagonal``, every third
    row stores none (a unit-diagonal factor)."""
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for r in range(1, n):
        picked = rng.choice(r, size=min(hubs.get(r, int(rng.integers(0, 4))), r), replace=False)
        rows.append(np.full(len(picked), r)), cols.append(picked)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    diag = np.flatnonzero(np.arange(n) % 3 != 0) if not diagonal else np.arange(n)
    values = np.concatenate([rng.uniform(1.0, 2.0, len(rows)) / 8.0, rng.uniform(1.0, 2.0, len(diag)) * 4.0])
    rows, cols = np.concatenate([rows, diag]), np.concatenate([cols, diag])
    if upper:
        rows, cols = n - 1 - rows, n - 1 - cols
    a = sp.csr_array((values, (rows, cols)), shape=(n, n))
    a.sort_indices()
    return a


def _system(split, values: np.ndarray) -> sp.csr_array:
    gathered = np.concatenate([values, CONSTANTS])[split.value_index.numpy()]
    return sp.csr_array((gathered, split.col.numpy(), split.crow.numpy()), shape=(split.n, split.n))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("diagonal", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_the_split_system_solves_to_the_same_x(upper, diagonal, transpose):
    n = 3000
    hubs = {2999: 2500, 1500: 1200, 2000: 1025, 2500: 1024, 700: 650}  # over, over, just over, at, under
    system = _hub_factor(n, hubs, seed=1, upper=upper, diagonal=diagonal)  # T, with the long rows
    lower = not upper
    # The factor A is T itself, or with transpose T's transpose: T's entries then gathered from
    # A's values (the solver's T = A^T).
    a = sp.csr_array(system.T) if transpose else system
    a.sort_indices()
    crow, col, value_index = (torch.from_numpy(v) for v in (a.indptr.astype(np.int64), a.indices.astype(np.int64),
                                                            np.arange(a.nnz)))
    if transpose:
        crow, col, value_index = (torch.from_numpy(v) for v in transposed_pattern(crow.numpy(), col.numpy()))
    split = split_long_rows(crow, col, lower, value_index)
    t = _system(split, a.data)
    assert split.crow.numel() == split.n + 1 and torch.all(split.crow.diff() >= 0)
    coo = t.tocoo()
    assert np.all(coo.row >= coo.col) if lower else np.all(coo.row <= coo.col)  # still triangular
    assert np.all(np.diff(split.col.numpy())[np.diff(np.repeat(np.arange(split.n), np.diff(t.indptr))) == 0] > 0)
    off = np.diff(t.indptr) - (t.diagonal() != 0)
    assert off.max() == 1024  # the row at the threshold kept whole, the longer ones split
    position = split.position.numpy()
    assert len(np.unique(position)) == n and split.n - n == sum(-(-c // 256) for c in hubs.values() if c > 1024)
    rng = np.random.default_rng(2)
    b = rng.standard_normal((n, 3))
    want = spla.spsolve_triangular(sp.csr_matrix(system), b, lower=lower, unit_diagonal=not diagonal)
    b_split = np.zeros((split.n, 3))
    b_split[position] = b
    got = spla.spsolve_triangular(sp.csr_matrix(t), b_split, lower=lower, unit_diagonal=not diagonal)
    np.testing.assert_allclose(got[position], want, rtol=1e-12, atol=1e-12)


def test_factors_without_long_rows_are_not_split():
    a = triangular.generate("laplacian3d", 20_000, 0)
    crow, col = torch.from_numpy(a.indptr.astype(np.int64)), torch.from_numpy(a.indices.astype(np.int64))
    assert split_long_rows(crow, col, True) is None
    assert split_long_rows(torch.zeros(1, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), True) is None


def test_a_power_law_factors_hubs_are_split_evenly():
    a = triangular.generate("power_law", 60_000, 7)
    row_nnz = np.diff(a.indptr)
    assert row_nnz.max() > 1025  # the family has hubs (rows of thousands of entries)
    crow, col = torch.from_numpy(a.indptr.astype(np.int64)), torch.from_numpy(a.indices.astype(np.int64))
    split = split_long_rows(crow, col, True)
    hub = int(np.argmax(row_nnz))
    parts = -(-(row_nnz[hub] - 1) // 256)
    start = int(split.position[hub]) - parts
    sizes = split.crow.diff()[start:start + parts].numpy() - 1  # less each partial row's diagonal
    assert sizes.sum() == row_nnz[hub] - 1 and sizes.max() - sizes.min() <= 1  # even chunks
    assert int(split.crow.diff()[split.position[hub]]) == parts + 1  # -1 per partial row, and its diagonal


def test_bad_chunks_are_refused():
    crow, col = torch.tensor([0, 1]), torch.tensor([0])
    with pytest.raises(ValueError, match="chunk"):
        split_long_rows(crow, col, True, chunk=0)
    with pytest.raises(ValueError, match="split_above"):
        split_long_rows(crow, col, True, chunk=8, split_above=4)


@pytest.mark.gpu
@pytest.mark.parametrize("analysis", [True, False], ids=["analysed", "fast_start"])
@pytest.mark.parametrize("lower, transpose", [(True, False), (True, True), (False, False), (False, True)])
@pytest.mark.parametrize("k", [1, 16])
def test_factors_with_long_rows_solve_through_their_split_systems_on_a_gpu(analysis, lower, transpose, k):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from .test_gpu import _check  # noqa: PLC0415 (the GPU tests' checks: poisoned x, residual, SciPy)

    # Long rows in the solved system: a lower factor's for A, an upper one's long columns for A^T.
    unit = k == 1
    dtype = torch.float64 if lower else torch.float32
    hubs = {2999: 2500, 1500: 1200, 2000: 1025, 2500: 1024}
    system = _hub_factor(3000, hubs, seed=3, upper=lower == transpose, diagonal=not unit)
    matrix = sp.csr_array(system.T) if transpose else system
    solver = _check(matrix, lower, unit, transpose, k, dtype, analysis=analysis)
    plans = solver._pattern.device_plans
    assert plans.device_system(transpose).split is not None  # the long rows were split
    power_law = triangular.generate("power_law", 60_000, 7, upper=not lower)
    _check(power_law, lower, False, transpose, k, torch.float64, analysis=analysis)


def test_a_system_whose_longest_row_is_known_short_reads_nothing_back():
    """The factor checks measure A's longest row: with no row over SPLIT_ABOVE, the system
    skips the split's search (and its read-back); unknown, it reads the longest row back and
    splits as before."""
    from cuda_path import HostReads

    from gsparse.kernels.sptrsv.natural import DeviceSystem
    from gsparse.kernels.sptrsv.split import SPLIT_ABOVE

    matrix = triangular.generate("laplacian2d", 2_000, 0)
    crow, col = (torch.from_numpy(a.astype(np.int64)) for a in (matrix.indptr, matrix.indices))
    with HostReads() as reads:
        system = DeviceSystem(crow, col, True, False, longest_row=3)
    assert reads.reads == [] and system.split is None and system.longest_row == 3
    with HostReads() as reads:
        system = DeviceSystem(crow, col, True, False)
    assert len(reads.reads) == 1 and system.split is None and system.longest_row == 3
    hub = triangular.generate("power_law", 20_000, 0)
    crow, col = (torch.from_numpy(a.astype(np.int64)) for a in (hub.indptr, hub.indices))
    longest = int(np.diff(hub.indptr).max())
    assert longest > SPLIT_ABOVE + 1
    known, read = DeviceSystem(crow, col, True, False, longest), DeviceSystem(crow, col, True, False)
    assert known.split is not None and torch.equal(known.crow, read.crow) and torch.equal(known.col, read.col)
    assert DeviceSystem(crow, col, True, True).longest_row == int(np.bincount(hub.indices).max())
