# A user runs 3 ranks over 16 batches: ranks 1 and 2 get an EMPTY micro-batch at the end of each
# epoch. The job must finish two epochs with validation, on every rank, without hanging.
. "$top_srcdir/tests/lib.sh"
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
mpi 3 "$HETSEQ" train "$CFG" -o data.path=\"$DATA\" -o training.max_update=0 -o training.max_epoch=2 \
  -o checkpoint.save_dir=\"ck\" > run.log 2>&1 || { cat run.log; fail "3-rank run failed"; }
cat run.log
grep -q "6 updates per epoch" run.log || fail "expected ceil(16/3)=6 updates per epoch"
[ "$(grep -c "valid on 'test' subset" run.log)" -eq 2 ] || fail "expected one validation per epoch"
grep -q "samples 500 " run.log || fail "validation must see all 500 test images exactly once"
[ -f ck/checkpoint2.h5 ] && [ -f ck/checkpoint1.h5 ] || fail "epoch checkpoints missing"
pass
