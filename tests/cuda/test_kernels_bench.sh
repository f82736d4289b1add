#!/bin/sh
# The memory-bound kernel benchmark (bench/gpu/kernels_bench.c) runs on the emulated device at tiny
# shapes: every row is there, with its launches and a non-zero byte count from the device-op ledger, and
# the peak bandwidth comes from the device's attributes; the fused attention's rows (bf16, tf32) at two
# shapes each, with a TFLOP/s column. Figures are the emulator's (not checked).
set -eu
bench=${top_builddir:-.}/tests/cuda/kernels_bench_emu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bench" --small --reps 1 >"$out" 2>&1 || { cat "$out"; echo "FAIL: kernels_bench exited $?" >&2; exit 1; }
cat "$out"
fail=0
for op in "layernorm_forward " "layernorm_forward (+ residual)" layernorm_backward "dropout_forward (hidden)" \
  bias_gelu_forward gelu_backward "dropout_forward (attention probs)" log_softmax_nll_forward \
  log_softmax_nll_backward "gather_rows (word embedding)" "scatter_add_rows (word gradient)" \
  "scatter_add_rows (position)" "scatter_add_rows (token type)" "sumsq_tensors (gradient norm)" lamb_update \
  "to_half (fp32 -> 16 bits)" "from_half (16 bits -> fp32)" "flash_attention_forward (bf16)" \
  "flash_attention_backward (bf16)" "flash_attention_forward (tf32)" "flash_attention_backward (tf32)"; do
  # | op | shape | launches | MB | us | GB/s | peak |: launches >= 1 and MB > 0
  row=$(grep -F "| $op" "$out" | head -1)
  if [ -z "$row" ]; then echo "FAIL: no row for $op" >&2; fail=1; continue; fi
  echo "$row" | awk -F'|' '{ exit !($4 + 0 >= 1 && $5 + 0 > 0) }' ||
    { echo "FAIL: $op: no launch or no bytes counted: $row" >&2; fail=1; }
done
[ "$(grep -c '| flash_attention_.*TFLOP\|| flash_attention_[a-z]* ([a-z0-9]*) .*|[ 0-9.]*|$' "$out")" -ge 8 ] ||
  { echo "FAIL: expected 8 fused-attention rows (2 ops x 2 precisions x 2 shapes) with a TFLOP/s column" >&2; fail=1; }
grep -q "^peak memory bandwidth 1555 GB/s" "$out" || { echo "FAIL: peak bandwidth not from the device's attributes" >&2; fail=1; }
exit $fail
