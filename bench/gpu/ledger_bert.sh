#!/bin/bash
# BERT's device work per update at a GPU's micro-batch, measured without a GPU: two short runs on the
# emulated CUDA device at small micro-batches with the device-op ledger on (HETSEQ_CUDA_LEDGER=1), then
# bench/gpu/ledger_scale.py's extrapolation (docs/gpu.md, "What to expect from hetseq's mixed path").
#
#   usage: bash bench/gpu/ledger_bert.sh BUILD_DIR [--config FILE] [--precision P] [--batches B1,B2]
#              [--to B] [--seq-len L] [--pred P] [--vocab V] [--hetseq BINARY] [--keep] [-o KEY=VALUE]...
#   BUILD_DIR: a build configured --with-cuda --enable-cuda-emulation (its tests/cuda/hetseq_emu; on a
#   GPU node --hetseq BUILD_DIR/hetseq counts the same on the GPU, faster);
#   --config: the experiment (default conf/bert_large_phase1.cfg with conf/bert_config_large.json);
#   --precision (default bf16), --batches (default 1,2), --to (default 64): the micro-batches;
#   --seq-len, --pred, --vocab: the generated shards' sequence length, masked positions and vocabulary
#   (default 128, 20, 30522: phase 1); -o: more overrides of the experiment, as hetseq train takes them.
# BERT-large at micro-batch 1 and 2 takes about 4 minutes each on one core and 6-7 GB of memory.
# Python: $PYTHON_TORCH, else python3, with h5py and numpy (the shards' writer, tests/ref/make_bert_shards.py).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
usage() { sed -n '6,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
build=$(cd "$1" && pwd); shift
config=$top/conf/bert_large_phase1.cfg model_json=$top/conf/bert_config_large.json
precision=bf16 batches=1,2 to=64 seq=128 pred=20 vocab=30522 hetseq=$build/tests/cuda/hetseq_emu keep=0
extra=() me=ledger_bert scratch=hetseq-ledger
. "$here/ledger_lib.sh"
while [ $# -gt 0 ]; do
  case $1 in
    --seq-len) seq=$2; shift 2 ;;
    --pred) pred=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    *) ledger_option "$1" "${2-}"; [ "$used" -gt 0 ] || usage; shift "$used" ;;
  esac
done
ledger_start
"$python" "$top/tests/ref/make_bert_shards.py" shards --prefix wiki --split training --rows $((2 * rows)) \
  --seq-len "$seq" --max-pred "$pred" --vocab "$vocab" --seed 3
"$python" "$top/tests/ref/make_bert_shards.py" shards --prefix wiki --split test --rows 2 \
  --seq-len "$seq" --max-pred "$pred" --vocab "$vocab" --seed 4
for b in $b1 $b2; do
  args=(-o data.path=\"shards\" -o training.max_sentences=$b)
  [ -z "$model_json" ] || args+=(-o model.config_file=\"$model_json\")
  ledger_run "$b" "${args[@]}"
done
ledger_report
