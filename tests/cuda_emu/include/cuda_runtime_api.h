/* Stand-in for CUDA's cuda_runtime_api.h on the emulated device (tests only; tests/cuda_emu/).
 * The C API of the subset of the CUDA Runtime hetseq uses, with CUDA's signatures and C linkage, so
 * host glue written in C or C++ compiles unchanged against it. Every function returns a
 * cudaError_t and records a failure for cudaGetLastError (CUDA Runtime API, "Error Handling").
 * Semantics are described where they are implemented (tests/cuda_emu/runtime/) and in
 * docs/gpu-emulation.md. */
#ifndef HS_EMU_CUDA_RUNTIME_API_H
#define HS_EMU_CUDA_RUNTIME_API_H
#include <stddef.h>
#include "vector_types.h"
#include "driver_types.h"

#ifdef __cplusplus
#define HS_EMU_DEFAULT(v) = v
extern "C" {
#else
#define HS_EMU_DEFAULT(v)
#endif

/* device management (CUDA Runtime API, "Device Management") */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

/* errors ("Error Handling") */
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t error);
const char *cudaGetErrorName(cudaError_t error);

/* memory ("Memory Management") */
cudaError_t cudaMalloc(void **devPtr, size_t size);
cudaError_t cudaFree(void *devPtr);
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream HS_EMU_DEFAULT(0));
cudaError_t cudaMemset(void *devPtr, int value, size_t count);
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream HS_EMU_DEFAULT(0));

/* streams ("Stream Management") */
cudaError_t cudaStreamCreate(cudaStream_t *pStream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags HS_EMU_DEFAULT(0));

/* stream capture and graphs ("Stream Management", "Graph Management"): tests/cuda_emu/runtime/graphs.cc */
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags HS_EMU_DEFAULT(0));
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph, cudaGraphExecUpdateResultInfo *resultInfo);
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes);

/* events ("Event Management") */
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream HS_EMU_DEFAULT(0));
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream HS_EMU_DEFAULT(0),
                                     unsigned int flags HS_EMU_DEFAULT(0));
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);

/* execution control ("Execution Control"); kernels are launched with HS_LAUNCH (kernels/hs_cuda.h) */
cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value);
/* occupancy ("Occupancy"): blocks of blockSize threads with dynamicSMemSize bytes each that one
 * multiprocessor holds, by threads, blocks and shared memory; the emulated kernels have no register
 * counts, so registers do not bound it here as they may on a GPU (docs/gpu-emulation.md) */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
                                                          size_t dynamicSMemSize);

#ifdef __cplusplus
}
#endif
#undef HS_EMU_DEFAULT
#endif
