# A user trains the MNIST CNN with precision = "bf16" on the CPU; the job is killed after 7 updates and
# resubmitted with the same save_dir. As in fp32 (test_resume.sh), the parameters after 20 updates and
# the logged loss of every update are bit-identical to a run that was never interrupted: the bf16
# products are deterministic and nothing of them is kept between updates.
. "$top_srcdir/tests/lib.sh"
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
CMP="$top_builddir/tests/tools/h5compare"
grep -q '^#define HAVE_DNNL 1' "$top_builddir/build_config.h" || fail "hetseq built without oneDNN: install Debian's libdnnl-dev and configure again"
common="-o data.path=\"$DATA\" -o training.max_epoch=0 -o checkpoint.save_interval_updates=5 -o device=\"cpu\""
common="$common -o precision=\"bf16\""

mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=7 -o checkpoint.save_dir=\"resumed\" > part1.log 2>&1 \
  || { cat part1.log; fail "first part failed"; }
grep -q "precision bf16 on the CPU" part1.log || { cat part1.log; fail "the log does not say how bf16 runs"; }
mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=20 -o checkpoint.save_dir=\"resumed\" > part2.log 2>&1 \
  || { cat part2.log; fail "resumed part failed"; }
grep -q "resuming from resumed/checkpoint_last.h5 (epoch 1, 7 updates into it" part2.log \
  || { cat part2.log; fail "second run did not resume at update 7"; }
mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=20 -o checkpoint.save_dir=\"straight\" > straight.log 2>&1 \
  || { cat straight.log; fail "uninterrupted run failed"; }
"$CMP" straight/checkpoint_last.h5 resumed/checkpoint_last.h5 0 || fail "resumed parameters differ from the uninterrupted run"
traj() { grep '"type": "train"' "$1" | sed 's/.*"num_updates": \([0-9]*\), "loss": \([^,]*\),.*"lr": \([^,]*\), "gnorm": \([^,]*\),.*/\1 \2 \3 \4/'; }
traj straight/metrics.jsonl > straight.traj
traj resumed/metrics.jsonl > resumed.traj
[ "$(wc -l < straight.traj)" -eq 20 ] || fail "expected 20 train records, got $(wc -l < straight.traj)"
diff straight.traj resumed.traj || fail "loss trajectory differs after resume"
# bf16 really changed the arithmetic: the same 20 updates in fp32 end with other parameters.
mpi 2 "$HETSEQ" train "$CFG" $common -o precision=\"fp32\" -o training.max_update=20 -o checkpoint.save_dir=\"fp32\" \
  > fp32.log 2>&1 || { cat fp32.log; fail "fp32 run failed"; }
"$CMP" straight/checkpoint_last.h5 fp32/checkpoint_last.h5 0 >/dev/null 2>&1 && fail "bf16 and fp32 runs are identical"
pass
