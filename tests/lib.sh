# Shared helpers for the shell tests (sourced). Each test runs in its own scratch directory.
# Environment from make check: HETSEQ, top_srcdir, top_builddir, MPIRUN, PYTHON_TORCH.
set -u
: "${HETSEQ:=$(pwd)/hetseq}"
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
FMNIST_H5="$top_builddir/tests/fashion-mnist.h5"

TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hetseq-$TEST_NAME.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 99

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
pass() { echo "PASS: ${*:-$TEST_NAME}"; exit 0; }

# make_tiny_mnist FILE: 400 training and 40 test images of Fashion-MNIST, for runs of many short updates.
make_tiny_mnist() {
  "$HETSEQ" prep mnist --in "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" --limit-train 400 \
    --limit-test 40 --out "$1" > "$1.log" 2>&1 || { cat "$1.log"; fail "hetseq prep mnist of $1 failed"; }
}

# make_bert_small_shards TRAIN_ROWS: the shards tests/e2e/bert_small.cfg reads (shards/wiki_*.hdf5; a
# vocabulary of 1000, 32 tokens and up to 5 masked per sequence): training files of TRAIN_ROWS rows (a
# comma list, e.g. 37,50,13; seed 3) and one test file of 24 rows (seed 4). Needs PYTHON_TORCH (h5py).
make_bert_small_shards() {
  local w="$top_srcdir/tests/ref/make_bert_shards.py"
  "$PYTHON_TORCH" "$w" shards --prefix wiki --split training --rows "$1" --seq-len 32 --max-pred 5 --vocab 1000 \
    --seed 3 || fail "writing training shards"
  "$PYTHON_TORCH" "$w" shards --prefix wiki --split test --rows 24 --seq-len 32 --max-pred 5 --vocab 1000 \
    --seed 4 || fail "writing test shards"
}

# mpi N CMD...: run CMD on N ranks (root-safe, oversubscribed on a 2-core machine), 300 s limit (a
# hang guard: a loaded 2-core machine running the suite two tests at a time is slow).
mpi() {
  local n=$1; shift
  timeout -k 5 300 "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" \
    --mca btl self,vader --mca rmaps_base_oversubscribe 1 "$@"
}

# expect_error WHAT PATTERN CMD...: CMD must exit non-zero within HS_ERROR_SECONDS (default 10; a
# liveness bound, not a speed figure: every rank must end, none may hang) and print PATTERN.
expect_error() {
  local what=$1 pattern=$2; shift 2
  local out rc t0 t1
  t0=$(date +%s.%N)
  out=$("$@" 2>&1); rc=$?
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v lim="${HS_ERROR_SECONDS:-10}" 'BEGIN { exit !(b - a > lim) }' &&
    fail "$what: took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s to end (limit ${HS_ERROR_SECONDS:-10} s). Output:
$out"
  [ $rc -ne 0 ] || fail "$what: expected a non-zero exit, got 0. Output:
$out"
  # 124: the time limit of mpi() ran out (137 is also what mpirun reports for a rank killed by
  # SIGKILL, e.g. an injected node failure; a hang would have exceeded HS_ERROR_SECONDS above).
  [ $rc -ne 124 ] || fail "$what: timed out (a rank hung). Output:
$out"
  printf '%s\n' "$out" | grep -q -E -- "$pattern" || fail "$what: message does not match /$pattern/. Output:
$out"
  echo "ok: $what -> $(printf '%s\n' "$out" | grep -m1 -E -- "$pattern")"
}
