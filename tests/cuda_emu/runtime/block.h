// Execution of one kernel on the emulated CUDA device (tests only; tests/cuda_emu/).
// The blocks of the grid run one after another in a seeded random order (CUDA Programming Guide,
// "Thread Hierarchy": blocks must be independent and may run in any order). Within a block every
// thread is a fiber on the calling host thread; a thread runs until it waits (barrier, warp-level
// function, atomicCAS/atomicExch) or exits, and the next thread to run is drawn at random from the
// runnable ones, so code that depends on an order between barriers gives wrong numbers.
#ifndef HS_EMU_BLOCK_H
#define HS_EMU_BLOCK_H
#include <cstddef>
#include <functional>
#include "hs_emu/device_builtins.h"
#include "hs_emu/launch.h"

namespace hs_emu {

struct KernelLaunch {
  LaunchSite site;
  dim3 grid, block;
  size_t dynamic_shared;
  size_t shared_limit; // static + dynamic shared memory per block
  std::function<void()> body; // runs one thread: calls the kernel with the launch's arguments
};

// Runs every block of the grid; device memory must be accessible (memory.h, DeviceAccess).
// Errors in the kernel's use of barriers and warp functions are reported and abort the process.
void run_kernel(const KernelLaunch &launch);

} // namespace hs_emu
#endif
