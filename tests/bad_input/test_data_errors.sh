# A user points hetseq at broken data: a missing or truncated HDF5 file, a file with the wrong dtype or
# layout, broken IDX input to `hetseq prep mnist`. Each gives one clear message naming the file and a
# non-zero exit on every rank (2 ranks) within seconds.
. "$top_srcdir/tests/lib.sh"
DRIVER="$top_builddir/tests/mpi/mnist_driver"
SRC="${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
PY=/usr/bin/python3
[ -d "$SRC" ] || fail "no Fashion-MNIST IDX files in $SRC: install Debian's dataset-fashion-mnist (or set FASHION_MNIST_DIR)"

# ---- a good file first: prep works and the file reads on 2 ranks --------------------------------------
mpi 2 "$HETSEQ" prep mnist --in "$SRC" --out good.h5 --limit-train 300 --limit-test 100 > prep.log 2>&1 \
  || { cat prep.log; fail "prep of the good IDX files failed"; }
grep -q "300 train and 100 test images" prep.log || { cat prep.log; fail "prep summary line missing"; }
[ -e good.h5.tmp ] && fail "prep left its temporary file behind"
mpi 2 "$DRIVER" read good.h5 > read.log 2>&1 || { cat read.log; fail "reading the good file failed"; }

# ---- the HDF5 file --------------------------------------------------------------------------------------
expect_error "missing HDF5 file" "cannot read the MNIST data file nonexistent.h5.*hetseq prep mnist" \
  mpi 2 "$DRIVER" read nonexistent.h5
head -c 20000 good.h5 > truncated.h5
expect_error "truncated HDF5 file" "truncated.h5 is not a readable HDF5 file.*truncated" \
  mpi 2 "$DRIVER" read truncated.h5
echo "not HDF5 at all" > text.h5
expect_error "a text file" "text.h5 is not a readable HDF5 file" mpi 2 "$DRIVER" read text.h5

if "$PY" -c 'import h5py, numpy' 2>/dev/null; then
  # train/labels as float32, as a hand-made converter might write them
  "$PY" - <<'PYEOF' || fail "h5py could not write the test files"
import h5py, numpy as np
with h5py.File("good.h5", "r") as g:
    parts = {k: g[k][()] for k in ("train/images", "train/labels", "test/images", "test/labels")}
def write(name, override):
    with h5py.File(name, "w") as f:
        for k, v in parts.items():
            if k in override:
                if override[k] is not None: f[k] = override[k]
            else:
                f[k] = v
write("float_labels.h5", {"train/labels": parts["train/labels"].astype(np.float32)})
write("int16_images.h5", {"test/images": parts["test/images"].astype(np.int16)})
write("no_test_labels.h5", {"test/labels": None})
write("narrow_images.h5", {"train/images": parts["train/images"][:, :, :27]})
write("short_labels.h5", {"train/labels": parts["train/labels"][:299]})
write("big_labels.h5", {"train/labels": np.full_like(parts["train/labels"], 12)})
PYEOF
  expect_error "float32 labels" "float_labels.h5: dataset train/labels holds 32-bit floating point values.*uint8" \
    mpi 2 "$DRIVER" read float_labels.h5
  expect_error "int16 images" "int16_images.h5: dataset test/images holds 16-bit signed integer values" \
    mpi 2 "$DRIVER" read int16_images.h5
  expect_error "missing dataset" "no_test_labels.h5: dataset test/labels is missing.*hetseq prep mnist" \
    mpi 2 "$DRIVER" read no_test_labels.h5
  expect_error "28x27 images" "narrow_images.h5: dataset train/images is \[300,28,27\], expected \[N,28,28\]" \
    mpi 2 "$DRIVER" read narrow_images.h5
  expect_error "fewer labels than images" "short_labels.h5: train/images has 300 images but train/labels has 299" \
    mpi 2 "$DRIVER" read short_labels.h5
  # labels beyond the model's 10 classes: found on the host while the batch is staged (the loss op on
  # the device never checks them)
  expect_error "labels beyond the classes" "label 12 of sample [0-9]+ in this batch is outside \[0, 10\)" \
    mpi 2 "$HETSEQ" train "$top_srcdir/tests/e2e/small.cfg" -o data.path=\"big_labels.h5\" -o training.max_update=1 \
    -o checkpoint.no_save=true
else
  echo "note: no h5py for /usr/bin/python3: wrong-dtype files not tested"
fi

# ---- IDX input to prep ---------------------------------------------------------------------------------
mkdir idx
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  cp "$SRC/$f.gz" idx/ 2>/dev/null || cp "$SRC/$f" idx/ || fail "cannot copy $f"
done
prep() { mpi 2 "$HETSEQ" prep mnist --in idx --out out.h5 "$@"; }

full=$(stat -c %s idx/train-images-idx3-ubyte.gz)
mv idx/train-images-idx3-ubyte.gz whole.gz
head -c $((full / 2)) whole.gz > idx/train-images-idx3-ubyte.gz
expect_error "truncated gzipped IDX" "train-images-idx3-ubyte.gz: truncated" prep
rm idx/train-images-idx3-ubyte.gz
gzip -dc whole.gz | head -c 100000 > idx/train-images-idx3-ubyte
expect_error "truncated plain IDX" "train-images-idx3-ubyte: truncated: the header promises 47040000 data bytes but the file holds only 99984" prep
rm idx/train-images-idx3-ubyte
cp idx/train-labels-idx1-ubyte.gz idx/train-images-idx3-ubyte.gz
expect_error "labels where images belong" "train-images-idx3-ubyte.gz: bad magic number 0x00000801, expected 0x00000803" prep
mv whole.gz idx/train-images-idx3-ubyte.gz
mv idx/t10k-labels-idx1-ubyte.gz t10k-labels.gz
expect_error "missing IDX file" "neither t10k-labels-idx1-ubyte nor t10k-labels-idx1-ubyte.gz" prep
mv t10k-labels.gz idx/t10k-labels-idx1-ubyte.gz
expect_error "unwritable output" "cannot create no/such/dir/out.h5.tmp" \
  mpi 2 "$HETSEQ" prep mnist --in idx --out no/such/dir/out.h5
expect_error "bad limit" "--limit-train 0: expected a whole number >= 1" prep --limit-train 0
[ -e out.h5 ] && fail "a failed prep left out.h5"
ls | grep -q 'out.h5.tmp' && fail "a failed prep left a temporary file"
pass
