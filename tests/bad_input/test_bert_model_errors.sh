#!/bin/sh
# A user sets up BERT pre-training with a broken model description: a bert_config.json that is not
# JSON, has a value of the wrong type or an activation hetseq lacks, libconfig model keys that do not
# fit together, a model too short for the data, or a validation split that matches no file. Each ends
# with exit 1 and one message naming the file or key, on one rank and on two, without a hang.
. "${top_srcdir:-.}/tests/lib.sh"

"$HETSEQ" --version >/dev/null 2>&1 || skip "the hetseq binary is not built yet ($HETSEQ --version failed)"

# The model is checked before any data is opened, so these runs need no shards.
experiment() { # experiment FILE MODEL-GROUP-BODY
  printf 'task = "bert";\ndevice = "cpu";\ntraining: { max_update = 1; };\ndata: { path = "no-shards-here"; };\nmodel: { %s };\n' "$2" > "$1"
}

printf '{"vocab_size": 30522, "hidden_size": 768,,}\n' > broken.json
experiment broken.cfg 'config_file = "broken.json";'
expect_error "bert_config.json that is not JSON" \
  'model\.config_file = "broken\.json" is not valid JSON' "$HETSEQ" train broken.cfg

printf '{"vocab_size": 30522, "hidden_size": "768"}\n' > string.json
experiment string.cfg 'config_file = "string.json";'
expect_error "a size given as a string" \
  'string\.json: "hidden_size" must be an integer, not "768"' "$HETSEQ" train string.cfg

printf '[768, 12]\n' > array.json
experiment array.cfg 'config_file = "array.json";'
expect_error "a JSON array instead of an object" \
  'model\.config_file = "array\.json": the file must hold one JSON object' "$HETSEQ" train array.cfg

printf '{"hidden_act": "relu", "unknown_key": [1, 2]}\n' > relu.json
experiment relu.cfg 'config_file = "relu.json";'
expect_error "an activation hetseq does not implement (unknown keys are fine)" \
  'relu\.json": hidden_act = "relu": .*set it to "gelu"' "$HETSEQ" train relu.cfg

experiment missing.cfg 'config_file = "nowhere/bert_config.json";'
expect_error "a bert_config.json that does not exist" \
  'model\.config_file = "nowhere/bert_config\.json": cannot open it' "$HETSEQ" train missing.cfg

printf '{"hidden_size": 100, "num_attention_heads": 12}\n' > heads.json
experiment heads_json.cfg 'config_file = "heads.json";'
expect_error "heads that do not divide the hidden size (bert_config.json)" \
  'heads\.json": hidden_size \(100\) is not a multiple of num_attention_heads \(12\)' "$HETSEQ" train heads_json.cfg

experiment heads.cfg 'hidden_size = 100; num_attention_heads = 12;'
expect_error "heads that do not divide the hidden size (model keys)" \
  'model\.hidden_size \(100\) is not a multiple of model\.num_attention_heads \(12\)' "$HETSEQ" train heads.cfg
expect_error "the same on two ranks" \
  'model\.hidden_size \(100\) is not a multiple of model\.num_attention_heads \(12\)' mpi 2 "$HETSEQ" train heads.cfg

# With data: shards by the independent writer (needs h5py).
[ -n "${PYTHON_TORCH:-}" ] && "$PYTHON_TORCH" -c 'import h5py' 2>/dev/null || {
  echo "no Python with h5py: the checks that need shards are skipped"
  pass
}
"$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --rows 12 --split training \
  --seq-len 32 --max-pred 5 --vocab 1000 >/dev/null || fail "make_bert_shards.py failed"
"$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --rows 6 --split test \
  --seq-len 32 --max-pred 5 --vocab 1000 >/dev/null || fail "make_bert_shards.py failed"
small='vocab_size = 1000; hidden_size = 32; num_hidden_layers = 1; num_attention_heads = 2; intermediate_size = 64;'

printf 'task = "bert";\ndevice = "cpu";\ntraining: { max_update = 1; };\ndata: { path = "shards"; valid_subset = "test"; };\nmodel: { %s max_position_embeddings = 16; };\n' \
  "$small" > short.cfg
expect_error "sequences longer than the position table" \
  'hold sequences of 32 tokens but the model has max_position_embeddings = 16.*model\.max_position_embeddings' \
  "$HETSEQ" train short.cfg

printf 'task = "bert";\ndevice = "cpu";\ntraining: { max_update = 1; };\ndata: { path = "shards"; valid_subset = "valid"; };\nmodel: { %s };\n' \
  "$small" > novalid.cfg
expect_error "a validation split that matches no file" \
  "no file whose name contains 'valid'.*data\.valid_subset" mpi 2 "$HETSEQ" train novalid.cfg

printf 'task = "bert";\ndevice = "cpu";\ntraining: { max_update = 1; };\ndata: { path = "shards"; valid_subset = "test"; };\nmodel: { %s };\n' \
  "vocab_size = 500; hidden_size = 32; num_hidden_layers = 1; num_attention_heads = 2; intermediate_size = 64;" > vocab.cfg
expect_error "token ids beyond the model's vocabulary" 'is not a token id of the vocabulary \[0, 500\)' "$HETSEQ" train vocab.cfg
pass
