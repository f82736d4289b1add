#!/bin/sh
# san_check.sh CMD...: run one test (a cmocka binary, or `sh test.sh`) of a sanitizer build so that any
# sanitizer report fails it. make check-asan / check-tsan (tests/sanitizers.am) use it as LOG_COMPILER
# and SH_LOG_COMPILER.
#
# Every process the test starts (hetseq on each MPI rank, under mpirun, under `timeout`) writes its
# reports to files in a fresh directory (ASan and TSan: log_path instead of stderr; UBSan: stderr and,
# through ubsan_hook.so, a file there too). A test's own checks cannot then swallow a report: a bad-input test that expects a non-zero exit and a message would otherwise pass
# when a rank dies of a heap overflow after printing the message. After the test, any report file
# fails it (exit 1), and the reports are copied into the test's log.
#
# HS_SANITIZER (address, thread; from configure) picks the options. The defaults can be extended or
# overridden with the usual ASAN_OPTIONS, UBSAN_OPTIONS, TSAN_OPTIONS; log_path is always ours.
# Exit codes: the test's own, or 1 if any report was written (a skipped test, 77, with a report fails).
here=$(cd "$(dirname "$0")" && pwd)
reports=$(mktemp -d "${TMPDIR:-/tmp}/hetseq-san.XXXXXX") || exit 99
case "${HS_SANITIZER:-no}" in
address)
  # detect_leaks=0: Open MPI, PMIx and HDF5 keep allocations until exit by design, and GCC 12's
  # LeakSanitizer dies on hetseq's threads' dynamic TLS with glibc 2.36 ("Tracer caught signal 11").
  # Leaks are valgrind's job (make check-valgrind).
  # UBSan reports: GCC's separate libubsan ignores log_path (they go to stderr); ubsan_hook.so, preloaded
  # into every process, writes each one to the same directory (verify_asan_link_order=0 lets it come
  # before libasan; it defines no function ASan intercepts).
  hook=${top_builddir:-.}/tests/sanitizers/ubsan_hook.so
  [ -f "$hook" ] || { echo "san_check.sh: $hook is missing (make check-asan builds it)" >&2; rm -rf "$reports"; exit 99; }
  LD_PRELOAD="$(cd "$(dirname "$hook")" && pwd)/ubsan_hook.so${LD_PRELOAD:+:$LD_PRELOAD}"
  ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}:log_path=$reports/asan"
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  export LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS
  ;;
thread)
  # halt_on_error=1: the first race ends the process (exit 66, which mpirun passes on as a failure).
  # tsan.supp lists what is suppressed and why (no hetseq function may appear in it).
  # ignore_noninstrumented_modules=1: Open MPI is not instrumented, and whichever thread drives its
  # progress (the prefetch thread in a collective read, the stall inspector probing) copies a message
  # into the main thread's receive buffer (the gradient buckets) with memcpy; the completion that orders
  # it before the main thread's reads is invisible to TSan. Each 8-byte word of a 5 MB gradient then
  # races, and TSan scans its list of racy addresses once per word before the suppression applies:
  # quadratic, so one rank spent minutes there (gdb: ReportRace -> FindRacyAddress under post_gather)
  # and the job hung until the stall inspector or the hang guard ended it.
  TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:history_size=4:ignore_noninstrumented_modules=1:suppressions=$here/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}:log_path=$reports/tsan"
  export TSAN_OPTIONS
  # libgomp is not built with -fsanitize=thread: its barriers are invisible to TSan, and every
  # OpenMP region would be reported as a race. One OpenMP thread means no libgomp worker threads.
  OMP_NUM_THREADS=1; export OMP_NUM_THREADS
  ;;
*)
  echo "san_check.sh: HS_SANITIZER=${HS_SANITIZER:-} is not a sanitizer build (configure --enable-sanitizers[=thread])" >&2
  rm -rf "$reports"; exit 99 ;;
esac
HS_SAN_REPORTS=$reports; export HS_SAN_REPORTS

"$@"
rc=$?

found=0
for f in "$reports"/*; do
  [ -f "$f" ] || continue
  found=1
  echo "==== sanitizer report $(basename "$f") (from a process of this test):"
  cat "$f"
done
rm -rf "$reports"
if [ $found = 1 ]; then
  echo "FAIL: a sanitizer reported an error (above); the test itself exited $rc"
  exit 1
fi
exit $rc
