#!/bin/sh
# A user trains a small Transformer-XL (dropout on, adaptive softmax with div_val 2, memory) and checks
# the two promises of the ordered stream:
#  - world-size invariance: 1 rank x update_freq 2 (batch_chunk) and 2 ranks x 1 end with the same model
#    (the same columns, memories and dropout masks; only the order of float sums differs: <= 1e-5);
#  - exact resume: stopping after update 6 (mid-epoch) and resuming from that checkpoint gives the model of
#    the uninterrupted run bit for bit, memories included; resuming it on 1 rank x update_freq 2 gives
#    the same model to summation order;
#  - the checkpoint's /model loads into a PyTorch MemTransformerLM with load_state_dict(strict=True).
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/ref/txl_corpus.sh"
"$HETSEQ" --version >/dev/null 2>&1 || skip "the hetseq binary is not built yet"
need_python h5py numpy

make_txl_corpus data 600
txl_experiment exp.cfg data ""

mpi 2 "$HETSEQ" train exp.cfg -o checkpoint.save_dir=two > two.log 2>&1 || { cat two.log; fail "2-rank run"; }
mpi 1 "$HETSEQ" train exp.cfg -o checkpoint.save_dir=one -o 'training.update_freq=[2]' > one.log 2>&1 ||
  { cat one.log; fail "1-rank run"; }
mkdir -p resumed resumed1
cp two/checkpoint_1_6.h5 resumed/checkpoint_last.h5 || fail "no checkpoint after update 6: $(ls two)"
cp two/checkpoint_1_6.h5 resumed1/checkpoint_last.h5
mpi 2 "$HETSEQ" train exp.cfg -o checkpoint.save_dir=resumed > resumed.log 2>&1 || { cat resumed.log; fail "resumed run"; }
grep -q "resuming from" resumed.log || { cat resumed.log; fail "the run did not resume"; }
mpi 1 "$HETSEQ" train exp.cfg -o checkpoint.save_dir=resumed1 -o 'training.update_freq=[2]' > resumed1.log 2>&1 ||
  { cat resumed1.log; fail "resumed run on 1 rank"; }

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

a, b, mode = tensors(sys.argv[1]), tensors(sys.argv[2]), sys.argv[3]
assert set(a) == set(b), "different tensors: %s" % (set(a) ^ set(b))
assert any(k.startswith("task_state/") for k in a), "no task state (memories) in the checkpoint"
worst, where = 0.0, ""
for k in a:
    x, y = np.asarray(a[k], dtype=np.float64), np.asarray(b[k], dtype=np.float64)
    if mode == "exact":
        if not np.array_equal(a[k], b[k]):
            sys.exit("%s differs (max |diff| %g)" % (k, np.max(np.abs(x - y))))
    else:
        s = np.max(np.abs(x)) if x.size else 0.0
        e = np.max(np.abs(x - y)) / s if s > 0 else 0.0
        if e > worst:
            worst, where = e, k
if mode != "exact":
    print("worst relative difference %.2e (%s)" % (worst, where))
    if worst > 1e-5:
        sys.exit("differs beyond summation order")
print("ok", mode)
PY
"$PYTHON_TORCH" compare.py two/checkpoint_1_12.h5 one/checkpoint_1_12.h5 close || fail "1 rank x 2 micro-batches != 2 ranks"
"$PYTHON_TORCH" compare.py two/checkpoint_1_12.h5 resumed/checkpoint_1_12.h5 exact || fail "resume is not exact"
"$PYTHON_TORCH" compare.py two/checkpoint_1_12.h5 resumed1/checkpoint_1_12.h5 close || fail "resume on 1 rank differs"

cat > load_torch.py <<'PY'
import sys
import h5py
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
from txl_torch import MemTransformerLM

with h5py.File(sys.argv[3], "r") as f:
    n_token = int(f.attrs["vocab_size"])
model = MemTransformerLM(n_token, n_layer=2, n_head=2, d_model=16, d_head=8, d_inner=32, cutoffs=[20, 60], div_val=2)
with h5py.File(sys.argv[2], "r") as f:
    sd = {k: torch.from_numpy(np.asarray(v[()])) for k, v in f["model"].items()}
model.load_state_dict(sd, strict=True)
print("ok: %d state_dict entries load with strict=True" % len(sd))
PY
"$PYTHON_TORCH" load_torch.py "$top_srcdir/tests/ref" two/checkpoint_1_12.h5 data/lm.h5 ||
  fail "the checkpoint does not load into PyTorch's MemTransformerLM with strict=True"
pass
