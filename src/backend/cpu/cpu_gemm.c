/* Dense linear algebra on the CPU: OpenBLAS (row-major CBLAS) for the products (oneDNN under
 * precision = "bf16", rounded operands under "tf32" | "fp16": cpu_rounded_gemm.c), (the bias passes:
 * cpu_bias.c). Which product is which: cpu_ops.h.
 * The OpenMP build of OpenBLAS shares hetseq's thread pool and runs single-threaded when called from
 * inside a parallel region (the convolution relies on that). */
#include <cblas.h>

#include "backend/cpu/cpu_rounded_gemm.h"
#include "backend/cpu/cpu_ops.h"

/* c[m,n] = alpha * op(a)[m,k] · op(b)[k,n] + beta * c[m,n] in fp32, whatever the precision (the
 * convolutions, which round their operands themselves) */
void hs_cpu_blas_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* The backend's gemm member: fp32 through hs_cpu_blas_sgemm, the other precisions through
 * hs_cpu_precision_gemm */
void hs_cpu_gemm(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (be->precision == HS_PRECISION_FP32)
        hs_cpu_blas_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        hs_cpu_precision_gemm(be, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
