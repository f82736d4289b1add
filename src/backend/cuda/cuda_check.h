/* Status checks for every call into the CUDA runtime, cuBLASLt, cuDNN and NCCL: a failure names the
 * source file, line, the call, the library's message and a hint, then ends every rank (hs_fatal_at).
 * HS_CUDA_LAUNCHED("kernel", bytes) after every kernel launch turns a bad launch configuration into the same report
 * and counts the launch in the device-operation ledger (below). */
#ifndef HS_BACKEND_CUDA_CHECK_H
#define HS_BACKEND_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "backend/ledger.h"
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

/* After a launch: a launch error (bad grid, too much shared memory) is reported at the launch site, and
 * the launch is counted in the device-operation ledger (src/backend/ledger.h, docs/gpu.md):
 *   HS_CUDA_LAUNCHED("kernel_name", bytes)  bytes = what this launch reads + writes in device memory,
 *                                           from the operands' shapes (scratch included);
 *   HS_CUDA_LAUNCHED("kernel_name")         the same without a byte count (the ledger shows "+?" and
 *                                           its tests fail on it: give the bytes).
 * Every kernel launch is followed by exactly one of them: that is how a kernel is counted. */
#define HS_CUDA_LAUNCHED(...) HS_CUDA_LAUNCHED_PICK_(__VA_ARGS__, HS_CUDA_LAUNCHED_SIZED_, HS_CUDA_LAUNCHED_UNSIZED_, )(__VA_ARGS__)
#define HS_CUDA_LAUNCHED_PICK_(a, b, which, ...) which
#define HS_CUDA_LAUNCHED_UNSIZED_(kernel_name) HS_CUDA_LAUNCHED_SIZED_(kernel_name, HS_LEDGER_UNSIZED)
#define HS_CUDA_LAUNCHED_SIZED_(kernel_name, bytes)                                                  \
    do {                                                                                             \
        cudaError_t hs_cuda_rc_ = cudaGetLastError();                                                \
        if (hs_cuda_rc_ != cudaSuccess)                                                              \
            hs_fatal_at(__FILE__, __LINE__, "launch of " kernel_name,                               \
                        "a kernel launch failed: this is a bug in hetseq's launch configuration, "  \
                        "please report it with the config file",                                     \
                        "%s (%s)", cudaGetErrorString(hs_cuda_rc_), cudaGetErrorName(hs_cuda_rc_));  \
        HS_LEDGER_COUNT(kernel_name, HS_LEDGER_KERNEL, (bytes));                                     \
    } while (0)

/* A library call (cuBLASLt, cuDNN, NCCL) or a runtime copy/fill enqueued on a stream: one device op. */
#define HS_CUDA_LIBRARY_OP(name) HS_LEDGER_COUNT(name, HS_LEDGER_LIBRARY, 0)
#define HS_CUDA_COPY_OP(name, bytes) HS_LEDGER_COUNT(name, HS_LEDGER_COPY, (bytes))

#ifdef __cplusplus
}
#endif
#endif
