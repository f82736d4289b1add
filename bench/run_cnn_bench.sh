#!/bin/sh
# CNN training throughput, hetseq's CPU backend next to PyTorch: same net, batch and thread count.
# Each side runs ROUNDS times, alternating, and the best round counts (other load on the node only
# ever slows a round down).
#   usage (in the build directory, after `make bench`):
#     $top_srcdir/bench/run_cnn_bench.sh [THREADS [BATCH [ITERATIONS [ROUNDS]]]]
set -eu
threads=${1:-2}
batch=${2:-64}
iterations=${3:-40}
rounds=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
builddir=${top_builddir:-.}
python=${PYTHON_TORCH:-/usr/bin/python3}
[ -x "$builddir/bench/cnn_bench" ] || { echo "bench/cnn_bench not built: run 'make bench' in the build directory" >&2; exit 1; }
have_torch=yes
"$python" -c 'import torch' 2>/dev/null || have_torch=no
export OMP_NUM_THREADS="$threads"

best() { awk '{ for (i = 1; i <= NF; i++) if ($i == "images/s") print $(i-1) }' | sort -g | tail -1; }
hs_runs= pt_runs=
r=0
while [ $r -lt "$rounds" ]; do
  hs_runs="$hs_runs$("$builddir/bench/cnn_bench" "$batch" "$iterations")
"
  [ $have_torch = no ] || pt_runs="$pt_runs$("$python" "$here/cnn_torch.py" "$batch" "$iterations" 2>/dev/null)
"
  r=$((r + 1))
done
hs=$(printf '%s' "$hs_runs" | best)
printf 'MNIST CNN training, batch %s, %s threads, best of %s rounds of %s iterations:\n' "$batch" "$threads" "$rounds" "$iterations"
printf '  hetseq (CPU backend)  %8.1f images/s\n' "$hs"
if [ $have_torch = yes ]; then
  pt=$(printf '%s' "$pt_runs" | best)
  printf '  PyTorch %-13s %8.1f images/s\n' "$("$python" -c 'import torch; print(torch.__version__)')" "$pt"
  awk -v a="$hs" -v b="$pt" 'BEGIN { printf("  speed-up over PyTorch: %.2fx\n", a / b) }'
else
  echo "  PyTorch not available to $python: no comparison"
fi
