#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for hetseq and then either runs the main job or the tests.
#   bash tools/quickstart.sh demo   install packages, build, make a WordPiece vocabulary and BERT shards
#                                   from the English text of Debian's `fortunes`, pretrain a tiny BERT
#                                   (2 MPI ranks, CPU) with validation, plot the losses, print where
#                                   the checkpoint, metrics and plot are
#   bash tools/quickstart.sh mnist  the same for HetSeq's MNIST CNN on Fashion-MNIST
#   bash tools/quickstart.sh txl    a small Transformer-XL language model on the fortunes' text turned
#                                   into WikiText format: trains on 2 ranks, reports validation
#                                   perplexity, evaluates the test split with throughput and latency
#                                   percentiles, plots the losses
#   bash tools/quickstart.sh test   install every package the build and the tests use (a minimal Debian
#                                   12 root included) and tokenizers/transformers from PyPI (build/pyenv),
#                                   build (with the real CUDA backend where nvcc
#                                   exists), run `make check` (the CUDA backend's tests on the emulated
#                                   device included), valgrind memcheck of a
#                                   training run (build/), the unit, MPI and end-to-end tests under
#                                   ASan+UBSan (build-asan/) and the threaded tests under ThreadSanitizer
#                                   (build-tsan/); ends with "N passed, N failed, N skipped" over all
set -euo pipefail
mode=${1:-demo}
case "$mode" in demo|mnist|txl|test) ;; *) echo "usage: bash tools/quickstart.sh demo|mnist|txl|test" >&2; exit 2 ;; esac
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)

PACKAGES="build-essential autoconf automake libtool pkg-config libopenmpi-dev openmpi-bin libhdf5-openmpi-dev
 hdf5-tools libconfig-dev libjson-c-dev libutf8proc-dev libopenblas-openmp-dev zlib1g-dev libcmocka-dev
 libdnnl-dev dataset-fashion-mnist"
# What the tests run besides the build (a minimal Debian 12, debootstrap --variant=minbase, has none of
# these): python3 with torch/h5py/numpy and a venv for PyPI's tokenizers (ca-certificates for pip's
# HTTPS); fortunes (corpus); valgrind; clang-14 + libclang-rt-14-dev (libFuzzer) and llvm-14 (its
# llvm-symbolizer: LeakSanitizer's suppressions name functions); Boost.Context (the emulated CUDA
# device's fibers); slurm-wlm + its plugins (pmix) + munge; lmod; procps (pkill, ps), iproute2 (ip)
# and util-linux (unshare) for the stop-signal and multi-host tests; hostname; git (the op-recipe test
# applies docs/gpu.md's recipe to a scratch copy and counts the files it changed).
[ "$mode" = test ] && PACKAGES="$PACKAGES python3 python3-torch python3-h5py python3-numpy python3-venv ca-certificates
 fortunes valgrind clang-14 libclang-rt-14-dev llvm-14 libboost-context-dev slurm-wlm slurm-wlm-basic-plugins munge lmod
 procps iproute2 util-linux hostname git"
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
# the system's torch, h5py and numpy. It must succeed: without them the cross-check fails (naming what
# to install), and a failed install here is counted as a failed step.
python_env() {
  local venv=$top/build/pyenv
  "$venv/bin/python" -c 'import tokenizers, transformers' >/dev/null 2>&1 && return 0
  mkdir -p build
  { /usr/bin/python3 -m venv --system-site-packages "$venv" &&
    "$venv/bin/pip" install -q --disable-pip-version-check tokenizers==0.15.2 transformers==4.38.2 &&
    "$venv/bin/python" -c 'import tokenizers, transformers'; } || {
    echo "== could not install tokenizers and transformers from PyPI into $venv (network? ca-certificates?):" \
      "the tokenizer cross-checks will fail" >&2
    return 1
  }
}

# mpirun refuses to run as root unless told it is intended (containers, CI machines).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The sanitizer and fuzz runs symbolize their stacks with llvm-14's llvm-symbolizer: without it a leak's
# frames are bare addresses and LeakSanitizer's suppressions, which name functions (tests/fuzz/lsan.supp;
# test_fuzz.sh adds LSAN_OPTIONS=suppressions=...:symbolize=1 itself), never match.
if [ "$mode" = test ] && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
  export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}symbolize=1"
fi

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
txl)
  build build
  # English text of Debian's fortunes, one file per collection, as ordinary text; `prep lm --raw`
  # tokenises it into WikiText format (kept in data/txl_demo/tokens/ to look at) and writes lm.h5.
  [ -f data/txl_demo/lm.h5 ] || mpirun -np 2 --oversubscribe build/hetseq prep lm --raw /usr/share/games/fortunes \
      --out data/txl_demo --write-tokens data/txl_demo/tokens --min-freq 3 --seed 12345
  mpirun -np 2 --oversubscribe build/hetseq train conf/txl_demo.cfg
  mpirun -np 2 --oversubscribe build/hetseq eval conf/txl_demo.cfg --checkpoint checkpoints/txl_demo/checkpoint_last.h5 \
      --split test --report checkpoints/txl_demo/eval_test.json
  tools/plot_metrics.sh checkpoints/txl_demo/metrics.jsonl checkpoints/txl_demo/loss.png 2>/dev/null || true
  echo "== checkpoints: $top/checkpoints/txl_demo/   metrics (JSON lines): $top/checkpoints/txl_demo/metrics.jsonl"
  echo "== test-split report (perplexity, tokens/s, latency percentiles): $top/checkpoints/txl_demo/eval_test.json"
  echo "== loss plot: $top/checkpoints/txl_demo/loss.png"
  ;;
test)
  status=0
  python_env || status=1
  pyenv=(); [ -x build/pyenv/bin/python ] && pyenv=(PYTHON_TORCH="$top/build/pyenv/bin/python")
  # Every summary this run counts; one left over from an earlier run must not count again.
  logs="build/test-suite.log build/test-suite-valgrind.log build-asan/test-suite.log build-tsan/test-suite.log"
  rm -f $logs
  step() { # name command...: run one step, say how long it took; a failure is counted, the run goes on
    local name=$1 t0=$SECONDS rc=0; shift
    echo "== $name"
    "$@" || rc=$?
    echo "== $name: $((SECONDS - t0)) s$([ $rc -eq 0 ] || echo ", FAILED (exit $rc)")"
    [ $rc -eq 0 ] || status=1
    return $rc
  }
  # The real CUDA backend is built (nvcc, -Werror, sm_75..sm_90 + PTX) wherever a CUDA toolkit is
  # installed; its GPU tests then skip unless a GPU is visible. The emulated CUDA device (host compiler
  # only) runs the CUDA backend's tests everywhere.
  cuda=()
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    cuda=(--with-cuda); echo "== CUDA toolkit found: building the real CUDA backend too (nvcc)"
  else
    echo "== no CUDA toolkit (nvcc): building without the real CUDA backend; the emulated CUDA device runs its tests"
  fi
  # A build that fails runs none of its tests: its summary is missing and counts as a failure below.
  # --enable-cuda-emulation: without Boost.Context configure stops and names the package, rather than
  # leaving the emulated device's tests out of the run.
  if step "build build/" build build --enable-cuda-emulation "${cuda[@]}" "${pyenv[@]}"; then
    step "make check (build/)" make -C build -j"$jobs" check || true
    # valgrind memcheck of 20 training updates on 2 ranks, in the same build (tests/sanitizers.am).
    step "valgrind (build/: make check-valgrind)" make -C build check-valgrind || true
  fi
  # ASan + UBSan: the CPU unit and gradient tests and the MPI, end-to-end and bad-input tests.
  if step "build build-asan/" build build-asan --enable-sanitizers; then
    step "ASan+UBSan (build-asan/: make check-asan)" make -C build-asan -j"$jobs" check-asan || true
  fi
  # ThreadSanitizer: the prefetch unit test and 2-rank training with every thread running.
  if step "build build-tsan/" build build-tsan --enable-sanitizers=thread; then
    step "ThreadSanitizer (build-tsan/: make check-tsan)" make -C build-tsan -j"$jobs" check-tsan || true
  fi
  pass=0 fail=0 skip=0
  for log in $logs; do
    [ -f "$log" ] || { echo "== missing $log (its step did not run its tests)"; fail=$((fail + 1)); continue; }
    p=$(sed -n 's/^# PASS: *//p' "$log" | head -1); f=$(sed -n 's/^# FAIL: *//p' "$log" | head -1)
    e=$(sed -n 's/^# ERROR: *//p' "$log" | head -1); x=$(sed -n 's/^# XPASS: *//p' "$log" | head -1)
    s=$(sed -n 's/^# SKIP: *//p' "$log" | head -1)
    echo "== $log: ${p:-0} passed, $((${f:-0} + ${e:-0} + ${x:-0})) failed, ${s:-0} skipped"
    pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0} + ${e:-0} + ${x:-0})); skip=$((skip + ${s:-0}))
  done
  [ $fail -eq 0 ] || status=1
  echo "$pass passed, $fail failed, $skip skipped"
  exit $status
  ;;
esac
