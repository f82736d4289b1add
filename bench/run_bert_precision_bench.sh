#!/bin/sh
# BERT-mini training throughput in fp32 and bf16, hetseq's CPU backend next to PyTorch 2.x, same model
# (4 layers, hidden 256, 4 heads, intermediate 1024, vocabulary 30528, MLM head on the 20 labelled
# positions), batch 32 x 128, AdamW, same threads:
#   hetseq fp32       bench/bert_bench ... fp32
#   hetseq bf16       bench/bert_bench ... bf16 (precision = "bf16": GEMM operands rounded to bf16, fp32 sums)
#   torch fp32        bench/bert_torch.py ... fp32 masked
#   torch bf16        bench/bert_torch.py ... bf16 masked (torch.autocast("cpu", dtype=torch.bfloat16))
# Every run is a fresh process; a round runs all sides one after the other for every thread count and
# OpenBLAS kernel setting, and rounds repeat that order, so that load on a shared node falls on every
# side alike (interleaved). Each run's line carries the 1-minute load average read just before it; the
# summary gives the median round (and the range) per side with the ratio to hetseq fp32 of the same
# threads and kernels.
#
# OpenBLAS picks its kernels by CPU model unless OPENBLAS_CORETYPE names them (docs/performance.md):
# hetseq is run with each value in CORETYPES ("unset" = OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# removed), by default the environment's value and unset. PyPI's torch 2.x computes with MKL and oneDNN,
# not OpenBLAS, so it is run once per round and thread count, with OPENBLAS_* removed.
#
#   usage (in the build directory, after `make bench/bert_bench`):
#     TORCH2_PYTHON=/opt/torch2/bin/python $top_srcdir/bench/run_bert_precision_bench.sh [THREADS... [-- ITERATIONS WARMUP ROUNDS]]
#     defaults: threads 1 2; 4 timed steps after 2 warm-up steps, 2 rounds
#   e.g. CORETYPES="unset SkylakeX" TORCH2_PYTHON=/opt/torch2/bin/python $top_srcdir/bench/run_bert_precision_bench.sh 1 2
# TORCH2_PYTHON: an interpreter with torch >= 2 (a venv: python3 -m venv DIR && DIR/bin/pip install
# torch); without it, hetseq only. SIDES limits the sides (default "hs-fp32 hs-bf16 torch-fp32 torch-bf16").
set -eu
threads_list=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do threads_list="$threads_list $1"; shift; done
[ $# -gt 0 ] && shift
threads_list=${threads_list:-" 1 2"}
iterations=${1:-4}
warmup=${2:-2}
rounds=${3:-2}
for n in $threads_list $iterations $rounds; do
  case $n in '' | *[!0-9]* | 0) echo "threads, iterations and rounds are whole numbers >= 1 (got '$n')" >&2; exit 2 ;; esac
done
case $warmup in '' | *[!0-9]*) echo "warm-up steps: a whole number >= 0 (got '$warmup')" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
builddir=${top_builddir:-.}
bench=$(cd "$builddir" && pwd)/bench/bert_bench
[ -x "$bench" ] || { echo "$bench not built: run 'make bench/bert_bench' in the build directory" >&2; exit 1; }
torch2=${TORCH2_PYTHON:-}
sides=${SIDES:-"hs-fp32 hs-bf16 torch-fp32 torch-bf16"}
if [ -n "$torch2" ] && ! "$torch2" -c 'import torch; assert int(torch.__version__.split(".")[0]) >= 2' 2>/dev/null; then
  echo "TORCH2_PYTHON=$torch2 has no torch >= 2: hetseq only" >&2
  torch2=
fi
if [ -z "${CORETYPES:-}" ]; then
  CORETYPES="unset"
  [ -n "${OPENBLAS_CORETYPE:-}" ] && CORETYPES="$OPENBLAS_CORETYPE unset"
fi
has_side() { case " $sides " in *" $1 "*) return 0 ;; esac; return 1; }
load() { cut -d' ' -f1 /proc/loadavg; }
# field WORD: the number in front of WORD on a line
field() { awk -v w="$1" '{ for (i = 2; i <= NF; i++) if ($i == w) { print $(i-1); exit } }'; }

results=$(mktemp "${TMPDIR:-/tmp}/hetseq-precision-bench.XXXXXX")
trap 'rm -f "$results"' EXIT INT TERM
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); BF16 instructions:" \
  "$(grep -o -m1 -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ' || true)"
grep -q -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo || echo "  (none: bf16 products are emulated with fp32 instructions on both sides)"
[ -n "$torch2" ] && echo "torch: $("$torch2" -c 'import torch; print(torch.__version__)' 2>/dev/null) ($torch2)"
echo "batch 32 x 128, AdamW, $warmup warm-up + $iterations timed steps, $rounds rounds; load = 1-minute load average before each run"

# run SIDE THREADS CORETYPE: one fresh process, one result line
run() {
  side=$1 t=$2 ct=$3 l=$(load)
  case $side in
    hs-*)
      if [ "$ct" = unset ]; then
        out=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$t" "$bench" 32 "$iterations" "$warmup" adamw "${side#hs-}" 2>&1)
      else
        out=$(OPENBLAS_CORETYPE="$ct" OMP_NUM_THREADS="$t" "$bench" 32 "$iterations" "$warmup" adamw "${side#hs-}" 2>&1)
      fi ;;
    torch-*)
      out=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$torch2" "$here/bert_torch.py" "$t" "$iterations" "$warmup" \
        "${side#torch-}" masked 2>&1 | grep -v -i warn) ;;
  esac
  sps=$(printf '%s\n' "$out" | grep 'seq/s' | field seq/s)
  [ -n "$sps" ] || { printf '%s\n' "$out" >&2; echo "no seq/s from $side" >&2; exit 1; }
  case $side in
    hs-*) extra=$(printf '%s\n' "$out" | grep 'seq/s' | sed -n 's/.*\(SGEMM *[0-9.]* GFLOP\/s\).*/OpenBLAS \1/p') ;;
    *) extra=$(printf '%s\n' "$out" | grep 'seq/s' | sed -n 's/.*\[\(torch SGEMM.*\)\]/\1/p') ;;
  esac
  printf '%-10s threads %s  kernels %-8s %7.1f seq/s   load %s   %s\n' "$side" "$t" "$ct" "$sps" "$l" "$extra"
  echo "$t $ct $side $sps" >>"$results"
}

r=1
while [ $r -le "$rounds" ]; do
  echo "round $r ($(date -u +%H:%M:%S) UTC, load $(load))"
  for t in $threads_list; do
    for ct in $CORETYPES; do
      for side in hs-fp32 hs-bf16; do has_side $side && run $side "$t" "$ct"; done
    done
    if [ -n "$torch2" ]; then
      for side in torch-fp32 torch-bf16; do has_side $side && run $side "$t" mkl; done
    fi
  done
  r=$((r + 1))
done
echo "end ($(date -u +%H:%M:%S) UTC, load $(load))"

echo "summary: seq/s, median round (min-max), ratio of medians to hetseq fp32 with the same threads and kernels"
echo "(torch's ratio is to hetseq fp32 with the last kernels of CORETYPES: $(echo "$CORETYPES" | awk '{ print $NF }'))"
last_ct=$(echo "$CORETYPES" | awk '{ print $NF }')
# values arrive sorted within a key (sort -k4g), so the median is the middle one
sort -k1,1n -k2,2 -k3,3 -k4,4g "$results" | awk -v last="$last_ct" '
  function flush() {
    if (key == "") return
    n = m
    med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    median[key] = med; lo[key] = v[1]; hi[key] = v[n]; order[++count] = key
  }
  { k = $1 " " $2 " " $3; if (k != key) { flush(); key = k; m = 0 } v[++m] = $4 }
  END {
    flush()
    for (i = 1; i <= count; i++) {
      split(order[i], f, " ")
      ref = f[1] " " (f[2] == "mkl" ? last : f[2]) " hs-fp32"
      printf("  threads %s  %-10s kernels %-8s %7.1f (%.1f-%.1f) seq/s", f[1], f[3], f[2], median[order[i]], lo[order[i]], hi[order[i]])
      if (ref in median) printf("   %.2fx hetseq fp32", median[order[i]] / median[ref])
      printf("\n")
    }
  }'
