# A node dies, a rank hangs, the disk fills, a file is unreadable on one node, the numbers go bad or a
# replica silently diverges, mid-run (fault injection, HETSEQ_FAULT, docs/reliability.md). For each:
# the job ends (no rank hangs) within 3 x the time the uninterrupted run took + 5 s (+ the stall
# timeout), the message names the rank and the cause, the last checkpoint is intact and loads, no half-written checkpoint is left under a checkpoint's name, and
# running the same command again resumes to exactly the parameters of a run that never failed.
. "$top_srcdir/tests/lib.sh"
CMP="$top_builddir/tests/tools/h5compare"
need_cmd h5dump hdf5-tools
make_tiny_mnist tiny.h5
CFG="$top_srcdir/tests/e2e/small.cfg"
args=(-o data.path=\"tiny.h5\" -o training.max_sentences=4 -o training.max_epoch=0 -o training.max_update=16
      -o checkpoint.save_interval_updates=4 -o log.interval=4)

t0=$(date +%s.%N)
mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" -o checkpoint.save_dir=\"ref\" > ref.log 2>&1 \
  || { cat ref.log; fail "the uninterrupted run failed"; }
# Every faulty run trains some of these updates before its fault: its liveness bound (expect_error) is
# measured from this clean run, not from a job that does nothing.
HS_ERROR_BASE=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "the uninterrupted run of 16 updates on 2 ranks: $HS_ERROR_BASE s"

saved_updates() { h5dump -a /train_state/num_updates "$1" 2>/dev/null | sed -n 's/^ *(0): *//p'; }

# fault NAME SPEC PATTERN SAVED [extra -o ...]: SAVED = updates of the checkpoint that must survive ("-" none).
fault() {
  local name=$1 spec=$2 pattern=$3 saved=$4; shift 4
  local dir="ck_$name"
  HETSEQ_FAULT="$spec" \
    expect_error "$name ($spec)" "$pattern" mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" -o checkpoint.save_dir=\"$dir\" "$@"
  if [ "$saved" = - ]; then
    [ ! -e "$dir/checkpoint_last.h5" ] || fail "$name: a checkpoint appeared though none was due"
  else
    [ "$(saved_updates "$dir/checkpoint_last.h5")" = "$saved" ] \
      || fail "$name: checkpoint_last.h5 should hold update $saved, holds '$(saved_updates "$dir/checkpoint_last.h5")'"
    mpi 2 "$HETSEQ" eval "$CFG" "${args[@]}" --checkpoint "$dir/checkpoint_last.h5" > "$name.eval.log" 2>&1 \
      || { cat "$name.eval.log"; fail "$name: the surviving checkpoint does not load"; }
  fi
  for f in "$dir"/checkpoint*.h5; do
    [ -e "$f" ] || continue
    h5dump -H "$f" > /dev/null 2>&1 || fail "$name: $f is damaged"
  done
  # The same command again, fault gone: it resumes (or starts) and ends where the clean run ended.
  mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" "$@" -o checkpoint.save_dir=\"$dir\" > "$name.rerun.log" 2>&1 \
    || { cat "$name.rerun.log"; fail "$name: the rerun failed"; }
  [ "$saved" = - ] || grep -q "resuming from $dir/checkpoint_last.h5 (.*$saved updates in all)" "$name.rerun.log" \
    || { cat "$name.rerun.log"; fail "$name: the rerun did not resume from update $saved"; }
  "$CMP" ref/checkpoint_last.h5 "$dir/checkpoint_last.h5" 0 > "$name.cmp" \
    || { cat "$name.cmp"; fail "$name: the resumed run does not end with the uninterrupted run's parameters"; }
  echo "ok: $name: rerun resumed from ${saved/-/scratch} and ended bit-identical"
}

fault die         "die:rank=1:update=7"          "rank 1.*(signal 9|Killed)"                             4
fault ckpt_die    "ckpt_die:rank=0:update=8"     "rank 0.*(signal 9|Killed)"                             4
fault enospc      "enospc:rank=0:update=8"       "removed the incomplete checkpoint.*checkpoint_1_8.h5.tmp" 4
HS_ERROR_WAIT=3 fault stall       "stall:rank=1:update=6"        "^    rank 1: in forward/backward of update 6 for" 4 \
  -o distributed.stall_timeout=3
fault unreadable  "unreadable:rank=1:file=tiny"  "\[rank 1\]: error: cannot read the MNIST data file .*tiny.h5: Permission denied" -
fault nan         "nan:rank=1:update=6"          "diverged at update 6.*first gradient with a NaN or Inf is conv1.weight" 4
fault corrupt     "corrupt:rank=1:update=5"      "replica check after update 6: the ranks hold different values of conv1.weight" 4 \
  -o distributed.check_replicas_every=2
# A mistyped fault is refused, not silently ignored (a test must not pass for the wrong reason).
HS_ERROR_BASE= HETSEQ_FAULT="dye:rank=1" expect_error "unknown fault kind" "HETSEQ_FAULT: unknown fault 'dye'" \
  mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" -o checkpoint.save_dir=\"typo\"
pass
