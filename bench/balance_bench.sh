#!/usr/bin/env bash
# What distributed.balance = "auto" buys on an unbalanced job: 3 ranks of the MNIST CNN where rank 0
# has a core of its own and ranks 1 and 2 share the other core (taskset), first with HetSeq's equal
# micro-batches, then with balance = auto (--mca mpi_yield_when_idle 1: a rank waiting in MPI must
# give its shared core to the rank that computes). Prints the time per update of the last updates of each run
# and the shares the balancer learned. A benchmark (figures in docs/performance.md), not a test.
#   bash bench/balance_bench.sh [BUILD_DIR]     (default: build)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
work=$(mktemp -d /tmp/hetseq-balance.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$build/hetseq" prep mnist --in "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" --limit-train 6000 \
  --limit-test 100 --out mnist.h5 > /dev/null
cat > pin.sh <<'PIN'
#!/bin/sh
# rank 0 alone on core 0, the others together on core 1
case "${OMPI_COMM_WORLD_RANK:-0}" in 0) exec taskset -c 0 "$@" ;; *) exec taskset -c 1 "$@" ;; esac
PIN
chmod +x pin.sh
updates=60
run() { # name extra...
  local name=$1; shift
  mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 3 ./pin.sh "$build/hetseq" train "$top/tests/e2e/small.cfg" \
    -o data.path=\"mnist.h5\" -o training.max_update=$updates -o training.max_epoch=0 -o training.max_sentences=64 \
    -o training.validate_interval=0 -o checkpoint.no_save=true -o log.interval=1 \
    -o log.metrics_file=\"$work/$name.jsonl\" "$@" > "$name.log" 2>&1
  # mean wall time per update over the last 40 updates (after warm-up and the first re-balance)
  awk -F'"wall": ' '/"type": "train"/ { split($2, a, ","); w[++n] = a[1] } END { printf "%.3f", (w[n] - w[n - 40]) / 40 }' "$name.jsonl"
}
equal=$(run equal)
auto=$(run auto -o 'distributed.balance="auto"' -o distributed.balance_warmup=5)
echo "3 ranks (rank 0 alone on a core, ranks 1-2 sharing one), CNN, 3 x 64 images per update:"
echo "  equal micro-batches:  $equal s per update"
echo "  balance = auto:       $auto s per update   ($(awk -v a="$equal" -v b="$auto" 'BEGIN { printf "%.2fx", a / b }') shorter)"
grep '^| balance = auto' auto.log | tail -1
