// Streams and events of the emulated CUDA runtime (tests only; tests/cuda_emu/): the API over
// streams.cc. CUDA Runtime API, "Stream Management" and "Event Management":
//   - cudaEventRecord captures the work issued to the stream so far; cudaStreamWaitEvent and
//     cudaEventSynchronize use the capture of the most recent record at the time of the call; an event
//     never recorded is complete.
//   - cudaStreamQuery / cudaEventQuery answer cudaErrorNotReady while work is pending, and then run one
//     runnable item, so a polling loop makes progress.
//   - cudaEventElapsedTime measures the emulator's wall clock between the two records' execution:
//     it is not GPU time.
//   - cudaStreamDestroy with work pending returns at once; the work still runs.
#include <chrono>
#include "state.h"
#include "streams.h"

using namespace hs_emu;

extern "C" cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
  HS_EMU_API_ENTER;
  if (s == nullptr || (flags & ~static_cast<unsigned>(cudaStreamNonBlocking)) != 0) return record_error(cudaErrorInvalidValue);
  *s = new_stream(flags);
  return cudaSuccess;
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  HS_EMU_API_ENTER;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  if (s->legacy) return record_error(cudaErrorInvalidResourceHandle);
  s->destroyed = true;
  return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  HS_EMU_API_ENTER;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  const uint64_t target = s->enqueued;
  run_until([s, target] { return s->done >= target; });
  return cudaSuccess;
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t stream) {
  HS_EMU_API_ENTER;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  if (s->done >= s->enqueued) return cudaSuccess;
  run_one();                // progress for a polling loop; the answer is the state before it
  return cudaErrorNotReady; // not an error: not recorded for cudaGetLastError
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  HS_EMU_API_ENTER;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  CUevent_st *e = resolve_event(event);
  if (e == nullptr) return record_error(cudaErrorInvalidResourceHandle);
  if (flags != cudaEventWaitDefault) return record_error(cudaErrorInvalidValue);
  if (e->stream == nullptr) return cudaSuccess;
  enqueue(s, "cudaStreamWaitEvent", [] {}, {Dep{e->stream, e->seq}});
  return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
  HS_EMU_API_ENTER;
  const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (e == nullptr || (flags & ~known) != 0) return record_error(cudaErrorInvalidValue);
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) return record_error(cudaErrorInvalidValue);
  *e = new_event(flags);
  return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  HS_EMU_API_ENTER;
  CUevent_st *e = resolve_event(event);
  if (e == nullptr) return record_error(cudaErrorInvalidResourceHandle);
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  const uint64_t generation = ++e->generation;
  e->timed = false;
  e->stream = s;
  e->seq = enqueue(s, "cudaEventRecord", [e, generation] {
    if (e->generation != generation) return; // recorded again since
    e->when = std::chrono::steady_clock::now();
    e->timed = true;
  });
  return cudaSuccess;
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t event) {
  HS_EMU_API_ENTER;
  CUevent_st *e = resolve_event(event);
  if (e == nullptr) return record_error(cudaErrorInvalidResourceHandle);
  if (e->stream == nullptr) return cudaSuccess;
  const Dep d{e->stream, e->seq};
  if (complete(d)) return cudaSuccess;
  run_one();
  return cudaErrorNotReady;
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  HS_EMU_API_ENTER;
  CUevent_st *e = resolve_event(event);
  if (e == nullptr) return record_error(cudaErrorInvalidResourceHandle);
  if (e->stream == nullptr) return cudaSuccess;
  const Dep d{e->stream, e->seq};
  run_until([d] { return complete(d); });
  return cudaSuccess;
}

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  HS_EMU_API_ENTER;
  CUevent_st *a = resolve_event(start), *b = resolve_event(end);
  if (ms == nullptr) return record_error(cudaErrorInvalidValue);
  if (a == nullptr || b == nullptr || a->stream == nullptr || b->stream == nullptr ||
      ((a->flags | b->flags) & cudaEventDisableTiming))
    return record_error(cudaErrorInvalidResourceHandle);
  if (!complete(Dep{a->stream, a->seq}) || !complete(Dep{b->stream, b->seq})) return record_error(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(b->when - a->when).count();
  return cudaSuccess;
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t event) {
  HS_EMU_API_ENTER;
  CUevent_st *e = resolve_event(event);
  if (e == nullptr) return record_error(cudaErrorInvalidResourceHandle);
  e->destroyed = true; // waits already queued keep their (stream, position)
  return cudaSuccess;
}
