#!/usr/bin/env bash
# compute-sanitizer memcheck over sampled SpTRSV schemes (every code variant of the reduced
# space, and the fast start's) on small edge-case factors: a dense row, rows without
# off-diagonal entries, diagonal only, n = 1, a unit diagonal stored nowhere, no entries,
# int64 indices. The checks run in SHARDS processes side by side (default: half the CPU
# cores), each under its own sanitizer: most of a run is compiling and loading kernel
# variants, which one process would do one at a time.
# Run on a GPU machine from the repository root: bash scripts/sanitize_sptrsv.sh [--seed S]
# (SHARDS=N to choose the processes, LOGS=DIR to keep their logs).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src"
shards=${SHARDS:-$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))}
logs=${LOGS:-$(mktemp -d)}  # each shard's log, with its progress
mkdir -p "$logs"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
for ((i = 0; i < shards; i++)); do
    compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 --print-limit 20 \
        python3 scripts/sptrsv_selfcheck.py --shard "$i/$shards" "$@" > "$logs/$i.log" 2>&1 &
    pids+=($!)
done
status=0
for ((i = 0; i < shards; i++)); do
    wait "${pids[$i]}" || status=1
    echo "--- shard $i/$shards"
    grep -v "checked$" "$logs/$i.log"
done
echo "memcheck over $shards shards: $([ $status = 0 ] && echo clean || echo FAILED)"
exit $status
