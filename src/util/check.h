/* Error checking for every call into MPI, HDF5, libconfig, CUDA, cuBLAS, cuDNN, NCCL and every
 * allocation. A failure prints one message naming the source file, line, the call and a hint for the
 * user, then ends every rank (MPI_Abort when more than one rank runs), so no rank hangs in a
 * collective waiting for a dead peer. */
#ifndef HS_UTIL_CHECK_H
#define HS_UTIL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define HS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define HS_PRINTF(f, a)
#endif

/* Internal failure of a library call: file:line, the call's text, the library's message, a hint. */
_Noreturn void hs_fatal_at(const char *file, int line, const char *call, const char *hint,
                           const char *fmt, ...) HS_PRINTF(5, 6);

/* A user's error (bad config, missing or corrupt data file, impossible batch size): one clear message
 * that names the file/key/line and says what to do. Ends every rank with exit status 1. */
_Noreturn void hs_die(const char *fmt, ...) HS_PRINTF(1, 2);

/* The same, for an error that every rank detects identically (config and command-line errors): only
 * rank 0 prints, every rank finalizes MPI and exits 1 — no abort banner, no duplicate messages. Use it
 * only where all ranks are guaranteed to reach the same call. */
_Noreturn void hs_die_all(const char *fmt, ...) HS_PRINTF(1, 2);

/* An error that every rank detects at the same point (from all-reduced values) while other threads may
 * still be in collectives: rank 0 prints the message, every rank aborts. */
_Noreturn void hs_die_agreed(const char *fmt, ...) HS_PRINTF(1, 2);

/* Ends the process group: MPI_Abort if MPI runs with more than one rank, else exit(code). */
_Noreturn void hs_abort(int code);

/* Which rank this process is (for message prefixes); set by comm init. */
void hs_check_set_rank(int rank, int size);

#define HS_FATAL(hint, ...) hs_fatal_at(__FILE__, __LINE__, NULL, (hint), __VA_ARGS__)

/* Allocation: never returns NULL. HS_ALLOC(p, n) allocates n zeroed elements of *p. */
void *hs_xcalloc(size_t count, size_t size, const char *file, int line);
void *hs_xrealloc(void *p, size_t bytes, const char *file, int line);
char *hs_xstrdup(const char *s, const char *file, int line);
#define HS_ALLOC(ptr, count) ((ptr) = hs_xcalloc((size_t)(count), sizeof *(ptr), __FILE__, __LINE__))
#define HS_REALLOC(ptr, count) ((ptr) = hs_xrealloc((ptr), (size_t)(count) * sizeof *(ptr), __FILE__, __LINE__))
#define HS_STRDUP(s) hs_xstrdup((s), __FILE__, __LINE__)

/* MPI: every MPI call returns an error code; with MPI_ERRORS_RETURN set on our communicators the
 * macro reports it instead of the library aborting silently. */
#define HS_CHECK_MPI(call, hint)                                                                  \
    do {                                                                                          \
        int hs_mpi_rc_ = (call);                                                                  \
        if (hs_mpi_rc_ != 0) hs_mpi_failed(__FILE__, __LINE__, #call, (hint), hs_mpi_rc_);        \
    } while (0)
_Noreturn void hs_mpi_failed(const char *file, int line, const char *call, const char *hint, int rc);

/* HDF5: ids and herr_t are negative on failure. HS_H5(call, hint) evaluates to the call's value.
 * The HDF5 error stack is printed under the message (automatic printing is turned off at start). */
int64_t hs_h5_check(int64_t value, const char *file, int line, const char *call, const char *hint);
#define HS_H5(call, hint) hs_h5_check((int64_t)(call), __FILE__, __LINE__, #call, (hint))

/* pthreads and other calls returning 0 on success, an errno value otherwise. */
#define HS_CHECK_ERRNO(call, hint)                                                                \
    do {                                                                                          \
        int hs_e_rc_ = (call);                                                                    \
        if (hs_e_rc_ != 0) hs_errno_failed(__FILE__, __LINE__, #call, (hint), hs_e_rc_);          \
    } while (0)
_Noreturn void hs_errno_failed(const char *file, int line, const char *call, const char *hint, int rc);

#endif
