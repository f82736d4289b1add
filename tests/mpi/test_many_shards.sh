# A user pretrains BERT on data that comes as many small shard files (NVIDIA's phase-1 data is hundreds
# to thousands of files): 200 training shards of 1 to 5 rows and 40 test shards, on 3 ranks with
# shuffled micro-batches that straddle file boundaries. The model after a few updates, with validation,
# is the same (h5compare 1e-5) as from the same rows in 2 training files and 1 test file, and so is the
# loss trajectory; also with a descriptor limit (ulimit -n 400) under which the training reader keeps
# only 100 of its 200 files open and reopens the others.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import h5py, numpy' 2>/dev/null || fail "$PY cannot import h5py and numpy: install Debian's python3-h5py python3-numpy (tools/quickstart.sh test does)"
CFG="$top_srcdir/tests/e2e/bert_small.cfg"
CMP="$top_builddir/tests/tools/h5compare"
W="$top_srcdir/tests/ref/make_bert_shards.py"

train_rows=$("$PY" -c 'print(",".join(str(1 + (i * 7) % 5) for i in range(200)))')
test_rows=$("$PY" -c 'print(",".join(str(1 + (i * 3) % 4) for i in range(40)))')
"$PY" "$W" many --prefix wiki --split training --rows "$train_rows" --seq-len 32 --max-pred 5 --vocab 1000 \
  --seed 5 || fail "writing 200 training shards"
"$PY" "$W" many --prefix wiki --split test --rows "$test_rows" --seq-len 32 --max-pred 5 --vocab 1000 \
  --seed 6 || fail "writing 40 test shards"
# the same rows, in the reader's file order (sorted names: wiki_training_10 before wiki_training_2),
# as 2 training files of uneven size and 1 test file, written the way NVIDIA's writer does
"$PY" - <<'PYEOF' || fail "h5py could not write the 2-file copy"
import os
import h5py, numpy as np
names = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"]
def rows_of(split):
    files = sorted(os.path.join("many", f) for f in os.listdir("many") if split in f)
    out = {k: [] for k in names}
    for p in files:
        with h5py.File(p, "r") as f:
            for k in names:
                out[k].append(f[k][()])
    return {k: np.concatenate(v) for k, v in out.items()}, len(files)
os.makedirs("few")
for split, cuts in (("training", [0, 250, None]), ("test", [0, None])):
    d, n = rows_of(split)
    assert n == (200 if split == "training" else 40), n
    for i in range(len(cuts) - 1):
        with h5py.File("few/wiki_%s_%d.hdf5" % (split, i), "w") as f:
            for k in names:
                f.create_dataset(k, data=d[k][cuts[i]:cuts[i + 1]], compression="gzip")
PYEOF

run() { # dir path
  mpi 3 "$HETSEQ" train "$CFG" -o data.path=\"$2\" -o checkpoint.save_dir=\"$1\" -o training.max_update=6 \
    -o training.validate_interval_updates=3 > "$1.log" 2>&1 || { cat "$1.log"; fail "training on $2 failed"; }
}
run from_many many
run from_few few
hard=$(ulimit -H -n)
if [ "$hard" = unlimited ] || [ "$hard" -ge 400 ]; then
  (ulimit -n 400 && run from_many_lru many) || exit 1
  "$CMP" from_few/checkpoint_last.h5 from_many_lru/checkpoint_last.h5 1e-5 \
    || fail "200 shard files, 100 open at a time != the same rows in 2 files"
fi
grep -q "valid on 'test' subset" from_many.log || { cat from_many.log; fail "no validation ran"; }
grep -q "num_updates=6," from_many.log || { cat from_many.log; fail "expected 6 updates"; }
"$CMP" from_few/checkpoint_last.h5 from_many/checkpoint_last.h5 1e-5 || fail "200 shard files != the same rows in 2 files"
traj() { grep -E '"type": "(train|valid)"' "$1" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }
traj from_few/metrics.jsonl > few.traj
traj from_many/metrics.jsonl > many.traj
[ "$(wc -l < few.traj)" -ge 8 ] || { cat from_few/metrics.jsonl; fail "expected 6 train and 2 valid records"; }
diff few.traj many.traj || fail "the loss trajectory depends on how the rows are split into files"
pass
