/* HDF5 helpers for telling a user what went wrong with a file. */
#include "util/h5util.h"

#include <pthread.h>

#include <stdio.h>

#include "util/check.h"

/* H5Ewalk2 callback: frame 0 of an upward walk is the innermost one. */
static herr_t innermost_frame(unsigned n, const H5E_error2_t *e, void *data) {
    if (n == 0 && e->desc) snprintf(data, HS_H5_REASON_LEN, "%s", e->desc);
    return 0;
}

const char *hs_h5_reason(char buf[HS_H5_REASON_LEN]) {
    buf[0] = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_frame, buf);
    H5Eclear2(H5E_DEFAULT);
    return buf[0] ? buf : "unknown HDF5 error";
}

void hs_h5_describe_type(hid_t type, char *out, size_t len) {
    H5T_class_t cls = (H5T_class_t)HS_H5(H5Tget_class(type), NULL);
    size_t size = H5Tget_size(type);
    if (cls == H5T_INTEGER) {
        snprintf(out, len, "%zu-bit %s integer", 8 * size, H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned" : "signed");
        return;
    }
    const char *name = cls == H5T_FLOAT ? "floating point" : cls == H5T_STRING ? "string" : "non-numeric";
    snprintf(out, len, "%zu-bit %s", 8 * size, name);
}

static pthread_mutex_t h5_mutex;
static pthread_once_t h5_mutex_once = PTHREAD_ONCE_INIT;

static void h5_mutex_init(void) {
    pthread_mutexattr_t attr;
    HS_CHECK_ERRNO(pthread_mutexattr_init(&attr), NULL);
    HS_CHECK_ERRNO(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE), NULL);
    HS_CHECK_ERRNO(pthread_mutex_init(&h5_mutex, &attr), NULL);
    HS_CHECK_ERRNO(pthread_mutexattr_destroy(&attr), NULL);
}

void hs_h5_lock(void) {
    HS_CHECK_ERRNO(pthread_once(&h5_mutex_once, h5_mutex_init), NULL);
    HS_CHECK_ERRNO(pthread_mutex_lock(&h5_mutex), "HDF5 lock");
}

void hs_h5_unlock(void) { HS_CHECK_ERRNO(pthread_mutex_unlock(&h5_mutex), "HDF5 lock"); }
