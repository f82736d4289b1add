#!/bin/sh
# hetseq next to PyTorch on one GPU, the same shapes, side by side, the same day: BERT-large and BERT-base
# phase 1 (L 128, 20 masked positions, micro-batch 64) and BERT-large at phase-2 shapes (L 512, 80 masked
# positions, micro-batch 32) at fp32/tf32/bf16/fp16, Transformer-XL base
# (16 layers, d_model 512, 32 x 192 tokens, memory 192) at tf32/bf16, the MNIST CNN at batch 64; PyTorch:
# Hugging Face's BertForPreTraining (SDPA) eager and under torch.compile, NVIDIA's MemTransformerLM
# (tests/ref/txl_torch.py) eager and compiled, the CNN eager and compiled. One markdown table: throughput,
# ratios, model TFLOP/s, MFU against the GPU's dense peak, peak device memory (bench/gpu/gpu_bench.py says
# how each is measured and counted).
#
#   usage: bash bench/gpu/run.sh BUILD_DIR [--quick] [--device cuda|cpu] [--out FILE] [--warmup W]
#              [--steps S] [--only bert-large,bert-base,bert-large-p2,txl,cnn] [--precisions fp32,tf32,bf16,fp16]
#              [--budget SEC] [--threads N] [--timeout SEC] [--keep] [--hetseq BINARY]
#              [--no-pytorch] [--ncu DIR [--ncu-updates N] [--peak-gbs GB/s]]
#   BUILD_DIR: a build with `make hetseq` done (configure --with-cuda for a GPU run);
#   --quick: tiny shapes, 1 warm-up + 2 timed updates; `--device cpu --quick` is a smoke run of every path
#   on a machine without a GPU (tests/e2e/test_gpu_bench_smoke.sh);
#   --only, --precisions: what runs, in the order given (e.g. --only bert-large,txl --precisions bf16,tf32
#   for the figures that matter first); --budget SEC: no run starts after SEC seconds, and --out FILE
#   holds every finished row as it ends (a job cut short by its time limit keeps them);
#   --ncu DIR: each hetseq run once more, N updates after the warm-up under Nsight Compute: where the GPU
#   time goes, by kernel, with each kernel's DRAM bandwidth (DIR/*.md; bench/gpu/ncu_summary.py);
#   --no-pytorch: hetseq's runs only.
# Python: $PYTHON_TORCH, else BUILD_DIR/pyenv/bin/python (tools/quickstart.sh makes it: the system's torch
# plus transformers), else python3; it needs torch, h5py, numpy and transformers.
set -eu
[ $# -ge 1 ] || { sed -n '11,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
build=$1
python=${PYTHON_TORCH:-}
if [ -z "$python" ]; then
  if [ -x "$build/pyenv/bin/python" ]; then python=$build/pyenv/bin/python; else python=$(command -v python3); fi
fi
"$python" -c 'import torch, h5py, numpy' 2>/dev/null ||
  { echo "$python cannot import torch, h5py and numpy (Debian: python3-torch python3-h5py python3-numpy)" >&2; exit 1; }
case " $* " in *" --no-pytorch "*) ;; *)
"$python" -c 'import transformers' 2>/dev/null ||
  { echo "$python cannot import transformers (pip install transformers; tools/quickstart.sh test makes build/pyenv with it)" >&2; exit 1; }
;; esac
exec "$python" "$here/gpu_bench.py" "$@"
