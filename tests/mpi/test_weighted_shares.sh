# A user on a mixed cluster gives fast ranks bigger shares of every global batch — by hand
# (distributed.weights), by memory cap (distributed.rank_max_sentences) or by measurement
# (distributed.balance = "auto") — and gets the same model as 1 rank with the same global batch, within
# 1e-5, for the CNN and for BERT (1e-4 for a job of an emulated-GPU rank beside CPU ranks). Plain SGD for the
# CNN: the shares change summation order only, and HetSeq's Adadelta recipe amplifies any rounding
# difference (docs/gpu.md, "Determinism"); BERT keeps its LAMB recipe. A killed balance = auto job
# resumes with the shares it had learned and stays bit-identical to a job that was never killed.
. "$top_srcdir/tests/lib.sh"
CMP="$top_builddir/tests/tools/h5compare"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"

traj() { grep '"type": "train"' "$1" | sed 's/.*"num_updates": \([0-9]*\), "loss": \([^,]*\),.*"gnorm": \([^,]*\),.*/\1 \2 \3/'; }
same_traj() { # A B [TOL]: equal update counts, losses and gradient norms within TOL (1e-5) relative
  local tol=${3:-1e-5}
  traj "$1" > a.traj; traj "$2" > b.traj
  [ -s a.traj ] && [ "$(wc -l < a.traj)" -eq "$(wc -l < b.traj)" ] || fail "$1 and $2 have different numbers of updates"
  paste a.traj b.traj | awk -v tol="$tol" '
    function rel(x, y) { d = x - y; if (d < 0) d = -d; m = (x < 0 ? -x : x); if (m < 1e-30) m = 1e-30; return d / m }
    { if ($1 != $4 || rel($2, $5) > tol || rel($3, $6) > tol) { print "update " $1 ": " $2 " " $3 " vs " $5 " " $6; bad = 1 } }
    END { exit bad }' || fail "the loss trajectories of $1 and $2 differ"
}
run() { # ranks dir args...
  local np=$1 dir=$2; shift 2
  mpi "$np" "$HETSEQ" train "$@" -o checkpoint.save_dir=\"$dir\" > "$dir.log" 2>&1 || { cat "$dir.log"; fail "training into $dir failed"; }
}
same() { # reference other what [TOL (1e-5)]
  local tol=${4:-1e-5}
  "$CMP" "$1/checkpoint_last.h5" "$2/checkpoint_last.h5" "$tol" > cmp.log || { cat cmp.log; fail "$3: not the model of 1 rank"; }
  same_traj "$1/metrics.jsonl" "$2/metrics.jsonl" "$tol"
  echo "ok: $3 = 1 rank ($(tail -1 cmp.log | sed 's/ of the whole model.*//'))"
}

# ---- the CNN: global batch 3 x 8 images ---------------------------------------------------------------
make_tiny_mnist mnist.h5
CNN="$top_srcdir/tests/e2e/small.cfg"
cnn="-o data.path=\"mnist.h5\" -o training.max_update=20 -o training.max_epoch=0 -o training.max_sentences=8
  -o optimizer.name=\"sgd\" -o optimizer.lr=0.01 -o optimizer.momentum=0.0"
run 1 cnn_one "$CNN" $cnn -o training.update_freq=3
run 3 cnn_w211 "$CNN" $cnn -o 'distributed.weights=[2.0,1.0,1.0]'
grep -q "weighted shares of every global batch (distributed.weights): rank 0 2 rank 1 1 rank 2 1" cnn_w211.log \
  || { cat cnn_w211.log; fail "the weights are not logged"; }
same cnn_one cnn_w211 "CNN, weights 2:1:1"
run 3 cnn_auto "$CNN" $cnn -o 'distributed.balance="auto"' -o 'distributed.rank_max_sentences=[3,8,5]' \
  -o distributed.rebalance_every=5
grep -q "balance = auto after update 4: shares of the global batch rank 0" cnn_auto.log \
  || { cat cnn_auto.log; fail "balance = auto did not log the learned shares after its warm-up"; }
same cnn_one cnn_auto "CNN, balance = auto with per-rank memory caps 3, 8, 5"

# ---- a killed balance = auto job resumes with the shares it learned --------------------------------------
# The job's last checkpoint is that of update 5, written just as its warm-up (updates 2-5) ended: update 6
# was already read with equal shares and the learned ones start at update 7. The killed job is the
# uninterrupted run up to that checkpoint (a copy of it), so the resumed job must log the restored shares
# (those the uninterrupted run learned), learn nothing again, and end bit-identical to the uninterrupted run.
auto="-o distributed.balance=\"auto\" -o distributed.balance_warmup=4 -o training.max_update=12
  -o checkpoint.save_interval_updates=5 -o checkpoint.keep_last=0"
run 3 auto_straight "$CNN" $cnn $auto
learned=$(sed -n 's/.*balance = auto after update 5: shares of the global batch\(.*\)/\1/p' auto_straight.log \
  | sed 's/ ([^)]*)//g')
[ -n "$learned" ] || { cat auto_straight.log; fail "balance = auto did not learn its shares after update 5"; }
mkdir auto_resumed && cp auto_straight/checkpoint_1_5.h5 auto_resumed/checkpoint_last.h5
run 3 auto_resumed "$CNN" $cnn $auto
grep -qF "shares of the global batch restored from auto_resumed/checkpoint_last.h5: rank 0 33.3%, rank 1 33.3%, rank 2 33.3%; from update 7:$learned" \
  auto_resumed.log || { cat auto_resumed.log; fail "the resumed job did not restore the learned shares ($learned)"; }
! grep -q "balance = auto after update" auto_resumed.log || { cat auto_resumed.log; fail "the resumed job learned its shares again"; }
"$CMP" auto_straight/checkpoint_last.h5 auto_resumed/checkpoint_last.h5 0 > cmp.log \
  || { cat cmp.log; fail "the resumed balance = auto job is not bit-identical to the uninterrupted one"; }
traj auto_straight/metrics.jsonl | awk '$1 > 5' > straight.traj
traj auto_resumed/metrics.jsonl > resumed.traj
[ "$(wc -l < resumed.traj)" -eq 7 ] && diff straight.traj resumed.traj > /dev/null \
  || fail "the losses of updates 6-12 differ between the resumed and the uninterrupted balance = auto job"
echo "ok: a resumed balance = auto job restores its shares ($learned) and is bit-identical"

# ---- one emulated-GPU rank beside two CPU ranks ----------------------------------------------------------
if [ -x "$EMU" ]; then
  w="distributed.weights=[1.0,2.0,2.0]"
  timeout -k 5 300 "$MPIRUN" --allow-run-as-root --oversubscribe --mca btl self,vader \
    -np 1 "$EMU" train "$CNN" $cnn -o device=\"cuda\" -o "$w" -o checkpoint.save_dir=\"mixed\" : \
    -np 2 "$EMU" train "$CNN" $cnn -o device=\"cpu\" -o "$w" -o checkpoint.save_dir=\"mixed\" > mixed.log 2>&1 \
    || { cat mixed.log; fail "the mixed CPU/GPU job failed"; }
  grep -q "a mixed job (CPU and GPU ranks)" mixed.log || { cat mixed.log; fail "the mixed job did not say how it moves gradients"; }
  # Within 1e-4, not 1e-5: the GPU rank's products (cuBLASLt and cuDNN, whose summation orders the
  # emulated device draws from HS_CUDA_EMU_SEED as a GPU's algorithms differ) round otherwise than the
  # CPU's: an fp32 sum of K terms by about sqrt(K)·2^-24 relative (K up to 9216 here: 6e-6), which 20
  # updates through ReLU, max-pool and dropout carry on (2e-5 seen); the CPU-only jobs above differ only
  # in the order of the loss's sum. A rank's share weighted wrongly changes an update by tens of percent.
  same cnn_one mixed "CNN, 1 emulated-GPU rank + 2 CPU ranks, weights 1:2:2" 1e-4
else
  echo "mixed CPU/GPU part skipped: no emulated CUDA build (hetseq_emu)"
fi

# ---- BERT (LAMB, dropout on) ----------------------------------------------------------------------------
if [ -n "${PYTHON_TORCH:-}" ]; then
  "$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split training \
    --rows 37,50,13 --seq-len 32 --max-pred 5 --vocab 1000 --seed 3 || fail "writing training shards"
  "$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split test \
    --rows 24 --seq-len 32 --max-pred 5 --vocab 1000 --seed 4 || fail "writing test shards"
  BERT="$top_srcdir/tests/e2e/bert_small.cfg"
  run 1 bert_one "$BERT" -o training.update_freq=3 -o training.max_sentences=4
  run 3 bert_w211 "$BERT" -o training.max_sentences=4 -o 'distributed.weights=[2.0,1.0,1.0]'
  same bert_one bert_w211 "BERT, weights 2:1:1"
  run 3 bert_auto "$BERT" -o training.max_sentences=4 -o 'distributed.balance="auto"' -o distributed.balance_warmup=2
  same bert_one bert_auto "BERT, balance = auto"
else
  echo "BERT part skipped: no Python with h5py to write the test shards"
fi

# ---- a user's mistake: one weight per rank ----------------------------------------------------------------
expect_error "weights for 2 ranks on 3" "distributed.weights lists 2 weight\(s\) but the job has 3 rank\(s\)" \
  mpi 3 "$HETSEQ" train "$CNN" $cnn -o 'distributed.weights=[2.0,1.0]' -o checkpoint.save_dir=\"bad\"
expect_error "a zero weight" "distributed.weights" \
  mpi 3 "$HETSEQ" train "$CNN" $cnn -o 'distributed.weights=[2.0,0.0,1.0]' -o checkpoint.save_dir=\"bad\"
pass
