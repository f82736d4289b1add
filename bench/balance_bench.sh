#!/usr/bin/env bash
# What distributed.balance = "auto" buys on an unbalanced job: 3 ranks of the MNIST CNN where rank 0
# has a core of its own and ranks 1 and 2 share the other core (taskset), with HetSeq's equal
# micro-batches and with balance = auto, alternately, ROUNDS times. Ideal: equal shares make the two
# ranks of the shared core compute 2 x 1/3 of the global batch on one core, 2:1:1 shares 2 x 1/4, and
# rank 0 1/2 on its own core: 1.33x shorter updates, less whatever every rank pays per update whatever
# its share (optimizer step, gradient all-reduce), which the shared core pays twice.
# Compute-dominated as real training is: IMAGES per rank per update (default 192), one thread per rank
# (OMP_NUM_THREADS=1), --mca mpi_yield_when_idle 1 (a rank waiting in MPI gives its shared core to the
# rank that computes). Prints the load, the median time of the updates after the first re-balance
# and the shares the balancer learned. A benchmark (figures in docs/performance.md), not a test.
#   bash bench/balance_bench.sh [BUILD_DIR]     (default: build; IMAGES=192 UPDATES=30 ROUNDS=3)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
images=${IMAGES:-192} updates=${UPDATES:-30} rounds=${ROUNDS:-3}
skip=10 # updates not counted: start-up, the warm-up (balance_warmup = 5) and the first shares' update
work=$(mktemp -d /tmp/hetseq-balance.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$build/hetseq" prep mnist --in "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" --limit-train 60000 \
  --limit-test 100 --out mnist.h5 > /dev/null
cat > pin.sh <<'PIN'
#!/bin/sh
# rank 0 alone on core 0, the others together on core 1
case "${OMPI_COMM_WORLD_RANK:-0}" in 0) exec taskset -c 0 "$@" ;; *) exec taskset -c 1 "$@" ;; esac
PIN
chmod +x pin.sh
run() { # name extra...
  local name=$1; shift
  mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 3 ./pin.sh "$build/hetseq" train "$top/tests/e2e/small.cfg" \
    -o data.path=\"mnist.h5\" -o training.max_update=$updates -o training.max_epoch=0 -o training.max_sentences=$images \
    -o training.validate_interval=0 -o checkpoint.no_save=true -o log.interval=1 \
    -o log.metrics_file=\"$work/$name.jsonl\" "$@" > "$name.log" 2>&1
  # the median wall time of the updates after the first `skip` (a burst of another job on the shared
  # machine moves the mean, hardly the median)
  awk -v skip=$skip -F'"wall": ' '/"type": "train"/ { split($2, a, ","); w[++n] = a[1]; if (n > skip) print w[n] - w[n - 1] }' \
    "$name.jsonl" | sort -g | awk '{ d[++n] = $1 } END { printf "%.3f", n % 2 ? d[(n + 1) / 2] : (d[n / 2] + d[n / 2 + 1]) / 2 }'
}
echo "3 ranks (rank 0 alone on a core, ranks 1-2 sharing one), CNN, 3 x $images images per update,"
echo "median time of updates $((skip + 1))-$updates; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
ratios=
for r in $(seq "$rounds"); do
  equal=$(run equal)
  auto=$(run auto -o 'distributed.balance="auto"' -o distributed.balance_warmup=5)
  ratio=$(awk -v a="$equal" -v b="$auto" 'BEGIN { printf "%.2f", a / b }')
  ratios="$ratios $ratio"
  echo "round $r: equal micro-batches $equal s, balance = auto $auto s: ${ratio}x shorter"
  grep '^| balance = auto' auto.log | sed 's/^/  /'
done
echo "median over the rounds: $(printf '%s\n' $ratios | sort -g | awk '{ d[++n] = $1 }
  END { printf "%.2f", n % 2 ? d[(n + 1) / 2] : (d[n / 2] + d[n / 2 + 1]) / 2 }')x shorter with balance = auto"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
