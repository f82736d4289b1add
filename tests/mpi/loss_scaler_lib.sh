# Helpers of the loss-scaler tests (sourced after tests/lib.sh by tests/mpi/test_loss_scaler*.sh).
# Set before sourcing: LS_HETSEQ (the binary), LS_DEVICE ("cpu" or "cuda"), LS_EXTRA (more -o options).
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
CMP="$top_builddir/tests/tools/h5compare"
need_python h5py
INIT=1024 INTERVAL=3 OVERFLOW_AT=5 N=12
common="-o data.path=\"$DATA\" -o training.max_epoch=0 -o device=\"$LS_DEVICE\" -o log.interval=1 ${LS_EXTRA:-}"
common="$common -o loss_scaler.init_scale=$INIT.0 -o loss_scaler.growth_interval=$INTERVAL"
common="$common -o distributed.check_replicas_every=1"

# same_state A B KEYS...: the checkpoints hold bit-identical /model and /optimizer datasets, the same
# optimizer step and the same /train_state attributes KEYS (exit 1 otherwise, naming what differs).
same_state() {
  "$PYTHON_TORCH" - "$@" <<'PY'
import sys, h5py, numpy as np
a, b, keys = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), sys.argv[3:]
def datasets(f, group):
    out = {}
    f[group].visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out
bad = []
for g in ("model", "optimizer"):
    da, db = datasets(a, g), datasets(b, g)
    if sorted(da) != sorted(db): bad.append(g + ": different tensors")
    bad += ["/%s/%s differs" % (g, n) for n in da if n in db and da[n].tobytes() != db[n].tobytes()]
if a["optimizer"].attrs["step"] != b["optimizer"].attrs["step"]:
    bad.append("optimizer step %d vs %d" % (a["optimizer"].attrs["step"], b["optimizer"].attrs["step"]))
for k in keys:
    if a["train_state"].attrs[k] != b["train_state"].attrs[k]:
        bad.append("train_state %s: %r vs %r" % (k, a["train_state"].attrs[k], b["train_state"].attrs[k]))
print("\n".join(bad) if bad else "same")
sys.exit(1 if bad else 0)
PY
}
attr() { "$PYTHON_TORCH" -c 'import sys, h5py; f = h5py.File(sys.argv[1], "r"); print(f[sys.argv[2]].attrs[sys.argv[3]])' "$@"; }

# suite NAME PRECISION ENABLED: the checks above for one precision.
suite() {
  local name=$1 prec=$2 enabled=$3
  local opts="$common -o precision=\"$prec\" -o loss_scaler.enabled=\"$enabled\""
  HETSEQ_FAULT="overflow:rank=1:update=$OVERFLOW_AT" mpi 2 "$LS_HETSEQ" train "$CFG" $opts -o training.max_update=$N \
    -o checkpoint.save_interval_updates=1 -o checkpoint.keep_last=-1 -o checkpoint.save_dir=\"$name-straight\" \
    > $name-straight.log 2>&1 || { cat $name-straight.log; fail "$name: the run with an overflow failed"; }
  grep -q "dynamic loss scaling: scale $INIT," $name-straight.log || { cat $name-straight.log; fail "$name: the scaler is not on"; }
  # exactly one skip, of update 5, logged once, with the scale halving
  grep "gradient overflow" $name-straight.log > skips.txt
  [ "$(wc -l < skips.txt)" -eq 1 ] || { cat $name-straight.log; fail "$name: expected one overflow line, got $(wc -l < skips.txt)"; }
  local s4
  s4=$(awk -v i="$INIT" -v g="$INTERVAL" -v o="$OVERFLOW_AT" 'BEGIN { s = i; n = 0
    for (u = 1; u < o; u++) if (++n == g) { s *= 2; n = 0 }; print s }')
  grep -qx "| update $OVERFLOW_AT: gradient overflow, skipped; loss scale $s4 -> $((s4 / 2))" skips.txt \
    || { cat skips.txt; fail "$name: the overflow line is not for update $OVERFLOW_AT, scale $s4 -> $((s4 / 2))"; }
  # the scale after every update, against the rule (GradScaler: x2 after INTERVAL good updates, /2 on overflow)
  awk -v i="$INIT" -v g="$INTERVAL" -v o="$OVERFLOW_AT" -v n="$N" 'BEGIN { s = i; k = 0; sk = 0
    for (u = 1; u <= n; u++) { if (u == o) { s /= 2; k = 0; sk++ } else if (++k == g) { s *= 2; k = 0 }
      print u, s, sk } }' > want.txt
  grep '"type": "train"' $name-straight/metrics.jsonl |
    sed 's/.*"num_updates": \([0-9]*\),.*"loss_scale": \([0-9.e+]*\), "skipped_updates": \([0-9]*\),.*/\1 \2 \3/' > got.txt
  diff want.txt got.txt || fail "$name: the loss scale per update (num_updates scale skipped) differs from the rule"
  # update 5 changed nothing; updates 4 and 6 changed the parameters
  local c="$name-straight/checkpoint_1"
  same_state ${c}_4.h5 ${c}_5.h5 || fail "$name: update $OVERFLOW_AT was not skipped (state changed)"
  [ "$(attr ${c}_5.h5 train_state num_updates)" = 5 ] || fail "$name: the skipped update does not count in num_updates"
  [ "$(attr ${c}_6.h5 optimizer step)" = 5 ] || fail "$name: optimizer step after update 6 is not 5"
  "$CMP" ${c}_3.h5 ${c}_4.h5 0 > /dev/null 2>&1 && fail "$name: update 4 changed nothing"
  "$CMP" ${c}_5.h5 ${c}_6.h5 0 > /dev/null 2>&1 && fail "$name: update 6 changed nothing"
  # resume: killed after update 7 (scale and good-step count away from their initial values), rerun
  HETSEQ_FAULT="overflow:rank=1:update=$OVERFLOW_AT" mpi 2 "$LS_HETSEQ" train "$CFG" $opts -o training.max_update=7 \
    -o checkpoint.save_dir=\"$name-resumed\" > $name-part1.log 2>&1 || { cat $name-part1.log; fail "$name: first part failed"; }
  HETSEQ_FAULT="overflow:rank=1:update=$OVERFLOW_AT" mpi 2 "$LS_HETSEQ" train "$CFG" $opts -o training.max_update=$N \
    -o checkpoint.save_dir=\"$name-resumed\" > $name-part2.log 2>&1 || { cat $name-part2.log; fail "$name: resumed part failed"; }
  grep -q "resuming from $name-resumed/checkpoint_last.h5 (epoch 1, 7 updates into it" $name-part2.log \
    || { cat $name-part2.log; fail "$name: the second run did not resume at update 7"; }
  grep -q "gradient overflow" $name-part2.log && fail "$name: the resumed run skipped an update"
  "$CMP" $name-straight/checkpoint_last.h5 $name-resumed/checkpoint_last.h5 0 \
    || fail "$name: resumed parameters differ from the uninterrupted run"
  same_state $name-straight/checkpoint_last.h5 $name-resumed/checkpoint_last.h5 loss_scale loss_scale_good_steps \
    loss_scale_skipped num_updates || fail "$name: the resumed run's state differs from the uninterrupted run"
  grep '"type": "train"' $name-resumed/metrics.jsonl |
    sed 's/.*"num_updates": \([0-9]*\),.*"loss_scale": \([0-9.e+]*\), "skipped_updates": \([0-9]*\),.*/\1 \2 \3/' > got.txt
  diff want.txt got.txt || fail "$name: the resumed run's loss scale per update differs from the rule"
  echo "ok: $name"
}

