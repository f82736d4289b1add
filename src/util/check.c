#include <mpi.h>

#include "util/check.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_rank = 0, g_size = 1;
static MPI_Comm g_error_comm = MPI_COMM_NULL;
static atomic_int g_dying = 0;        /* first thread to die owns the exit; later ones wait for it */
static atomic_int g_other_mpi_threads; /* threads besides the caller that may be inside MPI */

static pthread_t g_main_thread;
static int g_main_thread_set = 0;

void hs_check_set_rank(int rank, int size) {
    g_rank = rank;
    g_size = size;
    g_main_thread = pthread_self();
    g_main_thread_set = 1;
}
void hs_check_set_error_comm(MPI_Comm comm) { g_error_comm = comm; }
void hs_check_mpi_thread(int delta) { atomic_fetch_add(&g_other_mpi_threads, delta); }

static void (*g_cleanup)(void *);
static void *g_cleanup_arg;

void hs_check_on_fatal(void (*fn)(void *), void *arg) {
    g_cleanup = fn;
    g_cleanup_arg = arg;
}

static int mpi_running(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

_Noreturn void hs_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    if (mpi_running() && g_size > 1) {
        /* mpirun forwards each rank's stderr asynchronously and MPI_Abort kills the ranks at once:
         * give the message a moment to reach the user's terminal first. */
        usleep(300 * 1000);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    /* _exit, not exit: after a failed HDF5 write, HDF5's own exit-time cleanup can crash and turn a
     * clear error into a segfault status. */
    _exit(code);
}

/* Formats "hetseq [rank r]: <body>\n[  hint: ...\n]" into one buffer and writes it with one call, so
 * the lines of several ranks never interleave mid-line. with_rank = 0 drops the rank prefix (an error
 * every rank saw). */
static void emit(int with_rank, const char *head, const char *hint, const char *fmt, va_list ap) {
    char msg[4096];
    int n = with_rank && g_size > 1 ? snprintf(msg, sizeof msg, "hetseq [rank %d]: %s", g_rank, head)
                                    : snprintf(msg, sizeof msg, "hetseq: %s", head);
    if (n < 0 || n >= (int)sizeof msg) n = 0;
    int m = vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    n = m < 0 ? n : (n + m >= (int)sizeof msg ? (int)sizeof msg - 1 : n + m);
    if (hint && *hint && n < (int)sizeof msg - 1) {
        m = snprintf(msg + n, sizeof msg - (size_t)n, "\n  hint: %s", hint);
        n = m < 0 ? n : (n + m >= (int)sizeof msg ? (int)sizeof msg - 1 : n + m);
    }
    fflush(stdout);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
}

/* How long a dying rank waits to learn whether every rank is dying too (an error every rank detects:
 * the config, a shared data file) or only itself (a rank-local error). Ranks that detect the same error
 * do so within milliseconds of each other. */
#define AGREE_SECONDS 2.0

/* 1 if every rank entered a fatal error within AGREE_SECONDS (a barrier on a communicator used for
 * nothing else completed), 0 if some rank did not (then the others are waiting elsewhere, e.g. in a
 * collective, and must be aborted). */
static int all_ranks_dying(void) {
    if (!mpi_running() || g_size <= 1 || g_error_comm == MPI_COMM_NULL) return 0;
    MPI_Request req;
    if (MPI_Ibarrier(g_error_comm, &req) != MPI_SUCCESS) return 0;
    double t0 = MPI_Wtime();
    for (;;) {
        int done = 0;
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
        if (done) return 1;
        if (MPI_Wtime() - t0 > AGREE_SECONDS) return 0;
        usleep(2000);
    }
}

/* Every fatal path ends here. The rank that saw the error prints it, once; if every rank saw it, only
 * rank 0 prints (without a rank prefix). No rank ever waits in MPI_Finalize while a peer may wait in a
 * collective: MPI_Finalize runs only when every rank is here and no other thread may be inside MPI;
 * otherwise MPI_Abort ends the whole job. */
static _Noreturn void die(int code, const char *head, const char *hint, const char *fmt, va_list ap) {
    if (atomic_exchange(&g_dying, 1)) {
        /* Another thread of this process is already ending it. */
        for (;;) pause();
    }
    if (g_cleanup) g_cleanup(g_cleanup_arg);
    int everyone = all_ranks_dying();
    if (!everyone || g_rank == 0) emit(!everyone, head, hint, fmt, ap);
    int main_alone = g_main_thread_set && pthread_equal(pthread_self(), g_main_thread) &&
                     atomic_load(&g_other_mpi_threads) == 0;
    if (everyone && main_alone) {
        fflush(stdout);
        fflush(stderr);
        MPI_Finalize();
        _exit(code);
    }
    if (everyone && g_rank != 0) usleep(200 * 1000); /* let rank 0's message out before any abort */
    hs_abort(code);
}

_Noreturn void hs_fatal_at(const char *file, int line, const char *call, const char *hint,
                           const char *fmt, ...) {
    char head[1024];
    if (call) snprintf(head, sizeof head, "error at %s:%d: %s failed: ", file, line, call);
    else snprintf(head, sizeof head, "error at %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    die(HS_EXIT_INTERNAL, head, hint, fmt, ap);
}

_Noreturn void hs_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    die(HS_EXIT_USER, "error: ", NULL, fmt, ap);
}

_Noreturn void hs_die_code(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    die(code, "error: ", NULL, fmt, ap);
}

_Noreturn void hs_die_agreed(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    die(HS_EXIT_USER, "error: ", NULL, fmt, ap);
}

_Noreturn void hs_die_all(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    die(HS_EXIT_USER, "error: ", NULL, fmt, ap);
}

_Noreturn void hs_mpi_failed(const char *file, int line, const char *call, const char *hint, int rc) {
    char msg[MPI_MAX_ERROR_STRING] = "unknown MPI error";
    int len = 0;
    if (mpi_running()) MPI_Error_string(rc, msg, &len);
    hs_fatal_at(file, line, call, hint, "MPI error %d: %s", rc, msg);
}

static herr_t print_h5_frame(unsigned n, const H5E_error2_t *e, void *data) {
    (void)data;
    fprintf(stderr, "    #%u %s:%u %s(): %s\n", n, e->file_name, e->line, e->func_name,
            e->desc ? e->desc : "");
    return 0;
}

int64_t hs_h5_check(int64_t value, const char *file, int line, const char *call, const char *hint) {
    if (value >= 0) return value;
    fflush(stdout);
    fprintf(stderr, "hetseq: HDF5 error stack (rank %d):\n", g_rank);
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, print_h5_frame, NULL);
    hs_fatal_at(file, line, call, hint, "HDF5 call returned %lld", (long long)value);
}

_Noreturn void hs_errno_failed(const char *file, int line, const char *call, const char *hint, int rc) {
    hs_fatal_at(file, line, call, hint, "%s", strerror(rc));
}
