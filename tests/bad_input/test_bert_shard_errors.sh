# A user points hetseq at broken BERT shards: a missing dataset, datasets of different lengths, float
# values, a truncated copy, a token id beyond the vocabulary, mask or position values no writer makes,
# shards of different sequence lengths, no file of the split. Each gives one clear message naming the
# file and dataset and a non-zero exit on every rank (2 ranks) within seconds. Shards written with other
# integer widths and byte orders (int64 ids, big-endian positions, uint8 segments, NSP labels as a
# column) are read correctly.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
PROG="$top_builddir/tests/mpi/test_bert_shards"
"$PY" -c 'import h5py, numpy' 2>/dev/null || fail "$PY cannot import h5py and numpy: install Debian's python3-h5py python3-numpy (tools/quickstart.sh test does)"
W="$top_srcdir/tests/ref/make_bert_shards.py"
scan() { mpi 2 "$PROG" scan "$@"; }

"$PY" "$W" good --rows 30,20 --seq-len 16 --max-pred 3 --vocab 500 --dump good.ref || fail "writer failed"
scan good training 500 > good.log 2>&1 || { cat good.log; fail "the good shards do not read"; }
grep -q "50 rows of 2 file(s), L 16, P 3" good.log || { cat good.log; fail "good shards: wrong summary"; }

# One broken copy of the good shards per case: bad/<case>/x_training_{0,1}.hdf5 (file 1 is the broken one).
"$PY" - <<'PYEOF' || fail "h5py could not write the broken shards"
import os, shutil
import h5py, numpy as np
names = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"]
src = {k: h5py.File("good/x_training_1.hdf5", "r")[k][()] for k in names}
def case(name, change, dtypes={}):
    os.makedirs("bad/" + name)
    shutil.copy("good/x_training_0.hdf5", "bad/%s/x_training_0.hdf5" % name)
    d = {k: v.copy() for k, v in src.items()}
    change(d)
    with h5py.File("bad/%s/x_training_1.hdf5" % name, "w") as f:
        for k, v in d.items():
            if v is not None:
                f.create_dataset(k, data=v, dtype=dtypes.get(k, v.dtype), compression="gzip")
case("missing", lambda d: d.update(masked_lm_ids=None))
case("short", lambda d: d.update(segment_ids=d["segment_ids"][:19]))
case("float", lambda d: d.update(input_mask=d["input_mask"].astype(np.float32)))
case("vocab", lambda d: d["input_ids"].__setitem__((7, 3), 500))
case("mlm_vocab", lambda d: d["masked_lm_ids"].__setitem__((4, 0), 777))
case("mask", lambda d: d["input_mask"].__setitem__((2, 5), 2))
case("order", lambda d: d["masked_lm_positions"].__setitem__((6, slice(0, 2)), [9, 4]))
case("position", lambda d: d["masked_lm_positions"].__setitem__((6, 0), 16))
case("longer", lambda d: d.update(input_ids=np.pad(d["input_ids"], ((0, 0), (0, 16))),
                                  input_mask=np.pad(d["input_mask"], ((0, 0), (0, 16))),
                                  segment_ids=np.pad(d["segment_ids"], ((0, 0), (0, 16)))))
# other integer layouts (not errors): int64 ids, big-endian int32 positions, uint8 segments, int16 NSP
# labels as a [N,1] column
case("widths", lambda d: d.update(next_sentence_labels=d["next_sentence_labels"].reshape(-1, 1)),
     {"input_ids": "<i8", "masked_lm_positions": ">i4", "segment_ids": "u1", "input_mask": "<i4",
      "next_sentence_labels": "<i2", "masked_lm_ids": ">i8"})
with h5py.File("bad/widths/x_training_1.hdf5", "r") as f:
    assert f["masked_lm_positions"].dtype == np.dtype(">i4") and f["input_ids"].dtype == np.dtype("<i8")
    assert f["next_sentence_labels"].shape == (20, 1) and f["segment_ids"].dtype == np.dtype("u1")
PYEOF

D=bad
expect_error "missing dataset" "$D/missing/x_training_1.hdf5: dataset masked_lm_ids is missing; this is not an NVIDIA BERT shard" \
  scan $D/missing training 500
expect_error "rows differ" "$D/short/x_training_1.hdf5: dataset segment_ids has 19 rows but input_ids has 20" \
  scan $D/short training 500
expect_error "float dataset" "$D/float/x_training_1.hdf5: dataset input_mask holds 32-bit floating point values; BERT shards hold integers" \
  scan $D/float training 500
expect_error "token id >= vocab_size" "$D/vocab/x_training_1.hdf5: dataset input_ids, row 7, column 3 \(global sample 37\): value 500 is not a token id of the vocabulary \[0, 500\): set model.vocab_size" \
  scan $D/vocab training 500
expect_error "masked id >= vocab_size" "$D/mlm_vocab/x_training_1.hdf5: dataset masked_lm_ids, row 4, column 0 \(global sample 34\): value 777 is not a token id" \
  scan $D/mlm_vocab training 500
expect_error "mask value 2" "$D/mask/x_training_1.hdf5: dataset input_mask, row 2, column 5 \(global sample 32\): value 2 is not 0 or 1" \
  scan $D/mask training 500
expect_error "positions not ascending" "$D/order/x_training_1.hdf5: dataset masked_lm_positions, row 6, column 1 \(global sample 36\): value 4 does not follow the previous position" \
  scan $D/order training 500
expect_error "position beyond L" "$D/position/x_training_1.hdf5: dataset masked_lm_positions, row 6, column 0 \(global sample 36\): value 16 is not a token position in \[1, 16\)" \
  scan $D/position training 500
expect_error "phase-1 and phase-2 shards mixed" "$D/longer/x_training_1.hdf5 has max_seq_length 32 and max_predictions_per_seq 3 but $D/longer/x_training_0.hdf5 has 16 and 3" \
  scan $D/longer training 500
head -c 9000 good/x_training_1.hdf5 > $D/vocab/x_training_1.hdf5
expect_error "truncated shard" "$D/vocab/x_training_1.hdf5 is not a readable HDF5 file \(.*truncated" \
  scan $D/vocab training 500
expect_error "no file of the split" "good: no file whose name contains 'valid' \(2 other files there, e.g. x_training_0.hdf5, x_training_1.hdf5\)" \
  scan good valid 500
expect_error "no such path" "cannot read the BERT data path nowhere: No such file or directory" \
  scan nowhere training 500

# the same values in other integer layouts read exactly as the reference says
mpi 2 "$PROG" verify $D/widths training 0 16 3 500 good.ref > widths.log 2>&1 || { cat widths.log; fail "other widths"; }
grep "^ok: 2 rank(s): 50 rows" widths.log || { cat widths.log; fail "other widths: no success line"; }
pass
