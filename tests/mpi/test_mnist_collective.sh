# A user prepares a Fashion-MNIST slice and reads it on 1, 2 and 3 ranks: every byte matches the IDX
# source, EMPTY micro-batches join the collective reads, the reads stay collective (HDF5's
# no-collective cause is 0) while the main thread all-reduces on another communicator.
. "$top_srcdir/tests/lib.sh"
SRC="${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
[ -d "$SRC" ] || fail "no Fashion-MNIST IDX files in $SRC: install Debian's dataset-fashion-mnist (or set FASHION_MNIST_DIR)"
PROG="$top_builddir/tests/mpi/test_mnist_collective"
for n in 1 2 3; do
  mpi $n "$PROG" "$SRC" "slice$n.h5" > run$n.log 2>&1 || { cat run$n.log; fail "$n rank(s)"; }
  grep "^ok: $n rank(s)" run$n.log || { cat run$n.log; fail "$n rank(s): no success line"; }
done
pass
