/* Rounding fp32 values to the reduced precisions of the matrix products (the config's `precision`):
 * bfloat16 (8-bit significand, fp32's exponent range), IEEE binary16 "fp16" (11-bit significand,
 * exponents -14..15, subnormals down to 2^-24) and TF32 (11-bit significand, fp32's range). Every
 * conversion rounds to nearest, ties to even — PyTorch's float -> bfloat16 / float16 conversions, the
 * cvt.rn conversions of the GPU — and keeps NaN a (quiet) NaN. Static inline C with no dependencies, so
 * host code, the CPU backend, tests and the emulated CUDA device compute the same bits.
 *
 * Why the rounded operands can be multiplied in fp32 exactly: the product of two values with p-bit
 * significands has at most 2p bits; 2·8 and 2·11 are both <= 24, fp32's significand. (An fp16
 * subnormal product is >= 2^-48, far above fp32's underflow at 2^-126; bf16 and tf32 share fp32's
 * exponent range, so their products under- or overflow exactly where fp32's do.) */
#ifndef HS_UTIL_LOWP_H
#define HS_UTIL_LOWP_H

#include <stdint.h>
#include <string.h>

/* __host__ __device__ under nvcc (kernels/lowp.cu converts GEMM operands with these), plain C elsewhere */
#ifdef __CUDACC__
#define HS_LOWP_FN static inline __host__ __device__
#else
#define HS_LOWP_FN static inline
#endif

HS_LOWP_FN uint32_t hs_lowp_f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

HS_LOWP_FN float hs_lowp_u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x rounded to the nearest bfloat16, as its bit pattern (the high half of the fp32 pattern). The
 * largest finite fp32 values round to infinity, as in IEEE. */
HS_LOWP_FN uint16_t hs_bf16_bits(float x) {
    uint32_t u = hs_lowp_f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep it quiet */
    u += 0x7fffu + ((u >> 16) & 1u); /* +half an ulp, +1 more when the kept part is odd: ties to even */
    return (uint16_t)(u >> 16);
}

HS_LOWP_FN float hs_bf16_to_float(uint16_t h) { return hs_lowp_u2f((uint32_t)h << 16); }

/* bf16(x) as an fp32 value (the low 16 bits of the significand zero) */
HS_LOWP_FN float hs_bf16_round(float x) { return hs_bf16_to_float(hs_bf16_bits(x)); }

/* x rounded to the nearest fp16, as its bit pattern. |x| >= 65520 (65504, the largest fp16, plus half
 * its ulp of 32: a tie that rounds to the even neighbour 2^16) becomes ±infinity; |x| < 2^-14 becomes
 * a subnormal multiple of 2^-24 (|x| <= 2^-25 becomes ±0). */
HS_LOWP_FN uint16_t hs_fp16_bits(float x) {
    const uint32_t u = hs_lowp_f2u(x);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x03ffu)); /* NaN: quiet */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* 65520 and up, infinity: ±infinity */
    if (a >= 0x38800000u) { /* normal fp16 (|x| >= 2^-14): drop 13 significand bits, rebias 127 -> 15 */
        const uint32_t r = a + 0x0fffu + ((a >> 13) & 1u); /* ties to even; a carry bumps the exponent */
        return (uint16_t)(sign | ((r - (112u << 23)) >> 13));
    }
    if (a <= 0x33000000u) return sign; /* |x| <= 2^-25 (half the smallest subnormal, a tie): ±0 */
    /* Subnormal: |x| = m·2^(e-150) with the 24-bit significand m, i.e. m·2^(e-126) units of 2^-24;
     * e <= 112, so the shift 126-e is 14..23. A quotient that rounds up to 0x400 is the smallest normal. */
    const uint32_t e = a >> 23, m = (a & 0x007fffffu) | 0x00800000u, shift = 126u - e;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* The fp32 value of an fp16 bit pattern (exact: every fp16 value is an fp32 value). */
HS_LOWP_FN float hs_fp16_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x03ffu;
    if (exp == 0x1fu) return hs_lowp_u2f(sign | 0x7f800000u | (man << 13)); /* infinity, NaN */
    if (exp != 0) return hs_lowp_u2f(sign | ((exp + 112u) << 23) | (man << 13));
    /* subnormal or zero: man·2^-24, exact in fp32 (0x1p-24f is a power of two) */
    const float v = (float)man * 0x1p-24f;
    return sign ? -v : v;
}

/* fp16(x) as an fp32 value */
HS_LOWP_FN float hs_fp16_round(float x) { return hs_fp16_to_float(hs_fp16_bits(x)); }

/* x rounded to TF32 (the 10 high significand bits kept, the low 13 zero) as an fp32 value: what a
 * tensor core multiplies under CUBLAS_COMPUTE_32F_FAST_TF32. fp32's exponent range, so only values
 * within half a TF32 ulp of FLT_MAX overflow (to ±infinity). */
HS_LOWP_FN float hs_tf32_round(float x) {
    uint32_t u = hs_lowp_f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return hs_lowp_u2f((u | 0x00400000u) & ~0x1fffu); /* NaN: quiet */
    u += 0x0fffu + ((u >> 13) & 1u);
    return hs_lowp_u2f(u & ~0x1fffu);
}

#endif
