#!/bin/bash
# Re-measure the open issues' bars on a lent GPU, one part per device call (each under the
# device tool's 10 minutes), from the repository root:
#
#     bash scripts/issue_bars.sh PART OUT
#
# PART is one of:
#   tests      the GPU test suite, distributed tests aside (tests/distributed has its own script)
#   tuning     issue 18: the model policy's decision time on this host's CPU, a fresh draw of
#              the five held-out families with the tune policy, the width cells
#              (96 / 100 / 128 features) and today's space on every cell once below 1.1x
#              cuSPARSE; then the reports
#   sptrsv     issue 20: the solver's default, the fast start and cuSPARSE on the 13 factors of
#              docs/performance.md, 1 and 16 right-hand sides
#   minibatch  issue 19: the input gather's kernel probe, the mini-batch checks and benchmark
#              (eager and captured steps, PyG)
#
# Every command is the one docs/performance.md quotes for its table; OUT receives the raw
# files and a log per part. Real graphs come from GSPARSE_DATA_DIR (or the shipped copies).
set -u
part=${1:?"usage: bash scripts/issue_bars.sh tests|tuning|sptrsv|minibatch OUT"}
out=${2:?"usage: bash scripts/issue_bars.sh PART OUT"}
mkdir -p "$out"
export PYTHONPATH=src
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
seed=${SEED:-$(date +%j)}  # a new draw of graphs unless SEED is given

case "$part" in
  tests)
    timeout 560 python3 -m pytest -q -m gpu -n "$(nproc)" -p no:cacheprovider -W ignore -rfE \
      --ignore=tests/distributed tests 2>&1 | tail -15 | tee "$out/tests.log"
    ;;
  tuning)
    # first, alone on the machine: the decision is host work, timed on one core
    OMP_NUM_THREADS=1 timeout 70 taskset -c 1 python3 scripts/decision_time.py --repeats 60 > "$out/decision_time.txt" 2>&1
    timeout 240 python3 -m gsparse.tune.collect --out "$out/heldout" --families knn,molecules,small_world,citation,cliques \
      --graphs 12 --cells-per-graph 4 --budget-s 180 --seed "$seed" --tune 2>&1 | tail -3
    timeout 150 python3 -m gsparse.tune.collect --out "$out/widths" --families community,rmat,power_law \
      --graphs 3 --min-edges 1e7 --max-edges 2e7 --features 96,100,128 \
      --cases spmm:copy_lhs:sum,spmm:mul:sum,sddmm:u:dot:v --dtypes float32 --cells-per-graph 0 \
      --budget-s 90 --work-cap 3e9 --seed "$seed" 2>&1 | tail -3
    timeout 100 python3 scripts/row_split_probe.py docs/results/tuning/h100-2026-11-25-run*.jsonl.gz \
      --below 1.1 2>&1 | grep -v -i warn > "$out/probe.log"
    {
      python3 scripts/tuning_report.py "$out/heldout/cells.jsonl" --worst 8
      python3 scripts/width_report.py "$out/widths/cells.jsonl"
      grep -E "space \(" "$out/probe.log"
      tail -6 "$out/decision_time.txt"
    } 2>&1 | tee "$out/tuning.md"
    ;;
  sptrsv)
    matrices=cora,citeseer,pubmed_cites,laplacian2d:500000,laplacian3d:500000,power_law:500000,rmat:500000,road:500000,banded:100000,geometric:500000,stencil:500000,community:500000:1,laplacian3d:4000000
    # the kernel cache filled first, so that the timed run compiles nothing
    timeout 200 python3 -m gsparse.bench.sptrsv --matrices "$matrices" --rhs 1,16 --dtypes float64 \
      --budget 0.01 --implementations gsparse,fast_start --kernel-cache "$out/kernels" --out "$out/prefill" \
      > /dev/null 2>&1
    timeout 340 python3 -m gsparse.bench.sptrsv --matrices "$matrices" --rhs 1,16 --dtypes float64 \
      --budget 0.1 --implementations gsparse,fast_start,cusparse --kernel-cache "$out/kernels" \
      --out "$out/bench" 2>&1 | tail -3
    cat "$out/bench/sptrsv.md"
    ;;
  minibatch)
    timeout 60 python3 scripts/gather_features_probe.py 2>&1 | tee "$out/gather_features.txt"
    timeout 500 python3 scripts/minibatch_check.py --bench --out "$out/minibatch" 2>&1 | tail -40 \
      | tee "$out/minibatch.log"
    ;;
  *)
    echo "unknown part $part: tests, tuning, sptrsv or minibatch" >&2
    exit 2
    ;;
esac
