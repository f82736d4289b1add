# A user starts a CPU training run while another job loads the cores: the MFU figures of the log and of
# the metrics file never pass 1, and the peak they are measured against is printed with how it was
# found. Then a peak as low as one measured on busy cores (injected through HETSEQ_TEST_MFU_PEAK): hetseq
# finds it stale against the model's own rate, re-measures, says so, and still never logs mfu > 1.
. "$top_srcdir/tests/lib.sh"
export OMP_NUM_THREADS=2
DATA="$top_builddir/tests/fashion-mnist-small.h5"
train() {
  local name=$1; shift
  env "$@" timeout -k 5 300 "$HETSEQ" train "$top_srcdir/tests/e2e/small.cfg" -o data.path=\"$DATA\" \
    -o training.max_update=10 -o checkpoint.save_dir=\"ck_$name\" -o log.metrics_file=\"m.jsonl\" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "$name: training failed"; }
}
# at_most_one NAME: every mfu of the console lines and of the metrics records is <= 1 (and there are some)
at_most_one() {
  local c j
  c=$(sed -n 's/.*, mfu=\([0-9.]*\),.*/\1/p' "$1.log")
  j=$(sed -n 's/.*"type": "train".*"mfu": \([0-9.eE+-]*\),.*/\1/p' "ck_$1/m.jsonl")
  [ -n "$c" ] && [ -n "$j" ] || { cat "$1.log"; fail "$1: no mfu figures logged"; }
  printf '%s\n' $c $j | awk '$1 > 1 { exit 1 }' || { cat "$1.log"; fail "$1: an mfu above 1: $(echo $c) / $(echo $j)"; }
}

# two busy loops on the cores while the run starts and trains (ended by their pids)
( while :; do :; done ) & load1=$!
( while :; do :; done ) & load2=$!
trap 'kill $load1 $load2 2>/dev/null; remove_scratch' EXIT
train loaded
kill $load1 $load2; wait $load1 $load2 2>/dev/null
grep -qE '^\| MFU against [0-9.e+-]+ TFLOP/s per rank \(SGEMM 512×512×512 measured at start, best of 0\.5 s\)$' loaded.log ||
  { cat loaded.log; fail "the peak is not logged with how it was measured"; }
at_most_one loaded

# a stale peak: re-measured, said, capped
train stale HETSEQ_TEST_MFU_PEAK=1e6
grep -q '^| MFU against 1e-06 TFLOP/s per rank (HETSEQ_TEST_MFU_PEAK, as if measured on busy cores)$' stale.log ||
  { cat stale.log; fail "the injected peak was not used"; }
grep -qE '^\| MFU: the model ran at [0-9.e+-]+ TFLOP/s per rank, above the peak of 1e-06 TFLOP/s .*: that peak is stale .*; re-measured: [0-9.e+-]+ TFLOP/s$' \
  stale.log || { cat stale.log; fail "the stale peak was not re-measured and said"; }
[ "$(grep -c 'that peak is stale' stale.log)" = 1 ] || { cat stale.log; fail "the peak was re-measured more than once"; }
at_most_one stale
pass
