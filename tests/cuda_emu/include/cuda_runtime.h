/* Stand-in for CUDA's cuda_runtime.h on the emulated device (tests only; tests/cuda_emu/).
 * Put tests/cuda_emu/include first on the include path and define HS_CUDA_EMU: the same kernels
 * (the CUDA sources under kernels/, through kernels/hs_cuda.h) and host glue then compile with the host C++ compiler and
 * run on fibers (docs/gpu-emulation.md). From C this header gives only the runtime API. */
#ifndef HS_EMU_CUDA_RUNTIME_H
#define HS_EMU_CUDA_RUNTIME_H
#define HS_CUDA_EMU_RUNTIME 1 /* kernels/hs_cuda.h checks that it got this header, not NVIDIA's */
#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include "hs_emu/device_builtins.h"
#include "hs_emu/launch.h"

/* The C++ conveniences NVIDIA's cuda_runtime.h adds over the C API. */
template <class T> inline cudaError_t cudaMalloc(T **devPtr, size_t size) {
  return ::cudaMalloc(reinterpret_cast<void **>(devPtr), size);
}
template <class T> inline cudaError_t cudaMallocHost(T **ptr, size_t size) {
  return ::cudaMallocHost(reinterpret_cast<void **>(ptr), size);
}
inline cudaError_t cudaMallocHost(void **ptr, size_t size, unsigned int flags) { return ::cudaHostAlloc(ptr, size, flags); }
template <class T> inline cudaError_t cudaMallocHost(T **ptr, size_t size, unsigned int flags) {
  return ::cudaHostAlloc(reinterpret_cast<void **>(ptr), size, flags);
}
template <class T> inline cudaError_t cudaHostAlloc(T **ptr, size_t size, unsigned int flags) {
  return ::cudaHostAlloc(reinterpret_cast<void **>(ptr), size, flags);
}
inline cudaError_t cudaEventCreate(cudaEvent_t *event, unsigned int flags) { return ::cudaEventCreateWithFlags(event, flags); }
template <class T> inline cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr, value);
}
template <class T>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, T func, int blockSize,
                                                                 size_t dynamicSMemSize) {
  return ::cudaOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, reinterpret_cast<const void *>(func), blockSize,
                                                         dynamicSMemSize);
}
#endif

#endif
