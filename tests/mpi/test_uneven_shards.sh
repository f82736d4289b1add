# A user runs 3 ranks over 16 batches: ranks 1 and 2 get an EMPTY micro-batch at the end of each
# epoch. The job must finish two epochs with validation, on every rank, without hanging.
. "$top_srcdir/tests/lib.sh"
# an update whose micro-batch is empty on a rank zeroes every gradient there (no writer runs); the
# gradients other updates' first writers write whole start as NaN (src/nn/params.h): either mistake shows
export HETSEQ_CHECK_GRADS_WRITTEN=1
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
mpi 3 "$HETSEQ" train "$CFG" -o data.path=\"$DATA\" -o training.max_update=0 -o training.max_epoch=2 \
  -o checkpoint.save_dir=\"ck\" > run.log 2>&1 || { cat run.log; fail "3-rank run failed"; }
cat run.log
! grep -qiw "nan" run.log || fail "a non-finite value in the log"
grep -q "6 updates per epoch" run.log || fail "expected ceil(16/3)=6 updates per epoch"
[ "$(grep -c "valid on 'test' subset" run.log)" -eq 2 ] || fail "expected one validation per epoch"
grep -q "samples 500 " run.log || fail "validation must see all 500 test images exactly once"
[ -f ck/checkpoint2.h5 ] && [ -f ck/checkpoint1.h5 ] || fail "epoch checkpoints missing"
pass
