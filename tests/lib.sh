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

# mpi N CMD...: run CMD on N ranks (root-safe, oversubscribed on a 2-core machine), 120 s limit.
mpi() {
  local n=$1; shift
  timeout -k 5 120 "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" \
    --mca btl self,vader --mca rmaps_base_oversubscribe 1 "$@"
}

# expect_error WHAT PATTERN CMD...: CMD must exit non-zero within the time limit and print PATTERN.
expect_error() {
  local what=$1 pattern=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "$what: expected a non-zero exit, got 0. Output:
$out"
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "$what: timed out (a rank hung). Output:
$out"
  printf '%s\n' "$out" | grep -q -E -- "$pattern" || fail "$what: message does not match /$pattern/. Output:
$out"
  echo "ok: $what -> $(printf '%s\n' "$out" | grep -m1 -E -- "$pattern")"
}
