# A user on a CPU that OpenBLAS misdetects (it runs its SSE3 Prescott kernels on a CPU with AVX2 or
# AVX-512) starts hetseq without setting anything: hetseq re-executes itself with the right
# OPENBLAS_CORETYPE, says so once, and trains to the same losses. The misdetection is forced on any CPU
# (OPENBLAS_CORETYPE=Prescott with the test hook that makes hetseq take it for OpenBLAS's own choice), so
# the test does not depend on which kernels this machine's OpenBLAS would pick. Also: a user's own
# OPENBLAS_CORETYPE wins, HETSEQ_OPENBLAS_AUTOFIX=0 turns the switch off, kernels that do not run
# (SIGILL, simulated) or are not faster keep the detected ones with the reason, no exec loop. Whether the
# candidate kernels are faster is decided by a timing; the test fixes its outcome with the hooks
# "faster" / "slower" (10x), so a loaded machine cannot flip it (the real gain is docs/performance.md's).
. "$top_srcdir/tests/lib.sh"
export OMP_NUM_THREADS=1
unset HETSEQ_OPENBLAS_AUTOFIX HETSEQ_OPENBLAS_AUTOFIXED HETSEQ_OPENBLAS_AUTOFIX_TEST
"$HETSEQ" --version > /dev/null 2>&1 || fail "hetseq --version failed"
NOTE='OpenBLAS misdetected this CPU as Prescott: using its'

# the kernels hetseq must pick, from the CPU's features (as src/train/blas_autofix.c reads them)
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { case "$flags" in *" $1 "*) return 0 ;; esac; return 1; }
want=
if has avx2 && has fma; then
  want=Haswell
  has avx512f && has avx512bw && has avx512vl && has avx512dq && want=SkylakeX
fi
# train NAME ENV...: 6 updates of the tests' MNIST experiment on 1 rank, with ENV set, log in NAME.log
DATA="$top_builddir/tests/fashion-mnist-small.h5"
train() {
  local name=$1; shift
  env "$@" timeout -k 5 300 "$HETSEQ" train "$top_srcdir/tests/e2e/small.cfg" -o data.path=\"$DATA\" \
    -o training.max_update=6 -o checkpoint.save_dir=\"ck_$name\" -o log.metrics_file=\"$name.jsonl\" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "$name: training failed"; }
}
blas_line() { grep 'BLAS: OpenBLAS' "$1.log"; }
losses() { sed -n 's/.*"type": "train".*"loss": \([0-9.eE+-]*\),.*/\1/p' "ck_$1/$1.jsonl"; }
# same_losses A B TOL: the train records' losses agree within TOL (absolute, bits)
same_losses() {
  local a b
  a=$(losses "$1"); b=$(losses "$2")
  [ -n "$a" ] && [ "$(echo "$a" | wc -l)" = "$(echo "$b" | wc -l)" ] || fail "$1 / $2: no or unequal loss records"
  paste <(echo "$a") <(echo "$b") | awk -v tol="$3" '{ d = $1 - $2; if (d < 0) d = -d; if (d > tol) exit 1 }' ||
    fail "losses differ by more than $3 between $1 and $2: $(echo $a) / $(echo $b)"
}

# A user's own OPENBLAS_CORETYPE is kept on any CPU: no re-execution, Prescott in the start-up line.
train user OPENBLAS_CORETYPE=Prescott
grep -q 'a CBLAS other than OpenBLAS' user.log && skip "hetseq is linked against a CBLAS other than OpenBLAS: nothing to switch"
blas_line user | grep -q 'OPENBLAS_CORETYPE=Prescott' || { cat user.log; fail "a user's OPENBLAS_CORETYPE was not kept"; }
grep -q "$NOTE" user.log && { cat user.log; fail "hetseq switched kernels over a user's OPENBLAS_CORETYPE"; }

if [ -z "$want" ]; then
  # nothing to gain here: with the misdetection forced hetseq stays, silently
  train forced OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected
  grep -q "$NOTE" forced.log && { cat forced.log; fail "switched kernels on a CPU without AVX2 and FMA"; }
  echo "SKIP (part): this CPU has neither AVX2 nor FMA, so no kernels are faster than Prescott's: the re-execution," \
    "its message, HETSEQ_OPENBLAS_AUTOFIX=0 and the probes' reasons are not exercised here" >&2
  pass "a user's OPENBLAS_CORETYPE is kept; nothing switched on a CPU without AVX2/FMA"
fi
[ "$want" = SkylakeX ] && user_warn='has AVX-512' || user_warn='has AVX2 and FMA'
grep -q "OPENBLAS_CORETYPE=Prescott in the environment (kept as set).*$user_warn.*OPENBLAS_CORETYPE=$want" user.log ||
  { cat user.log; fail "no warning that the user's OPENBLAS_CORETYPE is slower than $want"; }

# The misdetected case: re-executed with OPENBLAS_CORETYPE=$want, said once, the same losses as a run
# started with that setting (the same kernels: equal up to rounding noise of nothing).
train right OPENBLAS_CORETYPE=$want
train fixed OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected,faster
[ "$(grep -c "$NOTE $want kernels" fixed.log)" = 1 ] || { cat fixed.log; fail "the switch was not said exactly once"; }
blas_line fixed | grep -q "OPENBLAS_CORETYPE=$want" || { cat fixed.log; fail "not re-executed with OPENBLAS_CORETYPE=$want"; }
grep -q 'warning' fixed.log && { cat fixed.log; fail "a warning although the kernels were switched"; }
same_losses right fixed 1e-6

# HETSEQ_OPENBLAS_AUTOFIX=0: stays on Prescott with the old warning; losses agree within the rounding
# differences of other kernels (another summation order in every GEMM).
train off OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected HETSEQ_OPENBLAS_AUTOFIX=0
blas_line off | grep -q 'OPENBLAS_CORETYPE=Prescott' || { cat off.log; fail "HETSEQ_OPENBLAS_AUTOFIX=0 did not keep Prescott"; }
grep -q "HETSEQ_OPENBLAS_AUTOFIX=0 keeps hetseq from switching. Set OPENBLAS_CORETYPE=$want" off.log ||
  { cat off.log; fail "HETSEQ_OPENBLAS_AUTOFIX=0: no warning naming the setting"; }
same_losses right off 1e-3

# --help and --version compute nothing: they print at once, with no probe and no note.
for ask in --version --help; do
  out=$(OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected,faster "$HETSEQ" $ask 2>&1) ||
    fail "hetseq $ask failed: $out"
  printf '%s\n' "$out" | grep -q "$NOTE\|OpenBLAS" && fail "hetseq $ask probed OpenBLAS's kernels: $out"
done
out=$(OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected,faster "$HETSEQ" --version 2>/dev/null)
printf '%s\n' "$out" | grep -qx 'hetseq [0-9][0-9.a-z-]*' || fail "hetseq --version printed: $out"

# 2 ranks (one node) training: the note once, not once per rank; hetseq prep re-executes too.
out=$(OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected,faster mpi 2 "$HETSEQ" train \
  "$top_srcdir/tests/e2e/small.cfg" -o data.path=\"$DATA\" -o training.max_update=1 -o checkpoint.save_dir=\"ck_two\" \
  -o log.metrics_file=\"two.jsonl\" 2>&1) || fail "2 ranks: hetseq train failed: $out"
[ "$(printf '%s\n' "$out" | grep -c "$NOTE $want kernels")" = 1 ] || fail "2 ranks: the note is not printed once: $out"
OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected,faster "$HETSEQ" prep mnist \
  --in "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" --limit-train 64 --limit-test 8 --out p.h5 > prep.log 2>&1 ||
  { cat prep.log; fail "hetseq prep failed"; }
grep -q "$NOTE $want kernels" prep.log || { cat prep.log; fail "hetseq prep did not switch kernels"; }

# Kernels that do not run here (their probe dies of SIGILL, as on a CPU without the instructions) or
# are not faster: hetseq stays on Prescott and says why; training runs.
train sigill OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected,sigill
grep -q "stays on the Prescott kernels: its $want kernels did not run here: its probe was killed by Illegal instruction" \
  sigill.log || { cat sigill.log; fail "SIGILL: no reason given"; }
blas_line sigill | grep -q 'OPENBLAS_CORETYPE=Prescott' || { cat sigill.log; fail "SIGILL: kernels switched anyway"; }
train slower OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected,slower
grep -q "stays on the Prescott kernels: its $want kernels were not faster here" slower.log ||
  { cat slower.log; fail "not faster: no reason given"; }
blas_line slower | grep -q 'OPENBLAS_CORETYPE=Prescott' || { cat slower.log; fail "not faster: kernels switched anyway"; }

# No exec loop: an image that finds the marker of a re-execution never re-executes again.
out=$(HETSEQ_OPENBLAS_AUTOFIXED="Prescott $want 1 2" OPENBLAS_CORETYPE=Prescott HETSEQ_OPENBLAS_AUTOFIX_TEST=detected \
  timeout 30 "$HETSEQ" --version 2>&1) || fail "with the re-execution marker set: $out"
printf '%s\n' "$out" | grep -q "re-executed itself with OPENBLAS_CORETYPE=$want, but OpenBLAS runs its Prescott kernels" ||
  fail "with the re-execution marker set: $out"
pass
