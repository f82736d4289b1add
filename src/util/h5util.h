/* HDF5 helpers for telling a user what went wrong with a file. */
#ifndef HS_UTIL_H5UTIL_H
#define HS_UTIL_H5UTIL_H

#include <hdf5.h>
#include <stddef.h>

/* Bytes of the buffer hs_h5_reason fills. */
#define HS_H5_REASON_LEN 256

/* The description of the deepest frame of HDF5's error stack (where the failure started), e.g.
 * "truncated file: eof = ..."; the stack is cleared. Returns buf, or "unknown HDF5 error" if empty. */
const char *hs_h5_reason(char buf[HS_H5_REASON_LEN]);

/* A datatype for a message: "32-bit signed integer", "64-bit floating point", "8-bit string", ... */
void hs_h5_describe_type(hid_t type, char *out, size_t len);

/* Debian's parallel HDF5 is not thread-safe: at any moment only one thread of a process may be inside
 * HDF5. Every HDF5 call made while the prefetch thread runs (its collective reads, checkpoint writes
 * and loads) is bracketed by this one process-wide lock (recursive). Never hold it across an MPI
 * collective of another communicator: the prefetch thread's collective reads need the peers' prefetch
 * threads, never their main threads, so holding it for a read or a rank-local write cannot deadlock. */
void hs_h5_lock(void);
void hs_h5_unlock(void);

#endif
