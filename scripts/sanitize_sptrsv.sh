#!/usr/bin/env bash
# compute-sanitizer memcheck over sampled SpTRSV schemes (every code variant of the reduced
# space) on small edge-case factors: a dense row, rows without off-diagonal entries,
# diagonal only, n = 1, a unit diagonal stored nowhere, no entries, int64 indices.
# Run on a GPU machine from the repository root: bash scripts/sanitize_sptrsv.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src"
exec compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 --print-limit 20 \
    python3 scripts/sptrsv_selfcheck.py "$@"
