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
#include "graphs.h"
#include "state.h"
#include "streams.h"

using namespace hs_emu;

namespace {
// Querying or synchronising an event last recorded in a capture: the capture (if still active) is
// invalidated, as the query would synchronise a capturing stream.
cudaError_t captured_event_error(CUevent_st *e) {
  if (!e->capture->ended) e->capture->invalid = true;
  return record_error(cudaErrorCapturedEvent);
}
} // namespace

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
  if (s->capture) return invalidate_capture(s, cudaErrorStreamCaptureUnsupported);
  const uint64_t target = s->enqueued;
  run_until([s, target] { return s->done >= target; });
  return cudaSuccess;
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t stream) {
  HS_EMU_API_ENTER;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  if (s->capture) return invalidate_capture(s, cudaErrorStreamCaptureUnsupported);
  if (s->done >= s->enqueued) return cudaSuccess;
  run_one();                // progress for a polling loop; the answer is the state before it
  return cudaErrorNotReady; // not an error: not recorded for cudaGetLastError
}

namespace hs_emu {
cudaError_t wait_event(CUstream_st *s, CUevent_st *e, unsigned flags) {
  Capture *c = s->capture;
  if (c && c->invalid) return record_error(cudaErrorStreamCaptureInvalidated);
  if (c && (flags & cudaEventWaitExternal)) { // waits, at each launch, for the event's record then
    capture_event_node(s, Node::EventWait, e);
    return cudaSuccess;
  }
  if (e->capture) { // last recorded in a capture
    Capture *ec = e->capture;
    if (ec->ended) return c ? invalidate_capture(s, cudaErrorCapturedEvent) : record_error(cudaErrorCapturedEvent);
    if (c == nullptr) { // fork: s joins the capture
      s->capture = ec;
      ec->streams.push_back(s);
    } else if (c != ec) {
      ec->invalid = true;
      return invalidate_capture(s, cudaErrorStreamCaptureMerge);
    } else if (s == ec->origin && e->cap_count > ec->joined[e->cap_stream]) {
      ec->joined[e->cap_stream] = e->cap_count; // join back
    }
    return cudaSuccess;
  }
  if (e->stream == nullptr) return cudaSuccess; // never recorded: complete
  if (c) return invalidate_capture(s, cudaErrorStreamCaptureIsolation); // uncaptured work, no External flag
  enqueue(s, "cudaStreamWaitEvent", [] {}, {Dep{e->stream, e->seq}});
  return cudaSuccess;
}

cudaError_t record_event(CUevent_st *e, CUstream_st *s, unsigned flags) {
  Capture *c = s->capture;
  if (c && c->invalid) return record_error(cudaErrorStreamCaptureInvalidated);
  if (c && (flags & cudaEventRecordExternal)) { // records at each launch
    capture_event_node(s, Node::EventRecord, e);
    return cudaSuccess;
  }
  const uint64_t generation = ++e->generation;
  e->timed = false;
  if (c) { // a captured event: it stands for the stream's nodes so far
    e->capture = c;
    e->cap_stream = s;
    e->cap_count = c->issued[s];
    e->stream = nullptr;
    return cudaSuccess;
  }
  e->capture = nullptr;
  e->stream = s;
  e->seq = enqueue(s, "cudaEventRecord", [e, generation] {
    if (e->generation != generation) return; // recorded again since
    e->when = std::chrono::steady_clock::now();
    e->timed = true;
  });
  return cudaSuccess;
}
} // namespace hs_emu

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  HS_EMU_API_ENTER;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  CUevent_st *e = resolve_event(event);
  if (e == nullptr) return record_error(cudaErrorInvalidResourceHandle);
  if ((flags & ~static_cast<unsigned>(cudaEventWaitExternal)) != 0) return record_error(cudaErrorInvalidValue);
  return wait_event(s, e, flags);
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
  return cudaEventRecordWithFlags(event, stream, cudaEventRecordDefault);
}

extern "C" cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  HS_EMU_API_ENTER;
  CUevent_st *e = resolve_event(event);
  if (e == nullptr) return record_error(cudaErrorInvalidResourceHandle);
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  if ((flags & ~static_cast<unsigned>(cudaEventRecordExternal)) != 0) return record_error(cudaErrorInvalidValue);
  return record_event(e, s, flags);
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t event) {
  HS_EMU_API_ENTER;
  CUevent_st *e = resolve_event(event);
  if (e == nullptr) return record_error(cudaErrorInvalidResourceHandle);
  if (e->capture) return captured_event_error(e);
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
  if (e->capture) return captured_event_error(e);
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
