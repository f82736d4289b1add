// Reports of memory faults on the emulated CUDA device (tests only; tests/cuda_emu/). A SIGSEGV
// handler names what was touched (device memory from host code, a fiber stack guard, the guard page
// after dynamic shared memory, an illegal address inside a kernel), then restores the previous
// handler and returns, so the access faults again and the process dies of SIGSEGV as it would with
// a GPU's illegal access.
#ifndef HS_EMU_FAULT_H
#define HS_EMU_FAULT_H
#include <cstddef>

namespace hs_emu {

enum class FaultRegion { DeviceMemory, FiberStacks, SharedGuard };
void fault_register_region(const void *base, size_t bytes, FaultRegion what);

// The kernel running now (for the report); set by the block executor.
struct KernelLaunch;
extern const KernelLaunch *volatile g_running_kernel;

// Gives the calling host thread an alternate signal stack, so a fiber stack overflow is reported.
void fault_prepare_thread();

} // namespace hs_emu
#endif
