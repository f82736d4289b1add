#!/bin/sh
# Data-parallel scaling of BERT-mini pre-training on the CPU backend, with and without the gradient
# all-reduce overlapped with backward: `hetseq train` on 1 rank x 1 thread and on 2 ranks x 1 thread
# (OMP_NUM_THREADS=1), the same micro-batch per rank, with distributed.bucket_cap_mb = 25 (buckets
# all-reduced while backward goes on) and = 0 (one all-reduce after backward). For each setting:
#   seq/s       sequences per second over the updates after the warm-up ones: (updates counted) x
#               micro-batch x ranks / (wall time between the two metrics records)
#   efficiency  seq/s at 2 ranks / (2 x seq/s at 1 rank), in the same round and with the same cap
# The settings are interleaved (round 1: cap 25 on 1 then 2 ranks, cap 0 on 1 then 2 ranks; round 2
# ...) so that other load on the machine spreads over all of them; the table shows every round and the
# best seq/s of each setting (load only ever slows a run down). The machine's load average is printed
# before and after: figures taken on a loaded machine say little about scaling.
# Model (bench/bert_bench.c's BERT-mini): 4 layers, hidden 256, 4 heads, intermediate 1024, vocabulary
# 30522 padded to 30528; 128 tokens per sequence, 20 labelled positions; synthetic NVIDIA-format shards
# (tests/ref/make_bert_shards.py, needs h5py).
#   usage (in the build directory, after `make`):
#     $top_srcdir/bench/scaling_bench.sh [MICRO_BATCH [UPDATES [WARMUP [ROUNDS]]]]   (defaults 8 12 4 2)
set -eu
batch=${1:-8}
updates=${2:-12}
warmup=${3:-4}
rounds=${4:-2}
[ "$updates" -gt "$warmup" ] || { echo "UPDATES ($updates) must exceed WARMUP ($warmup)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
hetseq="$builddir/hetseq"
python=${PYTHON_TORCH:-/usr/bin/python3}
mpirun=${MPIRUN:-mpirun}
[ -x "$hetseq" ] || { echo "$hetseq not built: run 'make' in the build directory" >&2; exit 1; }
"$python" -c 'import h5py' 2>/dev/null || { echo "$python has no h5py: set PYTHON_TORCH to a Python with h5py" >&2; exit 1; }
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

work=$(mktemp -d "${TMPDIR:-/tmp}/hetseq_scaling.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
cd "$work"
# one epoch covers every update of the 2-rank runs
rows=$((batch * 2 * updates))
"$python" "$here/../tests/ref/make_bert_shards.py" shards --prefix mini --split training \
  --rows $((rows / 2)),$((rows - rows / 2)) --seq-len 128 --max-pred 20 --vocab 30522 --seed 1 >/dev/null
"$python" "$here/../tests/ref/make_bert_shards.py" shards --prefix mini --split test \
  --rows 8 --seq-len 128 --max-pred 20 --vocab 30522 --seed 2 >/dev/null
cat > mini.cfg <<CFG
task = "bert";
device = "cpu";
seed = 1;
data: { path = "shards"; train_subset = "training"; valid_subset = "test"; };
model: {
  vocab_size = 30522; hidden_size = 256; num_hidden_layers = 4; num_attention_heads = 4;
  intermediate_size = 1024; hidden_act = "gelu"; hidden_dropout_prob = 0.1;
  attention_probs_dropout_prob = 0.1; max_position_embeddings = 512; type_vocab_size = 2;
  initializer_range = 0.02; pad_vocab_to_multiple_of = 8;
};
optimizer: { name = "lamb"; lr = 1e-4; weight_decay = 0.01; clip_norm = 1.0; adam_eps = 1e-6; };
lr_scheduler: { name = "poly_warmup"; warmup_proportion = 0.1; total_num_update = 1000; power = 0.5; };
training: { max_sentences = $batch; update_freq = 1; max_epoch = 0; max_update = $updates; disable_validation = true; };
checkpoint: { save_dir = "ck"; no_save = true; };
log: { interval = 1; format = "none"; metrics_file = "metrics.jsonl"; }; # in save_dir
CFG

# wall time of the train record of update N in a metrics file
wall_at() { grep '"type": "train"' "$1" | grep "\"num_updates\": $2," | sed 's/.*"wall": \([0-9.]*\).*/\1/'; }

# run NP CAP: prints the seq/s of the run (called in $(...): its exit status tells the caller)
run() {
  rm -rf ck
  "$mpirun" --oversubscribe --bind-to none -np "$1" --mca btl self,vader \
    "$hetseq" train mini.cfg -o distributed.bucket_cap_mb=$2 > run.log 2>&1 \
    || { cat run.log >&2; echo "training on $1 rank(s), bucket_cap_mb = $2 failed" >&2; exit 1; }
  t0=$(wall_at ck/metrics.jsonl "$warmup")
  t1=$(wall_at ck/metrics.jsonl "$updates")
  [ -n "$t0" ] && [ -n "$t1" ] || { echo "no train records for updates $warmup and $updates" >&2; exit 1; }
  awk -v n=$((updates - warmup)) -v b="$batch" -v r="$1" -v a="$t0" -v z="$t1" 'BEGIN { printf("%.3f", n * b * r / (z - a)) }'
}

echo "BERT-mini, CPU backend, 1 thread per rank, micro-batch $batch x 128 tokens per rank, updates $warmup..$updates timed"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
printf '%-6s %-14s %12s %12s %11s\n' round bucket_cap_mb "1 rank seq/s" "2 rank seq/s" efficiency
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }
b1_25=0 b2_25=0 b1_0=0 b2_0=0
r=1
while [ $r -le "$rounds" ]; do
  for cap in 25 0; do
    s1=$(run 1 $cap) && s2=$(run 2 $cap) || exit 1
    printf '%-6s %-14s %12s %12s %11s\n' $r $cap "$s1" "$s2" "$(awk -v a="$s1" -v b="$s2" 'BEGIN { printf("%.3f", b / (2 * a)) }')"
    if [ $cap -eq 25 ]; then b1_25=$(best "$b1_25" "$s1"); b2_25=$(best "$b2_25" "$s2")
    else b1_0=$(best "$b1_0" "$s1"); b2_0=$(best "$b2_0" "$s2"); fi
  done
  r=$((r + 1))
done
for cap in 25 0; do
  if [ $cap -eq 25 ]; then s1=$b1_25 s2=$b2_25; else s1=$b1_0 s2=$b2_0; fi
  printf '%-6s %-14s %12s %12s %11s\n' best $cap "$s1" "$s2" "$(awk -v a="$s1" -v b="$s2" 'BEGIN { printf("%.3f", b / (2 * a)) }')"
done
echo "load after: $(uptime | sed 's/.*load average/load average/')"
