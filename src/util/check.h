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

/* Included by the CUDA sources (C++) too. */
#ifdef __cplusplus
#define HS_NORETURN [[noreturn]]
extern "C" {
#else
#define HS_NORETURN _Noreturn
#endif

/* Internal failure of a library call: file:line, the call's text, the library's message, a hint. */
HS_NORETURN void hs_fatal_at(const char *file, int line, const char *call, const char *hint,
                           const char *fmt, ...) HS_PRINTF(5, 6);

/* Exit codes (docs/reliability.md). */
#define HS_EXIT_USER 1       /* a user's error: config, data, resume mismatch, divergence */
#define HS_EXIT_INTERNAL 2   /* a library call failed (file system, MPI, HDF5, memory) */
#define HS_EXIT_STALLED 3    /* the stall inspector or the replica check stopped the run */
#define HS_EXIT_STOPPED 75   /* stopped by SIGTERM/SIGINT/SIGUSR1 after writing a checkpoint: rerun to resume */

/* A fatal error: one clear message naming the file/key/line and what to do, then every rank ends.
 * Whichever rank (or thread) sees it: if every rank reaches a fatal error within ~2 s (an error they all
 * detect, e.g. the config), rank 0 prints it once; otherwise the rank that saw it prints it (with its
 * rank) and MPI_Abort ends the job, so no rank hangs in a collective. Exit status HS_EXIT_USER. */
HS_NORETURN void hs_die(const char *fmt, ...) HS_PRINTF(1, 2);
/* The same with another exit status. */
HS_NORETURN void hs_die_code(int code, const char *fmt, ...) HS_PRINTF(2, 3);
/* Historical names of hs_die for errors every rank detects identically; same behaviour. */
HS_NORETURN void hs_die_all(const char *fmt, ...) HS_PRINTF(1, 2);
HS_NORETURN void hs_die_agreed(const char *fmt, ...) HS_PRINTF(1, 2);

/* A clean-up to run before a fatal error ends the process (e.g. remove a half-written checkpoint's
 * temporary file). One at a time; pass NULL to clear. */
void hs_check_on_fatal(void (*fn)(void *), void *arg);

/* Ends the process group: MPI_Abort if MPI runs with more than one rank, else exit(code). */
HS_NORETURN void hs_abort(int code);

/* Which rank this process is (for message prefixes); set by comm init. */
void hs_check_set_rank(int rank, int size);
/* A communicator used for nothing but agreeing on fatal errors (set by comm init). The type is an
 * MPI_Comm; declared with mpi.h included by the caller. */
#ifdef MPI_VERSION
void hs_check_set_error_comm(MPI_Comm comm);
#endif
/* Threads other than the main one that call MPI (the prefetch thread, the stall inspector) register
 * with +1 / -1: while any runs, a fatal error aborts instead of finalizing. */
void hs_check_mpi_thread(int delta);

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
HS_NORETURN void hs_mpi_failed(const char *file, int line, const char *call, const char *hint, int rc);

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
HS_NORETURN void hs_errno_failed(const char *file, int line, const char *call, const char *hint, int rc);

#ifdef __cplusplus
}
#endif

#endif
