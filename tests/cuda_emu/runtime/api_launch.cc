// Kernel launch on the emulated CUDA runtime (tests only; tests/cuda_emu/). The checks CUDA makes when
// a kernel is launched with <<<>>> (CUDA C++ Programming Guide, "Execution Configuration" and
// "Technical Specifications" for compute capability 8.0; CUDA Runtime API, cudaFuncSetAttribute):
//   - block: each dimension >= 1, x and y <= 1024, z <= 64, x*y*z <= 1024;
//     grid: x in [1, 2^31-1], y and z in [1, 65535]          -> cudaErrorInvalidConfiguration
//   - dynamic shared memory above the kernel's limit (48 KiB unless raised with
//     cudaFuncAttributeMaxDynamicSharedMemorySize)           -> cudaErrorInvalidValue
//   - an invalid stream                                       -> cudaErrorInvalidResourceHandle
// cudaOccupancyMaxActiveBlocksPerMultiprocessor answers from the same limits: blocks per multiprocessor
// (32), its threads (2048, whole warps) and its shared memory (164 KiB, 1 KiB reserved per block);
// a block above the kernel's dynamic shared-memory limit fits 0 times. Registers are not emulated.
// These errors are not sticky: the kernel is not queued and cudaGetLastError returns (and clears)
// the error. A valid launch is queued on its stream and runs when the host synchronises.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include "block.h"
#include "graphs.h"
#include "memory.h"
#include "shared_memory.h"
#include "state.h"
#include "streams.h"

using namespace hs_emu;

namespace {
std::map<const void *, int> &max_dynamic_shared() { // per kernel; absent = the 48 KiB default
  static std::map<const void *, int> *m = new std::map<const void *, int>;
  return *m;
}

cudaError_t check_configuration(dim3 g, dim3 b) {
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 ||
      static_cast<uint64_t>(b.x) * b.y * b.z > 1024)
    return cudaErrorInvalidConfiguration;
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    return cudaErrorInvalidConfiguration;
  return cudaSuccess;
}
} // namespace

namespace hs_emu {

void launch_kernel(const void *func, const LaunchSite &site, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                   std::function<void()> body) {
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  if (config().devices == 0) {
    record_error(cudaErrorNoDevice);
    return;
  }
  cudaError_t err = check_configuration(grid, block);
  if (err != cudaSuccess) {
    record_error(err);
    return;
  }
  const auto opt = max_dynamic_shared().find(func);
  const size_t max_dynamic = opt == max_dynamic_shared().end() ? kStaticSharedLimit : static_cast<size_t>(opt->second);
  if (shmem > max_dynamic) {
    record_error(cudaErrorInvalidValue);
    return;
  }
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) {
    record_error(err);
    return;
  }
  if (s->capture && s->capture->invalid) {
    record_error(cudaErrorStreamCaptureInvalidated);
    return;
  }
  if (!s->capture) g_stats.kernel_launches++;
  auto launch = std::make_shared<KernelLaunch>();
  launch->site = site;
  launch->grid = grid;
  launch->block = block;
  launch->dynamic_shared = shmem;
  launch->shared_limit = opt == max_dynamic_shared().end() ? kStaticSharedLimit : kSharedPerBlockOptin;
  launch->body = std::move(body);
  char label[512];
  snprintf(label, sizeof label, "kernel %s (%s:%d) grid (%u,%u,%u) block (%u,%u,%u) shared %zu", site.kernel, site.file,
           site.line, grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem);
  enqueue(s, label, [launch] {
    run_kernel(*launch);
    check_red_zones(launch->site.kernel, launch->site.file, launch->site.line);
  });
}

} // namespace hs_emu

extern "C" cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
  HS_EMU_API_ENTER;
  if (func == nullptr) return record_error(cudaErrorInvalidDeviceFunction);
  switch (attr) {
  case cudaFuncAttributeMaxDynamicSharedMemorySize:
    if (value < 0 || static_cast<size_t>(value) > kSharedPerBlockOptin) return record_error(cudaErrorInvalidValue);
    max_dynamic_shared()[func] = value;
    return cudaSuccess;
  case cudaFuncAttributePreferredSharedMemoryCarveout: // a hint; nothing to emulate
    if (value < -1 || value > 100) return record_error(cudaErrorInvalidValue);
    return cudaSuccess;
  }
  return record_error(cudaErrorInvalidValue);
}

extern "C" cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
                                                                     size_t dynamicSMemSize) {
  HS_EMU_API_ENTER;
  if (numBlocks == nullptr || blockSize <= 0) return record_error(cudaErrorInvalidValue);
  if (func == nullptr) return record_error(cudaErrorInvalidDeviceFunction);
  const auto opt = max_dynamic_shared().find(func);
  const size_t max_dynamic = opt == max_dynamic_shared().end() ? kStaticSharedLimit : static_cast<size_t>(opt->second);
  const int warps = (blockSize + 31) / 32;
  int blocks = blockSize > 1024 || dynamicSMemSize > max_dynamic ? 0 : kBlocksPerSM;
  if (kThreadsPerSM / (warps * 32) < blocks) blocks = kThreadsPerSM / (warps * 32);
  const size_t by_shared = kSharedPerSM / (dynamicSMemSize + kSharedReservedPerBlock);
  if (by_shared < static_cast<size_t>(blocks)) blocks = static_cast<int>(by_shared);
  *numBlocks = blocks;
  return cudaSuccess;
}
