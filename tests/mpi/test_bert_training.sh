# A user pretrains a small BERT on NVIDIA-format shards (written by an independent h5py writer, gzip
# with h5py's thin automatic chunks, three training files of uneven size):
# - scaling out changes nothing: 1 rank x update_freq 2 = 2 ranks, 1 rank x update_freq 3 = 3 ranks
#   (dropout on: masks are keyed by sample, not by rank), within 1e-5;
# - a job stopped after 5 updates and resumed gives bit-identical parameters and loss trajectory to an
#   uninterrupted run, on 1, 2 and 3 ranks;
# - phase 2 starts from phase 1's checkpoint with its own schedule, keeping the LAMB moments.
. "$top_srcdir/tests/lib.sh"
need_python h5py numpy
CFG="$top_srcdir/tests/e2e/bert_small.cfg"
CMP="$top_builddir/tests/tools/h5compare"
make_bert_small_shards 37,50,13

run() { # ranks uf dir extra...
  local np=$1 uf=$2 dir=$3; shift 3
  mpi "$np" "$HETSEQ" train "$CFG" -o training.update_freq=$uf -o checkpoint.save_dir=\"$dir\" "$@" \
    >> "$dir.log" 2>&1 || { cat "$dir.log"; fail "training on $np rank(s) into $dir failed"; }
}

run 1 2 one_uf2
run 2 1 two_uf1
grep -q "mlm_loss=" two_uf1.log || { cat two_uf1.log; fail "log lines lack the MLM loss"; }
grep -q "valid on 'test' subset" two_uf1.log || fail "no validation ran"
"$CMP" one_uf2/checkpoint_last.h5 two_uf1/checkpoint_last.h5 1e-5 || fail "1 rank x uf 2 != 2 ranks"
run 1 3 one_uf3
run 3 1 three_uf1
"$CMP" one_uf3/checkpoint_last.h5 three_uf1/checkpoint_last.h5 1e-5 || fail "1 rank x uf 3 != 3 ranks"

traj() { grep '"type": "train"' "$1" | sed 's/.*"num_updates": \([0-9]*\), "loss": \([^,]*\),.*"lr": \([^,]*\), "gnorm": \([^,]*\),.*/\1 \2 \3 \4/'; }
for np in 1 2 3; do
  run $np 1 "resumed$np" -o training.max_update=5
  run $np 1 "resumed$np"
  grep -q "resuming from resumed$np/checkpoint_last.h5" "resumed$np.log" || fail "no resume on $np rank(s)"
  straight=two_uf1; [ $np -eq 3 ] && straight=three_uf1
  [ $np -eq 1 ] && { run 1 1 straight1; straight=straight1; }
  "$CMP" "$straight/checkpoint_last.h5" "resumed$np/checkpoint_last.h5" 0 || fail "resume on $np rank(s) is not bit-exact"
  traj "$straight/metrics.jsonl" > a.traj; traj "resumed$np/metrics.jsonl" > b.traj
  [ "$(wc -l < a.traj)" -eq 12 ] || fail "expected 12 train records"
  diff a.traj b.traj || fail "loss trajectory differs after resume on $np rank(s)"
done

run 2 1 phase2 -o checkpoint.init_checkpoint=\"two_uf1/checkpoint_last.h5\" -o checkpoint.reset_step=true \
  -o optimizer.lr=1e-3 -o lr_scheduler.warmup_proportion=0.2 -o lr_scheduler.total_num_update=20 -o training.max_update=4
grep -q "initialised weights and optimizer moments from two_uf1/checkpoint_last.h5 (step counters reset)" phase2.log \
  || { cat phase2.log; fail "phase 2 did not start from phase 1"; }
grep -q "num_updates=4," phase2.log || fail "phase 2 counts its own updates"
pass
