# A user trains the tests' small BERT with precision = "bf16" and "fp16", where the encoder layers keep
# q|k|v, the attention probabilities, the context and the FFN activations in 16 bits for the backward
# pass (docs/gpu.md, "Mixed precision"), with device = "cuda" (here the emulated CUDA device: the same
# kernels/lowp.cu conversions and backend code) and on the CPU backend in the same precision:
#   - both logs say the activations are kept in 16 bits and report the same activation megabytes;
#   - the CUDA loss and gradient-norm trajectory follows the CPU's within 1e-3 relative over 4 updates:
#     both round the same values to the same 16 bits (tests/cuda/test_op_conformance checks to_half and
#     from_half bit for bit), so they differ only by the products' summation order (1e-5 per update, as
#     tests/cuda/test_cuda_training.sh), which now and then moves a value across a rounding midpoint
#     of the 16-bit type; measured (4 layers): at most 4.2e-5 (bf16) and 1.3e-5 (fp16);
#   - HETSEQ_ACTIVATION_STORAGE=fp32 on CUDA keeps fp32 storage (and says so), with a larger activation
#     figure and a first loss within 1e-4 relative (the same here): storage changes only the backward,
#     but the FFN input product, the 16-bit linear layer gemm_bias_half, writes its output in 16 bits
#     under 16-bit storage and in fp32 (rounded after) under fp32 storage: two cuBLASLt calls, whose
#     algorithms a GPU may sum in another order; then a trajectory within 1e-3 of the 16-bit one
#     (measured: 1e-5).
# 4 layers instead of the config's 2: with 2, one fp32 working set and two 16-bit copies weigh what two
# fp32 layers do. The attention is the unfused one on both backends (attention = "unfused"), whose
# probabilities are among the 16-bit tensors; the fused one under 16-bit storage is
# tests/cuda/test_fused_attention.sh's.
# bf16 needs the CPU reference's oneDNN; without it only fp16 runs.
. "$top_srcdir/tests/lib.sh"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
# every 16-bit twin a bf16/fp16 product reads instead of converting is compared with a fresh conversion
# (bind_half, src/backend/cuda/cuda_twins.c): a stale one stops the run naming the op
export HETSEQ_CHECK_HALF_TWINS=1
# the gradients an update's first micro-batch writes whole start as NaN instead of the last update's values
# (src/nn/params.h, hs_params_zero_grad_accumulated): a writer that added to one first would show
export HETSEQ_CHECK_GRADS_WRITTEN=1
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
need_python h5py numpy
make_bert_small_shards 37,50,13
BERT="$top_srcdir/tests/e2e/bert_small.cfg"

# traj FILE: "update loss gnorm" of every train record
traj() { grep '"type": "train"' "$1" | sed 's/.*"num_updates": \([0-9]*\), "loss": \([^,]*\),.*"gnorm": \([^,]*\),.*/\1 \2 \3/'; }
# same_traj A B TOL: equal update counts, losses and gradient norms within TOL relative; prints the worst
same_traj() {
  traj "$1" > a.traj; traj "$2" > b.traj
  [ -s a.traj ] && [ "$(wc -l < a.traj)" -eq "$(wc -l < b.traj)" ] || fail "$1 and $2 have different numbers of updates"
  paste a.traj b.traj | awk -v tol="$3" -v what="$1 vs $2" '
    function rel(x, y) { d = x - y; if (d < 0) d = -d; m = (x < 0 ? -x : x); if (m < 1e-30) m = 1e-30; return d / m }
    { r = rel($2, $5); g = rel($3, $6); if (r > worst) worst = r; if (g > worst) worst = g
      if ($1 != $4 || r > tol || g > tol) { print "update " $1 ": loss " $2 " gnorm " $3 " against loss " $5 " gnorm " $6; bad = 1 } }
    END { printf "%s: worst relative difference %.2g (tolerance %g)\n", what, worst, tol; exit bad }' ||
    fail "trajectories of $1 and $2 differ by more than $3 relative"
}
# run BINARY DIR PRECISION ARGS...
run() {
  local bin=$1 dir=$2 p=$3; shift 3
  OMP_NUM_THREADS=1 mpi 1 "$bin" train "$BERT" -o precision=\"$p\" -o training.max_update=4 -o model.num_hidden_layers=4 \
    -o attention=\"unfused\" \
    -o training.disable_validation=true -o checkpoint.no_save=true -o checkpoint.save_dir=\"$dir\" "$@" \
    > "$dir.log" 2>&1
}
# act_mb LOG: the activation megabytes of the start-up line
act_mb() { sed -n 's/.*| activations: \([0-9.]*\) MB.*/\1/p' "$1" | head -1; }

for p in bf16 fp16; do
  if ! run "$HETSEQ" "cpu_$p" $p; then
    if [ $p = bf16 ] && grep -q "oneDNN" "cpu_$p.log"; then echo "bf16 skipped: $(grep -m1 oneDNN cpu_$p.log)"; continue; fi
    cat "cpu_$p.log"; fail "$p training on the CPU failed"
  fi
  run "$EMU" "cuda_$p" $p -o device=\"cuda\" || { cat "cuda_$p.log"; fail "$p training on CUDA failed"; }
  for d in cpu cuda; do
    grep -q "| activations: .* kept in 16 bits" "${d}_$p.log" || { grep activations "${d}_$p.log"; fail "$p on $d: the log does not say the activations are kept in 16 bits"; }
  done
  [ "$(act_mb cpu_$p.log)" = "$(act_mb cuda_$p.log)" ] || fail "$p: activation MB differ: CPU $(act_mb cpu_$p.log), CUDA $(act_mb cuda_$p.log)"
  same_traj "cpu_$p/metrics.jsonl" "cuda_$p/metrics.jsonl" 1e-3
done

HETSEQ_ACTIVATION_STORAGE=fp32 run "$EMU" cuda_bf16_fp32 bf16 -o device=\"cuda\" -o precision=\"bf16\" ||
  { cat cuda_bf16_fp32.log; fail "bf16 with fp32 storage on CUDA failed"; }
grep -q "| activations: .* kept in fp32" cuda_bf16_fp32.log || fail "HETSEQ_ACTIVATION_STORAGE=fp32: the log does not say fp32"
awk -v a="$(act_mb cuda_bf16_fp32.log)" -v b="$(act_mb cuda_bf16.log)" 'BEGIN { exit !(a > b) }' ||
  fail "16-bit storage ($(act_mb cuda_bf16.log) MB) is not smaller than fp32 storage ($(act_mb cuda_bf16_fp32.log) MB)"
awk -v a="$(traj "cuda_bf16/metrics.jsonl" | head -1 | cut -d' ' -f2)" \
  -v b="$(traj "cuda_bf16_fp32/metrics.jsonl" | head -1 | cut -d' ' -f2)" \
  'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-4 * (b < 0 ? -b : b)) }' ||
  fail "the first loss depends on the activation storage by more than a summation order:" \
    "$(traj "cuda_bf16/metrics.jsonl" | head -1) against $(traj "cuda_bf16_fp32/metrics.jsonl" | head -1)"
same_traj "cuda_bf16_fp32/metrics.jsonl" "cuda_bf16/metrics.jsonl" 1e-3
echo "activations: bf16 $(act_mb cuda_bf16.log) MB, with HETSEQ_ACTIVATION_STORAGE=fp32 $(act_mb cuda_bf16_fp32.log) MB"
pass
