#!/bin/sh
# A user evaluates a checkpoint on two ranks with `hetseq eval --report r.json` after a short MNIST run
# and after a short BERT run, and reads the report with a script: it is valid JSON; its loss and task
# metrics are the printed ones; throughput is samples (and tokens) over the pass's seconds, as printed in
# NVIDIA's "Throughput Average" line; the latency percentiles are numpy.percentile of the per-step
# latencies it lists after the warm-up steps, ordered p50 <= p90 <= p95 <= p99, and are the printed ones.
# The same for a Transformer-XL language model (its own ordered segments, perplexity, a test split).
# Mistakes get one clear message and a non-zero exit: --split test for a task without a test split, a
# report in a directory that does not exist, eval's options given to train.
. "${top_srcdir:-.}/tests/lib.sh"

"$HETSEQ" --version >/dev/null 2>&1 || skip "the hetseq binary is not built yet ($HETSEQ --version failed)"
need_python h5py numpy
export OMP_NUM_THREADS=1

# check_report LOG JSON SPLIT SAMPLES TOKENS: the report against the printed lines. SAMPLES: the number
# expected, or "any"; TOKENS: per sample (BERT), "none" (the report's tokens are null) or "any" (a stream
# task counts them per segment).
check_report() {
  "$PYTHON_TORCH" - "$@" <<'PY'
import json, math, re, sys
import numpy as np
log, path, split, samples, tokens = sys.argv[1:6]
text = open(log).read()
r = json.load(open(path))  # raises on invalid JSON
def printed(name):
    m = re.search(r"^" + re.escape(name) + r" = ([0-9.]+)$", text, re.M)
    if not m:
        sys.exit(f"no line '{name} = ...' in the log")
    return float(m.group(1))
def close(a, b, tol, what):
    if not abs(a - b) <= tol:
        sys.exit(f"{what}: {a} vs {b}")
assert r["world_size"] == 2 and r["device"] == "cpu" and r["split"] == split, r
assert samples == "any" or r["samples"] == int(samples), (r["samples"], samples)
assert r["seconds"] > 0 and r["samples"] > 0
close(r["samples_per_s"], r["samples"] / r["seconds"], 1e-6 * r["samples_per_s"], "samples_per_s")
close(printed("Throughput Average (sequences/sec)"), r["samples_per_s"], 0.006, "printed sequences/sec")
if tokens == "none":
    assert r["tokens"] is None and r["tokens_per_s"] is None
    assert "tokens/sec" not in text
else:
    assert tokens == "any" or r["tokens"] == r["samples"] * int(tokens), (r["tokens"], tokens)
    assert r["tokens"] > 0
    close(r["tokens_per_s"], r["tokens"] / r["seconds"], 1e-6 * r["tokens_per_s"], "tokens_per_s")
    close(printed("Throughput Average (tokens/sec)"), r["tokens_per_s"], 0.006, "printed tokens/sec")
steps, w = r["step_latency_ms"], r["warmup_steps"]
assert len(steps) == r["steps"] and r["steps"] >= 3 and w == 1, (r["steps"], w)
assert all(s > 0 for s in steps)
lat = r["latency_ms"]
measured = np.array(steps[w:])
for p in (50, 90, 95, 99):
    close(lat[f"p{p}"], float(np.percentile(measured, p)), 1e-6 * lat[f"p{p}"] + 1e-9, f"p{p}")
    close(printed(f"Latency {p}% (ms)"), lat[f"p{p}"], 0.006, f"printed p{p}")
close(lat["mean"], float(measured.mean()), 1e-6 * lat["mean"] + 1e-9, "mean latency")
close(printed("Latency Average (ms)"), lat["mean"], 0.006, "printed mean latency")
assert lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"], lat
assert max(steps) <= 1000 * r["seconds"], "a step took longer than the pass"
if r["task"] == "mnist":
    m = re.search(r"^Test set: Average loss: ([0-9.]+), Accuracy: ([0-9]+)/([0-9]+)", text, re.M)
    close(r["loss"], float(m.group(1)), 0.5e-4 + 1e-12, "loss")
    assert r["correct"] == int(m.group(2)) and int(m.group(3)) == r["samples"]
    close(r["accuracy"], r["correct"] / r["samples"], 1e-9, "accuracy")
elif r["task"] == "bert":
    m = re.search(r"^Validation set \(\w+\): loss ([0-9.]+), mlm_loss=([0-9.]+), nsp_loss=([0-9.]+), "
                  r"mlm_acc=([0-9.]+), nsp_acc=([0-9.]+), samples ([0-9]+)$", text, re.M)
    if not m:
        sys.exit("no validation line in the log")
    for i, k in enumerate(("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc")):
        close(r[k], float(m.group(i + 1)), 0.5e-4 + 1e-6, k)
    assert 0 <= r["mlm_acc"] <= 1 and 0 <= r["nsp_acc"] <= 1
    close(r["loss"], r["mlm_loss"] + r["nsp_loss"], 1e-5, "loss = MLM + NSP")
else:  # a language model: NVIDIA's "| test loss  5.65 | test ppl   285.118" line, ppl = exp(loss)
    m = re.search(r"^(Validation|Test) set[^:]*: loss ([0-9.]+),", text, re.M)
    close(r["loss"], float(m.group(2)), 0.5e-4 + 1e-6, "loss")
    m = re.search(r"^\| " + split + r" loss +([0-9.]+) \| " + split + r" ppl +([0-9.]+)$", text, re.M)
    if not m:
        sys.exit("no NVIDIA loss/ppl line in the log")
    close(r["ppl"], math.exp(r["loss"]), 1e-5 * r["ppl"], "ppl = exp(loss)")
    close(float(m.group(2)), r["ppl"], 0.0006, "printed ppl")
print(f"{r['task']} {split}: loss {r['loss']:.4f}, {r['samples']} samples, {r['tokens']} tokens in {r['steps']} "
      f"steps, {r['samples_per_s']:.1f} samples/s, latency ms p50 {lat['p50']:.3f} p90 {lat['p90']:.3f} "
      f"p95 {lat['p95']:.3f} p99 {lat['p99']:.3f} (warm-up {w})")
PY
}

# ---- MNIST: 40 test images in micro-batches of 4 -> 10 batches, 5 steps per rank -----------------------
make_tiny_mnist tiny.h5
CFG="$top_srcdir/tests/e2e/small.cfg"
mpi 2 "$HETSEQ" train "$CFG" -o data.path=\"tiny.h5\" -o training.max_sentences=8 -o training.max_update=4 \
  -o checkpoint.save_dir=\"ck\" \
  > train.log 2>&1 || { cat train.log; fail "MNIST training failed"; }
mpi 2 "$HETSEQ" eval "$CFG" -o data.path=\"tiny.h5\" -o training.max_sentences=4 --checkpoint ck/checkpoint_last.h5 \
  --report r.json --warmup-steps 1 > eval.log 2>&1 || { cat eval.log; fail "MNIST eval failed"; }
cat eval.log
check_report eval.log r.json valid 40 none || fail "the MNIST report does not match (report: $(cat r.json))"

expect_error "--split test for MNIST" "the mnist task has no test split.*--split valid" \
  mpi 2 "$HETSEQ" eval "$CFG" -o data.path=\"tiny.h5\" --checkpoint ck/checkpoint_last.h5 --split test
expect_error "--split of another name" "--split train: expected valid or test" \
  "$HETSEQ" eval "$CFG" --checkpoint ck/checkpoint_last.h5 --split train
expect_error "a report in a missing directory" "--report no_such_dir/r.json: cannot write the report" \
  mpi 2 "$HETSEQ" eval "$CFG" -o data.path=\"tiny.h5\" --checkpoint ck/checkpoint_last.h5 --report no_such_dir/r.json
expect_error "a negative warm-up" "--warmup-steps -1: expected a whole number >= 0" \
  "$HETSEQ" eval "$CFG" --checkpoint ck/checkpoint_last.h5 --warmup-steps -1
expect_error "eval's option given to train" "--report is an option of hetseq eval, not of hetseq train" \
  "$HETSEQ" train "$CFG" --report r.json

# ---- BERT: 40 validation sequences of 32 tokens in micro-batches of 4 -> 5 steps per rank ---------------
"$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix tiny --rows 48 --split training \
  --seq-len 32 --max-pred 5 --vocab 1000 --seed 1 >/dev/null || fail "make_bert_shards.py failed"
"$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix tiny --rows 40 --split test \
  --seq-len 32 --max-pred 5 --vocab 1000 --seed 2 >/dev/null || fail "make_bert_shards.py failed"
cat > bert_config.json <<'JSON'
{"vocab_size": 1000, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 64}
JSON
cat > tiny.cfg <<'CFG'
task = "bert";
device = "cpu";
data: { path = "shards"; train_subset = "training"; valid_subset = "test"; };
model: { config_file = "bert_config.json"; };
optimizer: { name = "adamw"; lr = 0.002; weight_decay = 0.01; adam_eps = 1e-6; clip_norm = 1.0; };
lr_scheduler: { name = "polynomial_decay"; warmup_updates = 2; total_num_update = 100; };
training: { max_sentences = 4; update_freq = 1; max_epoch = 0; max_update = 4; };
checkpoint: { save_dir = "bert_ck"; };
CFG
mpi 2 "$HETSEQ" train tiny.cfg > bert_train.log 2>&1 || { cat bert_train.log; fail "BERT training failed"; }
mpi 2 "$HETSEQ" eval tiny.cfg --checkpoint bert_ck/checkpoint_last.h5 --report bert.json --warmup-steps 1 \
  > bert_eval.log 2>&1 || { cat bert_eval.log; fail "BERT eval failed"; }
cat bert_eval.log
check_report bert_eval.log bert.json valid 40 32 || fail "the BERT report does not match (report: $(cat bert.json))"
expect_error "--split test for BERT" "the bert task has no test split" \
  mpi 2 "$HETSEQ" eval tiny.cfg --checkpoint bert_ck/checkpoint_last.h5 --split test

# ---- Transformer-XL: an ordered stream with a test split, evaluated along its own segments ---------------
"$HETSEQ" prep lm --in "$top_srcdir/tests/fixtures/lm" --out lm > prep_lm.log 2>&1 \
  || { cat prep_lm.log; fail "hetseq prep lm failed"; }
cat > txl.cfg <<'CFG'
task = "txl";
device = "cpu";
data: { path = "lm"; };
txl: { n_layer = 2; n_head = 2; d_head = 8; d_model = 16; d_inner = 32; tgt_len = 8; mem_len = 8;
       eval_tgt_len = 8; eval_mem_len = 16; adaptive = false; batch_size = 4; eval_batch_size = 2; };
optimizer: { name = "lamb"; lr = 1e-2; clip_norm = 0.25; };
lr_scheduler: { name = "cosine"; warmup_updates = 2; total_num_update = 10; end_learning_rate = 1e-3; };
training: { update_freq = 1; max_update = 6; max_epoch = 0; validate_interval_updates = 6; };
checkpoint: { save_dir = "txl_ck"; };
log: { metrics_file = "metrics.jsonl"; };
CFG
mpi 2 "$HETSEQ" train txl.cfg > txl_train.log 2>&1 || { cat txl_train.log; fail "Transformer-XL training failed"; }
for split in valid test; do
  mpi 2 "$HETSEQ" eval txl.cfg --checkpoint txl_ck/checkpoint_last.h5 --split $split --report txl_$split.json \
    --warmup-steps 1 > txl_eval_$split.log 2>&1 || { cat txl_eval_$split.log; fail "Transformer-XL eval of $split failed"; }
  cat txl_eval_$split.log
  check_report txl_eval_$split.log txl_$split.json $split any any \
    || fail "the Transformer-XL report of $split does not match (report: $(cat txl_$split.json))"
done
# Evaluation walks the segments in order from fresh memories: one rank holding all columns gives the loss of
# two ranks holding half each, and `hetseq eval` the loss of the validation at the end of training.
"$HETSEQ" eval txl.cfg --checkpoint txl_ck/checkpoint_last.h5 --split test --report txl_test_1.json \
  > txl_eval_1.log 2>&1 || { cat txl_eval_1.log; fail "Transformer-XL eval on one rank failed"; }
"$PYTHON_TORCH" - txl_ck/metrics.jsonl txl_valid.json txl_test.json txl_test_1.json <<'PY' || fail "see above"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
valid = [r for r in rows if r["type"] == "valid"][-1]
ev, t2, t1 = (json.load(open(p)) for p in sys.argv[2:5])
print(f"validation at update {valid['num_updates']}: nll_loss {valid['nll_loss']:.6f}; eval valid {ev['loss']:.6f}; "
      f"eval test on 2 ranks {t2['loss']:.6f}, on 1 rank {t1['loss']:.6f} ({t1['tokens']} tokens)")
ok = abs(valid["nll_loss"] - ev["loss"]) <= 1e-5 * abs(ev["loss"])
ok = ok and abs(t2["loss"] - t1["loss"]) <= 1e-5 * abs(t1["loss"]) and t1["tokens"] == t2["tokens"]
sys.exit(0 if ok else 1)
PY
pass
