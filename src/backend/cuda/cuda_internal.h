/* What the files of the CUDA backend share beyond the seam: library set-up called once by
 * hs_backend_cuda, and the device collectives (cuda_nccl.c). */
#ifndef HS_BACKEND_CUDA_INTERNAL_H
#define HS_BACKEND_CUDA_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

void hs_cuda_gemm_init(const hs_backend *be); /* cuBLASLt handle and workspace (cuda_gemm.c) */
void hs_cuda_conv_init(const hs_backend *be); /* cuDNN handle on the compute stream (cuda_conv.c) */

/* cuda_nccl.c: the seam's collectives members (HS_OPTIONAL_OP in ops.def; prototypes in cuda_ops.h) */
/* kernels/lowp.cu: fp32 <-> 16-bit (bf16 != 0: bfloat16, else IEEE half) on `stream`, for the
 * all-reduce's 16-bit transit */
void hs_cuda_grad_to16(cudaStream_t stream, uint16_t *y, const float *x, size_t n, int bf16);
void hs_cuda_grad_from16(cudaStream_t stream, float *y, const uint16_t *x, size_t n, int bf16);

#ifdef __cplusplus
}
#endif
#endif
