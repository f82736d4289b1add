// Streams and events of the emulated CUDA device (tests only; tests/cuda_emu/).
// A stream is a queue of work items (kernels, copies, memsets, event records, event waits). Nothing
// runs when it is enqueued: work runs only when the host synchronises (cudaStreamSynchronize,
// cudaEventSynchronize, cudaDeviceSynchronize, the synchronous copies) or polls (cudaStreamQuery,
// cudaEventQuery run one item), and then the next item is drawn at random among the stream heads
// whose dependencies are complete. The only orders kept are the ones CUDA guarantees (CUDA
// Programming Guide, "Streams"; CUDA Runtime API, "Stream synchronization behavior"):
//   - items of one stream run in issue order;
//   - cudaStreamWaitEvent: later items of the stream wait for the work the event captured;
//   - the legacy default stream (stream 0, as nvcc compiles by default): an item on it waits for all
//     earlier work of every blocking stream, and an item on a blocking stream (cudaStreamCreate,
//     flags cudaStreamDefault) waits for all earlier work of the legacy stream. Streams created with
//     cudaStreamNonBlocking do neither. The per-thread default stream is not supported.
// Schedule (HS_CUDA_EMU_SCHEDULE, or hs_emu_set_schedule): "random" (the default) draws the next head
// uniformly; "priority" runs the runnable head of the earliest-created stream (the legacy stream,
// then streams in creation order), so a later-created stream — a copy stream made after the compute
// stream — runs only while the earlier ones are blocked on an event or idle, as late as CUDA allows
// for them: work that reads an upload it is not ordered after (no cudaStreamWaitEvent) then reads
// what the buffer held before under every seed, not under some seeds only.
#ifndef HS_EMU_STREAMS_H
#define HS_EMU_STREAMS_H
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>
#include "cuda_runtime_api.h"

namespace hs_emu {
struct Capture; // graphs.h
struct Dep { // complete when stream->done >= seq
  CUstream_st *stream;
  uint64_t seq;
};
struct WorkItem {
  uint64_t seq;
  std::vector<Dep> deps;
  std::string label;
  std::function<void()> run;
};
} // namespace hs_emu

// Stream and event objects are never freed: a destroyed handle stays recognisable (its use is
// cudaErrorInvalidResourceHandle) and queued dependencies on it stay valid.
struct CUstream_st {
  int id;
  bool legacy, blocking, destroyed;
  uint64_t enqueued, done; // sequence numbers: items 1..enqueued issued, 1..done complete
  std::deque<hs_emu::WorkItem> queue;
  hs_emu::Capture *capture; // the capture sequence the stream is in (graphs.h), or nullptr
};

struct CUevent_st {
  unsigned flags;
  bool destroyed;
  CUstream_st *stream; // the most recent record, or nullptr if never recorded
  uint64_t seq;
  uint64_t generation;  // counts records, so an old record's completion does not set the time
  bool timed;           // the most recent record has completed and set `when`
  std::chrono::steady_clock::time_point when;
  // Last recorded inside a capture sequence (graphs.h): that capture, the stream and how many of the
  // stream's nodes the record follows; capture == nullptr after a record outside any capture.
  hs_emu::Capture *capture;
  CUstream_st *cap_stream;
  uint64_t cap_count;
};

namespace hs_emu {

// 0 and cudaStreamLegacy are the legacy default stream; unknown and destroyed handles give nullptr
// and *err = cudaErrorInvalidResourceHandle (cudaStreamPerThread: cudaErrorNotSupported).
CUstream_st *resolve_stream(cudaStream_t s, cudaError_t *err);
CUstream_st *new_stream(unsigned flags);
CUevent_st *resolve_event(cudaEvent_t e); // nullptr if unknown or destroyed
CUevent_st *new_event(unsigned flags);

// Appends an item to the stream (with the legacy-stream dependencies); returns its sequence number.
// On a stream that is capturing (graphs.h) the item becomes a node of the capture instead (returns 0).
uint64_t enqueue(CUstream_st *s, std::string label, std::function<void()> run, std::vector<Dep> deps = {});

bool complete(const Dep &d);
// Runs work items until done() holds.
void run_until(const std::function<bool()> &done);
// Runs one runnable item, if any (progress for cudaStreamQuery / cudaEventQuery).
void run_one();
bool device_idle();

} // namespace hs_emu
#endif
