// Memory of the emulated CUDA device (tests only; tests/cuda_emu/).
// Device memory is one reserved mapping (the arena), PROT_NONE whenever no work item runs, so a host
// dereference of a device pointer faults as on a GPU (CUDA Programming Guide, "Device Memory").
// Allocations are 256-byte aligned (cudaMalloc's guarantee), filled with 0xFF bytes (a NaN in
// fp32/fp64/fp16/bf16, -1 as an integer; CUDA does not zero memory), and followed by a red zone that
// is checked after every kernel. Pinned host memory (cudaMallocHost, cudaHostAlloc) is ordinary host
// memory registered here so copies know their direction; it is filled the same way.
#ifndef HS_EMU_MEMORY_H
#define HS_EMU_MEMORY_H
#include <cstddef>
#include "cuda_runtime_api.h"

namespace hs_emu {

enum class MemKind { Device, Pinned, Pageable };
MemKind classify(const void *p);
// True when [p, p + n) lies inside one live allocation of its kind (device or pinned).
bool range_valid(MemKind kind, const void *p, size_t n);

cudaError_t device_malloc(void **p, size_t n);
cudaError_t device_free(void *p);
cudaError_t pinned_malloc(void **p, size_t n);
cudaError_t pinned_free(void *p);
void device_mem_info(size_t *free_bytes, size_t *total_bytes);

// Device memory is readable and writable inside this scope (work items run inside it); nests.
class DeviceAccess {
public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess &) = delete;
  DeviceAccess &operator=(const DeviceAccess &) = delete;
};

// After a kernel: reports (and aborts) if the kernel wrote into the red zone after an allocation.
void check_red_zones(const char *kernel, const char *file, int line);

constexpr unsigned char kFillByte = 0xFF;

} // namespace hs_emu
#endif
