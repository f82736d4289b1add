/* CPU "device" memory is host memory: 64-byte aligned (one cache line, one AVX-512 vector) so every
 * tensor starts on a vector boundary, and zero-filled as the backend contract promises. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "util/check.h"

#define HS_CPU_ALIGN 64

void *hs_cpu_alloc(const hs_backend *be, size_t bytes) {
    (void)be;
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

/* Staging memory is ordinary host memory on the CPU: the same aligned, zero-filled blocks. */
void *hs_cpu_host_alloc(const hs_backend *be, size_t bytes) { return hs_cpu_alloc(be, bytes); }

void hs_cpu_host_free(const hs_backend *be, void *p) { hs_cpu_free(be, p); }

void hs_cpu_free(const hs_backend *be, void *p) {
    (void)be;
    free(p);
}

void hs_cpu_upload(const hs_backend *be, void *dst, const void *src_host, size_t bytes) {
    (void)be;
    if (bytes) memcpy(dst, src_host, bytes);
}

void hs_cpu_download(const hs_backend *be, void *dst_host, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memcpy(dst_host, src, bytes);
}

void hs_cpu_copy(const hs_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes && dst != src) memmove(dst, src, bytes);
}

void hs_cpu_zero(const hs_backend *be, void *p, size_t bytes) {
    (void)be;
    if (bytes) memset(p, 0, bytes);
}

/* The CPU device's stream is the calling thread: every operation has finished when it returns. */
void hs_cpu_synchronize(const hs_backend *be) { (void)be; }

/* Input staging (backend.h): the CPU's one "stream" runs each copy when it is called, so an upload is
 * complete on return and every event is complete. An event is a non-NULL token that owns nothing. */
static char hs_cpu_event_token;

void *hs_cpu_event_create(const hs_backend *be) {
    (void)be;
    return &hs_cpu_event_token;
}

void hs_cpu_event_destroy(const hs_backend *be, void *event) {
    (void)be;
    (void)event;
}

void hs_cpu_upload_async(const hs_backend *be, void *dst, const void *src_host, size_t bytes) {
    hs_cpu_upload(be, dst, src_host, bytes);
}

void hs_cpu_event_record(const hs_backend *be, void *event, int stream) {
    (void)be;
    (void)event;
    (void)stream;
}

void hs_cpu_stream_wait(const hs_backend *be, int stream, void *event) {
    (void)be;
    (void)stream;
    (void)event;
}

void hs_cpu_event_synchronize(const hs_backend *be, void *event) {
    (void)be;
    (void)event;
}
