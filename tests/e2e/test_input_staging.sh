# A user's training gives bit-identical results whether input batches are uploaded asynchronously one
# update ahead (the default: copy stream, events, two input sets per micro-batch position) or
# synchronously inside each micro-batch's forward/backward (HETSEQ_INPUT_STAGING=sync): the MNIST CNN
# and a small BERT on 2 ranks with update_freq 1 and 2, and a small Transformer-XL (segment memories),
# on the CPU and on the emulated CUDA device (where work runs only when the host synchronises; with
# HS_CUDA_EMU_SCHEDULE=priority the copy stream runs only while the compute stream is blocked or idle,
# so an upload not ordered before the op that reads it changes the numbers; see
# tests/cuda_emu/runtime/streams.h). Every update but the last of a run (and those before a validation)
# has its inputs staged while the update before computes. A run stopped mid-epoch and resumed with
# asynchronous staging ends bit-identical to the uninterrupted synchronous run.
. "$top_srcdir/tests/lib.sh"
CMP="$top_builddir/tests/tools/h5compare"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"

traj() { grep '"type": "train"' "$1" | sed 's/.*"num_updates": \([0-9]*\), "loss": \([^,]*\),.*"gnorm": \([^,]*\),.*/\1 \2 \3/'; }
# run BINARY STAGING DIR ARGS...: 2 ranks, HETSEQ_INPUT_STAGING=STAGING
run() {
  local bin=$1 staging=$2 dir=$3; shift 3
  HETSEQ_INPUT_STAGING=$staging mpi 2 "$bin" train "$@" -o checkpoint.save_dir=\"$dir\" >> "$dir.log" 2>&1 ||
    { cat "$dir.log"; fail "training into $dir failed"; }
}
# same BINARY NAME AHEAD ARGS...: the async and the sync run of ARGS end bit-identical, update by update;
# with AHEAD given, the async run staged at most AHEAD updates' inputs during the update before: those
# whose read had finished by then (staging ahead never waits for a read, so how many depends on timing;
# the others are staged, with the same asynchronous uploads and events, at the start of their update)
same() {
  local bin=$1 name=$2 ahead=$3; shift 3
  run "$bin" async "${name}_async" "$@"
  run "$bin" sync "${name}_sync" "$@"
  grep -q "input batches are staged one update ahead" "${name}_async.log" || { cat "${name}_async.log"; fail "$name: the default run does not stage ahead"; }
  grep -q "input batches are uploaded synchronously" "${name}_sync.log" || { cat "${name}_sync.log"; fail "$name: HETSEQ_INPUT_STAGING=sync was not taken"; }
  local n; n=$(sed -n 's/.*| inputs of \([0-9]*\) update(s) were staged while the update before computed.*/\1/p' "${name}_async.log" | head -1)
  [ -n "$n" ] || { cat "${name}_async.log"; fail "$name: the log does not say how many updates were staged ahead"; }
  [ -z "$ahead" ] || [ "$n" -le "$ahead" ] ||
    { cat "${name}_async.log"; fail "$name: $n updates staged ahead, at most $ahead possible"; }

  "$CMP" "${name}_sync/checkpoint_last.h5" "${name}_async/checkpoint_last.h5" 0 || fail "$name: async staging != sync"
  traj "${name}_sync/metrics.jsonl" > s.traj; traj "${name}_async/metrics.jsonl" > a.traj
  [ -s s.traj ] && diff s.traj a.traj > /dev/null || fail "$name: the loss trajectories differ (async vs sync)"
  echo "ok: $name: async staging = sync, bit for bit ($(wc -l < s.traj) updates)"
}

make_tiny_mnist mnist.h5
CNN="$top_srcdir/tests/e2e/small.cfg"
cnn="-o data.path=\"mnist.h5\" -o training.max_epoch=0 -o training.max_sentences=4 -o checkpoint.save_interval_updates=4"
have_bert=0
if [ -n "${PYTHON_TORCH:-}" ]; then
  "$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split training \
    --rows 37,50,13 --seq-len 32 --max-pred 5 --vocab 1000 --seed 3 || fail "writing training shards"
  "$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split test \
    --rows 24 --seq-len 32 --max-pred 5 --vocab 1000 --seed 4 || fail "writing test shards"
  have_bert=1
fi
BERT="$top_srcdir/tests/e2e/bert_small.cfg"
. "$top_srcdir/tests/ref/txl_corpus.sh"
make_txl_corpus txl_data 600
txl_experiment txl.cfg txl_data ""

# ---- CPU ---------------------------------------------------------------------------------------------
for uf in 1 2; do
  same "$HETSEQ" "cnn_cpu_uf$uf" 11 "$CNN" $cnn -o training.max_update=12 -o training.update_freq=$uf
  [ $have_bert = 1 ] && same "$HETSEQ" "bert_cpu_uf$uf" "" "$BERT" -o training.update_freq=$uf
done
same "$HETSEQ" txl_cpu "" txl.cfg

# ---- the emulated CUDA device ----------------------------------------------------------------------------
[ -x "$EMU" ] || skip "CPU cases passed; hetseq_emu (the emulated CUDA build) is not built"
cuda='-o device="cuda"'
export HS_CUDA_EMU_DEVICES=2 # a GPU per rank: NCCL (ranks sharing one GPU: tests/cuda/test_shared_gpu.sh)
for uf in 1 2; do
  for schedule in priority random; do
    export HS_CUDA_EMU_SCHEDULE=$schedule HS_CUDA_EMU_SEED=5
    same "$EMU" "cnn_cuda_uf${uf}_$schedule" 7 "$CNN" $cnn $cuda \
      -o training.max_update=8 -o training.update_freq=$uf
  done
  export HS_CUDA_EMU_SCHEDULE=priority HS_CUDA_EMU_SEED=7
  [ $have_bert = 1 ] && same "$EMU" "bert_cuda_uf$uf" "" "$BERT" $cuda -o training.update_freq=$uf -o training.max_update=8
done
export HS_CUDA_EMU_SCHEDULE=priority HS_CUDA_EMU_SEED=3
same "$EMU" txl_cuda "" txl.cfg $cuda -o training.max_update=8
# stopped after 5 updates and resumed, staging ahead: = the uninterrupted synchronous run
export HS_CUDA_EMU_SEED=5 HS_CUDA_EMU_SCHEDULE=priority
run "$EMU" async cnn_resumed "$CNN" $cnn $cuda -o training.update_freq=2 -o training.max_update=5
run "$EMU" async cnn_resumed "$CNN" $cnn $cuda -o training.update_freq=2 -o training.max_update=8
grep -q "resuming from cnn_resumed/checkpoint_last.h5" cnn_resumed.log || fail "the run did not resume"
"$CMP" cnn_cuda_uf2_priority_sync/checkpoint_last.h5 cnn_resumed/checkpoint_last.h5 0 ||
  fail "stopped and resumed with async staging != the uninterrupted synchronous run"
echo "ok: resumed with async staging = uninterrupted synchronous run, bit for bit"
pass
