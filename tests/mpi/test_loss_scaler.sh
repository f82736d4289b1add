# A user trains the MNIST CNN on 2 ranks with dynamic loss scaling (loss_scaler) and one gradient
# overflows on rank 1 at update 5 (HETSEQ_FAULT=overflow): every rank skips exactly update 5 (the
# parameters, the optimizer's state and step count stay as they were after update 4; the replica check
# after every update shows both ranks agree), the scale halves once and grows again after
# growth_interval good updates, and the other updates are applied. A run killed after update 7 and
# resubmitted ends bit-identical to the uninterrupted one, scaler state included. Without the scaler
# the same overflow stops the run as diverged, and a scale driven below min_scale stops every rank.
# precision = "fp32" with loss_scaler.enabled = "on" always runs; precision = "fp16" (the scaler on by
# "auto") runs too when this build trains fp16 on the CPU. tests/cuda/test_loss_scaler.sh runs
# the same checks on the (emulated) CUDA device.
. "$top_srcdir/tests/lib.sh"
LS_HETSEQ=$HETSEQ LS_DEVICE=cpu
. "$top_srcdir/tests/mpi/loss_scaler_lib.sh"

suite fp32 fp32 on

# The scaling is exact in fp32 (S a power of two): without an overflow the run with the scaler on ends
# with the same bits as the run without it.
mpi 2 "$HETSEQ" train "$CFG" $common -o loss_scaler.enabled=\"on\" -o training.max_update=$N -o checkpoint.save_dir=\"on\" \
  > on.log 2>&1 || { cat on.log; fail "run with the scaler on failed"; }
mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=$N -o checkpoint.save_dir=\"off\" \
  > off.log 2>&1 || { cat off.log; fail "run without the scaler failed"; }
grep -q "dynamic loss scaling" off.log && fail "the scaler is on in fp32 with enabled = \"auto\""
grep -q '"loss_scale"' off/metrics.jsonl && fail "the metrics of a run without the scaler have a loss_scale field"
[ "$(attr off/checkpoint_last.h5 train_state loss_scale)" = 0.0 ] || fail "a run without the scaler saved a loss scale"
"$CMP" on/checkpoint_last.h5 off/checkpoint_last.h5 0 > /dev/null || fail "the scaler changed an fp32 run without overflow"

# Without the scaler an overflow stops the run as before.
HETSEQ_FAULT="overflow:rank=1:update=3" expect_error "overflow without the scaler" \
  "training diverged at update 3: .* the first gradient with a NaN or Inf is conv1.weight" \
  mpi 2 "$HETSEQ" train "$CFG" $common -o training.max_update=$N -o checkpoint.save_dir=\"div\"

# Backing off below min_scale stops every rank; the checkpoint of the update before is intact.
HETSEQ_FAULT="overflow:rank=0:update=3;overflow:rank=1:update=4" expect_error "scale below min_scale" \
  "update 4: gradient overflow with the loss scale at 1, and backing off to 0.5 would go below loss_scaler.min_scale = 1: the run has diverged in fp16" \
  mpi 2 "$HETSEQ" train "$CFG" $common -o loss_scaler.enabled=\"on\" -o loss_scaler.init_scale=2.0 -o training.max_update=$N \
  -o checkpoint.save_interval_updates=1 -o checkpoint.save_dir=\"under\"
[ "$(attr under/checkpoint_last.h5 train_state num_updates)" = 3 ] || fail "the last checkpoint is not that of update 3"
[ "$(attr under/checkpoint_last.h5 train_state loss_scale)" = 1.0 ] || fail "the last checkpoint's scale is not 1"

# A checkpoint written before the scaler existed (no loss_scale attributes) resumes with init_scale.
mkdir old
"$PYTHON_TORCH" - fp32-straight/checkpoint_1_7.h5 old/checkpoint_last.h5 <<'PY' || fail "cannot make the old checkpoint"
import shutil, sys, h5py
shutil.copyfile(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    for k in ("loss_scale", "loss_scale_good_steps", "loss_scale_skipped"): del f["train_state"].attrs[k]
PY
mpi 2 "$HETSEQ" train "$CFG" $common -o loss_scaler.enabled=\"on\" -o training.max_update=8 -o checkpoint.save_dir=\"old\" \
  > old.log 2>&1 || { cat old.log; fail "resuming from a checkpoint without scaler state failed"; }
grep -q "resuming from old/checkpoint_last.h5 (epoch 1, 7 updates into it" old.log || { cat old.log; fail "did not resume"; }
grep -q "dynamic loss scaling: scale $INIT," old.log || { cat old.log; fail "an old checkpoint did not resume with init_scale"; }
[ "$(attr old/checkpoint_last.h5 train_state loss_scale)" = "$INIT.0" ] || fail "the resumed old run saved another scale"

# fp16 on the CPU (GEMM operands rounded to fp16): the scaler is on by "auto".
if out=$(mpi 1 "$HETSEQ" train "$CFG" $common -o precision=\"fp16\" -o training.max_update=1 -o checkpoint.no_save=true \
  -o log.metrics_file=\"\" 2>&1); then
  suite fp16 fp16 auto
  # fp16 really changed the arithmetic: the same updates in fp32 end with other parameters
  "$CMP" fp32-straight/checkpoint_last.h5 fp16-straight/checkpoint_last.h5 0 > /dev/null 2>&1 \
    && fail "the fp16 and fp32 runs are identical"
elif printf '%s\n' "$out" | grep -q 'precision = "fp16"'; then
  echo "note: this build does not train precision = \"fp16\" on the CPU: $(printf '%s\n' "$out" | grep -m1 error)"
else
  printf '%s\n' "$out"
  fail "a one-update fp16 run failed"
fi
pass
