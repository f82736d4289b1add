# Shared helpers for the shell tests (sourced). Each test runs in its own scratch directory.
# Environment from make check: HETSEQ, top_srcdir, top_builddir, MPIRUN, PYTHON_TORCH.
set -u
: "${HETSEQ:=$(pwd)/hetseq}"
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
# Open MPI's point-to-point layer: ob1 (shared memory, TCP) is what a one-node job here selects anyway;
# naming it skips probing the others (UCX, PSM, PSM2): 0.2 s of every job's start, singletons included.
: "${OMPI_MCA_pml:=ob1}"
export OMPI_MCA_pml
FMNIST_H5="$top_builddir/tests/fashion-mnist.h5"

TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hetseq-$TEST_NAME.XXXXXX")
# Open MPI 4 keeps every job's session directory under one per-user directory, /tmp/ompi.HOST.UID: a
# job starting while two others create and remove it fails in orte_init ("A call to mkdir was unable
# to create the desired directory ... File exists"). make check runs tests two at a time, so each test
# gets a base of its own. It must be short: PMIx's sockets live under it (a socket path holds 107 bytes).
OMPI_MCA_orte_tmpdir_base=$(mktemp -d /tmp/hs-ompi.XXXXXX) || exit 99
export OMPI_MCA_orte_tmpdir_base
# remove_scratch: what a test's own EXIT trap calls last.
remove_scratch() { rm -rf "$WORK" "$OMPI_MCA_orte_tmpdir_base"; }
trap remove_scratch EXIT
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

# need_cmd CMD PACKAGE: CMD (a program a test runs) must be installed; if not, the test FAILS naming the
# Debian package that has it (tools/quickstart.sh test installs every one): a missing tool is a broken
# install step, never a reason to skip. /usr/sbin and /sbin are searched too (ip, slurmd, munged).
need_cmd() {
  PATH="$PATH:/usr/sbin:/sbin" command -v "$1" > /dev/null 2>&1 ||
    fail "$1 not found: install Debian's $2 (apt-get install $2; tools/quickstart.sh test installs it)"
}

# need_python MODULE...: PYTHON_TORCH (configure's Python with torch and h5py) must import MODULE...;
# if not, the test fails naming the Debian packages (python3-torch, python3-h5py, python3-numpy).
need_python() {
  local m pkgs=""
  for m in "$@"; do pkgs="$pkgs python3-$m"; done
  [ -n "${PYTHON_TORCH:-}" ] ||
    fail "no Python with$pkgs (configure found none: apt-get install$pkgs; tools/quickstart.sh test installs them)"
  "$PYTHON_TORCH" -c "import $(echo "$@" | tr ' ' ,)" 2> /dev/null ||
    fail "$PYTHON_TORCH cannot import $*: install Debian's$pkgs (tools/quickstart.sh test installs them)"
}

# mpi N CMD...: run CMD on N ranks (root-safe, oversubscribed on a 2-core machine), 300 s limit (a
# hang guard: a loaded 2-core machine running the suite two tests at a time is slow; inside
# expect_error the limit is its hang guard, HS_HANG_SECONDS).
mpi() {
  local n=$1; shift
  timeout -k 5 "${HS_MPI_LIMIT:-300}" "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" \
    --mca btl self,vader --mca rmaps_base_oversubscribe 1 "$@"
}

# noop_seconds N: sets HS_NOOP to the wall seconds of a job that does nothing, `hetseq --version`, on N
# ranks under mpi() (N = 1: hetseq alone, an MPI singleton, as the tests start serial commands): what
# starting and ending a job costs on this machine now (its load, a sanitizer build's slower start).
# Measured once per test and rank count (cached), when first asked: just before the first failing job
# of that rank count.
noop_seconds() {
  local n=$1 var="HS_NOOP_SECONDS_$1" t0 t1 out
  if [ -z "${!var:-}" ]; then
    t0=$(date +%s.%N)
    if [ "$n" = 1 ]; then out=$(unset HETSEQ_FAULT; timeout -k 5 120 "$HETSEQ" --version 2>&1)
    else out=$(unset HETSEQ_FAULT; HS_MPI_LIMIT=120 mpi "$n" "$HETSEQ" --version 2>&1)
    fi || fail "the no-op job (hetseq --version on $n rank(s)) failed: $out"
    t1=$(date +%s.%N)
    printf -v "$var" '%s' "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"
  fi
  HS_NOOP=${!var}
}

# expect_error WHAT PATTERN CMD...: CMD must exit non-zero, print PATTERN, and end (every rank) within a
# liveness bound measured, not guessed: 3 x the no-op job of the same rank count (noop_seconds: the
# ranks of `mpi N ...`, else 1) + 5 s + HS_ERROR_WAIT (seconds the failure is designed to wait, e.g. a
# stall_timeout; default 0). A test whose failing job first does real work (trains some updates) sets
# HS_ERROR_BASE to the measured seconds of a clean run doing at least that work, used instead of the
# no-op. A hang is killed by the hang guard (HS_HANG_SECONDS, 120 s; mpi() inside CMD uses it too).
HS_HANG_SECONDS=${HS_HANG_SECONDS:-120}
expect_error() {
  local what=$1 pattern=$2; shift 2
  local out rc t0 t1 ranks=1 base took limit HS_MPI_LIMIT=$HS_HANG_SECONDS
  [ "$1" = mpi ] && ranks=$2
  noop_seconds "$ranks"
  base=${HS_ERROR_BASE:-$HS_NOOP}
  t0=$(date +%s.%N)
  if [ "$(type -t "$1")" = file ]; then out=$(timeout -k 5 "$HS_HANG_SECONDS" "$@" 2>&1); rc=$?
  else out=$("$@" 2>&1); rc=$?
  fi
  t1=$(date +%s.%N)
  took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  limit=$(awk -v n="$base" -v w="${HS_ERROR_WAIT:-0}" 'BEGIN { printf "%.1f", 3 * n + 5 + w }')
  # 124: the hang guard ran out (137 is also what mpirun reports for a rank killed by SIGKILL, e.g. an
  # injected node failure; a job that hangs is ended by the guard and exits 124).
  [ $rc -ne 124 ] || fail "$what: still running after the ${HS_HANG_SECONDS} s hang guard (a rank hung); the" \
    "no-op job of $ranks rank(s) took $HS_NOOP s. Output:
$out"
  awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t > l) }' &&
    fail "$what: took $took s to end, more than $limit s = 3 x $base s ($([ -n "${HS_ERROR_BASE:-}" ] &&
      echo "the test's reference run" || echo "the no-op job of $ranks rank(s)")) + 5 s$([ "${HS_ERROR_WAIT:-0}" = 0 ] ||
      echo " + ${HS_ERROR_WAIT} s designed wait")$([ -z "${HS_ERROR_BASE:-}" ] ||
      echo "; the no-op job of $ranks rank(s) took $HS_NOOP s"). Output:
$out"
  [ $rc -ne 0 ] || fail "$what: expected a non-zero exit, got 0. Output:
$out"
  printf '%s\n' "$out" | grep -q -E -- "$pattern" || fail "$what: message does not match /$pattern/. Output:
$out"
  echo "ok: $what -> $(printf '%s\n' "$out" | grep -m1 -E -- "$pattern") ($took s; bound $limit s; no-op $HS_NOOP s)"
}
