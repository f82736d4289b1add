// Shared memory of the block that runs now on the emulated CUDA device (tests only; tests/cuda_emu/).
// Blocks run one at a time, so one window serves every block. At the start of each block both kinds
// start undefined again (CUDA does not initialise shared memory): every variable is filled with
// 0xFF bytes (NaN / -1) when the block first reaches its declaration, and the dynamic part when the
// block starts. Limits follow CUDA for compute capability 8.0 (CUDA C++ Programming Guide, "Shared
// Memory" and "Technical Specifications"): 48 KiB of static shared memory; static + dynamic at most
// 48 KiB unless the kernel opted in with cudaFuncAttributeMaxDynamicSharedMemorySize.
#ifndef HS_EMU_SHARED_MEMORY_H
#define HS_EMU_SHARED_MEMORY_H
#include <cstddef>
#include <utility>
#include <vector>

namespace hs_emu {

constexpr size_t kStaticSharedLimit = 48 << 10;
constexpr size_t kSharedPerBlockOptin = 166912; // sharedMemPerBlockOptin of an sm_80 device (163 KiB)
// one multiprocessor of an sm_80 device (cudaDeviceProp, api_device.cc; the occupancy calculator, api_launch.cc)
constexpr size_t kSharedPerSM = 167936, kSharedReservedPerBlock = 1024;
constexpr int kThreadsPerSM = 2048, kBlocksPerSM = 32;

class SharedMemory {
public:
  SharedMemory();
  void begin_block(size_t dynamic_bytes, size_t limit); // limit on static + dynamic
  // The block's copy of the variable declared at key; nullptr when the limits are exceeded.
  void *static_var(const void *key, size_t size, size_t align);
  void *dynamic_base() const { return dynamic_; }
  size_t static_bytes() const { return used_; }
  size_t dynamic_bytes() const { return dynamic_bytes_; }

private:
  char *static_base_, *dynamic_end_, *dynamic_ = nullptr;
  size_t used_ = 0, dynamic_bytes_ = 0, limit_ = 0;
  std::vector<std::pair<const void *, size_t>> vars_; // key -> offset, for this block
};

} // namespace hs_emu
#endif
