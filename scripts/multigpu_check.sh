#!/usr/bin/env bash
# The distributed measurements, on one machine with several GPUs, in one command:
#   bash scripts/multigpu_check.sh OUT [tests] [bench] [local] [papersbench[=SCALE]] [papers[=SCALE]]
# Steps (all by default):
#   tests   the distributed tests on NCCL, a GPU per rank (-m gpu tests/distributed);
#   bench   gsparse.bench.distributed on products-like at world sizes 1, 2, 4, 8 (up to the
#           GPUs present): strong scaling, the all-gather baseline, world size 1 against
#           the single-GPU operators;
#   local   the same with --locality 0.9 (90% of each row's sources in its own block);
#   papersbench[=SCALE]  the same on papers100m-like@SCALE (default 0.05; 10% of the edges
#           read sources anywhere, the others in their rank's range: a partitioned graph);
#   papers  full-batch training of a 2-layer GCN (hidden 256) on papers100m-like@SCALE
#           (default 1.0) over every GPU; at half that scale if it runs out of memory.
#           TRAIN_ARGS adds flags to its command (e.g. TRAIN_ARGS=--recompute-first).
# Writes OUT/topology.txt, OUT/dist-tests.log, OUT/bench.tgz (the bench's JSON and
# Markdown per series) and OUT/papers-SCALE.json; the rest goes to stdout.
set -u
out=${1:?usage: scripts/multigpu_check.sh OUT [tests] [bench] [local] [papersbench[=SCALE]] [papers[=SCALE]]}
shift
steps=${*:-tests bench local papers}
mkdir -p "$out"
cd "$(dirname "$0")/.."
# NVLink multicast stays off on shared hosts (see the device notes).
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=${GPUS:-$(python3 -c "import torch; print(torch.cuda.device_count())")}  # GPUS=N: N CPU ranks (gloo) where no GPU is present
echo "GPUs: $gpus"
nvidia-smi topo -m > "$out/topology.txt" 2>&1

series() {  # series NAME ARGS...: the bench at every world size into OUT/series/NAME
    local name=$1; shift
    for w in 1 2 4 8; do
        [ "$w" -le "$gpus" ] || break
        echo "== bench $name, world size $w"
        timeout 150 torchrun --nproc-per-node "$w" -m gsparse.bench.distributed --graph products-like "$@" \
            --out "$out/series/$name" 2>&1 | grep -v "^W1\|OMP_NUM_THREADS\|^\*\*\*"
    done
}

for step in $steps; do
    case $step in
    tests)
        echo "== tests"
        timeout 240 python3 -m pytest -q -m gpu tests/distributed -p no:cacheprovider -W ignore -rfE \
            > "$out/dist-tests.log" 2>&1
        tail -n 3 "$out/dist-tests.log" ;;
    bench) series uniform ;;
    local) series locality-0.9 --locality 0.9 ;;
    papersbench*)
        scale=${step#papersbench}; scale=${scale#=}; scale=${scale:-0.05}
        series "papers-$scale" --graph "papers100m-like@$scale" ;;
    papers*)
        scale=${step#papers}; scale=${scale#=}; scale=${scale:-1.0}
        for s in "$scale" "$(python3 -c "print($scale / 2)")"; do
            echo "== papers100m-like@$s on $gpus GPUs"
            if timeout 240 torchrun --nproc-per-node "$gpus" -m gsparse.distributed.train \
                --graph "papers100m-like@$s" --hidden 256 --epochs 5 --warmup 1 --json "$out/papers-$s.json" ${TRAIN_ARGS:-} \
                2>&1 | grep -v "^W1\|OMP_NUM_THREADS\|^\*\*\*"; then
                [ -s "$out/papers-$s.json" ] && break
            fi
        done ;;
    *) echo "unknown step $step"; exit 2 ;;
    esac
done
[ -d "$out/series" ] && tar czf "$out/bench.tgz" -C "$out" series && rm -rf "$out/series"
exit 0
