// Process-wide state of the emulated CUDA device (tests only; tests/cuda_emu/): configuration from
// the environment, the device lock, the seeded random generator, the per-host-thread last error and
// fatal reports.
#ifndef HS_EMU_STATE_H
#define HS_EMU_STATE_H
#include <cstddef>
#include <cstdint>
#include <mutex>
#include "cuda_runtime_api.h"
#include "hs_emu/control.h"

namespace hs_emu {

struct Config {
  uint64_t seed;      // HS_CUDA_EMU_SEED (default 1): orders threads, blocks and stream heads
  size_t mem_bytes;   // HS_CUDA_EMU_MEM_MB (default 4096): size of the device memory arena
  size_t stack_bytes; // HS_CUDA_EMU_STACK_KB (default 64): stack of each emulated thread
  int devices;        // HS_CUDA_EMU_DEVICES (default 1): the GPUs of the emulated node (0: a machine
                      // without a GPU; at most kMaxDevices)
  bool trace;         // HS_CUDA_EMU_TRACE=1: one line on stderr per stream work item executed
  bool fast_path;     // HS_CUDA_EMU_FAST_PATH (default 1): threads that never wait run as a loop (block.cc)
  bool wmma_shuffled; // HS_CUDA_EMU_WMMA_LAYOUT=shuffled (default rowmajor): the fragments' layouts (mma.h)
};
const Config &config();

// The emulated node's GPUs share one execution engine (one memory arena, one set of streams): a
// process uses one of them, chosen with cudaSetDevice, and what differs between them is their
// identity (ordinal, PCI bus id, UUID), which is what ranks compare to find out whether they share a GPU.
constexpr int kMaxDevices = 16;
int current_device(); // cudaSetDevice's choice (0 until then), per process (CUDA: per host thread)
void set_current_device(int device);
// Device d sits at PCI domain 0, bus d + 1, device 0, function 0: "0000:01:00.0" for device 0, as
// cudaDeviceGetPCIBusId writes it ([domain]:[bus]:[device].[function], hexadecimal).
inline int pci_bus(int device) { return device + 1; }

// Every API call holds this lock; kernels run inside it on the calling host thread.
std::recursive_mutex &device_mutex();

// Whether a worker fiber runs the next unstarted thread itself (block.cc); config().fast_path until
// hs_emu_set_fast_path changes it.
bool fast_path_enabled();

uint64_t random_below(uint64_t n); // uniform in [0, n), from the seeded generator
uint64_t current_seed();

// Remembers a failure for cudaGetLastError / cudaPeekAtLastError (per host thread, CUDA Runtime
// API "Error Handling") and returns it; cudaSuccess leaves the last error alone.
cudaError_t record_error(cudaError_t e);
cudaError_t take_last_error();
cudaError_t peek_last_error();

// Prints "hs_cuda_emu: <message> [HS_CUDA_EMU_SEED=...]" and aborts.
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

extern hs_emu_stats g_stats;

} // namespace hs_emu

// First statement of every API function: takes the device lock; with HS_CUDA_EMU_DEVICES=0 every
// call fails with cudaErrorNoDevice, as on a machine without a GPU.
#define HS_EMU_API_ENTER                                                  \
  std::lock_guard<std::recursive_mutex> hs_emu_lock(::hs_emu::device_mutex()); \
  if (::hs_emu::config().devices == 0) return ::hs_emu::record_error(cudaErrorNoDevice)

#endif
