#!/bin/sh
# Fuzzing the parsers of user input with libFuzzer (clang -fsanitize=fuzzer,address,undefined): the
# experiment file and -o overrides (src/config.c), IDX files (src/prep/idx.c), the WordPiece tokenizer
# and vocabulary loader (src/prep/wordpiece.c) and the text corpus reader (src/prep/corpus.c).
#
# Builds the targets with clang (HS_FUZZ_CC, else clang-14, else clang; fails naming Debian's clang-14
# and libclang-rt-14-dev if none can build a fuzzer), replays every input under tests/fuzz/regressions/<target>/ (inputs that once crashed), then
# fuzzes each target for HS_FUZZ_SECONDS (15) starting from tests/fuzz/corpus/<target>/. A crash,
# sanitizer report, leak, timeout (5 s per input) or out-of-memory (2 GB) fails the test, and the input
# is kept in $top_builddir/tests/fuzz/artifacts/. A user error (hs_die*) is a correct answer, not a
# crash: the targets link tests/fuzz/check_stub.c instead of src/util/check.c.
#
# Environment (from tests/fuzz.am): HS_FUZZ_CPPFLAGS, HS_FUZZ_LIBS_<TARGET>, HS_FUZZ_MPICC.
# By hand: HS_FUZZ_SECONDS=300 HS_FUZZ_TARGETS="config idx" make check TESTS=tests/fuzz/test_fuzz.sh
. "${top_srcdir:-.}/tests/lib.sh"
SRC=$top_srcdir
FUZZ=$SRC/tests/fuzz
BIN=$top_builddir/tests/fuzz/bin
ART=$top_builddir/tests/fuzz/artifacts
SECONDS_EACH=${HS_FUZZ_SECONDS:-15}
TARGETS=${HS_FUZZ_TARGETS:-config idx wordpiece corpus}

# ---- a clang that can build libFuzzer targets -------------------------------------------------------
CC=${HS_FUZZ_CC:-}
if [ -z "$CC" ]; then
  for c in clang-14 clang; do command -v "$c" >/dev/null 2>&1 && { CC=$c; break; }; done
fi
[ -n "$CC" ] || fail "no clang found: install Debian's clang-14 and libclang-rt-14-dev (or set HS_FUZZ_CC)"
SAN="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' > probe.c
"$CC" $SAN probe.c -o probe > probe.log 2>&1 ||
  fail "$CC cannot build a libFuzzer target: install Debian's libclang-rt-14-dev. $(head -3 probe.log)"

# mpi.h: src/prep/idx.c includes data/mnist.h, which includes it (nothing of MPI is linked)
MPI_INC=$(${HS_FUZZ_MPICC:-mpicc} --showme:compile 2>/dev/null) ||
  MPI_INC=$(${HS_FUZZ_MPICC:-mpicc} -show 2>/dev/null | tr ' ' '\n' | grep '^-I' | tr '\n' ' ') || MPI_INC=
CFLAGS="-std=c11 -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Werror -D_GNU_SOURCE $SAN"
CPPFLAGS="-I$SRC/src -I$FUZZ -I$top_builddir ${HS_FUZZ_CPPFLAGS:-} $MPI_INC -DHS_FUZZ_VOCAB=\"$FUZZ/vocab.txt\""

sources() { # the library sources each target links (besides the stub)
  case $1 in
    config) echo "src/config.c src/config_schema.c src/util/alloc.c" ;;
    idx) echo "src/prep/idx.c src/util/alloc.c" ;;
    wordpiece) echo "src/prep/wordpiece.c src/util/alloc.c" ;;
    corpus) echo "src/prep/corpus.c src/prep/wordpiece.c src/util/alloc.c" ;;
  esac
}
libs() {
  case $1 in
    config) echo "${HS_FUZZ_LIBS_CONFIG:--lconfig}" ;;
    idx) echo "${HS_FUZZ_LIBS_IDX:--lz}" ;;
    wordpiece | corpus) echo "${HS_FUZZ_LIBS_WORDPIECE:--lutf8proc}" ;;
  esac
}

mkdir -p "$BIN" "$ART" || fail "cannot create $BIN and $ART"
for t in $TARGETS; do
  [ -n "$(sources "$t")" ] || fail "unknown fuzz target '$t' (known: config idx wordpiece corpus)"
  files="$FUZZ/fuzz_$t.c $FUZZ/check_stub.c $FUZZ/fuzz_file.c"
  for s in $(sources "$t"); do files="$files $SRC/$s"; done
  # rebuild only when a source or header is newer than the target
  stale=1
  if [ -x "$BIN/fuzz_$t" ]; then
    stale=0
    for f in $files $FUZZ/*.h $SRC/src/*.h $SRC/src/util/*.h $SRC/src/data/*.h $SRC/src/prep/*.h; do
      [ "$f" -nt "$BIN/fuzz_$t" ] && { stale=1; break; }
    done
  fi
  if [ $stale = 1 ]; then
    echo "building fuzz_$t with $CC"
    # shellcheck disable=SC2086
    "$CC" $CFLAGS $CPPFLAGS $files $(libs "$t") -o "$BIN/fuzz_$t" > "build-$t.log" 2>&1 ||
      { cat "build-$t.log"; fail "cannot build fuzz_$t (see the compiler's messages above)"; }
  fi
done

# ---- run: regressions first, then fuzzing ------------------------------------------------------------
OPTS="-timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=2048"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
# lsan.supp names functions (libconfig's scanner): a leak's frames must be symbolized for them to match,
# so llvm-symbolizer must be found (Debian's llvm-14 has it in /usr/lib/llvm-14/bin, not on PATH).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in "$(command -v llvm-symbolizer-14)" "$(command -v llvm-symbolizer)" /usr/lib/llvm-14/bin/llvm-symbolizer; do
    [ -n "$s" ] && [ -x "$s" ] && { ASAN_SYMBOLIZER_PATH=$s; break; }
  done
fi
[ -x "${ASAN_SYMBOLIZER_PATH:-}" ] ||
  fail "no llvm-symbolizer (ASAN_SYMBOLIZER_PATH='${ASAN_SYMBOLIZER_PATH:-}'): install Debian's llvm-14; without it leak reports are bare addresses and tests/fuzz/lsan.supp cannot match"
export ASAN_SYMBOLIZER_PATH
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$FUZZ/lsan.supp:print_suppressions=0:symbolize=1"
report() { # report TARGET LOG WHAT
  tail -60 "$2"
  fail "fuzz_$1: $3 (the input is in $ART/; replay it with $BIN/fuzz_$1 FILE; once fixed, add it to tests/fuzz/regressions/$1/)"
}
for t in $TARGETS; do
  dict=
  [ -f "$FUZZ/$t.dict" ] && dict="-dict=$FUZZ/$t.dict"
  n=0
  if [ -d "$FUZZ/regressions/$t" ]; then
    set --
    for f in "$FUZZ/regressions/$t"/*; do [ -f "$f" ] && set -- "$@" "$f"; done
    n=$#
    if [ $n -gt 0 ]; then
      "$BIN/fuzz_$t" $OPTS -artifact_prefix="$ART/$t-regression-" "$@" > "regress-$t.log" 2>&1 ||
        report "$t" "regress-$t.log" "a regression input crashes again"
    fi
  fi
  mkdir -p "new-$t"
  # shellcheck disable=SC2086
  "$BIN/fuzz_$t" $OPTS $dict -max_total_time="$SECONDS_EACH" -print_final_stats=1 -artifact_prefix="$ART/$t-" \
    "new-$t" "$FUZZ/corpus/$t" > "fuzz-$t.log" 2>&1 || report "$t" "fuzz-$t.log" "the fuzzer found a crash"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "fuzz-$t.log")
  cov=$(grep -o 'cov: [0-9]*' "fuzz-$t.log" | tail -1)
  echo "ok: fuzz_$t: $n regression input(s) replayed; ${runs:-?} inputs in ${SECONDS_EACH} s, $cov, no crash"
done
pass
