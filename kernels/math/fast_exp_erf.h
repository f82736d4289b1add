/* exp and erf written so that a compiler can vectorise loops over them (no calls, no branches, no
 * errno), shared by the CPU backend and the CUDA kernels. They serve softmax, cross-entropy and GELU,
 * where libm's scalar expf/erff would cost more than the surrounding arithmetic.
 *
 * hs_exp_fast(x): x = n·ln2 + r with n = round(x/ln2), |r| <= ln2/2 (ln2 split in a hi part exact in
 * float and a lo correction), e^r = 1 + r + r²·P(r) with P a degree-4 polynomial fitted for minimum
 * relative error on [-ln2/2, ln2/2] (approximation error 8e-9, about 1 ulp after float rounding), and
 * 2^n built in the exponent bits (n read from the rounding sum's low bits: no float-to-integer
 * conversion, which runs at an eighth of the arithmetic rate on a GPU; the same values, all 2^32 inputs
 * compared when it changed). Inputs are clamped to [-87, 88] (2^n stays a normal float) and
 * anything below -87 returns exactly 0: e^-87 = 1.6e-38 is below every use here (softmax arguments
 * after the max subtraction, the masked -10000 scores, Gaussian tails), and exact zeros keep masked
 * attention weights exactly 0. NaN propagates through the polynomial.
 *
 * hs_erf_fast(x): Abramowitz & Stegun 7.1.26, erf(|x|) = 1 - t·(a1 + t(a2 + t(a3 + t(a4 + t a5))))·e^{-x²},
 * t = 1/(1 + p|x|), absolute error <= 1.5e-7 — the same formula PyTorch's vectorised CPU erf uses, so
 * GELU activations agree with PyTorch's CPU to float precision. Odd symmetry restores the sign. Below
 * |x| = 0.75 a Maclaurin polynomial replaces it (no cancellation, so erf(x) ~ 1.13x keeps its relative
 * precision for tiny x). */
#ifndef HS_KERNELS_MATH_FAST_EXP_ERF_H
#define HS_KERNELS_MATH_FAST_EXP_ERF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "math/hs_math.h"

HS_HD_INLINE float hs_exp_fast(float x) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693145751953125f;     /* 12 significant bits: n·ln2_hi is exact */
    const float ln2_lo = 1.42860682030941723e-6f; /* ln2 - ln2_hi */
    const float round_magic = 12582912.0f;        /* 1.5·2^23: adding it rounds to an integer */
    /* Every comparison is evaluated unconditionally and only selects values, so the compiler can turn
     * the selects into vector blends. A NaN input takes the clamp path (no NaN reaches the int cast)
     * and is returned as is at the end. */
    const int is_nan = x != x, below = x < -87.0f, above = x > 88.0f;
    float xc = below ? -87.0f : x;
    xc = above ? 88.0f : xc;
    xc = is_nan ? 0.0f : xc;
    const float shifted = xc * log2e + round_magic; /* in [2^23, 2^24): its last bits hold n + 2^22 */
    const float n = shifted - round_magic;
    const float r = (xc - n * ln2_hi) - n * ln2_lo;
    float p = 1.357120927e-03f;
    p = p * r + 8.372685872e-03f;
    p = p * r + 4.167356715e-02f;
    p = p * r + 1.666647941e-01f;
    p = p * r + 4.999996722e-01f;
    const float er = 1.0f + r + (r * r) * p;
    /* 2^n, n in [-126, 127]: n read from shifted's bits (an integer subtraction) rather than converted
     * from the float n (a conversion runs at an eighth of the arithmetic rate on a GPU) */
    uint32_t shifted_bits;
    memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
    const uint32_t bits = (shifted_bits - 0x4b400000U + 127U) << 23; /* 0x4b400000: round_magic's bits */
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    const float y = er * two_n;
    const float y_low = below ? 0.0f : y;
    return is_nan ? x : y_low;
}

/* Abramowitz & Stegun 7.1.26's polynomial: erfc(a) ~ poly(t)·e^{-a²} for a >= 0, t = 1/(1 + 0.3275911·a)
 * (hs_erf_fast_with_exp below, and the CUDA GELU under bf16/fp16, kernels/activations.cu). */
#define HS_AS7126_P 0.3275911f
HS_HD_INLINE float hs_as7126_poly(float t) {
    const float a1 = 0.254829592f, a2 = -0.284496736f, a3 = 1.421413741f, a4 = -1.453152027f, a5 = 1.061405429f;
    return t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))));
}

/* erf(x) and, through *exp_neg_x2, e^{-x²} (GELU's backward reuses it for the Gaussian density). */
HS_HD_INLINE float hs_erf_fast_with_exp(float x, float *exp_neg_x2) {
    const float ax = fabsf(x);
    const float t = 1.0f / (1.0f + HS_AS7126_P * ax);
    const float poly = hs_as7126_poly(t);
    const float e = hs_exp_fast(-x * x);
    const float r = copysignf(1.0f - poly * e, x);
    /* Near 0, 1 - poly·e cancels (float error up to 5e-7 near 0, 3e-7 at 0.5); the Maclaurin series
     * erf(x) = 2/√π · Σ (-1)^n x^(2n+1) / (n!(2n+1)), nine terms, is exact to 1e-9 for |x| < 0.75. */
    const float x2 = x * x;
    float s = 1.0f / 685440.0f;
    s = s * x2 - 1.0f / 75600.0f;
    s = s * x2 + 1.0f / 9360.0f;
    s = s * x2 - 1.0f / 1320.0f;
    s = s * x2 + 1.0f / 216.0f;
    s = s * x2 - 1.0f / 42.0f;
    s = s * x2 + 1.0f / 10.0f;
    s = s * x2 - 1.0f / 3.0f;
    s = s * x2 + 1.0f;
    const float series = 1.12837916709551257f * x * s; /* 2/√π */
    *exp_neg_x2 = e;
    return ax < 0.75f ? series : r;
}

HS_HD_INLINE float hs_erf_fast(float x) {
    float e;
    return hs_erf_fast_with_exp(x, &e);
}

#endif
