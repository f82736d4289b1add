/* Device memory, copies and pinned staging buffers of the CUDA backend. Every copy but upload_async is
 * enqueued on the compute stream, so it is ordered with the ops around it (docs/gpu.md, "Streams and
 * events"). upload returns when the host source may be reused (the seam's contract), so it waits for its
 * copy; upload_async runs on the copy stream and is ordered by the caller's events (docs/gpu.md, "Input
 * staging"). */
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"

void *hs_cuda_alloc(const hs_backend *be, size_t bytes) {
    void *p = NULL;
    cudaError_t rc = cudaMalloc(&p, bytes ? bytes : 1);
    if (rc != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        hs_fatal_at(__FILE__, __LINE__, "cudaMalloc",
                    "the model and batch do not fit in GPU memory: lower max_sentences (or max_tokens) and raise "
                    "update_freq, or use a smaller model; docs/gpu.md gives the memory budget per model",
                    "%s: %zu bytes requested, %zu of %zu bytes free on GPU %d", cudaGetErrorString(rc), bytes,
                    free_b, total_b, hs_cuda_dev(be)->ordinal);
    }
    hs_ledger_alloc(p, bytes ? bytes : 1);
    HS_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, hs_cuda_stream(be))); /* CUDA does not zero */
    HS_CUDA_COPY_OP("cudaMemsetAsync", bytes);
    return p;
}

void hs_cuda_free(const hs_backend *be, void *p) {
    hs_cuda_shadow_forget(p); /* a parameter arena's 16-bit copy goes with it (cuda_shadow.c) */
    hs_cuda_twins_forget(p);  /* and a binding of a twin starting here (cuda_twins.c) */
    hs_cuda_free_later(be, p); /* cudaFree waits for the work that may still use p (after a capture's launch) */
}

void hs_cuda_memory_written(const void *dst, size_t bytes) {
    hs_cuda_shadow_written(dst, bytes); /* a parameter arena's 16-bit copy: cuda_shadow.c */
    hs_cuda_twins_written(dst, bytes);  /* an activation's 16-bit twin: cuda_twins.c */
}

void hs_cuda_upload(const hs_backend *be, void *dst, const void *src_host, size_t bytes) {
    if (!bytes) return;
    hs_cuda_memory_written(dst, bytes);
    cudaStream_t s = hs_cuda_stream(be);
    HS_CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, s));
    HS_CUDA_COPY_OP("cudaMemcpyAsync host->device", bytes);
    HS_CUDA_CHECK(cudaStreamSynchronize(s)); /* src_host may be reused when this returns */
}

void hs_cuda_download(const hs_backend *be, void *dst_host, const void *src, size_t bytes) {
    cudaStream_t s = hs_cuda_stream(be);
    if (bytes) {
        HS_CUDA_CHECK(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, s));
        HS_CUDA_COPY_OP("cudaMemcpyAsync device->host", bytes);
    }
    HS_CUDA_CHECK(cudaStreamSynchronize(s));
}

void hs_cuda_copy(const hs_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    hs_cuda_memory_written(dst, bytes);
    HS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, hs_cuda_stream(be)));
    HS_CUDA_COPY_OP("cudaMemcpyAsync device->device", 2 * (uint64_t)bytes); /* read + write */
}

void hs_cuda_zero(const hs_backend *be, void *p, size_t bytes) {
    if (!bytes) return;
    hs_cuda_memory_written(p, bytes);
    HS_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, hs_cuda_stream(be)));
    HS_CUDA_COPY_OP("cudaMemsetAsync", bytes);
}

/* Every stream of the device: the host may then read anything and make blocking MPI calls. */
void hs_cuda_synchronize(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    HS_CUDA_CHECK(cudaStreamSynchronize(d->compute));
    HS_CUDA_CHECK(cudaStreamSynchronize(d->copy));
    HS_CUDA_CHECK(cudaStreamSynchronize(d->comm));
}

void *hs_cuda_host_alloc(const hs_backend *be, size_t bytes) {
    (void)be;
    void *p = NULL;
    cudaError_t rc = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
    if (rc != cudaSuccess)
        hs_fatal_at(__FILE__, __LINE__, "cudaHostAlloc",
                    "page-locked host memory is limited (ulimit -l, or the node's memory): lower max_sentences",
                    "%s: %zu bytes", cudaGetErrorString(rc), bytes);
    memset(p, 0, bytes ? bytes : 1);
    return p;
}

void hs_cuda_host_free(const hs_backend *be, void *p) {
    (void)be;
    if (p) HS_CUDA_CHECK(cudaFreeHost(p));
}

/* ---- input staging (backend.h, docs/gpu.md "Input staging") ------------------------------------------ */

static cudaStream_t stream_of(const hs_backend *be, int stream) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (stream == HS_STREAM_COMPUTE) return d->compute;
    if (stream == HS_STREAM_COPY) return d->copy;
    HS_FATAL(NULL, "unknown stream %d", stream);
}

void *hs_cuda_event_create(const hs_backend *be) {
    (void)be;
    cudaEvent_t e = NULL;
    HS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); /* ordering only: no timestamps */
    return (void *)e;
}

void hs_cuda_event_destroy(const hs_backend *be, void *event) {
    (void)be;
    if (event) HS_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)event));
}

/* From pinned memory cudaMemcpyAsync returns at once and the DMA engine reads src_host when the copy
 * runs: hence the caller's event before src_host is reused. */
void hs_cuda_upload_async(const hs_backend *be, void *dst, const void *src_host, size_t bytes) {
    if (!bytes) return;
    hs_cuda_memory_written(dst, bytes);
    HS_CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, hs_cuda_dev(be)->copy));
    HS_CUDA_COPY_OP("cudaMemcpyAsync host->device", bytes);
}

void hs_cuda_event_record(const hs_backend *be, void *event, int stream) {
    /* while capturing (cuda_graph.c): recorded by each launch of the graph */
    const unsigned flags = hs_cuda_dev(be)->capturing && stream == HS_STREAM_COMPUTE ? cudaEventRecordExternal : cudaEventRecordDefault;
    HS_CUDA_CHECK(cudaEventRecordWithFlags((cudaEvent_t)event, stream_of(be, stream), flags));
}

void hs_cuda_stream_wait(const hs_backend *be, int stream, void *event) {
    /* while capturing (cuda_graph.c): each launch waits for the event's record at that time */
    const unsigned flags = hs_cuda_dev(be)->capturing && stream == HS_STREAM_COMPUTE ? cudaEventWaitExternal : cudaEventWaitDefault;
    HS_CUDA_CHECK(cudaStreamWaitEvent(stream_of(be, stream), (cudaEvent_t)event, flags));
}

/* Called from the prefetch thread too: the runtime initialises a thread's first call on its current
 * device (0 by default), so name this rank's GPU first rather than open a context on GPU 0. */
void hs_cuda_event_synchronize(const hs_backend *be, void *event) {
    HS_CUDA_CHECK(cudaSetDevice(hs_cuda_dev(be)->ordinal));
    HS_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event));
}
