# A user trains the tests' small BERT on long sequences with the fused attention (attention = "fused",
# the default "auto" on CUDA; docs/gpu.md, "Fused attention") on the emulated CUDA device:
#   - the activations it keeps grow linearly with the sequence length: the "| activations:" figure at
#     L = 512 is at most 2.3 times the one at L = 256 (no [B,heads,L,L] tensor: the unfused attention's
#     probabilities alone would make it about 4 times), and at L = 256 it is below the unfused run's;
#   - fused and unfused training follow the same loss and gradient-norm trajectory within 1e-5
#     relative, the tolerance of the CUDA-against-CPU training test (tests/cuda/test_cuda_training.sh:
#     both attentions are within their derived bounds of the same exact values, conformance
#     "flash_attention_forward/backward"), on CUDA at L = 256 and on the CPU (the fused CPU op, the
#     reference math row by row) at the tests' L = 32;
#   - a mistyped HETSEQ_FLASH_KERNELS ends the run at start-up with a message naming it;
#   - under fp16 (16-bit activation storage) the fused run trains too, its trajectory within 1e-3 of the
#     unfused one (tests/cuda/test_act16_cuda.sh's tolerance): the unfused backward reads the
#     probabilities from their 16-bit copy, the fused one recomputes them from q|k|v and the fp32 lse.
. "$top_srcdir/tests/lib.sh"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
need_python h5py numpy
BERT="$top_srcdir/tests/e2e/bert_small.cfg"

# shards LEN: shards of LEN-token sequences in s$LEN/ (16 training rows, 8 test rows)
shards() {
  local w="$top_srcdir/tests/ref/make_bert_shards.py"
  "$PYTHON_TORCH" "$w" "s$1" --prefix wiki --split training --rows 16 --seq-len "$1" --max-pred 5 --vocab 1000 \
    --seed 3 > /dev/null || fail "writing $1-token training shards"
  "$PYTHON_TORCH" "$w" "s$1" --prefix wiki --split test --rows 8 --seq-len "$1" --max-pred 5 --vocab 1000 \
    --seed 4 > /dev/null || fail "writing $1-token test shards"
}
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
# run BINARY DIR DATA ATTENTION ARGS...: a few updates of 4 sequences, no validation, no checkpoint
run() {
  local bin=$1 dir=$2 data=$3 att=$4; shift 4
  OMP_NUM_THREADS=1 mpi 1 "$bin" train "$BERT" -o data.path=\"$data\" -o model.max_position_embeddings=512 \
    -o attention=\"$att\" -o training.max_sentences=4 -o training.disable_validation=true \
    -o checkpoint.no_save=true -o checkpoint.save_dir=\"$dir\" "$@" > "$dir.log" 2>&1 ||
    { cat "$dir.log"; fail "training into $dir failed"; }
}
# act_mb LOG: the activation megabytes of the start-up line
act_mb() { sed -n 's/.*| activations: \([0-9.]*\) MB.*/\1/p' "$1" | head -1; }

shards 256
shards 512
cuda="-o device=\"cuda\" -o training.max_update=2"
run "$EMU" fused256 s256 fused $cuda
run "$EMU" fused512 s512 fused $cuda
run "$EMU" unfused256 s256 unfused $cuda
grep -q "attention fused" fused256.log || { grep activations fused256.log; fail "the log does not say the attention is fused"; }
grep -q "attention unfused" unfused256.log || fail "the unfused run's log does not say unfused"
f256=$(act_mb fused256.log) f512=$(act_mb fused512.log) u256=$(act_mb unfused256.log)
echo "activations: fused L=256 $f256 MB, L=512 $f512 MB; unfused L=256 $u256 MB"
awk -v a="$f256" -v b="$f512" 'BEGIN { r = b / a; printf "L=512 / L=256: %.3f (at most 2.3)\n", r; exit !(r <= 2.3) }' ||
  fail "the fused attention's activations grow faster than linearly with L ($f256 MB -> $f512 MB)"
awk -v f="$f256" -v u="$u256" 'BEGIN { exit !(f < u) }' || fail "fused activations ($f256 MB) not below unfused ($u256 MB)"
same_traj fused256/metrics.jsonl unfused256/metrics.jsonl 1e-5

# fp16 with 16-bit activation storage, fused against unfused
run "$EMU" fused256_fp16 s256 fused $cuda -o precision=\"fp16\"
run "$EMU" unfused256_fp16 s256 unfused $cuda -o precision=\"fp16\"
grep -q "| activations: .* kept in 16 bits.*attention fused" fused256_fp16.log ||
  { grep activations fused256_fp16.log; fail "fp16 fused: the log does not say 16-bit storage and fused attention"; }
echo "activations fp16: fused L=256 $(act_mb fused256_fp16.log) MB, unfused $(act_mb unfused256_fp16.log) MB"
same_traj fused256_fp16/metrics.jsonl unfused256_fp16/metrics.jsonl 1e-3

# the CPU's fused op in training, against the CPU's unfused reference (the tests' 32-token shards)
make_bert_small_shards 37,50,13
run "$HETSEQ" cpu_fused shards fused -o training.max_update=4
run "$HETSEQ" cpu_unfused shards unfused -o training.max_update=4
same_traj cpu_fused/metrics.jsonl cpu_unfused/metrics.jsonl 1e-5
# attention = "auto" on CUDA with heads wider than the fused kernels take (256 columns: hidden 256 in one
# head) trains with the unfused attention and says so
run "$EMU" auto_wide shards auto -o device=\"cuda\" -o training.max_update=1 -o model.hidden_size=256 \
  -o model.num_attention_heads=1 -o model.intermediate_size=64
grep -q "attention unfused" auto_wide.log || { cat auto_wide.log; fail "auto with a 256-column head did not train unfused"; }
# a mistyped HETSEQ_FLASH_KERNELS stops the job as the CUDA backend starts, naming the variable and the
# values it takes, before any data is read (the data path here does not exist)
if HETSEQ_FLASH_KERNELS=wmmma OMP_NUM_THREADS=1 mpi 1 "$EMU" train "$BERT" -o device=\"cuda\" \
  -o data.path=\"$PWD/no_such_data\" -o checkpoint.no_save=true > bad_kernels.log 2>&1; then
  cat bad_kernels.log; fail "HETSEQ_FLASH_KERNELS=wmmma was accepted"
fi
[ "$(grep -c 'hetseq: error' bad_kernels.log)" = 1 ] &&
  grep -q 'hetseq: error: HETSEQ_FLASH_KERNELS="wmmma": expected "regs"' bad_kernels.log ||
  { cat bad_kernels.log; fail "a bad HETSEQ_FLASH_KERNELS was not the one error reported"; }
pass
