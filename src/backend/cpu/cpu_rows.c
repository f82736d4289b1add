/* Row operations on the CPU: gathers and scatter-adds of rows (embedding lookups, the pooler's first
 * token, masked positions). Every sum that crosses rows (scatter-add) is cut into column blocks fixed by the
 * shapes alone and each column is summed in row order, so the bits do not depend on the thread count. */
/* Floating-point exceptions are never trapped here, so let GCC turn the selects inside the
 * kernels/math formulas into vector blends (with trapping math it keeps them as branches and the
 * exp/erf loops stay scalar). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <string.h>

#include "backend/cpu/cpu_ops.h"

#define HS_PAR_MIN 32768 /* below this many values the thread pool costs more than the work */
#define HS_COL_BLOCK 64  /* columns per block of the column-parallel reductions */

/* ---- row gathers ------------------------------------------------------------------------------------- */

/* y[count,cols] (+)= x[index[i], :]; index < 0: a row of zeros */
void hs_cpu_gather_rows(const hs_backend *be, float *y, const float *x, const int32_t *index, int count, int cols,
                        int x_rows, int accumulate) {
    (void)be;
    (void)x_rows; /* every index is in [0, x_rows): checked while the batch is staged */
#pragma omp parallel for schedule(static) if ((size_t)count * (size_t)cols > HS_PAR_MIN)
    for (int i = 0; i < count; i++) {
        float *yr = y + (size_t)i * (size_t)cols;
        if (index[i] < 0) { /* a padding row: zeros */
            if (!accumulate) memset(yr, 0, (size_t)cols * sizeof *yr);
            continue;
        }
        const float *xr = x + (size_t)index[i] * (size_t)cols;
        if (accumulate) {
#pragma omp simd
            for (int c = 0; c < cols; c++) yr[c] += xr[c];
        } else {
            memcpy(yr, xr, (size_t)cols * sizeof *yr);
        }
    }
}

/* dst rows r < rows of cols floats, dst_ld / src_ld apart */
void hs_cpu_copy_rows(const hs_backend *be, float *dst, size_t dst_ld, const float *src, size_t src_ld, size_t cols,
                      int rows) {
    (void)be;
    if (cols == 0) return;
#pragma omp parallel for schedule(static) if ((size_t)rows * cols > HS_PAR_MIN)
    for (int r = 0; r < rows; r++) memcpy(dst + (size_t)r * dst_ld, src + (size_t)r * src_ld, cols * sizeof *dst);
}

/* dst rows r < rows of cols floats += the src rows, dst_ld / src_ld apart (one add each, as add_bias) */
void hs_cpu_add_rows(const hs_backend *be, float *dst, size_t dst_ld, const float *src, size_t src_ld, size_t cols,
                     int rows) {
    (void)be;
    if (cols == 0) return;
#pragma omp parallel for schedule(static) if ((size_t)rows * cols > HS_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *d = dst + (size_t)r * dst_ld;
        const float *s = src + (size_t)r * src_ld;
#pragma omp simd
        for (size_t c = 0; c < cols; c++) d[c] += s[c];
    }
}

/* dx[index[i], :] += dy[i, :]. Threads own column blocks and walk i in order, so repeated indices add
 * up in the same order whatever the thread count (no atomics, no sort). */
void hs_cpu_scatter_add_rows(const hs_backend *be, float *dx, const float *dy, const int32_t *index, int count,
                             int cols, int dx_rows) {
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
