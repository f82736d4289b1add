#!/bin/sh
# A user sets up Transformer-XL training with data or settings that do not fit: a vocabulary that does
# not match txl.n_token, a token id outside the vocabulary in the file, an empty validation split,
# columns that cannot be split over ranks x update_freq, too many columns for the data, segment and
# memory lengths out of range, ext_len other than 0, cutoffs that do not increase. Each ends with exit 1
# and one message naming the key, file or id, on two ranks, without a hang. A damaged token in the tail of
# the last validation column is found while column 0 warms its memory up, named by its place in the file.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/ref/txl_corpus.sh"
"$HETSEQ" --version >/dev/null 2>&1 || skip "the hetseq binary is not built yet"

make_txl_corpus data 400
txl_experiment exp.cfg data ""

expect_error "a vocabulary that does not match the model" \
  'txl\.n_token = 77 \(set at -o txl\.n_token=77\) does not match the data.s vocabulary of [0-9]+ words' \
  mpi 2 "$HETSEQ" train exp.cfg -o txl.n_token=77

mkdir -p badid novalid
cp data/lm.h5 badid/lm.h5
cp data/lm.h5 novalid/lm.h5
if [ -n "${PYTHON_TORCH:-}" ]; then
  "$PYTHON_TORCH" -c "
import h5py
f = h5py.File('badid/lm.h5', 'r+'); f['train'][37] = 999999; f.close()
f = h5py.File('novalid/lm.h5', 'r+'); del f['valid']; f.create_dataset('valid', shape=(0,), dtype='<i4'); f.close()
" || fail "h5py could not edit the copies"
  expect_error "a token id outside the vocabulary" \
    'token id 999999 at position 37 of the train split of badid/lm\.h5 is outside the model.s vocabulary' \
    mpi 2 "$HETSEQ" train exp.cfg -o data.path=badid -o checkpoint.no_save=true
  # the evaluation memory warm-up of column 0 reads the tail of the last column: a bad id there is
  # found by the rank of column 0, at its place in the file
  mkdir -p badtail
  cp data/lm.h5 badtail/lm.h5
  pos=$("$PYTHON_TORCH" -c "
import h5py
f = h5py.File('badtail/lm.h5', 'r+'); n = f['valid'].shape[0] // 2; f['valid'][2 * n - 3] = 999999; print(2 * n - 3); f.close()
") || fail "h5py could not edit badtail"
  expect_error "a bad id in the tail of the last validation column (column 0's memory warm-up)" \
    "rank 0\\]: error: token id 999999 at position $pos of the valid split of badtail/lm\\.h5" \
    mpi 2 "$HETSEQ" train exp.cfg -o data.path=badtail -o checkpoint.no_save=true -o training.max_update=2 \
    -o training.validate_interval_updates=2
  expect_error "an empty validation split" \
    'the valid split of novalid/lm\.h5 is empty' \
    mpi 2 "$HETSEQ" train exp.cfg -o data.path=novalid -o checkpoint.no_save=true
else
  echo "note: no Python with h5py: the damaged-file cases are not run"
fi

expect_error "columns that ranks x update_freq do not divide" \
  'txl\.batch_size = 6 columns cannot be split over 2 ranks x 2 micro-batches .*multiple of 4' \
  mpi 2 "$HETSEQ" train exp.cfg -o txl.batch_size=6 -o 'training.update_freq=[2]' -o checkpoint.no_save=true
expect_error "evaluation columns that the ranks do not divide" \
  'txl\.eval_batch_size = 3 columns cannot be split over 2 ranks' \
  mpi 2 "$HETSEQ" train exp.cfg -o txl.eval_batch_size=3 -o checkpoint.no_save=true
expect_error "more columns than the data can fill" \
  'the train split of data/lm\.h5 has [0-9]+ tokens: cut into txl\.batch_size = 1000000 columns' \
  mpi 2 "$HETSEQ" train exp.cfg -o txl.batch_size=1000000 -o checkpoint.no_save=true
expect_error "a segment length of 0" 'txl\.tgt_len = 0 is out of range' \
  mpi 2 "$HETSEQ" train exp.cfg -o txl.tgt_len=0
expect_error "a negative memory length" 'txl\.mem_len = -3 is out of range' \
  mpi 2 "$HETSEQ" train exp.cfg -o txl.mem_len=-3
expect_error "a clamp_len below -1" 'txl\.clamp_len = -2 is out of range' \
  mpi 2 "$HETSEQ" train exp.cfg -o txl.clamp_len=-2
expect_error "an extended context" 'txl\.ext_len = 4 is out of range' \
  mpi 2 "$HETSEQ" train exp.cfg -o txl.ext_len=4
expect_error "cutoffs that do not increase" 'txl\.cutoffs = \[\.\.\., 10, \.\.\.\]: the cutoffs must increase strictly' \
  mpi 2 "$HETSEQ" train exp.cfg -o 'txl.cutoffs=[20, 10]'
expect_error "cutoffs beyond the vocabulary" 'the cutoffs must increase strictly, start above 0 and stay below the vocabulary size' \
  mpi 2 "$HETSEQ" train exp.cfg -o 'txl.cutoffs=[20, 100000]'
# the environment switch of the 16-bit activation storage (docs/configuration.md, `precision`)
expect_error "an unknown activation storage" 'HETSEQ_ACTIVATION_STORAGE = "fp16": use "auto".*or "fp32"' \
  mpi 2 env HETSEQ_ACTIVATION_STORAGE=fp16 "$HETSEQ" train exp.cfg -o 'precision="fp16"'
pass
