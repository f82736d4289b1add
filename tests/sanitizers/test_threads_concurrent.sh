# Every thread of a training job at once, for the sanitizer runs (make check-tsan, make check-asan):
# 2 ranks train with update_freq 2 (two micro-batches per prefetch request), the prefetch thread reads
# the next update's collective HDF5 micro-batches while the main thread computes, all-reduces and
# writes a checkpoint after EVERY update (the process-wide HDF5 lock between the two), validates every 5
# updates, and the stall inspector thread polls its own communicator all along
# (distributed.stall_timeout = 30). The job then resumes from its checkpoint. Finally rank 1 stalls
# (HETSEQ_FAULT) for longer than a 2 s stall_timeout: rank 0's inspector thread asks its peer, reports
# and ends the job while the main thread waits in the gradient all-reduce.
# Under ThreadSanitizer a data race in any of this fails the test (tests/sanitizers/san_check.sh).
. "$top_srcdir/tests/lib.sh"
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
[ -f "$DATA" ] || fail "$DATA is missing (make tests/fashion-mnist-small.h5)"
common="-o data.path=\"$DATA\" -o training.max_sentences=16 -o training.update_freq=2 -o training.max_epoch=0
 -o checkpoint.save_interval_updates=1 -o checkpoint.save_dir=\"ck\" -o training.validate_interval_updates=5
 -o distributed.stall_timeout=30.0"

t0=$(date +%s.%N)
mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=12 > run1.log 2>&1 || { cat run1.log; fail "training failed"; }
# The stalled job below trains 3 of these updates first: its liveness bound is measured from this run.
run1_seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
n_valid=$(grep -c "valid on" run1.log)
[ "$n_valid" -ge 2 ] || { cat run1.log; fail "expected validation at updates 5 and 10, saw $n_valid"; }
[ -f ck/checkpoint_last.h5 ] || { cat run1.log; fail "no checkpoint_last.h5"; }
echo "ok: 12 updates on 2 ranks, a checkpoint after each, $n_valid validations"

mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=16 > run2.log 2>&1 || { cat run2.log; fail "resumed training failed"; }
grep -q "resuming from ck/checkpoint_last.h5" run2.log || { cat run2.log; fail "the second run did not resume"; }
echo "ok: resumed to update 16"

# The inspector ends a stalled job from its own thread: one report, every rank ends.
stalled_job() {
  HETSEQ_FAULT="stall:rank=1:update=3:seconds=60"; export HETSEQ_FAULT
  mpi 2 "$HETSEQ" train "$CFG" -o data.path=\"$DATA\" -o training.max_sentences=16 -o training.max_update=6 \
    -o checkpoint.save_dir=\"ck3\" -o distributed.stall_timeout=2.0
}
HS_ERROR_BASE=$run1_seconds HS_ERROR_WAIT=2 expect_error "stall detected by the inspector thread" "stalled: rank 0" stalled_job
pass
