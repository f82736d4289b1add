// Memory management of the emulated CUDA runtime (tests only; tests/cuda_emu/).
// CUDA Runtime API, "Memory Management" and "API synchronization behavior":
//   - cudaMemcpy (synchronous): host<->device copies return when the copy is done (they wait for the
//     earlier work they depend on on the legacy default stream); device->device copies do not wait;
//     host->host copies are fully synchronous.
//   - cudaMemcpyAsync: queued on the stream and done when the stream reaches it, for pinned and
//     pageable host memory alike (CUDA may make pageable copies synchronous, but does not promise it:
//     the emulator takes the strict reading). Host->host is fully synchronous.
//   - cudaMemset / cudaMemsetAsync: asynchronous (queued) unless the target is pinned host memory.
//   - The direction must match the pointers (cudaMemcpyDefault infers it); a mismatch, a device range
//     that is not inside one allocation, or a pageable memset target is cudaErrorInvalidValue.
//   - cudaFree and cudaFreeHost wait until the device is idle.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include "memory.h"
#include "graphs.h"
#include "state.h"
#include "streams.h"

using namespace hs_emu;

namespace {

const char *kind_name(cudaMemcpyKind k) {
  static const char *names[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};
  return names[k];
}

cudaError_t copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t stream, bool async) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return err;
  if (n == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  const MemKind dk = classify(dst), sk = classify(src);
  if (!range_valid(dk, dst, n) || !range_valid(sk, src, n)) return cudaErrorInvalidValue;
  const cudaMemcpyKind actual = sk == MemKind::Device
                                    ? (dk == MemKind::Device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                    : (dk == MemKind::Device ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  if (kind != cudaMemcpyDefault && kind != actual) return cudaErrorInvalidValue;
  char label[96];
  snprintf(label, sizeof label, "%s %s, %zu bytes", async ? "cudaMemcpyAsync" : "cudaMemcpy", kind_name(actual), n);
  const bool wait = actual == cudaMemcpyHostToHost || (!async && actual != cudaMemcpyDeviceToDevice);
  if (s->capture && s->capture->invalid) return cudaErrorStreamCaptureInvalidated;
  if (s->capture && wait) return invalidate_capture(s, cudaErrorStreamCaptureUnsupported);
  if (!async && refuse_during_capture(false)) return cudaErrorStreamCaptureUnsupported; // synchronous cudaMemcpy
  const uint64_t seq = enqueue(s, label, [dst, src, n] { memcpy(dst, src, n); });
  if (wait) run_until([s, seq] { return s->done >= seq; });
  return cudaSuccess;
}

cudaError_t fill(void *p, int value, size_t n, cudaStream_t stream, bool async) {
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return err;
  if (n == 0) return cudaSuccess;
  if (p == nullptr) return cudaErrorInvalidValue;
  const MemKind k = classify(p);
  if (k == MemKind::Pageable || !range_valid(k, p, n)) return cudaErrorInvalidValue;
  char label[64];
  snprintf(label, sizeof label, "%s %zu bytes", async ? "cudaMemsetAsync" : "cudaMemset", n);
  if (s->capture && s->capture->invalid) return cudaErrorStreamCaptureInvalidated;
  if (s->capture && k == MemKind::Pinned) return invalidate_capture(s, cudaErrorStreamCaptureUnsupported);
  const uint64_t seq = enqueue(s, label, [p, value, n] { memset(p, value, n); });
  if (k == MemKind::Pinned) run_until([s, seq] { return s->done >= seq; });
  return cudaSuccess;
}

} // namespace

extern "C" cudaError_t cudaMalloc(void **p, size_t n) {
  HS_EMU_API_ENTER;
  // "potentially unsafe" during a global or thread-local capture (it may synchronise the device)
  if (refuse_during_capture(false)) return record_error(cudaErrorStreamCaptureUnsupported);
  return record_error(device_malloc(p, n));
}

extern "C" cudaError_t cudaFree(void *p) {
  HS_EMU_API_ENTER;
  if (refuse_during_capture(false)) return record_error(cudaErrorStreamCaptureUnsupported); // it waits for the device
  run_until(device_idle);
  return record_error(device_free(p));
}

extern "C" cudaError_t cudaMallocHost(void **p, size_t n) {
  HS_EMU_API_ENTER;
  if (refuse_during_capture(false)) return record_error(cudaErrorStreamCaptureUnsupported);
  return record_error(pinned_malloc(p, n));
}

extern "C" cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags) {
  HS_EMU_API_ENTER;
  if (flags & ~static_cast<unsigned>(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
    return record_error(cudaErrorInvalidValue);
  return record_error(pinned_malloc(p, n));
}

extern "C" cudaError_t cudaFreeHost(void *p) {
  HS_EMU_API_ENTER;
  if (refuse_during_capture(false)) return record_error(cudaErrorStreamCaptureUnsupported);
  run_until(device_idle);
  return record_error(pinned_free(p));
}

// Pinned memory is mapped at the same address for the device (unified virtual addressing).
extern "C" cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags) {
  HS_EMU_API_ENTER;
  if (pDevice == nullptr || flags != 0 || classify(pHost) != MemKind::Pinned) return record_error(cudaErrorInvalidValue);
  *pDevice = pHost;
  return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
  HS_EMU_API_ENTER;
  return record_error(copy(dst, src, n, kind, nullptr, false));
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  HS_EMU_API_ENTER;
  return record_error(copy(dst, src, n, kind, s, true));
}

extern "C" cudaError_t cudaMemset(void *p, int value, size_t n) {
  HS_EMU_API_ENTER;
  return record_error(fill(p, value, n, nullptr, false));
}

extern "C" cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
  HS_EMU_API_ENTER;
  return record_error(fill(p, value, n, s, true));
}
