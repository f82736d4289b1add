/* Max pooling on the CPU (the family of kernels/pool.cu): k×k windows, stride k, PyTorch's tie rule. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"

/* First maximum of a window in row-major order (PyTorch's tie rule); a NaN wins, as in PyTorch. */
static inline int window_wins(float v, float best) { return v > best || (v != v && best == best); }

/* y[n,c,h/k,w/k] = max over each k×k window of x[n,c,h,w]; argmax = flat index in the h*w plane of the
 * winner. The common k = 2 has its own loop (no inner window loops, one pass over two input rows). */
void hs_cpu_maxpool2d_forward(const hs_backend *be, float *y, int32_t *argmax, const float *x, int n, int c, int h,
                              int w, int k) {
    (void)be;
    const int oh = h / k, ow = w / k;
    const int64_t planes = (int64_t)n * c;
#pragma omp parallel for schedule(static) if (planes * h * w > 32768)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * h * w;
        float *yp = y + pl * oh * ow;
        int32_t *ap = argmax + pl * oh * ow;
        for (int oy = 0; oy < oh; oy++) {
            if (k == 2) { /* selects, not branches: after a ReLU, ties and winners are unpredictable */
                const float *r0 = xp + 2 * oy * w, *r1 = r0 + w;
                float *yr = yp + oy * ow;
                int32_t *ar = ap + oy * ow;
#pragma omp simd
                for (int ox = 0; ox < ow; ox++) {
                    const float v1 = r0[2 * ox + 1], v2 = r1[2 * ox], v3 = r1[2 * ox + 1];
                    float best_v = r0[2 * ox];
                    int best = 2 * ox; /* offset from r0 */
                    const int win1 = window_wins(v1, best_v);
                    best_v = win1 ? v1 : best_v, best = win1 ? 2 * ox + 1 : best;
                    const int win2 = window_wins(v2, best_v);
                    best_v = win2 ? v2 : best_v, best = win2 ? w + 2 * ox : best;
                    const int win3 = window_wins(v3, best_v);
                    best_v = win3 ? v3 : best_v, best = win3 ? w + 2 * ox + 1 : best;
                    yr[ox] = best_v;
                    ar[ox] = 2 * oy * w + best;
                }
                continue;
            }
            for (int ox = 0; ox < ow; ox++) {
                int best = oy * k * w + ox * k;
                float best_v = xp[best];
                for (int i = 0; i < k; i++)
                    for (int j = 0; j < k; j++) {
                        const int idx = (oy * k + i) * w + ox * k + j;
                        if (window_wins(xp[idx], best_v)) best_v = xp[best = idx];
                    }
                yp[oy * ow + ox] = best_v;
                ap[oy * ow + ox] = best;
            }
        }
    }
}

/* dx[n,c,h,w] = dy routed back to each window's winner, 0 elsewhere (windows do not overlap). */
void hs_cpu_maxpool2d_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *argmax, int n, int c,
                               int h, int w, int k) {
    (void)be;
    const int oh = h / k, ow = w / k;
    const int64_t planes = (int64_t)n * c;
#pragma omp parallel for schedule(static) if (planes * h * w > 32768)
    for (int64_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * h * w;
        const float *dyp = dy + pl * oh * ow;
        const int32_t *ap = argmax + pl * oh * ow;
        memset(dxp, 0, (size_t)h * (size_t)w * sizeof *dxp);
        for (int q = 0; q < oh * ow; q++) dxp[ap[q]] += dyp[q];
    }
}
