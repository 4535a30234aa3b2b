#!/usr/bin/env bash
# compute-sanitizer memcheck over a sampled g-SpMM schedule space on small edge-case graphs.
# Run on a GPU machine from the repository root: bash scripts/sanitize_spmm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src"
exec compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 --print-limit 20 \
    python3 scripts/spmm_selfcheck.py
