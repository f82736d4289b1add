#!/bin/sh
# fp32 and bf16 matrix-product rates at hetseq's GEMM shapes (bench/bf16_gemm_bench: OpenBLAS SGEMM,
# oneDNN's fp32 matmul, hetseq's bf16 product through oneDNN and through rounded operands + SGEMM), for
# every thread count and OpenBLAS kernel setting: the data behind the choice of library for hetseq's
# fp32 products (docs/performance.md, "oneDNN for the fp32 products?"). Within a run the columns take
# turns in every repetition; the 1-minute load average is printed before every run.
# CORETYPES: OpenBLAS kernel settings to run ("unset" = OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# removed), by default the environment's value and unset.
#   usage (in the build directory, after `make bench/bf16_gemm_bench`):
#     $top_srcdir/bench/run_gemm_bench.sh [THREADS... [-- REPS [SPEC...]]]
#     defaults: threads 1 2; 5 repetitions; specs "mini:all cnn:all base:fp32" (SET:COLUMNS, see bench/bf16_gemm_bench.c)
#   e.g. CORETYPES="unset SkylakeX" $top_srcdir/bench/run_gemm_bench.sh 1 2
set -eu
threads_list=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do threads_list="$threads_list $1"; shift; done
[ $# -gt 0 ] && shift
threads_list=${threads_list:-" 1 2"}
reps=${1:-5}
[ $# -gt 0 ] && shift
specs=${*:-"mini:all cnn:all base:fp32"}
builddir=${top_builddir:-.}
bench=$(cd "$builddir" && pwd)/bench/bf16_gemm_bench
[ -x "$bench" ] || { echo "$bench not built: run 'make bench/bf16_gemm_bench' in the build directory" >&2; exit 1; }
if [ -z "${CORETYPES:-}" ]; then
  CORETYPES="unset"
  [ -n "${OPENBLAS_CORETYPE:-}" ] && CORETYPES="$OPENBLAS_CORETYPE unset"
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); BF16 instructions:" \
  "$(grep -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for spec in $specs; do
  for t in $threads_list; do
    for ct in $CORETYPES; do
      echo "== $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg), set ${spec%%:*}, threads $t, kernels $ct"
      if [ "$ct" = unset ]; then
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$t" "$bench" "$reps" "${spec%%:*}" "${spec#*:}"
      else
        OPENBLAS_CORETYPE="$ct" OMP_NUM_THREADS="$t" "$bench" "$reps" "${spec%%:*}" "${spec#*:}"
      fi
    done
  done
done
echo "== end $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
