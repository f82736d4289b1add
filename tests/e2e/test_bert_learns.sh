#!/bin/sh
# A user pre-trains a tiny BERT on NVIDIA-format shards (from an independent h5py writer) on two ranks,
# with the model described by a bert_config.json that leaves some keys out (they take BERT's
# defaults) and carries a key hetseq does not know (accepted, as NVIDIA does). The log carries the MLM
# and NSP losses and accuracies; the first MLM loss is that of a fresh model (about ln V: NVIDIA's
# initialisation predicts nearly uniformly over the V = 1000 tokens), the MLM loss falls over 24
# updates, and validation on the test split reports MLM accuracy.
. "${top_srcdir:-.}/tests/lib.sh"

"$HETSEQ" --version >/dev/null 2>&1 || skip "the hetseq binary is not built yet ($HETSEQ --version failed)"
need_python h5py numpy
"$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix tiny --rows 70,50 --split training \
  --seq-len 32 --max-pred 5 --vocab 1000 --seed 1 >/dev/null || fail "make_bert_shards.py failed"
"$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix tiny --rows 40 --split test \
  --seq-len 32 --max-pred 5 --vocab 1000 --seed 2 >/dev/null || fail "make_bert_shards.py failed"
cat > bert_config.json <<'JSON'
{"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "intermediate_size": 128, "max_position_embeddings": 64, "note": "shape of a test model"}
JSON
cat > tiny.cfg <<'CFG'
task = "bert";
device = "cpu";
data: { path = "shards"; train_subset = "training"; valid_subset = "test"; };
model: { config_file = "bert_config.json"; };
optimizer: { name = "adamw"; lr = 0.002; weight_decay = 0.01; adam_eps = 1e-6; clip_norm = 1.0; };
lr_scheduler: { name = "polynomial_decay"; warmup_updates = 2; total_num_update = 100; };
training: { max_sentences = 8; update_freq = 2; max_epoch = 0; max_update = 24; validate_interval_updates = 12; };
checkpoint: { save_dir = "ckpt"; no_save = true; };
log: { interval = 4; metrics_file = "metrics.jsonl"; };
CFG
mkdir -p ckpt  # no_save: nothing else creates the directory the metrics go to
OMP_NUM_THREADS=1 mpi 2 "$HETSEQ" train tiny.cfg > train.log 2>&1 || fail "training failed: $(cat train.log)"
grep -q 'mlm_loss=.*nsp_loss=.*mlm_acc=.*nsp_acc=' train.log || fail "no MLM/NSP figures in the log: $(cat train.log)"
metrics=ckpt/metrics.jsonl
[ -f "$metrics" ] || fail "no $metrics"
"$PYTHON_TORCH" - "$metrics" <<'PY' || fail "see above; log: $(cat train.log)"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in rows if r["type"] == "train"]
valid = [r for r in rows if r["type"] == "valid"]
first, last = train[0]["mlm_loss"], train[-1]["mlm_loss"]
print(f"MLM loss {first:.3f} -> {last:.3f} over {train[-1]['num_updates']} updates (ln 1000 = {math.log(1000):.3f}); "
      f"validation: {[(r['num_updates'], round(r['mlm_loss'], 3), round(r['mlm_acc'], 3)) for r in valid]}")
ok = abs(first - math.log(1000)) < 0.15 and last < first - 0.3 and len(valid) >= 2
ok = ok and all(0 <= r["mlm_acc"] <= 1 and 0 <= r["nsp_acc"] <= 1 and r["samples"] == 40 for r in valid)
ok = ok and all(r["world_size"] == 2 for r in train)
sys.exit(0 if ok else 1)
PY
pass
