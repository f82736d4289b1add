/* Dense linear algebra on the CPU: OpenBLAS (row-major CBLAS) for the products (oneDNN under
 * precision = "bf16", rounded operands under "tf32" | "fp16": cpu_bf16.c), OpenMP for the bias passes.
 * The OpenMP build of OpenBLAS shares hetseq's thread pool and runs single-threaded when called from
 * inside a parallel region (the convolution relies on that). */
#include <cblas.h>

#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_ops.h"

/* c[m,n] = alpha * op(a)[m,k] · op(b)[k,n] + beta * c[m,n] (also called by the convolutions) */
void hs_cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void hs_cpu_gemm(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (be->precision == HS_PRECISION_FP32)
        hs_cpu_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        hs_cpu_mm(be, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* y[rows,cols] += bias[cols] */
void hs_cpu_add_bias(const hs_backend *be, float *y, const float *bias, int rows, int cols) {
    (void)be;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 32768)
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * (size_t)cols;
#pragma omp simd
        for (int c = 0; c < cols; c++) yr[c] += bias[c];
    }
}

/* dbias[cols] += sum_r dy[r,cols]. Columns are split into fixed blocks across threads; each column is
 * summed over rows in row order in double, so the result does not depend on the thread count (nor on
 * the block width: 64 columns keep a 256-wide layer's bias gradient on more than one thread). */
#define HS_BIAS_GRAD_COLS 64
void hs_cpu_bias_grad(const hs_backend *be, float *dbias, const float *dy, int rows, int cols) {
    (void)be;
    const int nblocks = (cols + HS_BIAS_GRAD_COLS - 1) / HS_BIAS_GRAD_COLS;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 32768)
    for (int blk = 0; blk < nblocks; blk++) {
        const int c0 = blk * HS_BIAS_GRAD_COLS;
        const int nc = cols - c0 < HS_BIAS_GRAD_COLS ? cols - c0 : HS_BIAS_GRAD_COLS;
        double acc[HS_BIAS_GRAD_COLS] = {0};
        for (int r = 0; r < rows; r++) {
            const float *dyr = dy + (size_t)r * (size_t)cols + c0;
#pragma omp simd
            for (int c = 0; c < nc; c++) acc[c] += (double)dyr[c];
        }
        for (int c = 0; c < nc; c++) dbias[c0 + c] += (float)acc[c];
    }
}
