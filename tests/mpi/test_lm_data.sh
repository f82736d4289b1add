# A user prepares the WikiText-format fixture with `hetseq prep lm` and reads token runs on 1 and 3 ranks
# as Transformer-XL batching does (tests/mpi/test_lm_data.c): every token equals a serial read of the
# file, ranks with nothing to read join the collective reads, every read stays collective. Then the
# reader's messages: a run past the end of a split, a missing lm.h5, and (with h5py) files missing a
# split, holding floats, or of another format — each ends every rank with one message naming the file.
. "$top_srcdir/tests/lib.sh"
PROG="$top_builddir/tests/mpi/test_lm_data"
"$HETSEQ" prep lm --in "$top_srcdir/tests/fixtures/lm" --out fx > prep.log 2>&1 || { cat prep.log; fail "prep lm"; }
for n in 1 3; do
  mpi $n "$PROG" fx > run$n.log 2>&1 || { cat run$n.log; fail "reads on $n rank(s)"; }
  grep "^ok: $n rank(s)" run$n.log || { cat run$n.log; fail "$n rank(s): no success line"; }
done
# with 3 ranks some reads must have been empty on some rank (count 0), else the test proves less
grep -q "^ok: 3 rank(s): .* [1-9][0-9]* empty reads" run3.log || fail "no empty reads on 3 ranks: $(cat run3.log)"

expect_error "a run past the end of the valid split, last of 3 ranks" \
  "fx/lm.h5: run 0 of 1 reads tokens \[[0-9]+, [0-9]+\) of the valid split, which holds [0-9]+ tokens" \
  mpi 3 "$PROG" fx past-end
expect_error "no lm.h5 (2 ranks)" "cannot read the language-model data file nowhere/lm.h5: No such file.*hetseq prep lm" \
  mpi 2 "$PROG" nowhere open

if [ -n "${PYTHON_TORCH:-}" ]; then
  mkdir -p novalid floats other
  "$PYTHON_TORCH" - <<'PY' || fail "could not write the damaged files with h5py"
import h5py, numpy as np
src = h5py.File("fx/lm.h5", "r")
def copy(dst, skip=(), floats=(), fmt=None):
    with h5py.File(dst, "w") as f:
        for k, v in src.attrs.items():
            f.attrs[k] = v
        if fmt is not None:
            f.attrs["format"] = fmt
        for name in ("train", "valid", "test", "vocab"):
            if name in skip:
                continue
            data = src[name][:]
            f[name] = data.astype(np.float32) if name in floats else data
copy("novalid/lm.h5", skip=("valid",))
copy("floats/lm.h5", floats=("train",))
copy("other/lm.h5", fmt="something-else")
PY
  expect_error "lm.h5 without /valid (2 ranks)" "novalid/lm.h5: dataset /valid is missing \(the valid split\).*hetseq prep lm" \
    mpi 2 "$PROG" novalid open
  expect_error "lm.h5 with float token ids (2 ranks)" "floats/lm.h5: dataset /train holds 32-bit floating point values; token ids are 32-bit signed integers" \
    mpi 2 "$PROG" floats open
  expect_error "lm.h5 of another format (2 ranks)" "other/lm.h5: the attribute format of / is \"something-else\", expected \"hetseq-lm-1\"" \
    mpi 2 "$PROG" other open
else
  echo "note: no PYTHON_TORCH (h5py): the damaged-file messages are not checked"
fi
pass
