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
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --config) config=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") model_json=""; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --to) to=$2; shift 2 ;;
    --seq-len) seq=$2; shift 2 ;;
    --pred) pred=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --hetseq) hetseq=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -o) extra+=(-o "$2"); shift 2 ;;
    *) usage ;;
  esac
done
b1=${batches%,*} b2=${batches#*,}
[[ $b1 =~ ^[0-9]+$ && $b2 =~ ^[0-9]+$ && $b1 != "$b2" && $b1 -ge 1 && $b2 -ge 1 ]] ||
  { echo "ledger_bert: --batches takes two different micro-batches, e.g. 1,2" >&2; exit 2; }
[ -x "$hetseq" ] || { echo "ledger_bert: $hetseq is not built (make in a build configured --enable-cuda-emulation, or --hetseq)" >&2; exit 1; }
python=${PYTHON_TORCH:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/hetseq-ledger.XXXXXX")
[ $keep = 1 ] || trap 'rm -rf "$work"' EXIT
cd "$work"
rows=$((b1 > b2 ? b1 : b2))
"$python" "$top/tests/ref/make_bert_shards.py" shards --prefix wiki --split training --rows $((2 * rows)) \
  --seq-len "$seq" --max-pred "$pred" --vocab "$vocab" --seed 3
"$python" "$top/tests/ref/make_bert_shards.py" shards --prefix wiki --split test --rows 2 \
  --seq-len "$seq" --max-pred "$pred" --vocab "$vocab" --seed 4
for b in $b1 $b2; do
  echo "micro-batch $b: $hetseq train $(basename "$config") (log in $work/b$b.log)" >&2
  args=(-o device=\"cuda\" -o precision=\"$precision\" -o data.path=\"shards\" -o training.max_sentences=$b
        -o training.update_freq=1 -o training.max_update=2 -o training.max_epoch=0 -o training.disable_validation=true
        -o checkpoint.no_save=true -o checkpoint.save_dir=\"ck$b\" -o log.interval=1)
  [ -z "$model_json" ] || args+=(-o model.config_file=\"$model_json\")
  HETSEQ_CUDA_LEDGER=1 HS_CUDA_EMU_MEM_MB=${HS_CUDA_EMU_MEM_MB:-16000} "$hetseq" train "$config" "${args[@]}" \
    "${extra[@]}" > "b$b.log" 2>&1 || { tail -5 "b$b.log" >&2; echo "ledger_bert: the micro-batch $b run failed" >&2; exit 1; }
done
"$python" "$here/ledger_scale.py" "b$b1.log" "$b1" "b$b2.log" "$b2" --to "$to" --exclude "to_half_kernel (parameter copy)"
