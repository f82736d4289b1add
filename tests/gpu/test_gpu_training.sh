# On a machine with a GPU: hetseq built --with-cuda trains on the real GPU as on the CPU (docs/gpu.md,
# "First run on a GPU"). Runs under `make check` and standalone, from the checkout's root:
#   bash tests/gpu/test_gpu_training.sh BUILD_DIR          (BUILD_DIR holds hetseq and tests/tools/h5compare)
#   bash .dev/on_gpu.sh bash tests/gpu/test_gpu_training.sh build   (a GPU machine without hetseq's libraries)
# Exits 77 only when no GPU is visible; on any GPU count every step runs: with fewer GPUs than ranks the
# ranks share them (host-staged gradients, docs/gpu.md "More ranks than GPUs").
#   1. CNN, plain SGD, 10 updates of 48 images: 1, 2, 3 GPU ranks and a mixed job (1 GPU + 1 CPU rank)
#      equal one CPU rank within 1e-5 (model and per-update loss and gradient norm; SGD does not amplify
#      rounding, docs/gpu.md "Determinism"; measured on an H200: 1.6e-7).
#   2. HetSeq's CNN recipe (Adadelta, lr 1.01) GPU against GPU: 1 rank x update_freq 2 = 2 ranks
#      (world-size invariance), and a 2-rank run stopped after 7 updates and resumed is bit-identical.
#   3. The small BERT (LAMB, dropout on), 12 updates (needs a Python with h5py for the shards): fp32 on
#      1, 2, 3 GPU ranks = 1 CPU rank within 1e-5 (H200: 1.5e-8); bf16 and fp16 on 1 GPU rank = 1 CPU rank
#      in the same precision within the derived tolerance below.
#
# The 16-bit tolerance (docs/gpu.md, "Training tolerances of 16-bit runs"). Under precision bf16 or
# fp16 both backends round the two operands of every matrix product to 16 bits (nearest, ties to even;
# unit roundoff u = 2^-8 for bf16, 2^-11 for fp16) and sum the products in fp32. The same fp32 operand
# rounds to the same 16-bit value on both; operands that already differ in their last fp32 bits
# (another summation order upstream) can round to neighbouring 16-bit values, one 16-bit ulp = 2u
# relative apart. So one product term a·b differs by at most (2u + 2u)|a·b| = 4u|a·b|, and every weight
# gradient (the product X^T·dY) by at most 4u relative to the sum of its |terms|. LAMB then moves each
# tensor by a step whose length the trust ratio fixes at lr_t·||θ|| and whose direction differs by that
# relative amount, so after N updates
#     ||θ_gpu - θ_cpu|| / ||θ|| <= 4u · Σ_t lr_t
# (fp32 sums add K·2^-24, far below). bert_small.cfg: lr 2e-3, 10 warm-up updates (0.1 x 100), then
# poly 0.5: Σ_{t=1..12} lr_t = 0.0163 (summed from the run's own records). Tolerances: bf16
# 4·2^-8·0.0163 = 2.6e-4, fp16 4·2^-11·0.0163 = 3.2e-5, applied by h5compare to the whole model and to
# its largest element difference (relative to the largest parameter). Measured on an H200: bf16 1.49e-5
# (largest element 3.9e-5), fp16 2.1e-6 (1.02e-5). Per-update losses of 16-bit runs: within 4u relative
# (one product's bound). Gradient norms are not compared in 16 bits.
if [ -z "${top_srcdir:-}" ]; then # standalone: locate the checkout, the build, Python and the data
  top_srcdir=$(cd "$(dirname "$0")/../.." && pwd)
  top_builddir=$(cd "${1:-$top_srcdir/build}" 2>/dev/null && pwd) ||
    { echo "FAIL: build directory ${1:-$top_srcdir/build} not found (usage: $0 BUILD_DIR)" >&2; exit 1; }
  HETSEQ=$top_builddir/hetseq
  PYTHON_TORCH=${PYTHON_TORCH:-${HS_PY:-}}
  export top_srcdir top_builddir HETSEQ PYTHON_TORCH
fi
. "$top_srcdir/tests/lib.sh"
# the gradients an update's first micro-batch writes whole start as NaN (src/nn/params.h): on a real GPU
# this also shows that cuBLASLt reads no C at beta 0, the BGRADB epilogue included
export HETSEQ_CHECK_GRADS_WRITTEN=1
# A GPU is visible when nvidia-smi lists one, or (no nvidia-smi in the image) the driver's device file is there.
if command -v nvidia-smi > /dev/null 2>&1; then
  nvidia-smi -L 2>/dev/null | grep -q '^GPU' || skip "no GPU visible: nvidia-smi lists none"
else
  ls /dev/nvidia[0-9]* > /dev/null 2>&1 || skip "no GPU visible: no nvidia-smi and no /dev/nvidia0"
fi
[ -x "$HETSEQ" ] || fail "$HETSEQ is not built"
CMP="$top_builddir/tests/tools/h5compare"
[ -x "$CMP" ] || fail "$CMP is not built (make tests/tools/h5compare)"

# traj FILE: "update loss gnorm" of every train record
traj() { grep '"type": "train"' "$1" | sed 's/.*"num_updates": \([0-9]*\), "loss": \([^,]*\),.*"gnorm": \([^,]*\),.*/\1 \2 \3/'; }
# same_traj A B TOL [GNORM_TOL]: equal update counts, losses within TOL relative, gradient norms within
# GNORM_TOL (default TOL; "-" skips them)
same_traj() {
  traj "$1" > a.traj; traj "$2" > b.traj
  [ -s a.traj ] && [ "$(wc -l < a.traj)" -eq "$(wc -l < b.traj)" ] || fail "$1 and $2 have different numbers of updates"
  paste a.traj b.traj | awk -v tol="$3" -v gtol="${4:-$3}" '
    function rel(x, y) { d = x - y; if (d < 0) d = -d; m = (x < 0 ? -x : x); if (m < 1e-30) m = 1e-30; return d / m }
    { if ($1 != $4 || rel($2, $5) > tol || (gtol != "-" && rel($3, $6) > gtol)) {
        print "update " $1 ": loss " $2 " gnorm " $3 " | loss " $5 " gnorm " $6; bad = 1 } }
    END { exit bad }' || fail "trajectories of $1 and $2 differ by more than $3 relative"
}
# run RANKS DIR ARGS...: hetseq train on RANKS ranks into DIR
run() {
  local np=$1 dir=$2; shift 2
  mpi "$np" "$HETSEQ" train "$@" -o checkpoint.save_dir=\"$dir\" >> "$dir.log" 2>&1 || { cat "$dir.log"; fail "training into $dir failed"; }
}

# ---- 1. the CNN against the CPU ----------------------------------------------------------------------
make_tiny_mnist mnist.h5
CNN="$top_srcdir/tests/e2e/small.cfg"
cnn="-o data.path=\"mnist.h5\" -o training.max_update=20 -o training.max_epoch=0 -o training.max_sentences=8"
sgd="-o optimizer.name=\"sgd\" -o optimizer.lr=0.01 -o optimizer.momentum=0.0 -o training.max_update=10"
run 1 cnn_cpu "$CNN" $cnn $sgd -o training.update_freq=6
run 1 cnn_gpu1 "$CNN" $cnn $sgd -o training.update_freq=6 -o device=\"cuda\"
line=$(grep -m1 "device = cuda: rank 0 (local rank 0) uses GPU 0 of" cnn_gpu1.log) || { cat cnn_gpu1.log; fail "the GPU run does not say which GPU it uses"; }
GPUS=$(printf '%s\n' "$line" | sed 's/.* uses GPU 0 of \([0-9]*\) (\(.*\))$/\1/')
echo "GPU: $(printf '%s\n' "$line" | sed 's/.* uses GPU 0 of [0-9]* (//; s/)$//') ($GPUS visible)"
run 2 cnn_gpu2 "$CNN" $cnn $sgd -o training.update_freq=3 -o device=\"cuda\"
run 3 cnn_gpu3 "$CNN" $cnn $sgd -o training.update_freq=2 -o device=\"cuda\"
if [ "$GPUS" -lt 3 ]; then # more ranks than GPUs: said once, host-staged
  grep -q "^| ranks 0, .* share one GPU" cnn_gpu3.log && grep -q "(host-staged)" cnn_gpu3.log ||
    { cat cnn_gpu3.log; fail "3 ranks on $GPUS GPU(s): the log does not say that ranks share a GPU"; }
else
  grep -q "(NCCL)" cnn_gpu3.log || { cat cnn_gpu3.log; fail "3 ranks on $GPUS GPUs do not use NCCL"; }
fi
for r in 1 2 3; do
  "$CMP" cnn_cpu/checkpoint_last.h5 "cnn_gpu$r/checkpoint_last.h5" 1e-5 || fail "CNN: GPU on $r rank(s) != CPU"
  same_traj cnn_cpu/metrics.jsonl "cnn_gpu$r/metrics.jsonl" 1e-5
done
# the mixed job: one GPU rank beside one CPU rank
timeout -k 5 300 "$MPIRUN" --allow-run-as-root --oversubscribe --mca btl self,vader \
  -np 1 "$HETSEQ" train "$CNN" $cnn $sgd -o training.update_freq=3 -o device=\"cuda\" -o checkpoint.save_dir=\"cnn_mixed\" : \
  -np 1 "$HETSEQ" train "$CNN" $cnn $sgd -o training.update_freq=3 -o device=\"cpu\" -o checkpoint.save_dir=\"cnn_mixed\" \
  > cnn_mixed.log 2>&1 || { cat cnn_mixed.log; fail "the mixed job (1 GPU + 1 CPU rank) failed"; }
"$CMP" cnn_cpu/checkpoint_last.h5 cnn_mixed/checkpoint_last.h5 1e-5 || fail "CNN: mixed job != CPU"
echo "ok: CNN, 10 SGD updates: 1, 2, 3 GPU ranks and 1 GPU + 1 CPU rank = 1 CPU rank within 1e-5"

# ---- 2. HetSeq's recipe, GPU against GPU ---------------------------------------------------------------
run 1 recipe_uf2 "$CNN" $cnn -o training.update_freq=2 -o device=\"cuda\"
run 2 recipe_two "$CNN" $cnn -o training.update_freq=1 -o device=\"cuda\"
"$CMP" recipe_uf2/checkpoint_last.h5 recipe_two/checkpoint_last.h5 1e-5 || fail "CNN recipe on GPU: 1 rank x uf 2 != 2 ranks"
run 2 recipe_resumed "$CNN" $cnn -o device=\"cuda\" -o training.max_update=7 -o checkpoint.save_interval_updates=5
run 2 recipe_resumed "$CNN" $cnn -o device=\"cuda\" -o checkpoint.save_interval_updates=5
grep -q "resuming from recipe_resumed/checkpoint_last.h5" recipe_resumed.log || fail "the GPU run did not resume"
"$CMP" recipe_two/checkpoint_last.h5 recipe_resumed/checkpoint_last.h5 0 || fail "CNN recipe: resume on the GPU is not bit-exact"
traj recipe_two/metrics.jsonl > a.traj; traj recipe_resumed/metrics.jsonl > b.traj
diff a.traj b.traj > /dev/null || fail "CNN recipe: the loss trajectory differs after a resume on the GPU"
echo "ok: CNN recipe on the GPU: world-size invariant, resume bit-exact"

# ---- 3. the small BERT -----------------------------------------------------------------------------------
if [ -z "${PYTHON_TORCH:-}" ]; then
  echo "BERT part skipped: no Python with h5py to write the test shards (PYTHON_TORCH or HS_PY)"
  pass
fi
make_bert_small_shards 37,50,13
BERT="$top_srcdir/tests/e2e/bert_small.cfg"
run 1 bert_cpu "$BERT" -o training.update_freq=6
for r in 1 2 3; do
  run $r "bert_gpu$r" "$BERT" -o training.update_freq=$((6 / r)) -o device=\"cuda\"
  "$CMP" bert_cpu/checkpoint_last.h5 "bert_gpu$r/checkpoint_last.h5" 1e-5 || fail "BERT fp32: GPU on $r rank(s) != CPU"
  same_traj bert_cpu/metrics.jsonl "bert_gpu$r/metrics.jsonl" 1e-5
done
echo "ok: BERT fp32, 12 updates: 1, 2, 3 GPU ranks = 1 CPU rank within 1e-5"
# Σ lr_t over the 12 updates, from the run's own records (the derivation above: 0.0163)
lrsum=$(grep '"type": "train"' bert_cpu/metrics.jsonl | sed 's/.*"lr": \([^,}]*\).*/\1/' | awk '{ s += $1 } END { printf "%.6g", s }')
for p in bf16 fp16; do
  u=$([ $p = bf16 ] && echo 0.00390625 || echo 0.00048828125) # 2^-8, 2^-11
  tol=$(awk -v u="$u" -v s="$lrsum" 'BEGIN { printf "%.3g", 4 * u * s }')
  ltol=$(awk -v u="$u" 'BEGIN { printf "%.3g", 4 * u }')
  if ! mpi 1 "$HETSEQ" train "$BERT" -o training.update_freq=6 -o precision=\"$p\" -o checkpoint.save_dir=\"bert_cpu_$p\" \
      > "bert_cpu_$p.log" 2>&1; then
    grep -qi "oneDNN" "bert_cpu_$p.log" && { echo "BERT $p skipped: the CPU side needs oneDNN in this build"; continue; }
    cat "bert_cpu_$p.log"; fail "BERT $p on the CPU failed"
  fi
  run 1 "bert_gpu_$p" "$BERT" -o training.update_freq=6 -o precision=\"$p\" -o device=\"cuda\"
  "$CMP" "bert_cpu_$p/checkpoint_last.h5" "bert_gpu_$p/checkpoint_last.h5" "$tol" ||
    fail "BERT $p: GPU != CPU within 4u·Σlr = $tol (u = $u, Σlr = $lrsum)"
  same_traj "bert_cpu_$p/metrics.jsonl" "bert_gpu_$p/metrics.jsonl" "$ltol" -
  echo "ok: BERT $p, 12 updates: GPU = CPU within $tol (4u·Σlr, u = $u, Σlr = $lrsum); losses within 4u = $ltol"
done
pass
