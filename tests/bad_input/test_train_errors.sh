# A user's mistakes: each gives one clear message and a non-zero exit on every rank within seconds,
# and never damages a checkpoint that is already saved.
. "$top_srcdir/tests/lib.sh"
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
d="-o data.path=\"$DATA\""

# A good run first, so there is a checkpoint to protect (timed: the diverging run below does as much work
# before it fails, so its liveness bound is measured from this run, not from a no-op job).
t0=$(date +%s.%N)
mpi 2 "$HETSEQ" train "$CFG" $d -o training.max_update=3 -o checkpoint.save_dir=\"ck\" > good.log 2>&1 \
  || { cat good.log; fail "the good run failed"; }
good_seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
sum_before=$(md5sum ck/checkpoint_last.h5)

cp "$CFG" typo.cfg && sed -i 's/max_sentences = 64/max_sentence = 64/' typo.cfg
expect_error "config typo" "typo.cfg:[0-9]+.*max_sentence.*max_sentences" mpi 2 "$HETSEQ" train typo.cfg $d
cp "$CFG" str.cfg && sed -i 's/lr = 1.01/lr = "fast"/' str.cfg
expect_error "string where a number belongs" "str.cfg:[0-9]+.*optimizer.lr" mpi 2 "$HETSEQ" train str.cfg $d
expect_error "max_sentences = 0" "max_sentences" mpi 2 "$HETSEQ" train "$CFG" $d -o training.max_sentences=0
expect_error "more ranks than batches" "more ranks" mpi 3 "$HETSEQ" train "$CFG" $d -o training.max_sentences=500
expect_error "missing data file" "error:.*nonexistent.h5" mpi 2 "$HETSEQ" train "$CFG" -o data.path=\"nonexistent.h5\" \
  -o checkpoint.save_dir=\"ck\"
head -c 20000 "$DATA" > truncated.h5
expect_error "truncated HDF5 file" "error:.*truncated.h5" mpi 2 "$HETSEQ" train "$CFG" -o data.path=\"truncated.h5\" \
  -o checkpoint.save_dir=\"ck\"
expect_error "unknown override" "optimizer.lrr.*optimizer.lr" mpi 2 "$HETSEQ" train "$CFG" $d -o optimizer.lrr=0.5
# A run that diverges after resuming: it stops with a message, and its save_dir keeps the good checkpoint.
cp -r ck ckdiv
sum_div=$(md5sum ckdiv/checkpoint_last.h5)
HS_ERROR_BASE=$good_seconds expect_error "diverging run" "diverged" mpi 2 "$HETSEQ" train "$CFG" $d -o optimizer.lr=1e38 \
  -o optimizer.clip_norm=0.0 -o training.max_update=7 -o checkpoint.save_dir=\"ckdiv\" \
  -o checkpoint.reset_lr_scheduler=true
[ "$(md5sum ckdiv/checkpoint_last.h5)" = "$sum_div" ] || fail "the diverging run overwrote its last good checkpoint"
expect_error "eval of a missing checkpoint" "error:.*no_such.h5" mpi 2 "$HETSEQ" eval "$CFG" $d --checkpoint no_such.h5

[ "$(md5sum ck/checkpoint_last.h5)" = "$sum_before" ] || fail "an error run modified the saved checkpoint"
ls ck | grep -q '\.tmp$' && fail "a temporary checkpoint file was left behind"
pass
