#include "util/check.h"

#include <errno.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_rank = 0, g_size = 1;

void hs_check_set_rank(int rank, int size) { g_rank = rank; g_size = size; }

static int mpi_running(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

_Noreturn void hs_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    if (mpi_running() && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
    /* _exit, not exit: after a failed HDF5 write, HDF5's own exit-time cleanup can crash and turn a
     * clear error into a segfault status. */
    _exit(code);
}

static void prefix(void) {
    if (g_size > 1) fprintf(stderr, "hetseq [rank %d]: ", g_rank);
    else fprintf(stderr, "hetseq: ");
}

_Noreturn void hs_fatal_at(const char *file, int line, const char *call, const char *hint,
                           const char *fmt, ...) {
    fflush(stdout);
    prefix();
    fprintf(stderr, "error at %s:%d", file, line);
    if (call) fprintf(stderr, ": %s failed", call);
    fprintf(stderr, ": ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (hint && *hint) fprintf(stderr, "  hint: %s\n", hint);
    hs_abort(2);
}

_Noreturn void hs_die(const char *fmt, ...) {
    fflush(stdout);
    prefix();
    fprintf(stderr, "error: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    hs_abort(1);
}

_Noreturn void hs_die_all(const char *fmt, ...) {
    fflush(stdout);
    if (g_rank == 0) {
        fprintf(stderr, "hetseq: error: ");
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        fflush(stderr);
    }
    if (mpi_running()) MPI_Finalize();
    _exit(1);
}

void *hs_xcalloc(size_t count, size_t size, const char *file, int line) {
    if (count == 0 || size == 0) count = size = 1;
    void *p = calloc(count, size);
    if (!p)
        hs_fatal_at(file, line, "calloc", "the node is out of memory: lower training.max_sentences or use more ranks",
                    "cannot allocate %zu x %zu bytes", count, size);
    return p;
}

void *hs_xrealloc(void *p, size_t bytes, const char *file, int line) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q)
        hs_fatal_at(file, line, "realloc", "the node is out of memory", "cannot allocate %zu bytes", bytes);
    return q;
}

char *hs_xstrdup(const char *s, const char *file, int line) {
    size_t n = strlen(s) + 1;
    char *d = hs_xcalloc(n, 1, file, line);
    memcpy(d, s, n);
    return d;
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
    prefix();
    fprintf(stderr, "HDF5 stack:\n");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, print_h5_frame, NULL);
    hs_fatal_at(file, line, call, hint, "HDF5 call returned %lld", (long long)value);
}

_Noreturn void hs_errno_failed(const char *file, int line, const char *call, const char *hint, int rc) {
    hs_fatal_at(file, line, call, hint, "%s", strerror(rc));
}
