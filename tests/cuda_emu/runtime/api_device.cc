// Device management and error handling of the emulated CUDA runtime (tests only; tests/cuda_emu/).
// CUDA Runtime API, "Device Management" and "Error Handling". A node of HS_CUDA_EMU_DEVICES GPUs
// (default 1; 0 makes it a machine without a GPU), each with the limits of a compute capability 8.0
// GPU (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability") and its own PCI
// bus id and UUID (state.h: they share one execution engine; a process uses the one it set).
#include <cstdio>
#include <cstring>
#include "cuda_profiler_api.h"
#include "memory.h"
#include "shared_memory.h"
#include "state.h"
#include "graphs.h"
#include "streams.h"

using namespace hs_emu;

extern "C" cudaError_t cudaGetDeviceCount(int *count) {
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  if (count == nullptr) return record_error(cudaErrorInvalidValue);
  *count = config().devices;
  return record_error(config().devices == 0 ? cudaErrorNoDevice : cudaSuccess);
}

namespace {
bool valid_device(int device) { return device >= 0 && device < config().devices; }
} // namespace

extern "C" cudaError_t cudaSetDevice(int device) {
  HS_EMU_API_ENTER;
  if (!valid_device(device)) return record_error(cudaErrorInvalidDevice);
  set_current_device(device);
  return cudaSuccess;
}

extern "C" cudaError_t cudaGetDevice(int *device) {
  HS_EMU_API_ENTER;
  if (device == nullptr) return record_error(cudaErrorInvalidValue);
  *device = current_device();
  return cudaSuccess;
}

// "[domain]:[bus]:[device].[function]" in hexadecimal, NUL-terminated within len (CUDA writes at most
// len bytes; 13 hold the whole id).
extern "C" cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  HS_EMU_API_ENTER;
  if (pciBusId == nullptr || len <= 0) return record_error(cudaErrorInvalidValue);
  if (!valid_device(device)) return record_error(cudaErrorInvalidDevice);
  snprintf(pciBusId, static_cast<size_t>(len), "%04x:%02x:%02x.%x", 0, pci_bus(device), 0, 0);
  return cudaSuccess;
}

extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
  HS_EMU_API_ENTER;
  if (p == nullptr) return record_error(cudaErrorInvalidValue);
  if (!valid_device(device)) return record_error(cudaErrorInvalidDevice);
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "hetseq emulated CUDA device (fibers on the host CPU, sm_80 limits)");
  memcpy(p->uuid.bytes, "hetseq-emulated", 16);
  p->uuid.bytes[15] = static_cast<char>('A' + device); // one UUID per GPU of the node
  p->pciDomainID = 0;
  p->pciBusID = pci_bus(device);
  p->pciDeviceID = 0;
  device_mem_info(nullptr, &p->totalGlobalMem);
  p->sharedMemPerBlock = kStaticSharedLimit;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->memPitch = 2147483647;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->totalConstMem = 65536;
  p->major = 8;
  p->minor = 0;
  p->textureAlignment = 512;
  p->multiProcessorCount = 108;
  p->canMapHostMemory = 1;
  p->concurrentKernels = 1;
  p->asyncEngineCount = 2;
  p->unifiedAddressing = 1;
  p->memoryBusWidth = 5120;
  p->l2CacheSize = 40 << 20;
  p->maxThreadsPerMultiProcessor = kThreadsPerSM;
  p->sharedMemPerMultiprocessor = kSharedPerSM;
  p->regsPerMultiprocessor = 65536;
  p->managedMemory = 0; // cudaMallocManaged is not emulated
  p->sharedMemPerBlockOptin = kSharedPerBlockOptin;
  p->maxBlocksPerMultiProcessor = kBlocksPerSM;
  p->reservedSharedMemPerBlock = kSharedReservedPerBlock;
  return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
  HS_EMU_API_ENTER;
  if (value == nullptr) return record_error(cudaErrorInvalidValue);
  if (!valid_device(device)) return record_error(cudaErrorInvalidDevice);
  switch (attr) {
  case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
  case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(kStaticSharedLimit); break;
  case cudaDevAttrWarpSize: *value = 32; break;
  case cudaDevAttrMultiProcessorCount: *value = 108; break;
  case cudaDevAttrComputeCapabilityMajor: *value = 8; break;
  case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(kSharedPerBlockOptin); break;
  case cudaDevAttrPciBusId: *value = pci_bus(device); break;
  case cudaDevAttrMemoryClockRate: *value = 1215000; break; // kHz: an A100 40GB's HBM2, 1555 GB/s
  case cudaDevAttrGlobalMemoryBusWidth: *value = 5120; break;
  case cudaDevAttrPciDeviceId: *value = 0; break;
  case cudaDevAttrPciDomainId: *value = 0; break;
  default: return record_error(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

// Profiler control: no profiler here. Each call says so on stderr, the stop with the kernels and graphs
// launched since the start (host launches outside a capture, cudaGraphLaunch calls), so a test sees
// where the program placed its range. Start while started, or stop while stopped, has no effect (as
// CUDA's "has no effect" when the profiler is already on or off).
namespace {
bool g_profiling = false;
hs_emu_stats g_profile_start;
} // namespace

extern "C" cudaError_t cudaProfilerStart(void) {
  HS_EMU_API_ENTER;
  if (g_profiling) return cudaSuccess;
  g_profiling = true;
  g_profile_start = g_stats;
  fprintf(stderr, "hs_cuda_emu: cudaProfilerStart\n");
  return cudaSuccess;
}

extern "C" cudaError_t cudaProfilerStop(void) {
  HS_EMU_API_ENTER;
  if (!g_profiling) return cudaSuccess;
  g_profiling = false;
  fprintf(stderr, "hs_cuda_emu: cudaProfilerStop: %llu kernel launch(es), %llu graph launch(es) since cudaProfilerStart\n",
          (unsigned long long)(g_stats.kernel_launches - g_profile_start.kernel_launches),
          (unsigned long long)(g_stats.graph_launches - g_profile_start.graph_launches));
  return cudaSuccess;
}

// Waits for all work of all streams (runs it all, in a seeded random order that respects streams
// and events).
extern "C" cudaError_t cudaDeviceSynchronize(void) {
  HS_EMU_API_ENTER;
  if (refuse_during_capture()) return record_error(cudaErrorStreamCaptureUnsupported);
  run_until(device_idle);
  return cudaSuccess;
}

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  HS_EMU_API_ENTER;
  if (free_bytes == nullptr || total_bytes == nullptr) return record_error(cudaErrorInvalidValue);
  device_mem_info(free_bytes, total_bytes);
  return cudaSuccess;
}

// cudaGetLastError returns the last error of any runtime call of this host thread and resets it;
// cudaPeekAtLastError does not reset it. Launch errors arrive here (HS_LAUNCH has no return value).
extern "C" cudaError_t cudaGetLastError(void) { return take_last_error(); }
extern "C" cudaError_t cudaPeekAtLastError(void) { return peek_last_error(); }

namespace {
struct ErrorText {
  cudaError_t code;
  const char *name, *text;
};
// CUDA's own names and messages for the codes the emulator uses.
const ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorGraphExecUpdateFailure, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};
const ErrorText *find_error(cudaError_t e) {
  for (const ErrorText &t : kErrors)
    if (t.code == e) return &t;
  return nullptr;
}
} // namespace

extern "C" const char *cudaGetErrorString(cudaError_t e) {
  const ErrorText *t = find_error(e);
  return t ? t->text : "unrecognized error code";
}

extern "C" const char *cudaGetErrorName(cudaError_t e) {
  const ErrorText *t = find_error(e);
  return t ? t->name : "cudaErrorUnknown";
}
