# A user starts a second phase from a first phase's checkpoint (checkpoint.init_checkpoint): the weights
# come from that checkpoint (checked with a learning rate of 0, so one update leaves them unchanged),
# the optimizer moments are kept, and reset_step decides whether the update count restarts.
. "$top_srcdir/tests/lib.sh"
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
CMP="$top_builddir/tests/tools/h5compare"
d="-o data.path=\"$DATA\""
mpi 2 "$HETSEQ" train "$CFG" $d -o training.max_update=5 -o checkpoint.save_dir=\"phase1\" > p1.log 2>&1 \
  || { cat p1.log; fail "phase 1 failed"; }
mpi 2 "$HETSEQ" train "$CFG" $d -o training.max_update=1 -o checkpoint.save_dir=\"phase2\" \
  -o checkpoint.init_checkpoint=\"phase1/checkpoint_last.h5\" -o checkpoint.reset_step=true \
  -o optimizer.lr=0.0 -o lr_scheduler.name=\"constant\" > p2.log 2>&1 || { cat p2.log; fail "phase 2 failed"; }
grep -q "initialised weights and optimizer moments from phase1/checkpoint_last.h5 (step counters reset)" p2.log \
  || { cat p2.log; fail "phase 2 did not report starting from phase 1"; }
grep -q "num_updates=1," p2.log || fail "with reset_step the first update of phase 2 is update 1"
"$CMP" phase1/checkpoint_last.h5 phase2/checkpoint_last.h5 0 || fail "phase 2 did not start from phase 1's weights"
# Without reset_step the update count continues from the checkpoint's.
mpi 2 "$HETSEQ" train "$CFG" $d -o training.max_update=7 -o checkpoint.save_dir=\"cont\" \
  -o checkpoint.init_checkpoint=\"phase1/checkpoint_last.h5\" > cont.log 2>&1 || { cat cont.log; fail "continuation failed"; }
grep -q "num_updates=6," cont.log || { cat cont.log; fail "without reset_step the update count must continue at 6"; }
# A checkpoint of another optimizer cannot give its moments: a clear error that names the fix.
expect_error "optimizer mismatch" "reset_optimizer" mpi 2 "$HETSEQ" train "$CFG" $d -o optimizer.name=\"adam\" \
  -o checkpoint.save_dir=\"other\" -o checkpoint.init_checkpoint=\"phase1/checkpoint_last.h5\"
pass
