# CUDA graphs (cuda_graphs = true, the default; docs/gpu.md "CUDA graphs") on the emulated device: the
# update's forward, backward, NCCL all-reduce and gradient norm captured and launched as one graph per
# shape, and the optimizer step (unscale, clip, step) as a second graph, give the same bits as the eager run (cuda_graphs = false): the checkpoints compare equal with
# tolerance 0 and the loss/gnorm trajectories are identical. The CNN recipe (dropout on: per-update
# dropout keys in the kernel arguments) on 1 rank and on 2 ranks (the all-reduce inside the graph), a
# small BERT (LAMB, dropout on; per-update loss normalisation) on 2 ranks, a small Transformer-XL
# (LAMB, dropout and dropatt on, adaptive embedding and softmax, the memories carried from update to
# update; fixed and variable segment lengths) on 1 and 2 ranks: for it the optimizer moments and the
# memories (/task_state) compare equal too. The log says how many updates ran as graphs, so a run
# that silently stopped capturing fails too, and how many of them were replayed without a capture (the
# same executable graph launched again, its per-update scalars in device slots): the CNN replays every
# update after a key's capture, and every model its optimizer step; a per-update scalar that a kernel
# took as an argument instead of from its slot would replay the captured value (the dropout mask of
# the capture's update, say), and the bit comparison with the eager run would fail. On the CPU the key is
# ignored with a note. The emulator refuses what CUDA refuses during a capture (a synchronisation, a
# cudaFree), so device code that would break a capture on a GPU fails here.
. "$top_srcdir/tests/lib.sh"
need_cmd h5diff hdf5-tools
need_cmd h5dump hdf5-tools
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
# every 16-bit twin a bf16/fp16 product reads instead of converting is compared with a fresh conversion
# (bind_half, src/backend/cuda/cuda_twins.c): a stale one stops the run naming the op
export HETSEQ_CHECK_HALF_TWINS=1
# the gradients an update's first micro-batch writes whole start as NaN instead of the last update's values
# (src/nn/params.h, hs_params_zero_grad_accumulated): a writer that added to one first would show
export HETSEQ_CHECK_GRADS_WRITTEN=1
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
CMP="$top_builddir/tests/tools/h5compare"
export HS_CUDA_EMU_SEED="${HS_CUDA_EMU_SEED:-5}"
export HS_CUDA_EMU_DEVICES="${HS_CUDA_EMU_DEVICES:-2}"

traj() { grep '"type": "train"' "$1" | sed 's/.*"num_updates": \([0-9]*\), "loss": \([^,]*\),.*"gnorm": \([^,]*\),.*/\1 \2 \3/'; }
run() {
  local bin=$1 np=$2 dir=$3; shift 3
  mpi "$np" "$bin" train "$@" -o checkpoint.save_dir=\"$dir\" > "$dir.log" 2>&1 || { cat "$dir.log"; fail "training into $dir failed"; }
}
# same NAME RANKS UPDATES MIN MIN_REPLAYED ARGS...: graphs on = off bit for bit; at least MIN updates and
# MIN optimizer steps as graphs (a shape's first update runs eagerly: the shape is the staging slot and
# the micro-batch sizes), at least MIN_REPLAYED updates replayed without a capture, and every optimizer
# step but the first graphed one (it is captured) replayed
same() {
  local name=$1 np=$2 n=$3 min=$4 min_replayed=$5; shift 5
  run "$EMU" "$np" "${name}_on" "$@" -o device=\"cuda\" -o training.max_update=$n
  run "$EMU" "$np" "${name}_off" "$@" -o device=\"cuda\" -o training.max_update=$n -o cuda_graphs=false
  "$CMP" "${name}_on/checkpoint_last.h5" "${name}_off/checkpoint_last.h5" 0 || fail "$name: graphs on != off"
  # the optimizer state and the task's carried state (Transformer-XL's memories), where the checkpoint has them
  for g in optimizer task_state; do
    h5dump -n "${name}_on/checkpoint_last.h5" | grep -q "group *\/$g\$" || continue
    h5diff -q "${name}_on/checkpoint_last.h5" "${name}_off/checkpoint_last.h5" "/$g" "/$g" ||
      fail "$name: graphs on != off in the checkpoint's /$g"
  done
  traj "${name}_on/metrics.jsonl" > on.traj; traj "${name}_off/metrics.jsonl" > off.traj
  [ "$(wc -l < on.traj)" -eq "$n" ] && diff on.traj off.traj > /dev/null || fail "$name: the trajectories differ"
  line=$(grep "| CUDA graphs: " "${name}_on.log" | head -1)
  [ -n "$line" ] || { cat "${name}_on.log"; fail "$name: no CUDA graphs line in the log"; }
  graphed=$(echo "$line" | sed 's/.*CUDA graphs: \([0-9]*\) of.*/\1/')
  steps=$(echo "$line" | sed 's/.*, \([0-9]*\) optimizer step(s) as a graph.*/\1/')
  replayed=$(echo "$line" | sed 's/.*update(s) launched as a graph (\([0-9]*\) replayed without a capture).*/\1/')
  steps_replayed=$(echo "$line" | sed 's/.*optimizer step(s) as a graph (\([0-9]*\) replayed without a capture).*/\1/')
  [ "$graphed" -ge "$min" ] && [ "$steps" -ge "$min" ] || fail "$name: only $graphed of $n updates ran as graphs ($line)"
  [ "$replayed" -ge "$min_replayed" ] && [ "$steps_replayed" -eq $((steps - 1)) ] ||
    fail "$name: $replayed update(s) (at least $min_replayed) and $steps_replayed of $steps optimizer steps replayed without a capture ($line)"
  ! grep -q "| CUDA graphs: " "${name}_off.log" || fail "$name: cuda_graphs = false still launched graphs"
  echo "ok: $name on $np rank(s): $line; = cuda_graphs = false bit for bit"
}

make_tiny_mnist mnist.h5
CNN="$top_srcdir/tests/e2e/small.cfg"
cnn="-o data.path=\"mnist.h5\" -o training.max_epoch=0 -o training.max_sentences=8"
# two keys (the staging parity), each captured at its second update and replayed from its third on
same cnn1 1 8 6 4 "$CNN" $cnn -o training.update_freq=2
same cnn2 2 8 6 4 "$CNN" $cnn -o training.update_freq=2
# a per-update scalar left out of its slot is caught: with the dropout's key and first sample passed by
# value (HETSEQ_GRAPH_UNSLOT_DROPOUT, a test knob) the replayed updates redraw their capture's masks
HETSEQ_GRAPH_UNSLOT_DROPOUT=1 run "$EMU" 1 cnn1_unslotted "$CNN" $cnn -o training.update_freq=2 -o device=\"cuda\" \
  -o training.max_update=8
grep -q "(4 replayed without a capture)" cnn1_unslotted.log || { cat cnn1_unslotted.log; fail "cnn1_unslotted: no replays"; }
rc=0; "$CMP" cnn1_unslotted/checkpoint_last.h5 cnn1_off/checkpoint_last.h5 0 > unslotted.cmp || rc=$?
[ "$rc" -eq 1 ] || { cat unslotted.cmp; fail "a dropout key passed by value to a replayed graph went unnoticed (h5compare: $rc)"; }
echo "ok: the dropout key passed by value to the replayed graphs: $(tail -1 unslotted.cmp)"

if [ -n "${PYTHON_TORCH:-}" ]; then
  "$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split training \
    --rows 37,50,13 --seq-len 32 --max-pred 5 --vocab 1000 --seed 3 || fail "writing training shards"
  "$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split test \
    --rows 24 --seq-len 32 --max-pred 5 --vocab 1000 --seed 4 || fail "writing test shards"
  # (the last micro-batch of a shard is smaller: 4 of the 8 updates have a shape seen before, 2 keys
  # each captured once and replayed once: the MLM rows padded to the micro-batch's maximum keep the
  # signature of a shape, however many tokens each micro-batch labels)
  same bert2 2 8 4 2 "$top_srcdir/tests/e2e/bert_small.cfg" -o training.update_freq=2
  # bf16: the regions bind and end the activations' 16-bit twins (bind_half / unbind_half); the twins'
  # registry at a region's start is in its signature and the one after its capture is set again at a
  # replay, so they replay as fp32 does (every twin a product reads checked against a fresh conversion
  # in the eager updates: HETSEQ_CHECK_HALF_TWINS above)
  same bert2_bf16 2 8 4 2 "$top_srcdir/tests/e2e/bert_small.cfg" -o training.update_freq=2 -o precision=\"bf16\"
else
  echo "BERT part skipped: no Python with h5py to write the test shards"
fi

# Transformer-XL: the sinusoid tables and the embedding's scale table are uploaded once, so its update
# is captured as BERT's; 12 updates of one micro-batch (2 ranks: 2 columns each) with a validation
# and a save in between (the memories of evaluation and training are separate). varlen: every update
# has another segment length (the graph's kernels change their shapes, not their kinds), div_val = 1
# without projections (the embedding's scale op); the shapes' first updates run eagerly.
# Replays: the adaptive embedding's and softmax's clusters are padded to power-of-two buckets (at
# least 16 rows, at most the micro-batch's tokens; nn/adaptive.h), and the memory is full (mem_len)
# from the second update on, so a key's signature repeats while the buckets do. 2 ranks: 16 tokens
# per rank, every cluster one bucket (16): every graphed update after its key's capture replays (8 of
# 10; none before the padding). 1 rank: 32 tokens, clusters of about 16 tokens switch between the
# buckets 16 and 32 (a small test's worst case), 2 replayed. varlen: 4 (a signature per length).
. "$top_srcdir/tests/ref/txl_corpus.sh"
make_txl_corpus txl_data 600
HS_TEST_DEVICE=cuda txl_experiment txl.cfg txl_data ""
same txl1 1 12 8 2 txl.cfg -o log.interval=1
same txl2 2 12 8 8 txl.cfg -o log.interval=1
same txl1_varlen 1 12 8 4 txl.cfg -o log.interval=1 -o txl.varlen=true -o txl.div_val=1
# bf16: the twins' registry kept with each graph, as BERT's
same txl2_bf16 2 12 8 8 txl.cfg -o log.interval=1 -o precision=\"bf16\"
same txl1_bf16 1 12 8 2 txl.cfg -o log.interval=1 -o precision=\"bf16\"

# the CPU ignores the key, and says so when it is set
run "$HETSEQ" 1 cpu_note "$CNN" $cnn -o training.max_update=1 -o cuda_graphs=true
grep -q "note: cuda_graphs = true is ignored on the cpu backend" cpu_note.log || { cat cpu_note.log; fail "no note on the CPU"; }
pass
