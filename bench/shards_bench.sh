#!/bin/sh
# Reading many BERT shard files: the same 64 000 rows (L 128, P 20) as 1 000 shard files of 64 rows
# and as 4 files of 16 000 rows, read by 3 ranks the way training reads them (micro-batches of BATCH
# rows at batch-aligned offsets in shuffled order, every read collective). Prints the time per
# micro-batch for both and their ratio. Both sets are written by tests/ref/make_bert_shards.py
# (NVIDIA's create_dataset calls) and then given the same chunk layout with `hetseq prep repack`
# (64 x L chunks, uncompressed), so only the number of files differs. Each set is read ROUNDS times,
# interleaved, and the best round counts (other load on the node only ever slows a round down).
#   usage (in the build directory): $top_srcdir/bench/shards_bench.sh [READS [ROUNDS [BATCH [RANKS]]]]
# Needs tests/mpi/test_bert_shards (`make tests/mpi/test_bert_shards`) and /usr/bin/python3 with h5py.
# Environment: SHARDS_BENCH_DATA=DIR keeps the written shards in DIR and reuses them on the next run;
# BENCH_PROG=PATH reads with another build's test_bert_shards (e.g. of an older reader).
set -eu
reads=${1:-200}
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

echo "$ranks ranks read $reads micro-batches of $batch rows each (shuffled, batch-aligned), L 128, P 20,"
echo "64 000 rows in 64 x 128 chunks (hetseq prep repack); best of $rounds interleaved rounds"
best1000= best4=
r=0
while [ "$r" -lt "$rounds" ]; do
  for set in 4 1000; do
    "$mpirun" --allow-run-as-root --oversubscribe -np "$ranks" "$prog" bench "$work/s$set" training "$batch" "$reads" \
      > "$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
    s=$(sed -n 's/^bench: .* per rank: \([0-9.]*\) s,.*/\1/p' "$work/run.log")
    [ -n "$s" ] || { cat "$work/run.log"; exit 1; }
    grep -q "no-collective cause 0x0" "$work/run.log" || { cat "$work/run.log"; echo "reads were not collective" >&2; exit 1; }
    eval "b=\${best$set:-}"
    if [ -z "$b" ] || [ "$(echo "$s < $b" | bc -l)" = 1 ]; then eval "best$set=$s"; fi
  done
  r=$((r + 1))
done
ms4=$(echo "$best4 * 1000 / $reads" | bc -l)
ms1000=$(echo "$best1000 * 1000 / $reads" | bc -l)
printf '%-24s %14s\n' files "ms/micro-batch"
printf '%-24s %14.3f\n' "4 files of 16 000 rows" "$ms4"
printf '%-24s %14.3f\n' "1 000 files of 64 rows" "$ms1000"
printf '1 000 files / 4 files: %.2fx\n' "$(echo "$ms1000 / $ms4" | bc -l)"
