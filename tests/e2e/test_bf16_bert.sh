# A user pre-trains the tests' small BERT (bert_small.cfg: 2 layers, 64 wide) on one rank for 200
# updates in fp32 and in bf16 (precision = "bf16": bf16 products with fp32 sums; LayerNorm, softmax,
# losses, parameters and LAMB state in fp32), same seed and data. The bf16 loss curve tracks the fp32
# one; both curves are printed.
#
# Tolerance. One update's loss is noisy (dropout, 8 sequences of 32 tokens), and two runs whose
# arithmetic differs by bf16 rounding (2^-8 relative per operand) drift apart update by update, so
# single updates are not compared. We compare the mean loss (nats, MLM + NSP; ln 1000 + ln 2 = 7.6 at
# the start) over windows of 20 updates: every bf16 window within 0.02 nats of fp32's, and over the
# last 50 updates bf16 not above fp32 by more than 0.01. Measured on a 2-core AVX-512 machine without
# BF16 instructions: largest window gap 0.0001 nats, so the bounds leave room for other machines'
# summation orders while a bf16 path that broke training (a lost rounding to nearest: truncation
# biases every product; a wrong transpose) moves the curve by far more. The fp32 curve must also fall.
# HS_BF16_BERT_UPDATES=N runs fewer updates (the two runs take about 2 minutes on a loaded machine).
. "$top_srcdir/tests/lib.sh"
need_python h5py numpy
grep -q '^#define HAVE_DNNL 1' "$top_builddir/build_config.h" || fail "hetseq built without oneDNN: install Debian's libdnnl-dev and configure again"
CFG="$top_srcdir/tests/e2e/bert_small.cfg"
UPDATES=${HS_BF16_BERT_UPDATES:-200}
make_bert_small_shards 400,400
for p in fp32 bf16; do
  OMP_NUM_THREADS=1 mpi 1 "$HETSEQ" train "$CFG" -o precision=\"$p\" -o training.max_update=$UPDATES \
    -o lr_scheduler.total_num_update=$UPDATES -o training.validate_interval_updates=0 \
    -o training.disable_validation=true -o checkpoint.no_save=true -o checkpoint.save_dir=\"$p\" > $p.log 2>&1 \
    || { cat $p.log; fail "$p training failed"; }
done
grep -q "precision bf16 on the CPU" bf16.log || { cat bf16.log; fail "the log does not say how bf16 runs"; }
"$PYTHON_TORCH" - fp32/metrics.jsonl bf16/metrics.jsonl "$UPDATES" <<'PY' || fail "bf16 loss curve leaves the fp32 one"
import json, sys
def curve(path):
    rows = [json.loads(l) for l in open(path)]
    return [r["loss_nats_interval"] for r in rows if r["type"] == "train"]
f, b, n = curve(sys.argv[1]), curve(sys.argv[2]), int(sys.argv[3])
if len(f) != n or len(b) != n:
    sys.exit(f"expected {n} train records, got {len(f)} (fp32) and {len(b)} (bf16)")
print("update  fp32_loss  bf16_loss")
for i in range(n):
    print(f"{i + 1:6d}  {f[i]:9.4f}  {b[i]:9.4f}")
W = 20
gaps = []
for s in range(0, n - W + 1, W):
    mf, mb = sum(f[s:s + W]) / W, sum(b[s:s + W]) / W
    gaps.append(abs(mb - mf))
    print(f"updates {s + 1:3d}-{s + W:3d}: mean fp32 {mf:.4f}  bf16 {mb:.4f}  gap {mb - mf:+.4f}")
tail = min(50, n)
lf, lb = sum(f[-tail:]) / tail, sum(b[-tail:]) / tail
print(f"largest window gap {max(gaps):.4f} (limit 0.02); last {tail}: fp32 {lf:.4f} bf16 {lb:.4f} (limit +0.01)")
ok = max(gaps) <= 0.02 and lb - lf <= 0.01 and sum(f[-W:]) / W < sum(f[:W]) / W - 0.3
sys.exit(0 if ok else 1)
PY
pass
