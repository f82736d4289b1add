#!/bin/sh
# Reading many BERT shard files: the same 64 000 rows (L 128, P 20) as 1 000 shard files of 64 rows
# and as 4 files of 16 000 rows, read by 3 ranks the way training reads them: every epoch, the
# micro-batches of BATCH rows at batch-aligned offsets in a new shuffled order, dealt to the ranks in
# turn, every read collective. Prints, for both sets, the time of the open (the startup checks), the
# time per micro-batch of the first epoch (which opens each file the first time a read touches it)
# and of the later epochs (files already open), and the ratios 1 000 files / 4 files. Both sets are
# written by tests/ref/make_bert_shards.py (NVIDIA's create_dataset calls) and then given the same
# chunk layout with `hetseq prep repack` (64 x L chunks, uncompressed), so only the number of files
# differs. Each set is read ROUNDS times, interleaved, and the best round counts for each figure
# (other load on the node only ever slows a round down); STAT=median reports the median round instead
# (for a loaded machine, where the best round is luck).
#   usage (in the build directory): $top_srcdir/bench/shards_bench.sh [EPOCHS [ROUNDS [BATCH [RANKS]]]]
# Needs tests/mpi/test_bert_shards (`make tests/mpi/test_bert_shards`) and /usr/bin/python3 with h5py.
# Environment: SHARDS_BENCH_DATA=DIR keeps the written shards in DIR and reuses them on the next run;
# BENCH_PROG=PATH reads with another build's test_bert_shards; BENCH_BEFORE=PATH also reads, in the
# same rounds (side by side), with a test_bert_shards built with an older reader (its "bench" mode
# must print the same lines).
set -eu
epochs=${1:-3}
rounds=${2:-3}
batch=${3:-32}
ranks=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
builddir=${top_builddir:-.}
hetseq=${HETSEQ:-$builddir/hetseq}
prog=${BENCH_PROG:-$builddir/tests/mpi/test_bert_shards}
py=${PYTHON:-/usr/bin/python3}
mpirun=${MPIRUN:-mpirun}
[ -x "$hetseq" ] || { echo "no hetseq binary at $hetseq (run in the build directory)" >&2; exit 1; }
[ -x "$prog" ] || { echo "no $prog: run \`make tests/mpi/test_bert_shards\` in the build directory" >&2; exit 1; }
"$py" -c 'import h5py, numpy' 2>/dev/null || { echo "$py has no h5py + numpy" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -n "${SHARDS_BENCH_DATA:-}" ]; then # keep the written shards there and reuse them next time
  work=$SHARDS_BENCH_DATA
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/hetseq-shards-bench.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

if [ ! -d "$work/s1000" ] || [ ! -d "$work/s4" ]; then
rm -rf "$work/gen1000" "$work/gen4" "$work/s1000" "$work/s4"
rows=$("$py" -c 'print(",".join(["64"] * 1000))')
"$py" "$here/../tests/ref/make_bert_shards.py" "$work/gen1000" --rows "$rows" --seq-len 128 --max-pred 20 \
  --vocab 30522 --seed 7 > /dev/null
# the same rows, in HetSeq's file order (x_training_10 before x_training_2), as 4 files of 16 000
"$py" - "$work/gen1000" "$work/gen4" <<'PYEOF'
import os, sys
import h5py, numpy as np
src, dst = sys.argv[1], sys.argv[2]
names = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"]
files = sorted(os.path.join(src, f) for f in os.listdir(src))
data = {k: [] for k in names}
for p in files:
    with h5py.File(p, "r") as f:
        for k in names:
            data[k].append(f[k][()])
os.makedirs(dst)
for k in names:
    data[k] = np.concatenate(data[k])
n = len(data["input_ids"])
for i in range(4):
    with h5py.File(os.path.join(dst, "x_training_%d.hdf5" % i), "w") as f:
        for k in names:
            f.create_dataset(k, data=data[k][i * n // 4:(i + 1) * n // 4], compression="gzip")
PYEOF
for set in 1000 4; do
  "$mpirun" --allow-run-as-root --oversubscribe -np 2 "$hetseq" prep repack --in "$work/gen$set" \
    --out "$work/s$set" > "$work/repack$set.log" 2>&1 || { cat "$work/repack$set.log"; exit 1; }
done
rm -rf "$work/gen1000" "$work/gen4"
sync
fi

[ "$epochs" -ge 2 ] || { echo "EPOCHS must be at least 2 (the first one opens the files)" >&2; exit 1; }
if [ -n "${BENCH_BEFORE:-}" ]; then
  [ -x "$BENCH_BEFORE" ] || { echo "no $BENCH_BEFORE" >&2; exit 1; }
  readers="before after"
else
  readers=after
fi
echo "$ranks ranks, micro-batches of $batch rows (shuffled, batch-aligned), L 128, P 20, $epochs epochs;"
echo "64 000 rows in 64 x 128 chunks (hetseq prep repack); $rounds interleaved rounds; at the start: $(uptime | sed 's/.*load/load/')"
stat=${STAT:-best}
case $stat in best|median) ;; *) echo "STAT is best or median" >&2; exit 1 ;; esac
: > "$work/figures" # lines "READER SET FIGURE VALUE", FIGURE one of open, e1 (epoch 1), later
r=0
while [ "$r" -lt "$rounds" ]; do
  for reader in $readers; do
    if [ "$reader" = before ]; then p=$BENCH_BEFORE; else p=$prog; fi
    for set in 4 1000; do
      "$mpirun" --allow-run-as-root --oversubscribe -np "$ranks" "$p" bench "$work/s$set" training "$batch" "$epochs" \
        > "$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
      grep -q "no-collective cause 0x0" "$work/run.log" || { cat "$work/run.log"; echo "reads were not collective" >&2; exit 1; }
      open=$(sed -n 's/^bench: .*: open \([0-9.]*\) s$/\1/p' "$work/run.log")
      e1=$(sed -n 's/^bench: epoch 1: .*, \([0-9.]*\) ms per micro-batch.*/\1/p' "$work/run.log")
      later=$(sed -n 's/^bench: epoch [0-9]*: .*, \([0-9.]*\) ms per micro-batch.*/\1/p' "$work/run.log" | sed 1d |
        awk '{ t += $1 } END { if (NR) printf "%.3f", t / NR }')
      mem=$(sed -n 's/.*rank 0 peak memory \([0-9]*\) MB.*/\1/p' "$work/run.log")
      [ -n "$open" ] && [ -n "$e1" ] && [ -n "$later" ] || { cat "$work/run.log"; exit 1; }
      echo "round $((r + 1)): $reader, $set files: open $open s, epoch 1 $e1 ms, later epochs $later ms per micro-batch"
      echo "$reader $set open $open" >> "$work/figures"
      echo "$reader $set e1 $e1" >> "$work/figures"
      echo "$reader $set later $later" >> "$work/figures"
      eval "mem_${reader}_$set=\${mem:-?}"
    done
  done
  r=$((r + 1))
done
fig() { # READER SET FIGURE: the best (lowest) or the median value over the rounds
  awk -v r="$1" -v s="$2" -v f="$3" '$1 == r && $2 == s && $3 == f { print $4 }' "$work/figures" | sort -g |
    awk -v stat="$stat" '{ v[NR] = $1 } END { print stat == "best" ? v[1] : v[int((NR + 1) / 2)] }'
}
for reader in $readers; do
  for set in 4 1000; do
    for f in open e1 later; do eval "val_${reader}_${set}_$f=$(fig "$reader" "$set" "$f")"; done
  done
done
echo "$stat of $rounds rounds:"
printf '%-7s %-24s %8s %16s %16s %10s\n' reader files "open s" "epoch 1 ms/mb" "later ms/mb" "rank 0 MB"
for reader in $readers; do
  for set in 4 1000; do
    if [ "$set" = 4 ]; then what="4 files of 16 000 rows"; else what="1 000 files of 64 rows"; fi
    eval "printf '%-7s %-24s %8.3f %16.3f %16.3f %10s\n' $reader \"\$what\" \$val_${reader}_${set}_open \
      \$val_${reader}_${set}_e1 \$val_${reader}_${set}_later \$mem_${reader}_$set"
  done
  eval "printf '%-7s 1 000 files / 4 files: epoch 1 %.2fx, later epochs %.2fx\n' $reader \
    \$(echo \"\$val_${reader}_1000_e1 / \$val_${reader}_4_e1\" | bc -l) \
    \$(echo \"\$val_${reader}_1000_later / \$val_${reader}_4_later\" | bc -l)"
done
echo "at the end: $(uptime | sed 's/.*load/load/')"
