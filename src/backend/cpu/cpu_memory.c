/* CPU "device" memory is host memory: 64-byte aligned (one cache line, one AVX-512 vector) so every
 * tensor starts on a vector boundary, and zero-filled as the backend contract promises. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "util/check.h"

#define HS_CPU_ALIGN 64

void *hs_cpu_alloc(size_t bytes) {
    /* aligned_alloc wants a size that is a multiple of the alignment; 0 bytes still gets a block so
     * callers can treat every result alike. */
    size_t rounded = (bytes + HS_CPU_ALIGN - 1) / HS_CPU_ALIGN * HS_CPU_ALIGN;
    if (rounded == 0) rounded = HS_CPU_ALIGN;
    void *p = NULL;
    int rc = posix_memalign(&p, HS_CPU_ALIGN, rounded);
    if (rc != 0 || p == NULL)
        HS_FATAL("reduce the batch size or the model size, or run on a node with more memory",
                 "out of memory: cannot allocate %zu bytes", bytes);
    memset(p, 0, rounded);
    return p;
}

void hs_cpu_free(void *p) { free(p); }

void hs_cpu_upload(void *dst, const void *src_host, size_t bytes) {
    if (bytes) memcpy(dst, src_host, bytes);
}

void hs_cpu_download(void *dst_host, const void *src, size_t bytes) {
    if (bytes) memcpy(dst_host, src, bytes);
}

void hs_cpu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) memmove(dst, src, bytes);
}

void hs_cpu_zero(void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
}

/* Every CPU operation has finished when it returns. */
void hs_cpu_synchronize(void) {}
