// The emulated CUDA runtime API behaves as the CUDA Runtime API documents: the device and its
// properties, error codes and cudaGetLastError, launch-configuration errors, memory (fill pattern,
// copy directions and bounds, memset), and stream ordering (legacy default stream, blocking and
// non-blocking streams, events, queries). Run with the argument --no-device (and
// HS_CUDA_EMU_DEVICES=0) it checks the machine-without-a-GPU answers instead.
#include <cstdint>
#include <vector>
#include "hs_emu/control.h"
#include "selftest.h"
#include "selftest_kernels.h"

namespace {

void device_and_errors() {
  int count = -1, dev = -1;
  CUDA_OK(cudaGetDeviceCount(&count));
  CHECK(count == 1);
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaGetDevice(&dev));
  CHECK(dev == 0);
  cudaDeviceProp p;
  CUDA_OK(cudaGetDeviceProperties(&p, 0));
  CHECK(p.warpSize == 32 && p.maxThreadsPerBlock == 1024 && p.sharedMemPerBlock == 48 * 1024);
  CHECK(p.major == 8 && p.minor == 0 && p.multiProcessorCount > 0 && p.totalGlobalMem > 0);
  CHECK(p.sharedMemPerBlockOptin > p.sharedMemPerBlock && p.maxGridSize[0] == 2147483647 && p.maxThreadsDim[2] == 64);
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(sms == p.multiProcessorCount);
  // the PCI bus id: "0000:01:00.0", the same in the properties and the attributes
  char bus[32];
  CUDA_OK(cudaDeviceGetPCIBusId(bus, sizeof bus, 0));
  CHECK(strcmp(bus, "0000:01:00.0") == 0 && p.pciBusID == 1 && p.pciDomainID == 0 && p.pciDeviceID == 0);
  int attr_bus = 0;
  CUDA_OK(cudaDeviceGetAttribute(&attr_bus, cudaDevAttrPciBusId, 0));
  CHECK(attr_bus == 1);
  CHECK_ERR(cudaDeviceGetPCIBusId(bus, sizeof bus, 1), cudaErrorInvalidDevice); // a node of one GPU
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidDevice);

  // cudaGetLastError returns the last error and resets it; cudaPeekAtLastError does not reset it
  CUDA_OK(cudaGetLastError());
  CHECK_ERR(cudaSetDevice(1), cudaErrorInvalidDevice);
  CHECK_ERR(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
  CHECK_ERR(cudaGetLastError(), cudaSuccess);
  CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
  CHECK(strcmp(cudaGetErrorName(cudaErrorInvalidConfiguration), "cudaErrorInvalidConfiguration") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorNoDevice), "no CUDA-capable device is detected") == 0);
  printf("ok   device, properties, PCI bus id, cudaGetLastError / cudaPeekAtLastError, error strings\n");
}

void launch_errors() {
  const int n = 64;
  float *x = nullptr, *y = nullptr;
  CUDA_OK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&y, n * sizeof(float)));
  CUDA_OK(cudaMemset(x, 0, n * sizeof(float)));
  CUDA_OK(cudaMemset(y, 0, n * sizeof(float)));
  std::vector<float> h(n);

  st_dynamic_reverse(x, y, n, 1025, 1025 * sizeof(float), 0); // more than 1024 threads per block
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);
  st_index_grid(reinterpret_cast<int *>(y), 4, 4, dim3(1, 1, 65), 0); // block z > 64
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);
  st_index_grid(reinterpret_cast<int *>(y), 4, 4, dim3(64, 32), 0); // 2048 threads
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);
  st_dynamic_reverse(x, y, 0, 32, 32 * sizeof(float), 0); // a grid of 0 blocks
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);
  st_dynamic_reverse(x, y, n, 32, 48 * 1024 + 4, 0); // dynamic shared memory over 48 KiB, no opt-in
  CHECK_ERR(cudaPeekAtLastError(), cudaErrorInvalidValue);
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
  cudaStream_t gone;
  CUDA_OK(cudaStreamCreate(&gone));
  CUDA_OK(cudaStreamDestroy(gone));
  st_produce(x, n, 1.0f, gone); // a destroyed stream
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  CUDA_OK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (float v : h) CHECK(v == 0.0f); // none of the failed launches ran

  // the occupancy calculator: blocks per multiprocessor by blocks (32), threads (2048) and shared memory
  // (164 KiB, 1 KiB reserved per block); 0 above the kernel's dynamic limit (48 KiB until the opt-in)
  int blocks = -1;
  CUDA_OK(st_dynamic_reverse_occupancy(&blocks, 32, 0));
  CHECK(blocks == 32);
  CUDA_OK(st_dynamic_reverse_occupancy(&blocks, 256, 0));
  CHECK(blocks == 8);
  CUDA_OK(st_dynamic_reverse_occupancy(&blocks, 100, 0)); // 4 warps
  CHECK(blocks == 16);
  CUDA_OK(st_dynamic_reverse_occupancy(&blocks, 64, 40 * 1024));
  CHECK(blocks == 4);
  CUDA_OK(st_dynamic_reverse_occupancy(&blocks, 32, 48 * 1024 + 4));
  CHECK(blocks == 0);
  CHECK_ERR(st_dynamic_reverse_occupancy(&blocks, 0, 0), cudaErrorInvalidValue);
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);

  // not sticky: the same kernel runs after the errors; the opt-in allows more dynamic shared memory
  CHECK_ERR(st_dynamic_reverse_allow(200 * 1024), cudaErrorInvalidValue); // over sharedMemPerBlockOptin
  CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
  CUDA_OK(st_dynamic_reverse_allow(64 * 1024));
  CUDA_OK(st_dynamic_reverse_occupancy(&blocks, 32, 48 * 1024 + 4));
  CHECK(blocks == 3);
  CUDA_OK(st_dynamic_reverse_occupancy(&blocks, 32, 64 * 1024 + 4));
  CHECK(blocks == 0);
  st_produce(x, n, 5.0f, 0);
  st_dynamic_reverse(x, y, n, 32, 64 * 1024, 0);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(h[0] == 5.0f + 31 && h[31] == 5.0f && h[32] == 5.0f + 63);
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
  printf("ok   launch errors through cudaGetLastError (block/grid dimensions, shared memory, stream), "
         "not sticky; cudaFuncAttributeMaxDynamicSharedMemorySize opt-in; the occupancy calculator\n");
}

void memory() {
  const int n = 100;
  float *d = nullptr, *d2 = nullptr, *pinned = nullptr;
  CUDA_OK(cudaMalloc(&d, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&d2, n * sizeof(float)));
  CHECK(reinterpret_cast<uintptr_t>(d) % 256 == 0 && reinterpret_cast<uintptr_t>(d2) % 256 == 0);
  CUDA_OK(cudaMallocHost(&pinned, n * sizeof(float)));
  CHECK(all_bytes_ff(pinned, n * sizeof(float))); // not zeroed
  std::vector<float> h(n, 0.0f), back(n);
  CUDA_OK(cudaMemcpy(back.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(all_bytes_ff(back.data(), n * sizeof(float)) && std::isnan(back[0])); // fresh device memory is NaN

  // the direction must match the pointers; cudaMemcpyDefault infers it
  CHECK_ERR(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  CHECK_ERR(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  CHECK_ERR(cudaMemcpy(d, d2, n * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  CHECK_ERR(cudaMemcpy(h.data(), pinned, n * sizeof(float), cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  CHECK_ERR(cudaMemcpy(d, h.data(), n * sizeof(float), static_cast<cudaMemcpyKind>(7)), cudaErrorInvalidMemcpyDirection);
  CHECK_ERR(cudaMemcpy(d, h.data(), (n + 1) * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue); // past the end
  CHECK_ERR(cudaMemcpy(d + 1, h.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  CHECK_ERR(cudaMemset(h.data(), 0, sizeof(float)), cudaErrorInvalidValue); // pageable host memory
  CHECK_ERR(cudaFree(d + 1), cudaErrorInvalidValue);
  CHECK_ERR(cudaFree(h.data()), cudaErrorInvalidValue);
  CHECK_ERR(cudaFreeHost(h.data()), cudaErrorInvalidValue);
  CUDA_OK(cudaGetLastError() == cudaErrorInvalidValue ? cudaSuccess : cudaErrorUnknown);

  for (int i = 0; i < n; i++) h[i] = static_cast<float>(i);
  CUDA_OK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyDefault));           // H2D
  CUDA_OK(cudaMemcpy(d2, d, n * sizeof(float), cudaMemcpyDefault));                 // D2D
  CUDA_OK(cudaMemcpy(pinned, d2, n * sizeof(float), cudaMemcpyDefault));            // D2H (pinned)
  for (int i = 0; i < n; i++) CHECK(pinned[i] == static_cast<float>(i));
  CUDA_OK(cudaMemset(d2, 0, 10 * sizeof(float)));                                   // device: queued
  CUDA_OK(cudaMemcpy(back.data(), d2, n * sizeof(float), cudaMemcpyDeviceToHost));  // after it (stream 0)
  for (int i = 0; i < n; i++) CHECK(back[i] == (i < 10 ? 0.0f : static_cast<float>(i)));
  CUDA_OK(cudaMemset(pinned, 0, n * sizeof(float)));                                // pinned: synchronous
  CHECK(pinned[n - 1] == 0.0f);
  void *mapped = nullptr;
  CUDA_OK(cudaHostGetDevicePointer(&mapped, pinned, 0));
  CHECK(mapped == pinned);
  size_t free_b = 0, total_b = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  CHECK(free_b < total_b);
  CUDA_OK(cudaFree(d));
  CUDA_OK(cudaFree(d2));
  CUDA_OK(cudaFreeHost(pinned));
  CUDA_OK(cudaFree(nullptr));
  printf("ok   memory: 256-byte alignment, NaN fill, copy directions and bounds, memset, pinned memory\n");
}

// Correct stream usage gives the right result under every seed; the non-blocking stream does not
// wait for the legacy stream (wrong under some seed), as documented.
void streams() {
  const int n = 300;
  float *x = nullptr, *y = nullptr;
  CUDA_OK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&y, n * sizeof(float)));
  cudaStream_t blocking, nonblocking;
  CUDA_OK(cudaStreamCreate(&blocking));
  CUDA_OK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
  std::vector<float> h(n);
  auto right = [&](float base) {
    CUDA_OK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
      if (h[i] != 2.0f * (base + i)) return false;
    return true;
  };
  int nonblocking_wrong = 0;
  for (uint64_t seed = 1; seed <= 8; seed++) {
    hs_emu_set_seed(seed);
    float base = static_cast<float>(seed);
    st_produce(x, n, base, blocking); // legacy stream waits for the blocking stream
    st_consume(x, y, n, 0);
    CHECK(right(base));
    st_produce(x, n, base + 1, 0); // a blocking stream waits for the legacy stream
    st_consume(x, y, n, blocking);
    CUDA_OK(cudaStreamSynchronize(blocking));
    CHECK(right(base + 1));
    st_produce(x, n, base + 2, 0); // a non-blocking stream does not
    st_consume(x, y, n, nonblocking);
    CUDA_OK(cudaStreamSynchronize(nonblocking));
    nonblocking_wrong += !right(base + 2);
    CUDA_OK(cudaDeviceSynchronize());
  }
  CHECK(nonblocking_wrong >= 1);

  // queries: not ready while work is queued, and a polling loop makes progress
  st_produce(x, n, 7.0f, blocking);
  CHECK_ERR(cudaStreamQuery(blocking), cudaErrorNotReady);
  while (cudaStreamQuery(blocking) == cudaErrorNotReady) {
  }
  cudaEvent_t a, b, never;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  CUDA_OK(cudaEventCreate(&never));
  CUDA_OK(cudaEventQuery(never)); // never recorded: complete
  CUDA_OK(cudaEventSynchronize(never));
  CUDA_OK(cudaStreamWaitEvent(nonblocking, never, 0));
  float ms = -1;
  CHECK_ERR(cudaEventElapsedTime(&ms, a, never), cudaErrorInvalidResourceHandle);
  CUDA_OK(cudaEventRecord(a, blocking));
  st_produce(x, n, 8.0f, blocking);
  CUDA_OK(cudaEventRecord(b, blocking));
  CHECK_ERR(cudaEventQuery(b), cudaErrorNotReady);
  CHECK_ERR(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
  CUDA_OK(cudaEventSynchronize(b));
  CUDA_OK(cudaEventElapsedTime(&ms, a, b));
  CHECK(ms >= 0.0f);
  CUDA_OK(cudaGetLastError() == cudaErrorNotReady ? cudaSuccess : cudaErrorUnknown);

  // a destroyed stream's queued work still runs; its handle is invalid afterwards
  st_produce(x, n, 9.0f, nonblocking);
  CUDA_OK(cudaStreamDestroy(nonblocking));
  CHECK_ERR(cudaStreamSynchronize(nonblocking), cudaErrorInvalidResourceHandle);
  CUDA_OK(cudaDeviceSynchronize());
  st_consume(x, y, n, 0);
  CHECK(right(9.0f));
  CHECK_ERR(cudaStreamDestroy(0), cudaErrorInvalidResourceHandle);
  CHECK_ERR(cudaStreamSynchronize(cudaStreamPerThread), cudaErrorNotSupported);
  CUDA_OK(cudaEventDestroy(a));
  CHECK_ERR(cudaEventRecord(a, 0), cudaErrorInvalidResourceHandle);
  CUDA_OK(cudaGetLastError() == cudaErrorInvalidResourceHandle ? cudaSuccess : cudaErrorUnknown);
  CUDA_OK(cudaEventDestroy(b));
  CUDA_OK(cudaEventDestroy(never));
  CUDA_OK(cudaStreamDestroy(blocking));
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
  printf("ok   streams: legacy default stream vs blocking streams, non-blocking streams wrong under %d of 8 seeds "
         "without an event, queries, events, destroyed handles\n",
         nonblocking_wrong);
}

// HS_CUDA_EMU_SCHEDULE = "priority": an upload on a copy stream (created after the compute stream) that
// the reading stream does not wait for is read stale under every seed; with
// cudaEventRecord + cudaStreamWaitEvent the reader sees the upload under every seed.
void schedule_priority() {
  const int n = 300;
  float *x = nullptr, *y = nullptr, *filler = nullptr, *pinned = nullptr;
  CUDA_OK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&y, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&filler, n * sizeof(float)));
  CUDA_OK(cudaMallocHost(&pinned, n * sizeof(float)));
  cudaStream_t compute, copy;
  CUDA_OK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  cudaEvent_t uploaded;
  CUDA_OK(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
  std::vector<float> h(n);
  auto y_is = [&](float base) {
    CUDA_OK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
      if (h[i] != 2.0f * (base + i)) return false;
    return true;
  };
  hs_emu_set_schedule(1);
  for (uint64_t seed = 1; seed <= 4; seed++) {
    hs_emu_set_seed(seed);
    for (int ordered = 0; ordered <= 1; ordered++) {
      st_produce(x, n, 1.0f, compute); // x = 1 + i before the upload
      CUDA_OK(cudaStreamSynchronize(compute));
      for (int i = 0; i < n; i++) pinned[i] = 5.0f + static_cast<float>(i);
      CUDA_OK(cudaMemcpyAsync(x, pinned, n * sizeof(float), cudaMemcpyHostToDevice, copy));
      CUDA_OK(cudaEventRecord(uploaded, copy));
      for (int k = 0; k < 3; k++) st_produce(filler, n, 0.0f, compute); // other work queued before the read
      if (ordered) CUDA_OK(cudaStreamWaitEvent(compute, uploaded, 0));
      st_consume(x, y, n, compute);
      CUDA_OK(cudaStreamSynchronize(compute));
      CUDA_OK(cudaStreamSynchronize(copy));
      CHECK(y_is(ordered ? 5.0f : 1.0f));
    }
  }
  hs_emu_set_schedule(0);
  CUDA_OK(cudaEventDestroy(uploaded));
  CUDA_OK(cudaStreamDestroy(compute));
  CUDA_OK(cudaStreamDestroy(copy));
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
  CUDA_OK(cudaFree(filler));
  CUDA_OK(cudaFreeHost(pinned));
  printf("ok   schedule \"priority\": an unordered upload is read stale under every seed, an ordered one is seen\n");
}

int no_device() {
  int count = -1;
  CHECK_ERR(cudaGetDeviceCount(&count), cudaErrorNoDevice);
  CHECK(count == 0);
  void *p = nullptr;
  CHECK_ERR(cudaMalloc(&p, 16), cudaErrorNoDevice);
  st_produce(nullptr, 1, 0.0f, 0);
  CHECK_ERR(cudaGetLastError(), cudaErrorNoDevice);
  printf("ok   HS_CUDA_EMU_DEVICES=0: cudaGetDeviceCount and every call answer cudaErrorNoDevice\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--no-device") == 0) return no_device();
  device_and_errors();
  launch_errors();
  memory();
  streams();
  schedule_priority();
  // a machine without a GPU: the configuration is read once per process, so ask a new process
  const ChildEnd end = run_in_child([] {
    setenv("HS_CUDA_EMU_DEVICES", "0", 1);
    execl("/proc/self/exe", "test_emu_runtime", "--no-device", static_cast<char *>(nullptr));
    _exit(127);
  });
  if (!WIFEXITED(end.status) || WEXITSTATUS(end.status) != 0) {
    fprintf(stderr, "FAIL HS_CUDA_EMU_DEVICES=0 child:\n%s\n", end.stderr_text.c_str());
    return 1;
  }
  return 0;
}
