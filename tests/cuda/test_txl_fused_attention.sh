#!/bin/sh
# A user trains Transformer-XL on the (emulated) GPU with attention = "fused" (the default there,
# "auto") and with attention = "unfused" (docs/gpu.md, "Relative-position attention, fused"):
#  - the two runs (dropout and dropatt on, memory, same_length off and on) end with the same model to
#    summation order: every checkpoint tensor within 1e-5 relative of the other run's (the tolerance of
#    tests/ref/txl_ranks_and_resume.sh, which the CUDA-vs-CPU and world-size checks use: the fused op
#    computes the same sums in another order, and 12 LAMB updates do not amplify that);
#  - the activations line of the log shrinks: the fused op keeps each layer's row log-sum-exps
#    [b, n, qlen] instead of the probabilities [b, n, qlen, klen], in fp32 storage and under bf16;
#  - under bf16 both train with the twin check on (HETSEQ_CHECK_HALF_TWINS=1).
. "$top_srcdir/tests/lib.sh"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
need_python h5py numpy
. "$top_srcdir/tests/ref/txl_corpus.sh"
make_txl_corpus data 600
HS_TEST_DEVICE=cuda txl_experiment exp.cfg data ""

# run NAME ATTENTION [-o key=value ...]
run() {
  name=$1 mode=$2
  shift 2
  OMP_NUM_THREADS=1 mpi 1 "$EMU" train exp.cfg -o attention=\"$mode\" -o checkpoint.save_dir=\"$name\" "$@" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "Transformer-XL with attention = $mode failed ($name)"; }
}
run fused fused
run unfused unfused
run fused_sl fused -o txl.same_length=true
run unfused_sl unfused -o txl.same_length=true

cat > compare.py <<'PY'
import sys
import h5py
import numpy as np

def tensors(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and name.split("/")[0] in ("model", "task_state", "optimizer"):
                out[name] = obj[()]
        f.visititems(visit)
    return out

a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert set(a) == set(b), "different tensors: %s" % (set(a) ^ set(b))
worst, where, same = 0.0, "", True
for k in a:
    x, y = np.asarray(a[k], dtype=np.float64), np.asarray(b[k], dtype=np.float64)
    same = same and np.array_equal(a[k], b[k])
    s = np.max(np.abs(x)) if x.size else 0.0
    e = np.max(np.abs(x - y)) / s if s > 0 else 0.0
    if e > worst:
        worst, where = e, k
print("worst relative difference %.2e (%s)" % (worst, where))
if worst > 1e-5:
    sys.exit("fused and unfused differ beyond summation order")
if same:
    sys.exit("fused and unfused gave the same bits: was the fused op used?")
PY
"$PYTHON_TORCH" compare.py fused/checkpoint_1_12.h5 unfused/checkpoint_1_12.h5 || fail "fused != unfused after 12 updates"
"$PYTHON_TORCH" compare.py fused_sl/checkpoint_1_12.h5 unfused_sl/checkpoint_1_12.h5 ||
  fail "fused != unfused after 12 updates (same_length)"

# activations: MB of the log's line, fused below unfused
mb() { sed -n 's/.*| activations: \([0-9.]*\) MB.*/\1/p' "$1.log" | head -1; }
act_check() {
  f=$(mb "$1") u=$(mb "$2")
  [ -n "$f" ] && [ -n "$u" ] || fail "no activations line in $1.log or $2.log"
  grep -q "| activations: .*fused attention" "$1.log" || { grep "activations" "$1.log"; fail "$1: the line does not say fused"; }
  ! grep -q "| activations: .*fused attention" "$2.log" || fail "$2: the line says fused"
  echo "activations $3: fused $f MB, unfused $u MB"
  awk -v f="$f" -v u="$u" 'BEGIN { exit !(f < u) }' || fail "$3: the fused attention keeps no fewer bytes ($f >= $u MB)"
}
act_check fused unfused fp32
# bf16: 16-bit storage, and the 16-bit dataflow's tensors that exist only in 16 bits (docs/gpu.md, "The
# 16-bit dataflow"): with the twin check their fp32 ranges hold NaNs, so a read of one stops the run
export HETSEQ_CHECK_HALF_TWINS=1
# the gradients an update's first micro-batch writes whole start as NaN instead of the last update's values
# (src/nn/params.h, hs_params_zero_grad_accumulated): a writer that added to one first would show
export HETSEQ_CHECK_GRADS_WRITTEN=1
for m in fused unfused; do
  run ${m}_bf16 $m -o precision=\"bf16\" -o training.max_update=1 -o checkpoint.no_save=true
done
act_check fused_bf16 unfused_bf16 bf16
grep -q "| activations: .*in 16 bits, fused attention" fused_bf16.log || fail "bf16: 16-bit storage with the fused op"
pass "Transformer-XL: fused and unfused relative attention agree, and the fused op keeps fewer activation bytes"
