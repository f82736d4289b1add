/* The fuzz targets' replacement for src/util/check.c, linked instead of it (no MPI, no HDF5); it
 * defines every function of util/check.h but hs_check_set_error_comm (MPI-typed, unused by the
 * parsers).
 *
 * A user error (hs_die, hs_die_all, hs_die_agreed) is the parsers' correct answer to a bad input, so
 * it must not count as a crash: the message is kept in hs_fuzz_last_error and control returns to the
 * fuzz entry point with longjmp (see fuzz_common.h). The library releases what it holds before it
 * dies, so LeakSanitizer still catches memory lost on the error paths. An internal failure
 * (hs_fatal_at: a broken invariant, a failed library call) is a bug and aborts, which the fuzzer
 * reports as a crash; so does a user error raised outside a guarded call. */
#include "fuzz_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

jmp_buf *hs_fuzz_env;
char hs_fuzz_last_error[4096];

static void (*g_on_fatal)(void *);
static void *g_on_fatal_arg;

void hs_check_set_rank(int rank, int size) {
    (void)rank;
    (void)size;
}

void hs_check_mpi_thread(int delta) { (void)delta; }

void hs_check_on_fatal(void (*fn)(void *), void *arg) {
    g_on_fatal = fn;
    g_on_fatal_arg = arg;
}

_Noreturn void hs_abort(int code) {
    fprintf(stderr, "hetseq (fuzz): hs_abort(%d) called: an internal failure\n", code);
    abort();
}

_Noreturn static void user_error(const char *fmt, va_list ap) {
    vsnprintf(hs_fuzz_last_error, sizeof hs_fuzz_last_error, fmt, ap);
    if (g_on_fatal) { /* as src/util/check.c: the registered clean-up runs before the end */
        void (*fn)(void *) = g_on_fatal;
        g_on_fatal = NULL;
        fn(g_on_fatal_arg);
    }
    if (getenv("HS_FUZZ_VERBOSE")) fprintf(stderr, "hetseq (fuzz): user error: %s\n", hs_fuzz_last_error);
    if (!hs_fuzz_env) {
        fprintf(stderr, "hetseq (fuzz): user error outside a guarded call: %s\n", hs_fuzz_last_error);
        abort();
    }
    jmp_buf *env = hs_fuzz_env;
    hs_fuzz_env = NULL;
    longjmp(*env, 1);
}

_Noreturn void hs_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    user_error(fmt, ap);
}

/* Another exit status than a user error's (HS_EXIT_USER) means an internal failure: a crash. */
_Noreturn void hs_die_code(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (code != HS_EXIT_USER) {
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\nhetseq (fuzz): hs_die_code(%d): not a user error\n", code);
        abort();
    }
    user_error(fmt, ap);
}

_Noreturn void hs_die_all(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    user_error(fmt, ap);
}

_Noreturn void hs_die_agreed(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    user_error(fmt, ap);
}

_Noreturn void hs_fatal_at(const char *file, int line, const char *call, const char *hint, const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hetseq (fuzz): internal error at %s:%d: %s%s%s (hint: %s)\n", file, line, call ? call : "",
            call ? " failed: " : "", msg, hint ? hint : "-");
    abort();
}

_Noreturn void hs_mpi_failed(const char *file, int line, const char *call, const char *hint, int rc) {
    hs_fatal_at(file, line, call, hint, "MPI error %d (the fuzz targets run no MPI)", rc);
}

int64_t hs_h5_check(int64_t value, const char *file, int line, const char *call, const char *hint) {
    if (value >= 0) return value;
    hs_fatal_at(file, line, call, hint, "HDF5 call returned %lld (the fuzz targets run no HDF5)", (long long)value);
}

_Noreturn void hs_errno_failed(const char *file, int line, const char *call, const char *hint, int rc) {
    hs_fatal_at(file, line, call, hint, "%s", strerror(rc));
}
