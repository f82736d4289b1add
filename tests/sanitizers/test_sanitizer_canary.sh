# The sanitizer runs can fail: in this build's sanitizer (HS_SANITIZER from configure), a deliberate
# error in one rank of a 2-rank mpirun job (tests/sanitizers/san_canary.c) must end the job with a
# non-zero exit and a report, a clean job must end with 0 and no report, and tests/sanitizers/
# san_check.sh must fail a test that hides the job's exit status (as the bad-input tests do, which
# expect a non-zero exit) because a report was written.
. "$top_srcdir/tests/lib.sh"
CANARY="$top_builddir/tests/sanitizers/san_canary"
WRAP="$top_srcdir/tests/sanitizers/san_check.sh"
[ -x "$CANARY" ] || fail "$CANARY was not built"
case "${HS_SANITIZER:-no}" in
address) modes="heap ub" ;;
thread) modes="race" ;;
*) skip "not a sanitizer build (HS_SANITIZER=${HS_SANITIZER:-no})" ;;
esac

# Reports of the deliberate errors go here, not to the directory of the san_check.sh running this test.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$WORK/rep/asan"
export TSAN_OPTIONS="${TSAN_OPTIONS:-}:log_path=$WORK/rep/tsan"
export HS_SAN_REPORTS="$WORK/rep" # UBSan's reports (tests/sanitizers/ubsan_hook.c)

mkdir rep
mpi 2 "$CANARY" ok > ok.log 2>&1 || { cat ok.log; fail "the clean canary job failed"; }
grep -q "ended normally" ok.log || { cat ok.log; fail "the clean canary job printed nothing"; }
[ -z "$(ls rep)" ] || { cat rep/*; fail "the clean canary job wrote a sanitizer report"; }
echo "ok: a clean 2-rank job ends with 0 and no report"

for mode in $modes; do
  case $mode in
  heap) pattern="ERROR: AddressSanitizer: heap-buffer-overflow" ;;
  ub) pattern="runtime error: signed integer overflow" ;;
  race) pattern="WARNING: ThreadSanitizer: data race" ;;
  esac
  rm -rf rep && mkdir rep
  mpi 2 "$CANARY" "$mode" > "$mode.log" 2>&1 && { cat "$mode.log"; fail "canary '$mode': mpirun exited 0"; }
  rc=$?
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$mode.log"; fail "canary '$mode': the job hung after the report"; }
  cat rep/* 2>/dev/null | grep -q -i -- "$pattern" || { cat "$mode.log" rep/* 2>/dev/null; fail "canary '$mode': no report /$pattern/"; }
  echo "ok: canary '$mode': mpirun exited $rc, report: $(cat rep/* | grep -m1 -i -- "$pattern" | sed 's/^==[0-9]*==//')"

  # The harness: a test that ignores the job's status must still fail when a report was written.
  sh "$WRAP" sh -c "'$MPIRUN' --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader '$CANARY' $mode; exit 0" \
    > "wrap-$mode.log" 2>&1 && { cat "wrap-$mode.log"; fail "canary '$mode': san_check.sh passed a test with a report"; }
  grep -q -i -- "$pattern" "wrap-$mode.log" || { cat "wrap-$mode.log"; fail "canary '$mode': san_check.sh did not show the report"; }
  echo "ok: canary '$mode': san_check.sh fails a test that exits 0 after a report"
done
pass
