# A user estimates BERT's device work per update at a GPU's micro-batch without a GPU
# (bench/gpu/ledger_bert.sh: two short runs on the emulated device with the device-op ledger, extrapolated
# by bench/gpu/ledger_scale.py): for the tests' small BERT at bf16, micro-batches 2 and 4 extrapolated to
# 8 give the device ops of a run at 8 exactly and its bytes within 0.1 % (the MLM head's rows follow the
# data, not the batch alone), and extrapolating to 2 and 4 gives those runs' figures back. Tables of
# other models, or an op without a byte count, end with a message.
. "$top_srcdir/tests/lib.sh"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
need_python h5py numpy
S="$top_srcdir/bench/gpu/ledger_scale.py"
small=(--config "$top_srcdir/tests/e2e/bert_small.cfg" --seq-len 32 --pred 5 --vocab 1000 --hetseq "$EMU" --keep)
# est BATCHES TO: the summary line's device ops and bytes ("OPS BYTES"); the runs' logs stay (--keep) in
# ./hetseq-ledger.*/bB.log
est() {
  TMPDIR=$PWD bash "$top_srcdir/bench/gpu/ledger_bert.sh" "$top_builddir" "${small[@]}" --batches "$1" --to "$2" \
    > "est_$1_$2.md" 2> "est_$1_$2.err" || { cat "est_$1_$2.err"; fail "ledger_bert.sh --batches $1 --to $2 failed"; }
  sed -n 's/^\([0-9.]*\) device ops, .* GB (\([0-9]*\) bytes) moved.*/\1 \2/p' "est_$1_$2.md"
}
read -r ops8 bytes8 <<< "$(est 8,1 8)"
read -r ops bytes <<< "$(est 2,4 8)"
[ -n "$ops8" ] && [ -n "$ops" ] || fail "no summary line: $(cat est_2,4_8.md)"
dir=$(dirname "$(ls hetseq-ledger.*/b2.log)")
[ "$ops" = "$ops8" ] || fail "device ops extrapolated from 2 and 4 to 8: $ops, measured at 8: $ops8"
awk -v a="$bytes" -v b="$bytes8" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.001 * b) }' ||
  fail "bytes extrapolated from 2 and 4 to 8: $bytes, measured at 8: $bytes8 (more than 0.1 % apart)"
echo "ok: micro-batch 8 from 2 and 4: $ops device ops, $bytes bytes; measured $ops8, $bytes8"
for b in 2 4; do
  read -r o y <<< "$("$PYTHON_TORCH" "$S" "$dir/b2.log" 2 "$dir/b4.log" 4 --to $b --exclude "to_half_kernel (parameter copy)" |
    sed -n 's/^\([0-9.]*\) device ops, .* GB (\([0-9]*\) bytes) moved.*/\1 \2/p')"
  # the run's own table: its bytes over its second update (the scripts' HETSEQ_CUDA_LEDGER_WARMUP=1), the
  # one-time parameter copy left out
  grep -q '^| device-op ledger over 1 update(s) after the first 1:' "$dir/b$b.log" ||
    fail "the run at $b: no table of its second update alone (HETSEQ_CUDA_LEDGER_WARMUP=1)"
  want=$(awk '/^\| device-op ledger over 1 update/ { on = 1; next } on && /^\| / && $0 !~ /parameter copy/ &&
              $(NF - 1) ~ /^[0-9]+$/ { s += $(NF - 1) } END { printf "%.0f", s }' "$dir/b$b.log")
  [ -n "$o" ] && [ "$o" = "$ops8" ] || fail "--to $b: $o device ops, not $ops8"
  [ "$y" = "$want" ] || fail "--to $b: $y bytes, the run at $b moved $want"
done
echo "ok: extrapolating to the measured micro-batches gives their figures back"

# a table of another run, an op without a byte count
sed 's/^| layernorm_backward_dx_kernel /| another_kernel /' "$dir/b4.log" > other.log
grep -q '^| another_kernel ' other.log || fail "the fixture of other ops was not made"
out=$("$PYTHON_TORCH" "$S" "$dir/b2.log" 2 other.log 4 --to 8 2>&1) && fail "tables of other ops were accepted"
printf '%s\n' "$out" | grep -q "the two runs ran other ops (only in $dir/b2.log: layernorm_backward_dx_kernel; only in other.log: another_kernel)" ||
  fail "other ops: $out"
sed -E 's/^(\| layernorm_forward_kernel +kernel +[0-9]+ +[0-9.]+ +[0-9]+)/\1+?/' "$dir/b4.log" > unsized.log
grep -q '^| layernorm_forward_kernel .*+?' unsized.log || fail "the unsized fixture was not made"
out=$("$PYTHON_TORCH" "$S" "$dir/b2.log" 2 unsized.log 4 --to 8 2>&1) && fail "an op without a byte count was accepted"
printf '%s\n' "$out" | grep -q "unsized.log: layernorm_forward_kernel was launched without a byte count" || fail "unsized: $out"
echo "ok: tables of other ops, and an op without a byte count, end with a message"
pass
