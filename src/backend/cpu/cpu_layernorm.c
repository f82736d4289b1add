/* LayerNorm over the last dimension on the CPU, alone or with a residual add folded in; the formulas
 * are kernels/math/layernorm.h. Rows run in parallel; dgamma and dbeta are summed in row blocks fixed
 * by the shapes alone and the blocks combined in block order, so the bits do not depend on the thread
 * count. */
/* Floating-point exceptions are never trapped here, so let GCC turn the selects inside the
 * kernels/math formulas into vector blends (with trapping math it keeps them as branches and the
 * exp/erf loops stay scalar). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "math/layernorm.h"
#include "util/check.h"

#define HS_PAR_MIN 32768 /* below this many values the thread pool costs more than the work */
#define HS_COL_BLOCK 64  /* columns per block of the column-parallel reductions */
#define HS_LN_ROW_BLOCK 32 /* rows per partial sum of dgamma/dbeta */

/* ---- LayerNorm ------------------------------------------------------------------------------------------ */

/* One row: in = x (+ residual, stored to x_sum), statistics in double, then y. */
static HS_SIMD_CLONES void layernorm_forward_row(float *y, float *x_sum, float *mean, float *rstd, const float *in,
                                                 const float *residual, const float *gamma, const float *beta,
                                                 int cols, float eps) {
    if (residual) {
#pragma omp simd
        for (int c = 0; c < cols; c++) x_sum[c] = in[c] + residual[c];
        in = x_sum;
    }
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < cols; c++) sum += (double)in[c];
    const double mu = sum / cols;
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < cols; c++) {
        const double dv = (double)in[c] - mu;
        sq += dv * dv;
    }
    const float m = (float)mu, rs = hs_layernorm_rstd(sq / cols, eps);
#pragma omp simd
    for (int c = 0; c < cols; c++) y[c] = hs_layernorm_out(in[c], m, rs, gamma[c], beta[c]);
    *mean = m;
    *rstd = rs;
}

void hs_cpu_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd, const float *x,
                              const float *residual, const float *gamma, const float *beta, int rows, int cols,
                              float eps) {
    (void)be;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > HS_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const size_t off = (size_t)r * (size_t)cols;
        layernorm_forward_row(y + off, residual ? x_sum + off : NULL, mean + r, rstd + r, x + off,
                              residual ? residual + off : NULL, gamma, beta, cols, eps);
    }
}

/* One row of the backward pass: dx, and the row's dy·x̂ and dy added to the block partials pg, pb. */
static HS_SIMD_CLONES void layernorm_backward_row(float *dx, double *pg, double *pb, float *xhat, const float *dy,
                                                  const float *x, float m, float rs, const float *gamma, int cols) {
    double sum_g = 0.0, sum_gx = 0.0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int c = 0; c < cols; c++) {
        const float xh = (x[c] - m) * rs;
        const float g = dy[c] * gamma[c];
        xhat[c] = xh;
        sum_g += (double)g;
        sum_gx += (double)g * (double)xh;
        pg[c] += (double)dy[c] * (double)xh;
        pb[c] += (double)dy[c];
    }
    const float mean_g = (float)(sum_g / cols), mean_gx = (float)(sum_gx / cols);
#pragma omp simd
    for (int c = 0; c < cols; c++) dx[c] = hs_layernorm_dx(dy[c] * gamma[c], xhat[c], rs, mean_g, mean_gx); /* dx may alias dy */
}

/* dx row by row (rows in parallel); dgamma/dbeta as per-block partial sums over fixed blocks of
 * HS_LN_ROW_BLOCK rows, combined in block order. */
void hs_cpu_layernorm_backward(const hs_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *mean, const float *rstd, const float *gamma, int rows,
                               int cols) {
    (void)be;
    if (rows <= 0) return;
    const int nblocks = (rows + HS_LN_ROW_BLOCK - 1) / HS_LN_ROW_BLOCK;
    double *partial; /* [nblocks][2][cols]: Σ dy·x̂ then Σ dy of the block */
    HS_ALLOC(partial, (size_t)nblocks * 2 * (size_t)cols);
#pragma omp parallel
    {
        float *xhat;
        HS_ALLOC(xhat, (size_t)cols);
#pragma omp for schedule(static)
        for (int blk = 0; blk < nblocks; blk++) {
            double *pg = partial + (size_t)blk * 2 * (size_t)cols, *pb = pg + cols;
            for (int c = 0; c < 2 * cols; c++) pg[c] = 0.0;
            const int r1 = (blk + 1) * HS_LN_ROW_BLOCK < rows ? (blk + 1) * HS_LN_ROW_BLOCK : rows;
            for (int r = blk * HS_LN_ROW_BLOCK; r < r1; r++) {
                const size_t off = (size_t)r * (size_t)cols;
                layernorm_backward_row(dx + off, pg, pb, xhat, dy + off, x + off, mean[r], rstd[r], gamma, cols);
            }
        }
        free(xhat);
    }
    const int ncb = (cols + HS_COL_BLOCK - 1) / HS_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((size_t)nblocks * (size_t)cols > HS_PAR_MIN)
    for (int cb = 0; cb < ncb; cb++) {
        const int c0 = cb * HS_COL_BLOCK, c1 = c0 + HS_COL_BLOCK < cols ? c0 + HS_COL_BLOCK : cols;
        for (int c = c0; c < c1; c++) {
            double sg = 0.0, sb = 0.0;
            for (int blk = 0; blk < nblocks; blk++) {
                sg += partial[(size_t)blk * 2 * (size_t)cols + (size_t)c];
                sb += partial[(size_t)blk * 2 * (size_t)cols + (size_t)cols + (size_t)c];
            }
            dgamma[c] += (float)sg;
            dbeta[c] += (float)sb;
        }
    }
    free(partial);
}

/* ---- a sublayer's end: dropout, residual add, LayerNorm (one op on CUDA) ---------------------------------- */

/* x_sum = dropout(a) + residual, y = LayerNorm(x_sum): the calls (and bits) of the separate ops */
void hs_cpu_dropout_add_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd,
                                          const float *a, const float *residual, const float *gamma,
                                          const float *beta, int rows, int cols, float eps, int batch,
                                          size_t per_sample, size_t group, float p, uint64_t key,
                                          int64_t first_sample, uint16_t *y16) {
    hs_cpu_dropout_forward(be, x_sum, a, batch, per_sample, group, p, key, first_sample);
    hs_cpu_layernorm_forward(be, y, x_sum, mean, rstd, x_sum, residual, gamma, beta, rows, cols, eps);
    if (y16) hs_cpu_to_half(be, y16, y, (size_t)rows * (size_t)cols); /* to_half's bits */
}

/* dx = LayerNorm backward (may alias dy), da = dropout backward of dx */
void hs_cpu_layernorm_dropout_backward(const hs_backend *be, float *dx, float *da, float *dgamma, float *dbeta,
                                       const float *dy, const float *x, const float *mean, const float *rstd,
                                       const float *gamma, int rows, int cols, int batch, size_t per_sample,
                                       size_t group, float p, uint64_t key, int64_t first_sample, uint16_t *da16) {
    hs_output_check("layernorm_dropout_backward: da or da16", da, da16);
    hs_cpu_layernorm_backward(be, dx, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols);
    const size_t n = (size_t)rows * (size_t)cols;
    float *out = da;
    if (!da) HS_ALLOC(out, n ? n : 1); /* da16 alone: the gradient in a buffer of its own first */
    hs_cpu_dropout_backward(be, out, dx, batch, per_sample, group, p, key, first_sample);
    if (da16) hs_cpu_to_half(be, da16, out, n);
    if (!da) free(out);
}
