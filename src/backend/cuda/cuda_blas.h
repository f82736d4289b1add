/* GEMM entry points of the CUDA backend beyond the seam's gemm (src/backend/cuda/cuda_gemm.c), for
 * the hosts in kernels/ that chain GEMMs with their own kernels (attention). Row-major like the seam:
 * for each batch index i in [0, batch):
 *   C_i[m,n] = alpha * op(A_i)[m,k] · op(B_i)[k,n] + beta * C_i[m,n],
 *   A_i = a + i*stride_a, B_i = b + i*stride_b, C_i = c + i*stride_c (strides in elements);
 * op = transpose when trans_* != 0; lda/ldb/ldc are the row strides of the stored matrices.
 * Enqueued on the compute stream through cuBLASLt (fp32 in and out, the arithmetic of be->precision:
 * cuda_gemm.c; one algorithm chosen by the heuristic and cached per shape and precision, so the same
 * shape always runs the same algorithm: deterministic). */
#ifndef HS_BACKEND_CUDA_BLAS_H
#define HS_BACKEND_CUDA_BLAS_H

#include <stdint.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

void hs_cuda_gemm_strided_batched(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                                  const float *a, int lda, int64_t stride_a, const float *b, int ldb,
                                  int64_t stride_b, float beta, float *c, int ldc, int64_t stride_c, int batch);

#ifdef __cplusplus
}
#endif
#endif
