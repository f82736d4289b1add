/* Smooth activations on the CPU: exact-erf GELU (alone, with the bias add fused in, and from a 16-bit
 * pre-activation) and tanh; the formulas are kernels/math/gelu.h and activations.h. Element-wise, so the
 * results do not depend on the thread count. (ReLU lives with the other piecewise-linear ops in
 * cpu_elementwise.c.) */
/* Floating-point exceptions are never trapped here, so let GCC turn the selects inside the
 * kernels/math formulas into vector blends (with trapping math it keeps them as branches and the
 * exp/erf loops stay scalar). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "math/gelu.h"
#include "util/check.h"

#define HS_PAR_MIN 32768 /* below this many values the thread pool costs more than the work */

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

/* u[cols] = x + bias (the pre-activation, into u: x stays), y = gelu(u): one pass */
static HS_SIMD_CLONES void bias_gelu_row_out(float *y, float *u, const float *x, const float *bias, int cols) {
#pragma omp simd
    for (int c = 0; c < cols; c++) {
        u[c] = x[c] + bias[c];
        y[c] = hs_gelu(u[c]);
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

void hs_cpu_bias_gelu_forward(const hs_backend *be, float *y, float *x, const float *bias, int rows, int cols,
                              uint16_t *x16, uint16_t *y16) {
    hs_output_check("bias_gelu_forward: y or y16", y, y16);
    /* a span of a row at a time through the cache: the pre-activation into x (no x16) or into a span
     * buffer rounded into x16 (x stays); the output into y, or into a span buffer (y16 only), rounded into
     * y16 when asked: to_half's bits of the values just computed */
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > HS_PAR_MIN)
    for (int r = 0; r < rows; r++)
        for (int c0 = 0; c0 < cols; c0 += HS_SPAN) {
            const int len = cols - c0 < HS_SPAN ? cols - c0 : HS_SPAN;
            const size_t at = (size_t)r * (size_t)cols + (size_t)c0;
            float u[HS_SPAN], g[HS_SPAN];
            float *out = y ? y + at : g;
            if (x16) {
                bias_gelu_row_out(out, u, x + at, bias + c0, len);
                hs_cpu_to_half(be, x16 + at, u, (size_t)len);
            } else {
                bias_gelu_row(out, x + at, bias + c0, len);
            }
            if (y16) hs_cpu_to_half(be, y16 + at, out, (size_t)len);
        }
}

void hs_cpu_gelu_forward_half(const hs_backend *be, float *y, const uint16_t *x16, size_t n, uint16_t *y16) {
    hs_half_precision_check(be, "gelu_forward_half");
    hs_output_check("gelu_forward_half: y or y16", y, y16);
    const size_t spans = (n + HS_SPAN - 1) / HS_SPAN;
#pragma omp parallel for schedule(static) if (n > HS_PAR_MIN)
    for (size_t s = 0; s < spans; s++) {
        const size_t lo = s * HS_SPAN, len = n - lo < HS_SPAN ? n - lo : HS_SPAN;
        float wide[HS_SPAN], g[HS_SPAN]; /* x16's span widened (exact); the output when not kept */
        hs_cpu_from_half(be, wide, x16 + lo, len);
        float *out = y ? y + lo : g;
        gelu_span(out, wide, len);
        if (y16) hs_cpu_to_half(be, y16 + lo, out, len);
    }
}

void hs_cpu_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x, const uint16_t *x16,
                          size_t n, uint16_t *dx16, float *y, uint16_t *y16) {
    hs_gelu_backward_check(be, dx, dx16, x, x16);
    const size_t spans = (n + HS_SPAN - 1) / HS_SPAN;
#pragma omp parallel for schedule(static) if (n > HS_PAR_MIN)
    for (size_t s = 0; s < spans; s++) {
        const size_t lo = s * HS_SPAN, len = n - lo < HS_SPAN ? n - lo : HS_SPAN;
        float wide[HS_SPAN], g[HS_SPAN], d[HS_SPAN]; /* x16's span widened (exact); y, dx when not kept */
        const float *u = x ? x + lo : wide;
        if (x16) hs_cpu_from_half(be, wide, x16 + lo, len);
        if (y || y16) { /* the forward's output again (the same formula) */
            float *out = y ? y + lo : g;
            gelu_span(out, u, len);
            if (y16) hs_cpu_to_half(be, y16 + lo, out, len);
        }
        float *grad = dx ? dx + lo : d;
        gelu_grad_span(grad, dy + lo, u, len);
        if (dx16) hs_cpu_to_half(be, dx16 + lo, grad, len);
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
