#!/usr/bin/env bash
# compute-sanitizer memcheck over gsparse.nn.gather_features on edge cases: every dtype and
# index type, rows of 1-9 and 100 features read at every load width (column slices of a
# wider table at offsets that change the rows' alignment), one-row tables, empty batches,
# batches larger than a grid (grid-stride rows), with and without dropout, and the backward.
# Every result is also checked against the CPU reference, to the bit.
# Run on a GPU machine from the repository root: bash scripts/sanitize_gather_features.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src"
exec compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 --print-limit 20 python3 - <<'PY'
import torch

import gsparse._gather_features as gather

cases = 0
gen = torch.Generator().manual_seed(0)
for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
    for index_dtype in (torch.int32, torch.int64):
        for features in (*range(1, 10), 100):
            for rows, batch in ((1, 3), (37, 0), (37, 50), (300, 4_000_000 // max(features, 8))):
                wide = torch.randn(rows, features + 3, generator=gen).to(dtype)
                for offset in (0, 1, 2, 3):
                    x = wide[:, offset:offset + features]
                    index = torch.randint(0, rows, (batch,), generator=gen).to(index_dtype)
                    for seed, p in ((None, 0.0), (torch.tensor([7 * cases]), 0.3)):
                        want = gather.gather(x, index, seed, p)
                        got = gather.gather(x.cuda(), index.cuda(), None if seed is None else seed.cuda(), p)
                        assert torch.equal(got.cpu(), want), (dtype, index_dtype, features, rows, batch, offset, p)
                        cases += 1
x = torch.randn(50, 7, dtype=torch.float64, device="cuda", requires_grad=True)
out = gather.gather_op(x, torch.randint(0, 50, (80,), device="cuda"), torch.tensor([3], device="cuda"), 0.5)
out.sum().backward()
torch.cuda.synchronize()
print(f"{cases} cases equal the reference; backward ran")
PY
