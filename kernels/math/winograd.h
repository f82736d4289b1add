/* Winograd F(4×4, 3×3): the 1-d transforms (Lavin & Gray, interpolation points 0, ±1, ±2, ∞), written
 * once for both backends. A 4×4 block of a 3×3 stride-1 correlation over a 6×6 input tile d is
 *     Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A            (36 products instead of 144)
 * with
 *     Bᵀ = | 4  0 -5  0  1  0 |     G = |  1/4     0     0 |     Aᵀ = | 1  1  1  1  1  0 |
 *          | 0 -4 -4  1  1  0 |         | -1/6  -1/6  -1/6 |          | 0  1 -1  2 -2  0 |
 *          | 0  4 -4 -1  1  0 |         | -1/6   1/6  -1/6 |          | 0  1  1  4  4  0 |
 *          | 0 -2 -1  2  1  0 |         | 1/24  1/12   1/6 |          | 0  1 -1  8 -8  1 |
 *          | 0  2 -1 -2  1  0 |         | 1/24 -1/12   1/6 |
 *          | 0  4  0 -5  0  1 |         |    0     0     1 |
 * Each 2-d transform is the 1-d one applied to every column, then to every row. The gradients use the
 * adjoints (the transposed matrices): with V = Bᵀ d B, U = G g Gᵀ and M = A dY Aᵀ,
 *     ∂L/∂d = B (U ⊙ M) Bᵀ   and   ∂L/∂g = Gᵀ (V ⊙ M) G,
 * so every transform below comes with its transpose. */
#ifndef HS_KERNELS_MATH_WINOGRAD_H
#define HS_KERNELS_MATH_WINOGRAD_H

#include <stddef.h>

#include "math/hs_math.h"

/* The 1-d transforms read their inputs at in[0], in[is], in[2·is], ... and write their outputs at
 * out[0], out[os], ... (unrolled by hand: a caller vectorises across channels by calling one inside an
 * `omp simd` loop, with channel-contiguous inputs and outputs). */

/* o[6] = Bᵀ d[6]: the input-tile transform (shared sub-expressions: 12 additions/multiply-adds) */
HS_HD static inline void hs_wino_input_1d(const float *in, size_t is, float *out, size_t os) {
    const float d0 = in[0], d1 = in[is], d2 = in[2 * is], d3 = in[3 * is], d4 = in[4 * is], d5 = in[5 * is];
    const float a = d4 - 4.0f * d2, b = d3 - 4.0f * d1;
    const float e = d4 - d2, f = 2.0f * (d3 - d1);
    out[0] = 4.0f * d0 - 5.0f * d2 + d4;
    out[os] = a + b;
    out[2 * os] = a - b;
    out[3 * os] = e + f;
    out[4 * os] = e - f;
    out[5 * os] = 4.0f * d1 - 5.0f * d3 + d5;
}

/* o[6] = B v[6]: adjoint of the input transform (brings a transform-domain gradient back to a tile) */
HS_HD static inline void hs_wino_input_1d_t(const float *in, size_t is, float *out, size_t os) {
    const float v0 = in[0], v1 = in[is], v2 = in[2 * is], v3 = in[3 * is], v4 = in[4 * is], v5 = in[5 * is];
    const float p = v1 + v2, m = v1 - v2, q = v3 + v4, r = v3 - v4;
    out[0] = 4.0f * v0;
    out[os] = 4.0f * (v5 - m) - 2.0f * r;
    out[2 * os] = -5.0f * v0 - 4.0f * p - q;
    out[3 * os] = m + 2.0f * r - 5.0f * v5;
    out[4 * os] = v0 + p + q;
    out[5 * os] = v5;
}

/* o[4] = Aᵀ m[6]: the output transform (transform domain -> 4 outputs) */
HS_HD static inline void hs_wino_output_1d(const float *in, size_t is, float *out, size_t os) {
    const float m0 = in[0], m1 = in[is], m2 = in[2 * is], m3 = in[3 * is], m4 = in[4 * is], m5 = in[5 * is];
    const float p1 = m1 + m2, d1 = m1 - m2, p2 = m3 + m4, d2 = m3 - m4;
    out[0] = m0 + p1 + p2;
    out[os] = d1 + 2.0f * d2;
    out[2 * os] = p1 + 4.0f * p2;
    out[3 * os] = d1 + 8.0f * d2 + m5;
}

/* o[6] = A y[4]: adjoint of the output transform (an output gradient into the transform domain) */
HS_HD static inline void hs_wino_output_1d_t(const float *in, size_t is, float *out, size_t os) {
    const float y0 = in[0], y1 = in[is], y2 = in[2 * is], y3 = in[3 * is];
    const float p = y0 + y2, m = y1 + y3;
    const float p4 = y0 + 4.0f * y2, m8 = 2.0f * y1 + 8.0f * y3;
    out[0] = y0;
    out[os] = p + m;
    out[2 * os] = p - m;
    out[3 * os] = p4 + m8;
    out[4 * os] = p4 - m8;
    out[5 * os] = y3;
}

/* o[6] = G g[3]: the filter transform */
HS_HD static inline void hs_wino_filter_1d(const float *in, size_t is, float *out, size_t os) {
    const float g0 = in[0], g1 = in[is], g2 = in[2 * is];
    out[0] = g0 * (1.0f / 4.0f);
    out[os] = -(g0 + g1 + g2) * (1.0f / 6.0f);
    out[2 * os] = -(g0 - g1 + g2) * (1.0f / 6.0f);
    out[3 * os] = g0 * (1.0f / 24.0f) + g1 * (1.0f / 12.0f) + g2 * (1.0f / 6.0f);
    out[4 * os] = g0 * (1.0f / 24.0f) - g1 * (1.0f / 12.0f) + g2 * (1.0f / 6.0f);
    out[5 * os] = g2;
}

/* o[3] = Gᵀ u[6]: adjoint of the filter transform (a transform-domain filter gradient to 3 taps) */
HS_HD static inline void hs_wino_filter_1d_t(const float *in, size_t is, float *out, size_t os) {
    const float u0 = in[0], u1 = in[is], u2 = in[2 * is], u3 = in[3 * is], u4 = in[4 * is], u5 = in[5 * is];
    out[0] = u0 * (1.0f / 4.0f) - (u1 + u2) * (1.0f / 6.0f) + (u3 + u4) * (1.0f / 24.0f);
    out[os] = (u2 - u1) * (1.0f / 6.0f) + (u3 - u4) * (1.0f / 12.0f);
    out[2 * os] = (u3 + u4 - u1 - u2) * (1.0f / 6.0f) + u5;
}

#endif
