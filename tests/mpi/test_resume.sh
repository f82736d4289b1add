# A user's job is killed by the scheduler's time limit after 7 updates; re-submitting it with the same
# save_dir resumes from checkpoint_last.h5. The parameters after 20 updates and the logged loss of
# every update are bit-identical to a run that was never interrupted (dropout on; the resume point is
# mid-epoch and the run crosses epoch boundaries).
. "$top_srcdir/tests/lib.sh"
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
CMP="$top_builddir/tests/tools/h5compare"
common="-o data.path=\"$DATA\" -o training.max_epoch=0 -o checkpoint.save_interval_updates=5"

mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=7 -o checkpoint.save_dir=\"resumed\" > part1.log 2>&1 \
  || { cat part1.log; fail "first part failed"; }
mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=20 -o checkpoint.save_dir=\"resumed\" > part2.log 2>&1 \
  || { cat part2.log; fail "resumed part failed"; }
grep -q "resuming from resumed/checkpoint_last.h5 (epoch 1, 7 updates into it" part2.log \
  || { cat part2.log; fail "second run did not resume at update 7"; }
mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=20 -o checkpoint.save_dir=\"straight\" > straight.log 2>&1 \
  || { cat straight.log; fail "uninterrupted run failed"; }

"$CMP" straight/checkpoint_last.h5 resumed/checkpoint_last.h5 0 || fail "resumed parameters differ from the uninterrupted run"
# Loss trajectory: the train records (update, cumulative loss, lr, gnorm) must match exactly.
traj() { grep '"type": "train"' "$1" | sed 's/.*"num_updates": \([0-9]*\), "loss": \([^,]*\),.*"lr": \([^,]*\), "gnorm": \([^,]*\),.*/\1 \2 \3 \4/'; }
traj straight/metrics.jsonl > straight.traj
traj resumed/metrics.jsonl > resumed.traj
[ "$(wc -l < straight.traj)" -eq 20 ] || fail "expected 20 train records, got $(wc -l < straight.traj)"
diff straight.traj resumed.traj || fail "loss trajectory differs after resume"
pass
