#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for hetseq and then either runs the main job or the tests.
#   bash tools/quickstart.sh demo   install packages, build, make a WordPiece vocabulary and BERT shards
#                                   from the English text of Debian's `fortunes`, pretrain a tiny BERT
#                                   (2 MPI ranks, CPU) with validation, plot the losses, print where
#                                   the checkpoint, metrics and plot are
#   bash tools/quickstart.sh mnist  the same for HetSeq's MNIST CNN on Fashion-MNIST
#   bash tools/quickstart.sh test   install packages, build, run `make check` and the sanitizer
#                                   (ASan+UBSan) run of the CPU unit tests; ends with "N passed, N failed"
set -euo pipefail
mode=${1:-demo}
case "$mode" in demo|mnist|test) ;; *) echo "usage: bash tools/quickstart.sh demo|mnist|test" >&2; exit 2 ;; esac
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)

PACKAGES="build-essential autoconf automake libtool pkg-config libopenmpi-dev openmpi-bin libhdf5-openmpi-dev
 hdf5-tools libconfig-dev libjson-c-dev libutf8proc-dev libopenblas-openmp-dev zlib1g-dev libcmocka-dev
 dataset-fashion-mnist"
[ "$mode" = test ] && PACKAGES="$PACKAGES python3-torch python3-h5py python3-numpy python3-venv fortunes"
[ "$mode" = demo ] && PACKAGES="$PACKAGES fortunes gnuplot-nox"

install_packages() {
  local missing=""
  for p in $PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  [ -z "$missing" ] && return 0
  echo "== installing:$missing"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

build() { # dir configure-args...
  local dir=$1; shift
  [ -x configure ] || autoreconf -fi
  mkdir -p "$dir"
  (cd "$dir" && { [ -f Makefile ] || "$top/configure" -q "$@"; } && make -j"$jobs" >/dev/null)
}

# Hugging Face's tokenizers and transformers (PyPI) for the tokenizer cross-check, in a venv that keeps
# the system's torch, h5py and numpy; without them that test skips and says so.
python_env() {
  local venv=$top/build/pyenv
  "$venv/bin/python" -c 'import tokenizers, transformers' >/dev/null 2>&1 && return 0
  mkdir -p build
  { /usr/bin/python3 -m venv --system-site-packages "$venv" &&
    "$venv/bin/pip" install -q --disable-pip-version-check tokenizers==0.15.2 transformers==4.38.2; } ||
    echo "== warning: could not install tokenizers/transformers from PyPI: the tokenizer cross-check will skip"
}

# mpirun refuses to run as root unless told it is intended (containers, CI machines).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

install_packages
case "$mode" in
demo)
  build build
  corpus=/usr/share/games/fortunes
  mkdir -p data/demo
  [ -f data/demo/vocab.txt ] || build/hetseq prep vocab --corpus "$corpus" --size 8000 --out data/demo/vocab.txt
  [ -d data/demo/shards ] || mpirun -np 2 --oversubscribe build/hetseq prep bert --corpus "$corpus" \
      --vocab data/demo/vocab.txt --out data/demo/shards --seq-len 64 --max-pred 10 --dupe-factor 3 \
      --shards 4 --valid-fraction 0.05 --seed 12345
  mpirun -np 2 --oversubscribe build/hetseq train conf/bert_demo.cfg
  mpirun -np 2 --oversubscribe build/hetseq eval conf/bert_demo.cfg --checkpoint checkpoints/bert_demo/checkpoint_last.h5
  tools/plot_metrics.sh checkpoints/bert_demo/metrics.jsonl checkpoints/bert_demo/loss.png || true
  echo "== checkpoints: $top/checkpoints/bert_demo/   metrics (JSON lines): $top/checkpoints/bert_demo/metrics.jsonl"
  echo "== loss plot: $top/checkpoints/bert_demo/loss.png"
  ;;
mnist)
  build build
  mkdir -p data
  [ -f data/fashion-mnist.h5 ] || build/hetseq prep mnist --in /usr/share/datasets/fashion-mnist --out data/fashion-mnist.h5
  mpirun -np 2 --oversubscribe build/hetseq train conf/mnist.cfg
  mpirun -np 2 --oversubscribe build/hetseq eval conf/mnist.cfg --checkpoint checkpoints/mnist/checkpoint_last.h5
  tools/plot_metrics.sh checkpoints/mnist/metrics.jsonl checkpoints/mnist/loss.png 2>/dev/null || true
  echo "== checkpoints: $top/checkpoints/mnist/   metrics (JSON lines): $top/checkpoints/mnist/metrics.jsonl"
  ;;
test)
  python_env
  pyenv=(); [ -x build/pyenv/bin/python ] && pyenv=(PYTHON_TORCH="$top/build/pyenv/bin/python")
  build build "${pyenv[@]}"
  status=0
  (cd build && make -j"$jobs" check) || status=1
  # The sanitizer build runs the CPU unit and gradient tests (the MPI end-to-end tests run above).
  build build-asan --enable-sanitizers
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  san_tests=$(cd build-asan && make -s print-unit-tests)
  (cd build-asan && make -j"$jobs" check TESTS="$san_tests") || status=1
  summarize() { grep -h -E '^# (PASS|FAIL|SKIP|XFAIL|XPASS|ERROR): ' "$1"/test-suite.log 2>/dev/null || true; }
  pass=0 fail=0 skip=0
  for d in build build-asan; do
    log="$d/test-suite.log"
    [ -f "$log" ] || { fail=$((fail + 1)); continue; }
    p=$(sed -n 's/^# PASS: *//p' "$log" | head -1); f=$(sed -n 's/^# FAIL: *//p' "$log" | head -1)
    e=$(sed -n 's/^# ERROR: *//p' "$log" | head -1); x=$(sed -n 's/^# XPASS: *//p' "$log" | head -1)
    s=$(sed -n 's/^# SKIP: *//p' "$log" | head -1)
    pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0} + ${e:-0} + ${x:-0})); skip=$((skip + ${s:-0}))
  done
  [ $fail -eq 0 ] || status=1
  echo "$pass passed, $fail failed, $skip skipped"
  exit $status
  ;;
esac
