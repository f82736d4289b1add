/* Status checks for every call into the CUDA runtime, cuBLASLt, cuDNN and NCCL: a failure names the
 * source file, line, the call, the library's message and a hint, then ends every rank (hs_fatal_at).
 * HS_CUDA_LAUNCHED() after every kernel launch turns a bad launch configuration into the same report. */
#ifndef HS_BACKEND_CUDA_CHECK_H
#define HS_BACKEND_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "util/check.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HS_CUDA_HINT_DEFAULT "a CUDA runtime call failed: check the driver (nvidia-smi), CUDA_VISIBLE_DEVICES and free GPU memory"

#define HS_CUDA_CHECK(call)                                                                          \
    do {                                                                                             \
        cudaError_t hs_cuda_rc_ = (call);                                                            \
        if (hs_cuda_rc_ != cudaSuccess)                                                              \
            hs_fatal_at(__FILE__, __LINE__, #call, HS_CUDA_HINT_DEFAULT, "%s (%s)",                 \
                        cudaGetErrorString(hs_cuda_rc_), cudaGetErrorName(hs_cuda_rc_));             \
    } while (0)

/* After a launch: a launch error (bad grid, too much shared memory) is reported at the launch site. */
#define HS_CUDA_LAUNCHED(kernel_name)                                                                \
    do {                                                                                             \
        cudaError_t hs_cuda_rc_ = cudaGetLastError();                                                \
        if (hs_cuda_rc_ != cudaSuccess)                                                              \
            hs_fatal_at(__FILE__, __LINE__, "launch of " kernel_name,                               \
                        "a kernel launch failed: this is a bug in hetseq's launch configuration, "  \
                        "please report it with the config file",                                     \
                        "%s (%s)", cudaGetErrorString(hs_cuda_rc_), cudaGetErrorName(hs_cuda_rc_));  \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
