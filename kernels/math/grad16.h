/* 16-bit travel types of the gradient all-reduce (distributed.allreduce_dtype), written once for the
 * CPU algorithm (src/comm/grad_buckets.c) and the CUDA conversion kernels (kernels/grad_convert.cu):
 * fp32 -> bf16 / fp16 rounded to nearest, ties to even (torch's conversions), and back (exact).
 * Integer arithmetic only, so host and device give the same bits.
 * The fp16 rounding is a LOCAL COPY: replace it with src/util/lowp.h's fp16 rounding when that header
 * is merged (the bf16 rounding is the one of src/backend/cpu/cpu_bf16.h, hs_bf16_bits). */
#ifndef HS_KERNELS_MATH_GRAD16_H
#define HS_KERNELS_MATH_GRAD16_H

#include <stdint.h>
#include <string.h>

#include "math/hs_math.h"

HS_HD static inline uint32_t hs_grad16_f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

HS_HD static inline float hs_grad16_u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* bf16 bits of x, nearest even; NaN stays a quiet NaN (as hs_bf16_bits) */
HS_HD static inline uint16_t hs_grad16_bf16(float x) {
    uint32_t u = hs_grad16_f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* IEEE binary16 bits of x, nearest even; overflow to infinity, NaN stays NaN. LOCAL COPY (see above). */
HS_HD static inline uint16_t hs_grad16_fp16(float x) {
    const uint32_t u = hs_grad16_f2u(x);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520, the tie above 65504: infinity */
    if (a >= 0x38800000u) {
        /* normal: round the 23-bit significand at bit 13; a carry moves into the exponent */
        const uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r >> 13) - ((uint32_t)(127 - 15) << 10)));
    }
    if (a <= 0x33000000u) return sign; /* <= 2^-25 (half the smallest subnormal; the tie goes to even 0) */
    /* subnormal: |x| = m·2^(e-150) with the implicit bit; in units of 2^-24 that is m >> (126 - e),
     * rounded to nearest even on the bits shifted out (shift 14..25) */
    const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++; /* q = 1024 is the smallest normal's bits */
    return (uint16_t)(sign | q);
}

HS_HD static inline float hs_grad16_bf16_float(uint16_t h) { return hs_grad16_u2f((uint32_t)h << 16); }

HS_HD static inline float hs_grad16_fp16_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31) return hs_grad16_u2f(sign | 0x7f800000u | (m << 13));
    if (e != 0) return hs_grad16_u2f(sign | ((e + 127u - 15u) << 23) | (m << 13));
    if (m == 0) return hs_grad16_u2f(sign);
    /* subnormal m·2^-24: normalise the significand */
    uint32_t k = 0, mm = m;
    while (!(mm & 0x400u)) {
        mm <<= 1;
        k++;
    }
    return hs_grad16_u2f(sign | ((127u - 14u - k) << 23) | ((mm & 0x3ffu) << 13));
}

#endif
