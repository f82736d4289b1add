# A user pre-trains the tests' small BERT (bert_small.cfg: 2 layers, 64 wide; 4 sequences of 32 tokens
# per update, to keep the emulator's cost down) for 100 updates in fp32, then with device = "cuda"
# (here the emulated CUDA device: the same backend code and kernels, cuBLASLt/cuDNN stand-ins that
# compute the requested types) and precision = "bf16" (GEMM operands converted to CUDA_R_16BF, fp32
# accumulation), same seed and data; and in "fp16" (CUDA_R_16F operands) when the run reports dynamic
# loss scaling, which fp16 needs. The fp32 reference runs on the CPU backend, which fp32 on CUDA matches
# within 1e-5 per update (tests/cuda/test_cuda_training.sh). HS_PRECISION_BERT_ALL=1 adds "tf32"
# (CUBLAS_COMPUTE_32F_FAST_TF32). Each reduced-precision loss curve tracks the fp32 one; all curves are
# printed, and the log must say which cuBLASLt types each precision uses.
#
# Tolerance (as tests/e2e/test_bf16_bert.sh on the CPU): single updates are not compared (dropout noise,
# and runs whose arithmetic differs by a rounding of 2^-8 (bf16) or 2^-11 (tf32, fp16) relative per
# operand drift apart update by update). The mean loss (nats, MLM + NSP) over windows of 20 updates must
# be within 0.02 nats of fp32's, and over the last 50 updates not above fp32's by more than 0.01; the
# fp32 curve must fall by 0.08 nats from the first window to the last (measured: 7.61 -> 7.51 over 100
# updates of 4 sequences; 7.61 -> 7.42 over 200). Updates
# the fp16 run's loss scaler skips (gradient overflow while the scale settles: the first two here)
# have no loss and are left out of both means.
# Measured (emulated device, 2 cores at load 5-7): largest window gap bf16 0.0001, tf32 0.0000, fp16
# 0.0033 nats (2 updates skipped) over 200 updates; 95 s (bf16), 69 s (tf32), 115 s (fp16) per run of 200. A path that broke
# the arithmetic (a wrong operand type, truncation instead of rounding to nearest, a lost transpose)
# moves a window by far more.
# HS_PRECISION_BERT_UPDATES=N runs fewer updates. Cost: the script prints each run's time with the
# load average (the emulator runs kernels on one core).
. "$top_srcdir/tests/lib.sh"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
# (no HETSEQ_CHECK_HALF_TWINS here: its check waits for the device at every product, too slow for 100
# updates; test_cuda_training.sh, test_act16_cuda.sh and test_cuda_graphs.sh run with it)
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
need_python h5py numpy
CFG="$top_srcdir/tests/e2e/bert_small.cfg"
UPDATES=${HS_PRECISION_BERT_UPDATES:-100}
# mpi()'s 300 s is a hang guard; 100 emulated-device updates take 75-150 s on a busy 2-core machine
# (450 s seen at load 9), so this test's guard is longer (the test times nothing)
HS_MPI_LIMIT=${HS_MPI_LIMIT:-900}
make_bert_small_shards 400,400
run() { # precision [device]
  local p=$1 dev=${2:-cuda} t0 t1
  t0=$(date +%s)
  OMP_NUM_THREADS=1 mpi 1 "$EMU" train "$CFG" -o device=\"$dev\" -o precision=\"$p\" -o training.max_update=$UPDATES \
    -o training.max_sentences=4 -o lr_scheduler.total_num_update=$UPDATES -o training.validate_interval_updates=0 \
    -o training.disable_validation=true -o checkpoint.no_save=true -o checkpoint.save_dir=\"$p\" > $p.log 2>&1 \
    || { cat $p.log; fail "$p training on $dev failed"; }
  t1=$(date +%s)
  echo "$p: $UPDATES updates in $((t1 - t0)) s ($dev; load average $(cut -d' ' -f1 /proc/loadavg))"
}
# The fp32 curve comes from the CPU backend: fp32 on the emulated device matches it within 1e-5 per
# update (tests/cuda/test_cuda_training.sh) at a tenth of the cost. tf32 (whose per-op conformance
# tests/cuda/test_op_conformance checks) runs too with HS_PRECISION_BERT_ALL=1.
run fp32 cpu
CURVES="fp32 bf16"
run bf16
grep -q "precision bf16 on CUDA: cuBLASLt A and B in CUDA_R_16BF" bf16.log || { cat bf16.log; fail "the log does not say how bf16 runs"; }
if [ -n "${HS_PRECISION_BERT_ALL:-}" ]; then
  run tf32
  CURVES="$CURVES tf32"
  grep -q "precision tf32 on CUDA: cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32" tf32.log || { cat tf32.log; fail "the log does not say how tf32 runs"; }
fi
run fp16
grep -q "precision fp16 on CUDA: cuBLASLt A and B in CUDA_R_16F" fp16.log || { cat fp16.log; fail "the log does not say how fp16 runs"; }
if grep -qi "loss scal" fp16.log; then
  CURVES="$CURVES fp16"
else
  echo "fp16: this build reports no dynamic loss scaling, which fp16 training needs; its curve is printed, not checked"
fi
"$PYTHON_TORCH" - "$UPDATES" $CURVES <<'PY' || fail "a reduced-precision loss curve leaves the fp32 one"
import json, os, sys
n, names = int(sys.argv[1]), sys.argv[2:]
def curve(p):
    """losses of the train records, and which updates the loss scaler skipped (gradient overflow: no
    step, loss reported as 0; the records count them in skipped_updates)"""
    rows = [json.loads(l) for l in open(f"{p}/metrics.jsonl")]
    rows = [r for r in rows if r["type"] == "train"]
    sk = [r.get("skipped_updates", 0) for r in rows]
    return [r["loss_nats_interval"] for r in rows], [sk[i] > (sk[i - 1] if i else 0) for i in range(len(rows))]
shown = names + (["fp16"] if "fp16" not in names and os.path.exists("fp16/metrics.jsonl") else [])
c = {p: curve(p) for p in shown}
for p in names:
    if len(c[p][0]) != n:
        sys.exit(f"expected {n} train records in {p}, got {len(c[p][0])}")
print("update " + " ".join(f"{p + '_loss':>10}" for p in shown) + "  (s: update skipped by the loss scaler)")
for i in range(n):
    print(f"{i + 1:6d} " + " ".join((f"{c[p][0][i]:9.4f}" + ("s" if c[p][1][i] else " ")) if i < len(c[p][0])
                                     else f"{'-':>10}" for p in shown))
def mean(v, idx):
    return sum(v[i] for i in idx) / len(idx)
W, tail, f, ok = 20, min(50, n), c["fp32"][0], True
for p in names[1:]:
    b, skipped = c[p]
    kept = [i for i in range(n) if not skipped[i]]  # skipped updates have no loss to compare
    gaps = []
    for s in range(0, n - W + 1, W):
        idx = [i for i in kept if s <= i < s + W]
        gaps.append(abs(mean(b, idx) - mean(f, idx)))
    idx = [i for i in kept if i >= n - tail]
    lf, lb = mean(f, idx), mean(b, idx)
    good = max(gaps) <= 0.02 and lb - lf <= 0.01
    print(f"{p}: {n - len(kept)} updates skipped; largest window gap {max(gaps):.4f} (limit 0.02); last {tail}: "
          f"fp32 {lf:.4f} {p} {lb:.4f} (limit +0.01){'' if good else '  FAIL'}")
    ok = ok and good
falls = sum(f[-W:]) / W < sum(f[:W]) / W - 0.08
print(f"fp32 falls from {sum(f[:W]) / W:.4f} to {sum(f[-W:]) / W:.4f} (must fall by 0.08)")
sys.exit(0 if ok and falls else 1)
PY
pass
