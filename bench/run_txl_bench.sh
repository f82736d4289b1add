#!/bin/sh
# Transformer-XL training throughput, `hetseq train` (task txl, CPU backend, one rank) next to PyTorch
# (bench/txl_torch.py: tests/ref/txl_torch.py's MemTransformerLM, NVIDIA's model) on the same threads:
# training tokens/s (forward + backward + LAMB step with clipping), the same shapes, the same tokens.
#
# Shapes: TXL base (d_model 512, 8 heads x 64, d_inner 2048, tgt_len 192, mem_len 192, dropout 0.1,
# adaptive softmax with tied weights, div_val 1) with LAYERS layers instead of 16 and BATCH columns
# instead of 256, so that a round takes seconds, not hours. Data: the fortunes of Debian's fortunes
# package through `hetseq prep lm --raw` (real English text, ~565k training tokens, vocabulary 37 143);
# the adaptive softmax's head is the 19 997 most frequent words as in TXL base (cutoffs [19997, 29997]:
# two tail clusters, base has three). TXL_BENCH_DATA=DIR takes DIR/lm.h5 instead (e.g. WikiText-103
# with TXL_BENCH_CUTOFFS="19997,39997,199997").
#
# Each round runs hetseq, then PyTorch, each in a fresh process; WARMUP updates are not timed, the next
# STEPS are. Rounds alternate the two sides so that load on a shared node falls on both; the median
# round is reported with the range. hetseq's time is its meters' update time (log.interval 1: each
# record's tokens / tokens_per_sec), from taking a read batch to the end of the optimizer step, as
# PyTorch's is timed around its whole update (its batches are already in memory).
#
# OpenBLAS, which both link, picks its kernels by CPU model unless OPENBLAS_CORETYPE names them, and
# falls back to old ones on a model it does not know: every configuration is run with each value in
# CORETYPES ("unset" = the variable removed), by default the environment's value and unset.
#   usage (in the build directory, after `make hetseq`):
#     $top_srcdir/bench/run_txl_bench.sh [THREADS... [-- LAYERS BATCH WARMUP STEPS ROUNDS]]
#     defaults: threads 1 2; 4 layers, batch 4, 2 warm-up + 5 timed updates, 3 rounds
#   e.g. CORETYPES="unset SkylakeX" $top_srcdir/bench/run_txl_bench.sh 1 2
set -eu
threads_list=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do threads_list="$threads_list $1"; shift; done
[ $# -gt 0 ] && shift
threads_list=${threads_list:-" 1 2"}
layers=${1:-4}
batch=${2:-4}
warmup=${3:-2}
steps=${4:-5}
rounds=${5:-3}
for n in $threads_list $layers $batch $steps $rounds; do
  case $n in '' | *[!0-9]* | 0) echo "threads, layers, batch, steps and rounds are whole numbers >= 1 (got '$n')" >&2; exit 2 ;; esac
done
case $warmup in '' | *[!0-9]*) echo "warm-up updates: a whole number >= 0 (got '$warmup')" >&2; exit 2 ;; esac
tgt_len=192 mem_len=192
cutoffs=${TXL_BENCH_CUTOFFS:-19997,29997}
here=$(cd "$(dirname "$0")" && pwd)
builddir=${top_builddir:-.}
hetseq=$(cd "$builddir" && pwd)/hetseq
python=${PYTHON_TORCH:-/usr/bin/python3}
[ -x "$hetseq" ] || { echo "$hetseq not built: run 'make hetseq' in the build directory" >&2; exit 1; }
if [ -z "${CORETYPES:-}" ]; then
  CORETYPES=unset
  [ -n "${OPENBLAS_CORETYPE:-}" ] && CORETYPES="$OPENBLAS_CORETYPE unset"
fi
# hetseq's peak resident memory through GNU time, when there
timer=
[ -x /usr/bin/time ] && timer="/usr/bin/time -f peak_rss_kib=%M"
have_torch=1
"$python" -c 'import torch, h5py' 2>/dev/null || { have_torch=0; echo "PyTorch or h5py not available to $python: hetseq only"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/hetseq-txl-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
if [ -n "${TXL_BENCH_DATA:-}" ]; then
  [ -f "$TXL_BENCH_DATA/lm.h5" ] ||
    { echo "$TXL_BENCH_DATA/lm.h5 not found: TXL_BENCH_DATA names the directory of a 'hetseq prep lm' output" >&2; exit 1; }
  data=$(cd "$TXL_BENCH_DATA" && pwd)
  source_text="$data/lm.h5"
else
  [ -d /usr/share/games/fortunes ] || { echo "/usr/share/games/fortunes not found: install Debian's fortunes package, or set TXL_BENCH_DATA" >&2; exit 1; }
  data=$work/lm
  "$hetseq" prep lm --raw /usr/share/games/fortunes --out "$data" >"$work/prep.log" 2>&1 ||
    { cat "$work/prep.log" >&2; exit 1; }
  source_text="the fortunes (/usr/share/games/fortunes, 'hetseq prep lm --raw')"
fi

cat >"$work/txl_bench.cfg" <<EOF
# written by bench/run_txl_bench.sh
task = "txl"; device = "cpu"; seed = 1111;
data: { path = "$data"; };
txl: { n_layer = $layers; n_head = 8; d_head = 64; d_model = 512; d_inner = 2048; d_embed = -1;
       dropout = 0.1; dropatt = 0.0; tgt_len = $tgt_len; mem_len = $mem_len; eval_tgt_len = $tgt_len;
       adaptive = true; cutoffs = [$cutoffs]; div_val = 1; tie_weight = true; tie_projs = true;
       batch_size = $batch; eval_batch_size = $batch; };
optimizer: { name = "lamb"; lr = 0.01; adam_betas = [0.9, 0.999]; adam_eps = 1e-6; weight_decay = 0.0;
             clip_norm = 0.25; lamb_trust_ratio_on_no_decay = true; };
lr_scheduler: { name = "constant"; };
training: { update_freq = 1; max_update = $((warmup + steps)); max_epoch = 0; disable_validation = true; };
checkpoint: { save_dir = "$work/checkpoints"; no_save = true; };
log: { interval = 1; format = "json"; metrics_file = ""; };
EOF

# with_coretype C CMD...: CMD with OPENBLAS_CORETYPE=C, or without the variable for "unset"
with_coretype() {
  c=$1; shift
  if [ "$c" = unset ]; then env -u OPENBLAS_CORETYPE "$@"; else env OPENBLAS_CORETYPE="$c" "$@"; fi
}
# the kernels OpenBLAS picks (libopenblas.so.0, as both sides load it)
corename() {
  with_coretype "$1" "$python" -c 'import ctypes
l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype = ctypes.c_char_p
print(l.openblas_get_corename().decode())' 2>/dev/null || echo "?"
}
# tokens/s of hetseq's log on stdin over the updates after the warm-up: sum(tokens) / sum(tokens / tps)
hetseq_rate() {
  awk -v w="$warmup" '
    function num(key,   s) { if (!match($0, "\"" key "\": [0-9.e+-]+")) return -1; s = substr($0, RSTART, RLENGTH); sub(/.*: /, "", s); return s + 0 }
    /"type": "train"/ { u = num("num_updates"); if (u > w) { tok += num("tokens"); sec += num("tokens") / num("tokens_per_sec"); n++ } }
    END { if (n > 0 && sec > 0) printf("%.1f\n", tok / sec); else print "0" }'
}
# median, min, max of the numbers on stdin
stats() { sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf("%.1f %.1f %.1f\n", m, v[1], v[NR]) }'; }
json_field() { "$python" -c 'import json, sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }

echo "Transformer-XL training, TXL-base shapes with $layers layers: d_model 512, 8 heads x 64, d_inner 2048,"
echo "  tgt_len $tgt_len, mem_len $mem_len, batch $batch columns ($((batch * tgt_len)) tokens per update), dropout 0.1,"
echo "  adaptive softmax cutoffs [$cutoffs] tied, LAMB + clip 0.25; data: $source_text"
echo "  $warmup warm-up + $steps timed updates per round, $rounds rounds alternating hetseq / PyTorch; one rank"
echo "  $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  tok/s: median of the rounds (min-max); peak RSS: median, MiB"
printf '%-10s %-9s %-7s %-23s  %-23s  %-14s  %s\n' CORETYPE kernels threads "hetseq tok/s" "PyTorch tok/s" "hetseq/PyTorch" "peak RSS hetseq / PyTorch"
for c in $CORETYPES; do
  kernels=$(corename "$c")
  for t in $threads_list; do
    : >"$work/hs"; : >"$work/pt"; : >"$work/hs_rss"; : >"$work/pt_rss"
    r=0
    while [ $r -lt "$rounds" ]; do
      with_coretype "$c" env OMP_NUM_THREADS="$t" $timer "$hetseq" train "$work/txl_bench.cfg" >"$work/hs.log" 2>&1 ||
        { tail -20 "$work/hs.log" >&2; exit 1; }
      hetseq_rate <"$work/hs.log" >>"$work/hs"
      awk -F= '/^peak_rss_kib=/ { printf("%.0f\n", $2 / 1024) }' "$work/hs.log" >>"$work/hs_rss"
      if [ $have_torch = 1 ]; then
        with_coretype "$c" env OMP_NUM_THREADS="$t" "$python" "$here/txl_torch.py" "$data/lm.h5" --threads "$t" \
          --layers "$layers" --batch "$batch" --tgt-len $tgt_len --mem-len $mem_len --cutoffs "$cutoffs" \
          --warmup "$warmup" --steps "$steps" --optim lamb --json >"$work/pt.json" 2>"$work/pt.err" ||
          { cat "$work/pt.err" >&2; exit 1; }
        json_field tokens_per_sec <"$work/pt.json" >>"$work/pt"
        json_field peak_rss_mib <"$work/pt.json" >>"$work/pt_rss"
      fi
      r=$((r + 1))
    done
    hs=$(stats <"$work/hs")
    hs_rss=$( [ -s "$work/hs_rss" ] && stats <"$work/hs_rss" | cut -d' ' -f1 || echo 0)
    if [ $have_torch = 1 ]; then pt=$(stats <"$work/pt"); pt_rss=$(stats <"$work/pt_rss" | cut -d' ' -f1); else pt="0 0 0" pt_rss=0; fi
    echo "$c $kernels $t $hs $pt $hs_rss $pt_rss" | awk '{
      ratio = $7 > 0 ? sprintf("%.2fx", $4 / $7) : "-";
      printf("%-10s %-9s %-7s %7.1f (%6.1f-%6.1f)  %7.1f (%6.1f-%6.1f)  %-14s  %5.0f / %5.0f\n", $1, $2, $3, $4, $5, $6,
             $7, $8, $9, ratio, $10, $11) }'
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
