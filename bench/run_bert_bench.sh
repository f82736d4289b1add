#!/bin/sh
# BERT-mini pre-training throughput, hetseq's CPU backend next to PyTorch (tests/ref/bert_torch.py, the
# NVIDIA model) on the same thread count: sequences/s, model GFLOP/s, hetseq's rate as a fraction of
# OpenBLAS SGEMM measured in the same run, and peak resident memory. hetseq runs ROUNDS times and the
# best round counts (other load on the node only ever slows a round down); PyTorch runs once per MLM
# head variant (each in its own process, so its peak memory is per variant).
#   usage (in the build directory, after `make bench`):
#     $top_srcdir/bench/run_bert_bench.sh [THREADS [ITERATIONS [WARMUP [ROUNDS]]]]
set -eu
threads=${1:-2}
iterations=${2:-10}
warmup=${3:-3}
rounds=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
builddir=${top_builddir:-.}
python=${PYTHON_TORCH:-/usr/bin/python3}
[ -x "$builddir/bench/bert_bench" ] || { echo "bench/bert_bench not built: run 'make bench' in the build directory" >&2; exit 1; }
export OMP_NUM_THREADS="$threads"

# field VALUE-BEFORE-WORD: the number in front of WORD on a line
field() { awk -v w="$1" '{ for (i = 2; i <= NF; i++) if ($i == w) { print $(i-1); exit } }'; }

best_line= best=0
r=0
while [ $r -lt "$rounds" ]; do
  out=$("$builddir/bench/bert_bench" 32 "$iterations" "$warmup")
  line=$(printf '%s\n' "$out" | grep 'seq/s')
  sps=$(printf '%s\n' "$line" | field seq/s)
  if awk -v a="$sps" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$sps; best_line=$line; header=$(printf '%s\n' "$out" | head -1); fi
  r=$((r + 1))
done
echo "$header"
echo "  best of $rounds rounds:"
echo "$best_line"
hs_rss=$(printf '%s\n' "$best_line" | awk '{ for (i = 1; i <= NF; i++) if ($i == "RSS") print $(i+1) }')

if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "PyTorch not available to $python: no comparison"
  exit 0
fi
pt=$("$python" "$here/bert_torch.py" "$threads" "$iterations" "$warmup")
printf '%s\n' "$pt"
pt_all=$(printf '%s\n' "$pt" | grep 'all L' | field seq/s)
pt_masked=$(printf '%s\n' "$pt" | grep 'P only' | field seq/s)
rss_of() { printf '%s\n' "$pt" | grep "$1" | awk '{ for (i = 1; i <= NF; i++) if ($i == "RSS") print $(i+1) }'; }
echo "summary ($threads threads):"
awk -v h="$best" -v a="$pt_all" -v m="$pt_masked" -v hr="$hs_rss" -v ar="$(rss_of 'all L')" -v mr="$(rss_of 'P only')" 'BEGIN {
  printf("  hetseq %.1f seq/s, peak RSS %.0f MiB\n", h, hr);
  printf("  vs PyTorch, NVIDIA head on all L positions: %.2fx seq/s, memory %.2fx (%.0f MiB)\n", h / a, hr / ar, ar);
  printf("  vs PyTorch, head on the P labelled positions: %.2fx seq/s, memory %.2fx (%.0f MiB)\n", h / m, hr / mr, mr);
}'
