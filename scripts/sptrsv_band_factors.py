"""Factors of short rows whose entries lie just past the fast start's near window
(:data:`gsparse.kernels.sptrsv.stats.NEAR`, 32 rows): the cases that should break a rule
which reads "no entries near the diagonal" as "natural order needs no levels". Each is a
square ``.npz`` of a graph whose edges join row ``i`` to ``i - d``, ``d`` uniform in a
range past the window, a Poisson number of them per row; ``gsparse.bench.sptrsv`` takes
the lower triangle of its symmetrised adjacency as the factor.

    python scripts/sptrsv_band_factors.py OUT_DIR

writes ``band33_64.npz`` (1M rows, 2 entries a row on average, ``d`` in 33-64),
``chain33.npz`` (1M rows, one entry at ``d`` = 33 with probability about 0.63) and
``band40_400.npz`` (600K rows, 2.5 entries, ``d`` in 40-400).
"""
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def band(n: int, nearest: int, farthest: int, per_row: float, seed: int) -> sp.csr_array:
    """Edges ``(i, i - d)``, ``d`` uniform in ``[nearest, farthest]``, Poisson(``per_row``) of
    them a row (those before row 0 dropped)."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), rng.poisson(per_row, n))
    cols = rows - rng.integers(nearest, farthest + 1, rows.size)
    keep = cols >= 0
    return sp.coo_array((np.ones(int(keep.sum())), (rows[keep], cols[keep])), shape=(n, n)).tocsr()


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    sp.save_npz(out / "band33_64.npz", band(1_000_000, 33, 64, 2.0, 1))
    sp.save_npz(out / "chain33.npz", band(1_000_000, 33, 33, 1.0, 2))
    sp.save_npz(out / "band40_400.npz", band(600_000, 40, 400, 2.5, 3))
