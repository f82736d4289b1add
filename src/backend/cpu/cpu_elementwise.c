/* Element-wise passes on the CPU. The formulas live in the kernels/math headers (shared with the CUDA
 * kernels); this file only spreads them over OpenMP threads. Loops below ~32k elements stay serial:
 * waking the thread pool costs more than the work. */
/* Floating-point exceptions are never trapped here, so GCC may turn the dropout mask's select into a
 * vector blend (as in cpu_activations.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "math/activations.h"
#include "math/dropout.h"
#include "util/check.h"

#define HS_PAR_MIN 32768

/* y[n] = x[n] * scale + shift */
void hs_cpu_u8_to_float(const hs_backend *be, float *y, const uint8_t *x, size_t n, float scale, float shift) {
    (void)be;
#pragma omp parallel for simd schedule(static) if (n > HS_PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = hs_u8_affine(x[i], scale, shift);
}

/* y[n] = relu(x[n]); y may alias x */
void hs_cpu_relu_forward(const hs_backend *be, float *y, const float *x, size_t n) {
    (void)be;
#pragma omp parallel for simd schedule(static) if (n > HS_PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = hs_relu(x[i]);
}

/* dx[n] = dy[n] * 1[y > 0]; any of dx, dy, y may alias */
void hs_cpu_relu_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n) {
    (void)be;
#pragma omp parallel for simd schedule(static) if (n > HS_PAR_MIN)
    for (size_t i = 0; i < n; i++) dx[i] = hs_relu_grad(dy[i], y[i]);
}

/* out[n] = in[n]·mask(sample_key, e0 + e): n consecutive elements of one sample (its key
 * hs_dropout_sample_key), element-wise mask */
#define HS_DROPOUT_SPAN 4096
static HS_SIMD_CLONES void dropout_span(float *out, const float *in, size_t n, uint64_t sample_key, size_t e0,
                                        hs_dropout_rate rate) {
#pragma omp simd
    for (size_t e = 0; e < n; e++) out[e] = in[e] * hs_dropout_factor(sample_key, e0 + e, rate);
}

/* out[batch, per_sample] = in * mask: one mask value per group of `group` consecutive elements of a
 * sample, drawn from (key, first_sample + sample, group index). Forward and backward are the same
 * multiplication by the same mask (d(x*m)/dx = m). */
static void dropout_apply(float *out, const float *in, int batch, size_t per_sample, size_t group, float p,
                          uint64_t key, int64_t first_sample) {
    const size_t total = (size_t)batch * per_sample;
    if (p <= 0.0f) {
        if (out != in) memcpy(out, in, total * sizeof *out);
        return;
    }
    if (group == 0 || per_sample % group != 0)
        HS_FATAL(NULL, "dropout: group %zu does not divide the %zu values per sample", group, per_sample);
    const hs_dropout_rate rate = hs_dropout_rate_of(p);
    if (group == 1) {
        /* element-wise: vectorised spans of one sample (the same formula, so the same bits) */
        const size_t spans = (per_sample + HS_DROPOUT_SPAN - 1) / HS_DROPOUT_SPAN;
        const int64_t units = (int64_t)batch * (int64_t)spans;
#pragma omp parallel for schedule(static) if (total > HS_PAR_MIN)
        for (int64_t u = 0; u < units; u++) {
            const int64_t sample = u / (int64_t)spans;
            const size_t e0 = (size_t)(u % (int64_t)spans) * HS_DROPOUT_SPAN;
            const size_t n = per_sample - e0 < HS_DROPOUT_SPAN ? per_sample - e0 : HS_DROPOUT_SPAN;
            const size_t off = (size_t)sample * per_sample + e0;
            dropout_span(out + off, in + off, n, hs_dropout_sample_key(key, (uint64_t)(first_sample + sample)), e0, rate);
        }
        return;
    }
    const size_t groups = per_sample / group;
    const int64_t units = (int64_t)batch * (int64_t)groups;
#pragma omp parallel for schedule(static) if (total > HS_PAR_MIN)
    for (int64_t u = 0; u < units; u++) {
        const int64_t sample = u / (int64_t)groups;
        const size_t g = (size_t)(u % (int64_t)groups);
        const uint64_t sample_key = hs_dropout_sample_key(key, (uint64_t)(first_sample + sample));
        const float m = hs_dropout_factor(sample_key, g, rate);
        const size_t off = (size_t)u * group; /* = sample*per_sample + g*group */
#pragma omp simd
        for (size_t e = 0; e < group; e++) out[off + e] = in[off + e] * m;
    }
}

void hs_cpu_dropout_forward(const hs_backend *be, float *y, const float *x, int batch, size_t per_sample, size_t group,
                            float p, uint64_t key, int64_t first_sample) {
    (void)be;
    dropout_apply(y, x, batch, per_sample, group, p, key, first_sample);
}

void hs_cpu_dropout_backward(const hs_backend *be, float *dx, const float *dy, int batch, size_t per_sample,
                             size_t group, float p, uint64_t key, int64_t first_sample) {
    (void)be;
    dropout_apply(dx, dy, batch, per_sample, group, p, key, first_sample);
}

/* y[batch, per_sample] = relu(x)·mask (element-wise mask; none when p <= 0): relu_forward then
 * dropout_forward's formulas per element, the same bits; y16 = to_half(y) */
void hs_cpu_relu_dropout_forward(const hs_backend *be, float *y, const float *x, int batch, size_t per_sample,
                                 float p, uint64_t key, int64_t first_sample, uint16_t *y16) {
    hs_output_check("relu_dropout_forward: y or y16", y, y16);
    const size_t total = (size_t)(batch > 0 ? batch : 0) * per_sample;
    float *out = y;
    if (!y) HS_ALLOC(y, total ? total : 1); /* y16 alone: the output in a buffer of its own first */
    if (p <= 0.0f) {
        hs_cpu_relu_forward(be, y, x, total);
    } else {
        const hs_dropout_rate rate = hs_dropout_rate_of(p);
#pragma omp parallel for schedule(static) if (total > HS_PAR_MIN)
        for (int s = 0; s < batch; s++) {
            const size_t off = (size_t)s * per_sample;
            const uint64_t sample_key = hs_dropout_sample_key(key, (uint64_t)(first_sample + s));
#pragma omp simd
            for (size_t e = 0; e < per_sample; e++)
                y[off + e] = hs_relu(x[off + e]) * hs_dropout_factor(sample_key, e, rate);
        }
    }
    if (y16 && total) hs_cpu_to_half(be, y16, y, total);
    if (!out) free(y);
}

/* dx = relu_grad(dy·mask, y): dropout_backward then relu_backward per element; dx16 = to_half(dx) */
void hs_cpu_relu_dropout_backward(const hs_backend *be, float *dx, const float *dy, const float *y, int batch,
                                  size_t per_sample, float p, uint64_t key, int64_t first_sample, uint16_t *dx16) {
    hs_output_check("relu_dropout_backward: dx or dx16", dx, dx16);
    const size_t total = (size_t)(batch > 0 ? batch : 0) * per_sample;
    float *out = dx;
    if (!dx) HS_ALLOC(dx, total ? total : 1); /* dx16 alone: the gradient in a buffer of its own first */
    if (p <= 0.0f) {
        hs_cpu_relu_backward(be, dx, dy, y, total);
    } else {
        const hs_dropout_rate rate = hs_dropout_rate_of(p);
#pragma omp parallel for schedule(static) if (total > HS_PAR_MIN)
        for (int s = 0; s < batch; s++) {
            const size_t off = (size_t)s * per_sample;
            const uint64_t sample_key = hs_dropout_sample_key(key, (uint64_t)(first_sample + s));
#pragma omp simd
            for (size_t e = 0; e < per_sample; e++)
                dx[off + e] = hs_relu_grad(dy[off + e] * hs_dropout_factor(sample_key, e, rate), y[off + e]);
        }
    }
    if (dx16 && total) hs_cpu_to_half(be, dx16, dx, total);
    if (!out) free(dx);
}
