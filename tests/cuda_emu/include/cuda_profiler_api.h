/* Stand-in for CUDA's cuda_profiler_api.h on the emulated device (tests only; tests/cuda_emu/).
 * cudaProfilerStart / cudaProfilerStop (CUDA Runtime API, "Profiler Control"): with no profiler here, the
 * emulator says on stderr when each is called and, at the stop, how many kernels and graphs were
 * launched since the start, so a test can see where a program placed its range (docs/gpu-emulation.md). */
#ifndef HS_EMU_CUDA_PROFILER_API_H
#define HS_EMU_CUDA_PROFILER_API_H
#include "driver_types.h"

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);

#ifdef __cplusplus
}
#endif
#endif
