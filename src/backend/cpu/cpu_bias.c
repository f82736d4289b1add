/* Bias passes on the CPU (the family of kernels/bias.cu): y += bias over rows, over rows of a column slice
 * of a wider matrix (the q|k|v thirds), and their gradients; the GEMMs with a bias epilogue. Every
 * gradient sum crosses rows: it is cut into column blocks fixed by the shapes alone and each column is
 * summed in row order in double, so the bits do not depend on the thread count. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "util/check.h"
#include "util/lowp.h"

#define HS_PAR_MIN 32768 /* below this many values the thread pool costs more than the work */
#define HS_COL_BLOCK 64  /* columns per block of the column-parallel reductions */

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
void hs_cpu_bias_grad(const hs_backend *be, float *dbias, const float *dy, int rows, int cols) {
    (void)be;
    const int nblocks = (cols + HS_COL_BLOCK - 1) / HS_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 32768)
    for (int blk = 0; blk < nblocks; blk++) {
        const int c0 = blk * HS_COL_BLOCK;
        const int nc = cols - c0 < HS_COL_BLOCK ? cols - c0 : HS_COL_BLOCK;
        double acc[HS_COL_BLOCK] = {0};
        for (int r = 0; r < rows; r++) {
            const float *dyr = dy + (size_t)r * (size_t)cols + c0;
#pragma omp simd
            for (int c = 0; c < nc; c++) acc[c] += (double)dyr[c];
        }
        for (int c = 0; c < nc; c++) dbias[c0 + c] += (float)acc[c];
    }
}

/* ---- bias on a column slice ---------------------------------------------------------------------------------- */

/* y[r, 0:cols] += bias, rows ldy apart */
void hs_cpu_add_bias_strided(const hs_backend *be, float *y, int ldy, const float *bias, int rows, int cols) {
    (void)be;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > HS_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * (size_t)ldy;
#pragma omp simd
        for (int c = 0; c < cols; c++) yr[c] += bias[c];
    }
}

/* dbias[cols] += Σ_r dy[r, 0:cols] in double, each column summed in row order */
void hs_cpu_bias_grad_strided(const hs_backend *be, float *dbias, const float *dy, int ldy, int rows, int cols) {
    (void)be;
    const int nblocks = (cols + HS_COL_BLOCK - 1) / HS_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > HS_PAR_MIN)
    for (int blk = 0; blk < nblocks; blk++) {
        const int c0 = blk * HS_COL_BLOCK;
        const int nc = cols - c0 < HS_COL_BLOCK ? cols - c0 : HS_COL_BLOCK;
        double acc[HS_COL_BLOCK] = {0};
        for (int r = 0; r < rows; r++) {
            const float *dyr = dy + (size_t)r * (size_t)ldy + c0;
#pragma omp simd
            for (int c = 0; c < nc; c++) acc[c] += (double)dyr[c];
        }
        for (int c = 0; c < nc; c++) dbias[c0 + c] += (float)acc[c];
    }
}

/* ---- the GEMMs with a bias epilogue (the CUDA backend fuses them in cuBLASLt) ------------------------------- */

/* y[rows, out] (row stride ldy) = x[rows, in] · w[out, in]ᵀ + bias[out]: gemm then the bias pass, the very
 * calls (and bits) of the separate ops. */
void hs_cpu_gemm_bias(const hs_backend *be, float *y, int ldy, const float *x, const float *w, const float *bias,
                      int rows, int in, int out) {
    hs_cpu_gemm(be, 0, 1, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, ldy);
    if (ldy == out)
        hs_cpu_add_bias(be, y, bias, rows, out);
    else
        hs_cpu_add_bias_strided(be, y, ldy, bias, rows, out);
}

/* y16[rows, out] = round(x · wᵀ + round(bias)): gemm's sums into the scratch y, then per element the
 * rounded bias added and the sum rounded (cuBLASLt's recipe for a 16-bit D: its bias has D's type); without
 * y16 the rounded sums widened back into y. Without a bias nothing is added (a -0 sum stays -0). */
void hs_cpu_gemm_bias_half(const hs_backend *be, uint16_t *y16, float *y, const float *x, const float *w,
                           const float *bias, int rows, int in, int out) {
    hs_half_precision_check(be, "gemm_bias_half");
    if (rows <= 0 || out <= 0) return;
    if (!bias) {
        hs_cpu_gemm_half_out(be, y16, y, 0, 1, rows, out, in, x, in, w, in);
        return;
    }
    hs_cpu_gemm(be, 0, 1, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    const int bf16 = be->precision == HS_PRECISION_BF16;
    float *bias_rounded;
    HS_ALLOC(bias_rounded, (size_t)out);
    for (int c = 0; c < out; c++)
        bias_rounded[c] = bf16 ? hs_bf16_to_float(hs_bf16_bits(bias[c])) : hs_fp16_to_float(hs_fp16_bits(bias[c]));
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)out > HS_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * (size_t)out;
        if (y16) {
            uint16_t *hr = y16 + (size_t)r * (size_t)out;
            if (bf16)
                for (int c = 0; c < out; c++) hr[c] = hs_bf16_bits(yr[c] + bias_rounded[c]);
            else
                for (int c = 0; c < out; c++) hr[c] = hs_fp16_bits(yr[c] + bias_rounded[c]);
        } else if (bf16) {
            for (int c = 0; c < out; c++) yr[c] = hs_bf16_to_float(hs_bf16_bits(yr[c] + bias_rounded[c]));
        } else {
            for (int c = 0; c < out; c++) yr[c] = hs_fp16_to_float(hs_fp16_bits(yr[c] + bias_rounded[c]));
        }
    }
    free(bias_rounded);
}

/* c16[m, n] = round(op(a)·op(b)): gemm's sums into the scratch c, then rounded (into c16, or in c widened) */
void hs_cpu_gemm_half_out(const hs_backend *be, uint16_t *c16, float *c, int trans_a, int trans_b, int m, int n,
                          int k, const float *a, int lda, const float *b, int ldb) {
    hs_half_precision_check(be, "gemm_half_out");
    if (m <= 0 || n <= 0) return;
    hs_cpu_gemm(be, trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    const size_t count = (size_t)m * (size_t)n;
    if (c16) {
        hs_cpu_to_half(be, c16, c, count);
        return;
    }
    const int bf16 = be->precision == HS_PRECISION_BF16;
#pragma omp parallel for schedule(static) if (count > HS_PAR_MIN)
    for (size_t e = 0; e < count; e++)
        c[e] = bf16 ? hs_bf16_to_float(hs_bf16_bits(c[e])) : hs_fp16_to_float(hs_fp16_bits(c[e]));
}

/* dw[out, in] (+)= dy[rows, out]ᵀ · x[rows, in] (dy rows ldy apart), then dbias[out] (+)= Σ_r dy[r, :];
 * written when overwrite (the GEMM's beta 0, which BLAS never reads c for; dbias zeroed first), so the
 * bits are those of adding to zeros. */
void hs_cpu_gemm_wgrad_bgrad(const hs_backend *be, float *dw, float *dbias, const float *dy, int ldy, const float *x,
                             int rows, int in, int out, int overwrite) {
    if (out <= 0) return;
    if (rows > 0 && in > 0)
        hs_cpu_gemm(be, 1, 0, out, in, rows, 1.0f, dy, ldy, x, in, overwrite ? 0.0f : 1.0f, dw, in);
    else if (overwrite && in > 0) /* no rows: a product of zero terms */
        memset(dw, 0, (size_t)out * (size_t)in * sizeof *dw);
    if (overwrite) memset(dbias, 0, (size_t)out * sizeof *dbias);
    if (ldy == out)
        hs_cpu_bias_grad(be, dbias, dy, rows, out);
    else
        hs_cpu_bias_grad_strided(be, dbias, dy, ldy, rows, out);
}
