// Stream capture and CUDA graphs on the emulated device (tests only; tests/cuda_emu/). CUDA Programming
// Guide, "CUDA Graphs" ("Creating a Graph Using Stream Capture", "Cross-stream Dependencies and Events",
// "Prohibited and Unhandled Operations", "Invalidation", "Whole Graph Update"):
//   - cudaStreamBeginCapture puts a stream in capture mode: work enqueued on it (kernels, async copies
//     and memsets, cuBLASLt, cuDNN and NCCL calls) becomes a node of the capture and does not run.
//   - An event recorded on a capturing stream is a captured event; another stream that waits on it
//     joins the capture (fork), and the origin stream waiting on an event recorded on a joined stream
//     joins that stream back. cudaStreamEndCapture on the origin returns the graph; a joined stream with
//     work the origin did not wait for is cudaErrorStreamCaptureUnjoined (the emulator requires the
//     origin to wait on the joined stream directly, not through a third stream).
//   - Events crossing the capture boundary: a wait on an event recorded outside the capture is
//     cudaErrorStreamCaptureIsolation unless it passes cudaEventWaitExternal, and
//     cudaEventRecordWithFlags(cudaEventRecordExternal) records at each launch instead of joining.
//     Querying, synchronising or (outside the capture) waiting on a captured event is
//     cudaErrorCapturedEvent.
//   - Illegal during a capture, with cudaErrorStreamCaptureUnsupported, and the capture is invalidated
//     (its later calls fail with cudaErrorStreamCaptureInvalidated, cudaStreamEndCapture too):
//     cudaStreamSynchronize / cudaStreamQuery of a capturing stream, a synchronous memset of pinned
//     memory on it, cudaDeviceSynchronize (any capture), and cudaMalloc, cudaMallocHost, cudaFree,
//     cudaFreeHost and the synchronous cudaMemcpy while a capture in global or thread-local mode is
//     active (CUDA's "potentially unsafe" calls; the emulator does not tell host threads apart). A
//     relaxed-mode capture allows them, except what synchronises a capturing stream.
//   - cudaGraphLaunch enqueues the nodes in capture order on the launch stream: the capture order is one
//     order the graph's dependencies allow (every dependency points to earlier-issued work), so a
//     replay computes what the eager run computes. Kernel arguments, cuBLASLt/cuDNN host scalars and
//     NCCL arguments are those of the capture; cudaGraphExecUpdate replaces them with another capture's
//     when both have the same nodes of the same kinds in the same order.
#ifndef HS_EMU_GRAPHS_H
#define HS_EMU_GRAPHS_H
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>
#include "cuda_runtime_api.h"
#include "streams.h"

namespace hs_emu {

struct Node {
  enum Type { Work, EventRecord, EventWait } type;
  std::string label;
  std::string kind; // what cudaGraphExecUpdate compares: the label without its numbers
  std::function<void()> run;
  std::function<void()> on_launch; // host side, at each launch (NCCL's count of queued collectives)
  CUevent_st *event;               // EventRecord / EventWait (cudaEvent{Record,Wait}External)
};

struct Capture {
  CUstream_st *origin;
  cudaStreamCaptureMode mode;
  bool invalid, ended;
  std::vector<Node> nodes;
  std::vector<CUstream_st *> streams;            // the origin, then the streams that joined
  std::map<const CUstream_st *, uint64_t> issued; // nodes each stream added
  std::map<const CUstream_st *, uint64_t> joined; // of those, how many the origin waited for
};

// A work item enqueued on a capturing stream becomes a node (dropped if the capture is invalidated).
void capture_node(CUstream_st *s, std::string label, std::function<void()> run);
// cudaEventRecordExternal / cudaEventWaitExternal on a capturing stream: a node that records / waits at launch.
void capture_event_node(CUstream_st *s, Node::Type type, CUevent_st *e);
// Attaches a host-side action to the node just captured on s, run at each cudaGraphLaunch.
void capture_launch_hook(CUstream_st *s, std::function<void()> hook);
// Invalidates s's capture and returns why (for the caller to return).
cudaError_t invalidate_capture(CUstream_st *s, cudaError_t why);
// For calls that synchronise the whole device: if a capture is active (in global or thread-local mode,
// or any mode when `any_mode`), invalidates every active capture and returns true.
bool refuse_during_capture(bool any_mode = true);

// cudaEventRecord / cudaStreamWaitEvent on resolved handles (api_stream.cc), also used by graph launches.
cudaError_t record_event(CUevent_st *e, CUstream_st *s, unsigned flags);
cudaError_t wait_event(CUstream_st *s, CUevent_st *e, unsigned flags);

} // namespace hs_emu
#endif
