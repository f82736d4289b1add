// Self-test of stream capture and CUDA graphs on the emulated device (runtime/graphs.h): work enqueued
// on a capturing stream is recorded, not run; a launch replays it; events fork and join other streams
// into a capture; cudaGraphExecUpdate takes another capture's arguments; and the calls CUDA refuses
// during a capture (a synchronisation of a capturing stream above all) fail as on a GPU and
// invalidate the capture.
#include <vector>
#include "hs_emu/control.h"
#include "selftest.h"
#include "selftest_kernels.h"

namespace {
const int n = 300;

bool doubled(const float *y, float base) { // y == 2 (base + i), read back with a synchronous copy
  std::vector<float> h(n);
  CUDA_OK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++)
    if (h[i] != 2.0f * (base + static_cast<float>(i))) return false;
  return true;
}

bool untouched(const float *y) { // still cudaMalloc's NaN fill
  std::vector<float> h(n);
  CUDA_OK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++)
    if (!std::isnan(h[i])) return false;
  return true;
}

cudaStreamCaptureStatus status(cudaStream_t s) {
  cudaStreamCaptureStatus st;
  CUDA_OK(cudaStreamIsCapturing(s, &st));
  return st;
}

// Captured work does not run; each launch runs it, in order, on the launch stream.
void capture_and_replay() {
  float *x, *y;
  CUDA_OK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&y, n * sizeof(float)));
  cudaStream_t s, other;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  CHECK(status(s) == cudaStreamCaptureStatusNone);
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(status(s) == cudaStreamCaptureStatusActive);
  CHECK(status(other) == cudaStreamCaptureStatusNone);
  CHECK_ERR(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  CHECK_ERR(cudaGetLastError(), cudaErrorIllegalState);
  st_produce(x, n, 1.0f, s);
  st_consume(x, y, n, s);
  CUDA_OK(cudaGetLastError());
  cudaGraph_t g;
  CUDA_OK(cudaStreamEndCapture(s, &g));
  CHECK(status(s) == cudaStreamCaptureStatusNone);
  size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes(g, nullptr, &nodes));
  CHECK(nodes == 2);
  CUDA_OK(cudaStreamSynchronize(s));
  CHECK(untouched(y)); // recorded, not run
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  hs_emu_stats before, after;
  hs_emu_get_stats(&before);
  for (uint64_t seed = 1; seed <= 4; seed++) {
    hs_emu_set_seed(seed);
    CUDA_OK(cudaMemsetAsync(y, 0xFF, n * sizeof(float), other));
    CUDA_OK(cudaStreamSynchronize(other));
    CUDA_OK(cudaGraphLaunch(exec, other)); // any stream may launch it
    CUDA_OK(cudaStreamSynchronize(other));
    CHECK(doubled(y, 1.0f));
  }
  hs_emu_get_stats(&after);
  CHECK(after.graph_launches - before.graph_launches == 4 && after.graph_nodes - before.graph_nodes == 8);

  // whole graph update: another capture of the same kinds of nodes brings its arguments
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  st_produce(x, n, 5.0f, s);
  st_consume(x, y, n, s);
  cudaGraph_t g5;
  CUDA_OK(cudaStreamEndCapture(s, &g5));
  cudaGraphExecUpdateResultInfo info;
  CUDA_OK(cudaGraphExecUpdate(exec, g5, &info));
  CHECK(info.result == cudaGraphExecUpdateSuccess);
  CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CHECK(doubled(y, 5.0f));
  // ... and one with other nodes is refused; the executable graph keeps what it had
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  st_produce(x, n, 9.0f, s);
  cudaGraph_t g9;
  CUDA_OK(cudaStreamEndCapture(s, &g9));
  CHECK_ERR(cudaGraphExecUpdate(exec, g9, &info), cudaErrorGraphExecUpdateFailure);
  CHECK(info.result == cudaGraphExecUpdateErrorTopologyChanged);
  CUDA_OK(cudaGetLastError() == cudaErrorGraphExecUpdateFailure ? cudaSuccess : cudaErrorUnknown);
  CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CHECK(doubled(y, 5.0f));

  CHECK_ERR(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t none;
  CHECK_ERR(cudaStreamEndCapture(s, &none), cudaErrorIllegalState); // not capturing
  CUDA_OK(cudaGetLastError() == cudaErrorIllegalState ? cudaSuccess : cudaErrorUnknown);
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(g));
  CUDA_OK(cudaGraphDestroy(g5));
  CUDA_OK(cudaGraphDestroy(g9));
  CHECK_ERR(cudaGraphLaunch(exec, s), cudaErrorInvalidResourceHandle);
  CUDA_OK(cudaGetLastError() == cudaErrorInvalidResourceHandle ? cudaSuccess : cudaErrorUnknown);
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaStreamDestroy(other));
  printf("ok   capture records without running; launches replay in order; whole graph update\n");
}

// Fork and join through events; a joined stream's work the origin did not wait for is unjoined; an
// uncaptured event needs cudaEventWaitExternal; captured events cannot be queried.
void events_and_streams() {
  float *x, *y;
  CUDA_OK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&y, n * sizeof(float)));
  cudaStream_t s, side, copy;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  cudaEvent_t fork, join, outside;
  CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CUDA_OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  CUDA_OK(cudaEventCreateWithFlags(&outside, cudaEventDisableTiming));

  // s produces, side consumes (joined through `fork`), s waits for side (`join`)
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  st_produce(x, n, 3.0f, s);
  CUDA_OK(cudaEventRecord(fork, s));
  CHECK_ERR(cudaEventQuery(fork), cudaErrorCapturedEvent); // and the capture is invalidated: start again
  cudaGraph_t g;
  CHECK_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  CHECK(g == nullptr);
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  st_produce(x, n, 3.0f, s);
  CUDA_OK(cudaEventRecord(fork, s));
  CUDA_OK(cudaStreamWaitEvent(side, fork, 0));
  CHECK(status(side) == cudaStreamCaptureStatusActive);
  st_consume(x, y, n, side);
  CUDA_OK(cudaEventRecord(join, side));
  CUDA_OK(cudaStreamWaitEvent(s, join, 0));
  CUDA_OK(cudaStreamEndCapture(s, &g));
  CHECK(status(side) == cudaStreamCaptureStatusNone);
  CHECK_ERR(cudaStreamWaitEvent(copy, join, 0), cudaErrorCapturedEvent); // recorded in a capture
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CHECK(doubled(y, 3.0f));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(g));

  // without the join back
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaEventRecord(fork, s));
  CUDA_OK(cudaStreamWaitEvent(side, fork, 0));
  st_consume(x, y, n, side);
  CHECK_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureUnjoined);
  CHECK(status(side) == cudaStreamCaptureStatusNone);
  cudaGetLastError();

  // an event recorded outside the capture: refused without cudaEventWaitExternal ...
  st_produce(x, n, 0.0f, copy);
  CUDA_OK(cudaEventRecord(outside, copy));
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK_ERR(cudaStreamWaitEvent(s, outside, 0), cudaErrorStreamCaptureIsolation);
  CHECK(status(s) == cudaStreamCaptureStatusInvalidated);
  st_consume(x, y, n, s);
  CHECK_ERR(cudaGetLastError(), cudaErrorStreamCaptureInvalidated);
  CHECK_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  // ... and with it, each launch waits for the event's record at that time (the upload pattern:
  // the copy stream produces, the graph consumes), right under every seed
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaStreamWaitEvent(s, outside, cudaEventWaitExternal));
  st_consume(x, y, n, s);
  CUDA_OK(cudaEventRecordWithFlags(fork, s, cudaEventRecordExternal)); // recorded by each launch
  CUDA_OK(cudaStreamEndCapture(s, &g));
  CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  CUDA_OK(cudaEventRecord(fork, s)); // last recorded by the unjoined capture above: record it outside
  for (uint64_t seed = 1; seed <= 6; seed++) {
    hs_emu_set_seed(seed);
    CUDA_OK(cudaStreamWaitEvent(copy, fork, 0)); // x is rewritten only after the last launch read it
    st_produce(x, n, static_cast<float>(seed), copy);
    CUDA_OK(cudaEventRecord(outside, copy));
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CHECK(doubled(y, static_cast<float>(seed)));
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(g));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
  printf("ok   events fork and join streams into a capture; unjoined work; external events; captured events\n");
}

// What CUDA refuses during a capture is refused here, and invalidates the capture.
void refused_during_capture() {
  float *x, *y, *pinned;
  CUDA_OK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&y, n * sizeof(float)));
  CUDA_OK(cudaMallocHost(&pinned, n * sizeof(float)));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::function<cudaError_t()> refused[] = {
      [&] { return cudaStreamSynchronize(s); },
      [&] { return cudaStreamQuery(s); },
      [&] { return cudaDeviceSynchronize(); },
      [&] { return cudaFree(x); },
      [&] {
        float *tmp;
        return cudaMalloc(&tmp, 64);
      },
      [&] { return cudaMemcpy(pinned, x, n * sizeof(float), cudaMemcpyDeviceToHost); },
      [&] { return cudaMemsetAsync(pinned, 0, n * sizeof(float), s); }, // synchronous: pinned target
  };
  for (const auto &call : refused) {
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    st_produce(x, n, 1.0f, s);
    CHECK_ERR(call(), cudaErrorStreamCaptureUnsupported);
    CHECK(status(s) == cudaStreamCaptureStatusInvalidated);
    st_consume(x, y, n, s); // later work of the capture fails too
    CHECK_ERR(cudaGetLastError(), cudaErrorStreamCaptureInvalidated);
    CHECK_ERR(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, s), cudaErrorStreamCaptureInvalidated);
    cudaGraph_t g = reinterpret_cast<cudaGraph_t>(1);
    CHECK_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    CHECK(g == nullptr);
    CHECK(status(s) == cudaStreamCaptureStatusNone);
    cudaGetLastError();
  }
  // a relaxed-mode capture allows cudaMalloc and cudaFree (they are not on the capturing stream)
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  float *tmp;
  CUDA_OK(cudaMalloc(&tmp, 64));
  CUDA_OK(cudaFree(tmp));
  CHECK_ERR(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported); // but never a capturing stream's
  cudaGraph_t g;
  CHECK_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
  CUDA_OK(cudaFreeHost(pinned));
  printf("ok   synchronisations, cudaMalloc, cudaFree and synchronous copies during a capture are refused and invalidate it\n");
}
} // namespace

int main() {
  capture_and_replay();
  events_and_streams();
  refused_during_capture();
  return 0;
}
