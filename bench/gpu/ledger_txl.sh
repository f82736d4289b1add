#!/bin/bash
# Transformer-XL's device work per update at a GPU's batch, measured without a GPU: two short runs on the
# emulated CUDA device at small batches (columns) with the device-op ledger on (HETSEQ_CUDA_LEDGER=1), then
# bench/gpu/ledger_scale.py's extrapolation (docs/gpu.md, "What to expect from hetseq's mixed path").
#
#   usage: bash bench/gpu/ledger_txl.sh BUILD_DIR [--config FILE] [--precision P] [--batches B1,B2] [--to B]
#              [--vocab V] [--hetseq BINARY] [--keep] [-o KEY=VALUE]...
#   BUILD_DIR: a build configured --with-cuda --enable-cuda-emulation (its tests/cuda/hetseq_emu; on a
#   GPU node --hetseq BUILD_DIR/hetseq counts the same on the GPU, faster);
#   --config: the experiment (default conf/txl_base_wt103.cfg: 16 layers, d_model 512, 192 tokens and
#   memory 192 per column, WikiText-103's cutoffs); --precision (default bf16); --batches (default 1,2)
#   and --to (default 32, the per-GPU batch of TXL-base on 8 GPUs): columns per update on one rank;
#   --vocab: the generated corpus's words (default 267735, WikiText-103's: every one occurs, so the
#   adaptive softmax's clusters and the tied embedding have their full size); -o: more overrides.
# TXL-base at 1 and 2 columns takes a few minutes each on one core and about 5 GB of memory.
# Python: $PYTHON_TORCH, else python3, with numpy (the corpus's writer, bench/gpu/gpu_bench.py's).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
usage() { sed -n '6,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
build=$(cd "$1" && pwd); shift
config=$top/conf/txl_base_wt103.cfg
precision=bf16 batches=1,2 to=32 vocab=267735 hetseq=$build/tests/cuda/hetseq_emu keep=0
extra=() me=ledger_txl scratch=hetseq-ledger-txl
. "$here/ledger_lib.sh"
while [ $# -gt 0 ]; do
  case $1 in
    --vocab) vocab=$2; shift 2 ;;
    *) ledger_option "$1" "${2-}"; [ "$used" -gt 0 ] || usage; shift "$used" ;;
  esac
done
[[ $vocab =~ ^[0-9]+$ && $vocab -ge 1000 ]] || { echo "ledger_txl: --vocab takes a word count >= 1000" >&2; exit 2; }
ledger_start
# a Zipf corpus over the vocabulary, every word once (gpu_bench.py's writer): 4 updates' worth of Zipf
# tokens at the start of every column of both runs (chunks for lcm(B1, B2) columns; the every-word-once
# list after them, where the two updates do not reach)
g=$b1 h=$b2
while [ "$h" -gt 0 ]; do t=$((g % h)); g=$h h=$t; done
columns=$((b1 * b2 / g))
"$python" -c "
import sys; sys.path.insert(0, sys.argv[1])
from gpu_bench import make_lm_text
make_lm_text('text', int(sys.argv[2]), int(sys.argv[3]), 1111, int(sys.argv[4]))" "$here" "$vocab" $((columns * 192 * 4)) "$columns" > /dev/null
"$hetseq" prep lm --in text --out lm > prep.log 2>&1 || { tail -5 prep.log >&2; echo "ledger_txl: hetseq prep lm failed" >&2; exit 1; }
# WikiText-103's cutoffs scaled to this vocabulary (the same at its size)
cutoffs=$(awk -v v="$vocab" 'BEGIN { printf "%d,%d,%d", int(19997 * v / 267735), int(39997 * v / 267735), int(199997 * v / 267735) }')
for b in $b1 $b2; do
  ledger_run "$b" -o data.path=\"lm\" -o txl.batch_size=$b -o txl.eval_batch_size=$b -o txl.cutoffs=[$cutoffs]
done
ledger_report
