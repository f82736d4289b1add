/* BERT's row-wise and element-wise operations on the CPU: row gathers/scatters (embeddings, masked
 * positions), strided bias passes (the q|k|v slices), LayerNorm, GELU, tanh and the attention mask.
 * Formulas live in kernels/math; this file spreads them over OpenMP threads. Every sum that crosses
 * rows (scatter-add, dgamma, dbeta, bias gradients) is cut into blocks fixed by the shapes alone and
 * the blocks are combined in block order, so the bits do not depend on the thread count. */
/* Floating-point exceptions are never trapped here, so let GCC turn the selects inside the
 * kernels/math formulas into vector blends (with trapping math it keeps them as branches and the
 * exp/erf loops stay scalar). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "math/gelu.h"
#include "math/layernorm.h"
#include "math/softmax.h"
#include "util/check.h"

#define HS_PAR_MIN 32768 /* below this many values the thread pool costs more than the work */
#define HS_COL_BLOCK 64  /* columns per block of the column-parallel reductions */
#define HS_LN_ROW_BLOCK 32 /* rows per partial sum of dgamma/dbeta */

/* ---- row gathers ------------------------------------------------------------------------------------- */

/* y[count,cols] (+)= x[index[i], :] */
void hs_cpu_gather_rows(const hs_backend *be, float *y, const float *x, const int32_t *index, int count, int cols, int x_rows,
                        int accumulate) {
    (void)be;
    (void)x_rows; /* every index is in [0, x_rows): checked while the batch is staged */
#pragma omp parallel for schedule(static) if ((size_t)count * (size_t)cols > HS_PAR_MIN)
    for (int i = 0; i < count; i++) {
        float *yr = y + (size_t)i * (size_t)cols;
        const float *xr = x + (size_t)index[i] * (size_t)cols;
        if (accumulate) {
#pragma omp simd
            for (int c = 0; c < cols; c++) yr[c] += xr[c];
        } else {
            memcpy(yr, xr, (size_t)cols * sizeof *yr);
        }
    }
}

/* dx[index[i], :] += dy[i, :]. Threads own column blocks and walk i in order, so repeated indices add
 * up in the same order whatever the thread count (no atomics, no sort). */
void hs_cpu_scatter_add_rows(const hs_backend *be, float *dx, const float *dy, const int32_t *index, int count, int cols, int dx_rows) {
    (void)be;
    (void)dx_rows; /* every index is in [0, dx_rows): checked while the batch is staged */
    const int nblocks = (cols + HS_COL_BLOCK - 1) / HS_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((size_t)count * (size_t)cols > HS_PAR_MIN)
    for (int blk = 0; blk < nblocks; blk++) {
        const int c0 = blk * HS_COL_BLOCK;
        const int nc = cols - c0 < HS_COL_BLOCK ? cols - c0 : HS_COL_BLOCK;
        for (int i = 0; i < count; i++) {
            float *dxr = dx + (size_t)index[i] * (size_t)cols + c0;
            const float *dyr = dy + (size_t)i * (size_t)cols + c0;
#pragma omp simd
            for (int c = 0; c < nc; c++) dxr[c] += dyr[c];
        }
    }
}

/* ---- strided bias ------------------------------------------------------------------------------------- */

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

void hs_cpu_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd, const float *x, const float *residual,
                              const float *gamma, const float *beta, int rows, int cols, float eps) {
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
void hs_cpu_layernorm_backward(const hs_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                               const float *mean, const float *rstd, const float *gamma, int rows, int cols) {
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

/* ---- GELU and tanh ------------------------------------------------------------------------------------- */

#define HS_SPAN 4096 /* values per call of a span kernel */

static HS_SIMD_CLONES void gelu_span(float *y, const float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = hs_gelu(x[i]);
}

static HS_SIMD_CLONES void gelu_grad_span(float *dx, const float *dy, const float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = hs_gelu_grad(dy[i], x[i]);
}

/* x[cols] += bias (kept as the pre-activation), y = gelu(x): one pass */
static HS_SIMD_CLONES void bias_gelu_row(float *y, float *x, const float *bias, int cols) {
#pragma omp simd
    for (int c = 0; c < cols; c++) {
        const float u = x[c] + bias[c];
        x[c] = u;
        y[c] = hs_gelu(u);
    }
}

void hs_cpu_gelu_forward(const hs_backend *be, float *y, const float *x, size_t n) {
    (void)be;
    const size_t spans = (n + HS_SPAN - 1) / HS_SPAN;
#pragma omp parallel for schedule(static) if (n > HS_PAR_MIN)
    for (size_t s = 0; s < spans; s++) {
        const size_t lo = s * HS_SPAN;
        gelu_span(y + lo, x + lo, n - lo < HS_SPAN ? n - lo : HS_SPAN);
    }
}

void hs_cpu_bias_gelu_forward(const hs_backend *be, float *y, float *x, const float *bias, int rows, int cols) {
    (void)be;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > HS_PAR_MIN)
    for (int r = 0; r < rows; r++) bias_gelu_row(y + (size_t)r * (size_t)cols, x + (size_t)r * (size_t)cols, bias, cols);
}

void hs_cpu_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x, size_t n) {
    (void)be;
    const size_t spans = (n + HS_SPAN - 1) / HS_SPAN;
#pragma omp parallel for schedule(static) if (n > HS_PAR_MIN)
    for (size_t s = 0; s < spans; s++) {
        const size_t lo = s * HS_SPAN;
        gelu_grad_span(dx + lo, dy + lo, x + lo, n - lo < HS_SPAN ? n - lo : HS_SPAN);
    }
}

/* libm tanhf: only the pooler uses it (B·H values), so exactness beats speed here */
void hs_cpu_tanh_forward(const hs_backend *be, float *y, const float *x, size_t n) {
    (void)be;
#pragma omp parallel for schedule(static) if (n > HS_PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}

void hs_cpu_tanh_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n) {
    (void)be;
#pragma omp parallel for simd schedule(static) if (n > HS_PAR_MIN)
    for (size_t i = 0; i < n; i++) dx[i] = hs_tanh_grad(dy[i], y[i]);
}

/* ---- attention mask ------------------------------------------------------------------------------------- */

void hs_cpu_attention_mask_bias(const hs_backend *be, float *bias, const int32_t *mask, size_t n) {
    (void)be;
    for (size_t i = 0; i < n; i++) bias[i] = hs_attention_mask_bias_of(mask[i]);
}
